/** Card checks that need the tool registry, on top of engine/cards.ts's own. */
import { type ActorRole, type CardCheck, EngineError, type TaskCard, checkCard, checkCardAuthor, mayUseCardPowers } from '../engine/index.js';
import type { ToolRegistry } from '../tools/registry.js';
import { hasVision, modelFor, visionModels } from './planners/models.js';

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
    problems.push(...tool.checkCard(card));
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

/**
 * Whether `author` may write this card: its powers, by field (authority.ts CARD_POWERS:
 * refused at creation too) or by tool (a tool marked operatorOnly, e.g. the desktop's, which
 * only a daemon's registry knows). The run ends rejected before any step (forbidden_card);
 * `card check --as` asks the same. Null when the author may.
 */
export function authorRefusal(raw: unknown, card: TaskCard, author: { role: ActorRole; id: string }, tools: ToolRegistry): EngineError | null {
  if (mayUseCardPowers(author.role)) return null;
  const byField = checkCardAuthor(raw, author);
  if (!byField.ok) return new EngineError(byField.code, byField.message);
  const held = card.allowed_tools.filter((name) => tools.get(name)?.operatorOnly === true);
  if (held.length === 0) return null;
  return new EngineError(
    'FORBIDDEN',
    `the card allows ${held.join(', ')}, which only a card an operator wrote may allow (this one is by ${author.role} ${author.id})`,
    { tools: held },
  );
}

/**
 * An llm card whose tools return screenshots needs a model that can see them (seed 000):
 * refused with MODEL_LACKS_VISION before the run starts. Null when the card may run.
 */
export function visionRefusal(card: TaskCard, tools: ToolRegistry, env: NodeJS.ProcessEnv = process.env): EngineError | null {
  if (card.planner !== 'llm') return null;
  const imageTools = card.allowed_tools.filter((name) => tools.get(name)?.image === true);
  if (imageTools.length === 0) return null;
  const model = modelFor(card, env);
  if (hasVision(model, env)) return null;
  const listed = visionModels(env);
  return new EngineError(
    'MODEL_LACKS_VISION',
    `model ${model} cannot see images, but ${imageTools.join(', ')} observes by screenshot: name a vision model in the card's model (TASKLOOP_VISION_MODELS lists them: ${listed.length > 0 ? listed.join(', ') : 'none'})`,
    { model, tools: imageTools },
  );
}
