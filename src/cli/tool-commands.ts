/** `taskloop tools` (every registered tool with its schema) and `taskloop mcp` (the task tools over MCP). */
import type { Command } from 'commander';
import { loadTools } from '../workers/tool-modules.js';
import { assertBindableName } from '../engine/index.js';
import { serveStdio } from '../tools/mcp-server.js';
import { strictProblem } from '../tools/mcp-tools.js';
import { toOpenAiFunction } from '../tools/registry.js';
import { UsageError } from './context.js';
import { mcpServing } from './mcp-options.js';
import type { Run } from './task-commands.js';

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function registerToolCommands(program: Command, run: Run): void {
  program
    .command('tools')
    .description('list every registered tool with its kind, risk and argument schema')
    .option('--format <format>', 'openai (function-calling definitions) or json (default: a table, or json with --json)')
    .option('--strict', 'with --format openai: the form OpenAI strict mode accepts (nullable optionals, closed objects, the card as a JSON string)')
    .option('--tools <module>', 'a module exporting more tools, as the daemon loads it (repeatable)', collect)
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        let tools;
        try {
          tools = (await loadTools((o.tools as string[] | undefined) ?? [])).list();
        } catch (err) {
          throw new UsageError(err instanceof Error ? err.message : String(err));
        }
        const format = (o.format as string | undefined) ?? (ctx.json ? 'json' : 'table');
        if (o.strict === true && format !== 'openai') throw new UsageError('--strict goes with --format openai');
        if (format === 'openai') return void ctx.stdout(JSON.stringify(tools.map((t) => toOpenAiFunction(t, { strict: o.strict === true })), null, 2));
        if (format === 'json') {
          return void ctx.stdout(JSON.stringify(tools.map((t) => ({ name: t.name, description: t.description, kind: t.kind, risk: t.risk, operator_only: t.operatorOnly, idempotent: t.idempotent, timeout_ms: t.timeoutMs, max_output_bytes: t.maxOutputBytes, parameters: t.parameters })), null, 2));
        }
        if (format !== 'table') throw new UsageError(`--format must be openai or json, not '${format}'`);
        ctx.stdout(tools.map((t) => `${t.name.padEnd(18)} ${t.kind.padEnd(5)} ${t.risk.padEnd(4)} ${t.description}${t.operatorOnly ? ' [operator only]' : ''}`).join('\n'));
      }),
    );

  program
    .command('mcp')
    .description('serve the task tools over MCP on stdin/stdout, acting as one agent')
    .requiredOption('--agent <name>', 'the agent every call acts as')
    .option('--tools <module>', 'a module exporting more tools to serve beside the task tools (repeatable; high-risk tools and tools that need a card are refused)', collect)
    .option('--plugin <module>', 'a plugin whose tool_before hooks judge every call (repeatable; replaces the default task_enforcer unless it is named too)', collect)
    .option('--plugin-config <file>', 'JSON object: plugin name or module → its options')
    .option('--strict', 'list the tools\' arguments in the form OpenAI strict mode accepts (calls accept both forms either way)')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        assertBindableName(o.agent, '--agent');
        const manager = ctx.manager();
        const { tools, gate } = await mcpServing(manager, o.tools, o.plugin, o.pluginConfig);
        if (o.strict === true) {
          const problem = strictProblem(tools);
          if (problem !== null) throw new UsageError(problem);
        }
        await serveStdio({ agent: o.agent, manager, tools, gate, strict: o.strict === true });
      }),
    );
}
