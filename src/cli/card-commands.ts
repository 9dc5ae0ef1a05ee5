/** `taskloop card check FILE`: validate a card the way a run would, before anything runs. */
import type { Command } from 'commander';
import { EngineError } from '../engine/index.js';
import { builtInTools } from '../tools/builtin.js';
import { createToolRegistry } from '../tools/registry.js';
import { authorRefusal, checkCardWithTools, visionRefusal } from '../workers/card-check.js';
import { loadTools } from '../workers/tool-modules.js';
import type { Run } from './task-commands.js';
import { jsonObjectFrom } from './parse.js';

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function registerCardCommands(program: Command, run: Run): void {
  program
    .command('card')
    .description('task cards')
    .command('check <file>')
    .description('validate a card (JSON file, or - for standard input): exit 0 when a run would accept it')
    .option('--tools <module>', 'a tool module the daemon would load too (repeatable)', collect)
    .action(async (file: string, o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const card = jsonObjectFrom(file, 'card');
        const tools = o.tools === undefined ? createToolRegistry(builtInTools()) : await loadTools(o.tools);
        const checked = checkCardWithTools(card, tools);
        if (!checked.ok) throw new EngineError('VALIDATION_FAILED', `invalid card: ${checked.problems.join('; ')}`, { problems: checked.problems });
        const blind = visionRefusal(checked.card, tools);
        if (blind !== null) throw blind;
        // As the run will judge it for its author: `--as mallory` asks whether her card would run.
        const forbidden = authorRefusal(card, checked.card, ctx.actor, tools);
        if (forbidden !== null) throw forbidden;
        ctx.out({ ok: true, card: checked.card }, () => `card ok: ${checked.card.planner} planner, ${checked.card.allowed_tools.length} tools, budget ${JSON.stringify(checked.card.budget)}`);
      }),
    );
}
