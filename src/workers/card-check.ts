/** Card checks that need the tool registry, on top of engine/cards.ts's own. */
import { type CardCheck, checkCard } from '../engine/index.js';
import type { ToolRegistry } from '../tools/registry.js';

export function checkCardWithTools(raw: unknown, tools: ToolRegistry): CardCheck {
  const base = checkCard(raw);
  if (base.card === undefined) return base;
  const { card } = base;
  const problems: string[] = base.ok ? [] : [...base.problems];
  for (const name of card.allowed_tools) {
    const tool = tools.get(name);
    if (tool === undefined) {
      problems.push(`allowed_tools: ${name} is not a registered tool`);
      continue;
    }
    if (tool.kind === 'write' && tool.target !== null && card.scope[tool.target.scope] === undefined) {
      problems.push(`scope.${tool.target.scope}: required because ${name} writes (a write task needs its scope)`);
    }
  }
  const read = (name: string, where: string) => {
    const tool = tools.get(name);
    if (!card.allowed_tools.includes(name)) problems.push(`${where}: ${name} must also be in allowed_tools`);
    if (tool === undefined) problems.push(`${where}: ${name} is not a registered tool`);
    else if (tool.kind !== 'read') problems.push(`${where}: ${name} is a write tool; observing and final state use read-only tools`);
  };
  if (card.observe !== undefined) read(card.observe.tool, 'observe.tool');
  for (const [key, call] of Object.entries(card.final_state)) read(call.tool, `final_state.${key}.tool`);
  for (const name of card.approval?.tools ?? []) {
    if (!card.allowed_tools.includes(name)) problems.push(`approval.tools: ${name} is not in allowed_tools`);
  }
  return problems.length === 0 ? { ok: true, card } : { ok: false, problems, card };
}
