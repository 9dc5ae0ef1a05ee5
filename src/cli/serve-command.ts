/**
 * `taskloop serve`: the HTTP API and event streams (src/monitor/http), until SIGINT or
 * SIGTERM. `taskloop daemon --http PORT` starts the same server in the daemon's process.
 */
import type { Command } from 'commander';
import { EngineError, describeSweep, isEngineError, type RunStore, type TaskManager } from '../engine/index.js';
import { boardRoutes } from '../monitor/board/board.js';
import { type HttpServer, type HttpServerOptions, createHttpServer } from '../monitor/http/server.js';
import { serverTokens, tokensFromEnv } from '../monitor/http/auth.js';
import { SIGNIN_CODE_MS } from '../monitor/http/signin-codes.js';
import { tokenFileFor } from '../monitor/http/token-file.js';
import { refuseAgents } from '../monitor/http/request.js';
import type { Route } from '../monitor/http/router.js';
import { createMetrics } from '../monitor/metrics.js';
import { createMonitor } from '../monitor/monitor.js';
import { type CliContext, UsageError } from './context.js';
import type { PluginSpec } from '../plugins/load.js';
import { checkDaemonOptions } from '../workers/daemon-options.js';
import { ModuleLoadError, checkModules } from '../workers/module-check.js';
import { mcpServing } from './mcp-options.js';
import { duration, integer, list, pluginSpecs, usage } from './parse.js';
import type { Run } from './task-commands.js';

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** How often a standalone server runs the stale sweep and expires approvals (a daemon does both itself). */
const SWEEP_EVERY_MS = 5000;

/** A port from the command line: 0 (any free one) to 65535. */
export function portArg(text: string, flag: string): number {
  const port = integer(text, flag);
  if (port < 0 || port > 65_535) throw new EngineError('VALIDATION_FAILED', `${flag}: ${port} is not a port (0 to 65535; 0 picks a free one)`);
  return port;
}

/**
 * `--tools` and `--plugin` are loaded once before anything starts: a module that cannot load,
 * or a plugin that registers no hook, is a usage error (exit 2, its one line), as on `mcp`.
 */
export async function checkModuleOptions(toolModules: string[] | undefined, plugins: PluginSpec[]): Promise<void> {
  await checkModules(toolModules ?? [], plugins).catch(asUsage);
}

/** A module that would not load is a usage error (exit 2); anything else is rethrown. */
export function asUsage(err: unknown): never {
  throw err instanceof ModuleLoadError ? new UsageError(err.message) : err;
}

/**
 * Starts the server and prints, on stderr, `listening on http://HOST:PORT` (scripts read the
 * port from it), the token file when the server generated its token (`<db>.http-token`), and
 * the board's one-time sign-in link. A token configuration it cannot use — none off loopback,
 * an unsafe token file — is a usage error (exit 2); a reserved name in TASKLOOP_TOKENS is
 * RESERVED_NAME (exit 1).
 */
export async function startHttp(ctx: CliContext, opts: HttpServerOptions): Promise<HttpServer> {
  let credentials;
  try {
    credentials = serverTokens({ host: opts.host ?? '127.0.0.1', tokens: opts.tokens ?? tokensFromEnv(), tokenFile: opts.tokenFile ?? tokenFileFor(ctx.dbPath) });
  } catch (err) {
    if (isEngineError(err)) throw err;
    throw new UsageError((err as Error).message);
  }
  // GET /metrics: the monitor's figures in Prometheus text format.
  const monitor = await createMonitor({ tm: opts.tm, runs: opts.runs });
  const metrics = createMetrics({ tm: opts.tm, runs: opts.runs, monitor });
  // It counts every task, tool, queue and breaker: an agent reads only its own tasks, so not it.
  const metricsRoute: Route = {
    method: 'GET',
    path: '/metrics',
    handler: async ({ actor }) => {
      refuseAgents(actor, 'GET /metrics');
      return { text: await metrics.render(), contentType: metrics.contentType };
    },
  };
  let server: HttpServer;
  try {
    server = await createHttpServer({
      log: (line) => ctx.log(line),
      ...opts,
      tokens: credentials.tokens,
      extraRoutes: [...(opts.extraRoutes ?? []), metricsRoute, ...boardRoutes()],
    });
  } catch (err) {
    metrics.close();
    monitor.close();
    // A port that is taken or not ours to bind is the command line's to change, not a fault.
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      const where = `${opts.host ?? '127.0.0.1'}:${opts.port ?? 7070}`;
      const why = code === 'EADDRINUSE' ? 'is in use (another server?)' : code === 'EACCES' ? 'may not be bound by this user' : 'is not an address of this machine';
      throw new UsageError(`${where} ${why}: pick another port, or 0 for a free one`);
    }
    throw err;
  }
  process.stderr.write(`listening on ${server.url}\n`);
  if (credentials.tokenFile !== undefined) {
    process.stderr.write(`operator token: in ${credentials.tokenFile} (only you can read it; send it as Authorization: Bearer)\n`);
  }
  const link = server.signInLink();
  process.stderr.write(link === undefined
    ? `board: ${server.url}/ (sign in with your token)\n`
    : `board: ${link} (signs you in once, within ${SIGNIN_CODE_MS / 60_000} minutes; then use the token)\n`);
  return {
    ...server,
    tokenFile: credentials.tokenFile,
    async close(graceMs?: number) {
      metrics.close();
      monitor.close();
      await server.close(graceMs);
    },
  };
}

/** Resolves once SIGINT or SIGTERM asked the process to stop. */
export function untilSignal(ctx: CliContext): Promise<string> {
  return new Promise((resolve) => {
    const on = (signal: string) => () => {
      ctx.log(`${signal}: stopping`);
      resolve(signal);
    };
    process.once('SIGINT', on('SIGINT'));
    process.once('SIGTERM', on('SIGTERM'));
  });
}


function startSweeping(tm: TaskManager, runs: RunStore, ctx: CliContext): () => void {
  const timer = setInterval(() => {
    void (async () => {
      const swept = await tm.sweep();
      const line = describeSweep(swept);
      if (line !== undefined) ctx.log(line);
      const expired = await runs.expireApprovals();
      if (expired.length > 0) ctx.log(`approvals ${expired.join(', ')} expired`);
    })().catch((err: unknown) => ctx.log(`sweep failed: ${err instanceof Error ? err.message : String(err)}`));
  }, SWEEP_EVERY_MS);
  return () => clearInterval(timer);
}

export function registerServeCommand(program: Command, run: Run): void {
  program
    .command('serve')
    .description('serve the HTTP API, event streams and MCP (at /mcp, for agent tokens) until SIGINT or SIGTERM; every request needs a token, loopback included: TASKLOOP_TOKEN, else on loopback one generated into DB.http-token')
    .option('--port <n>', 'port to listen on (default 7070; 0 picks a free one)')
    .option('--host <address>', 'address to bind (default 127.0.0.1)')
    .option('--agent <name>', 'the agent name attached tasks are claimed as (default http-HOST-PID)')
    .option('--capabilities <list>', 'comma-separated capabilities offered to attached tasks')
    .option('--lease <duration>', 'lease of each claim of an attached task, renewed while it runs (default 30s)')
    .option('--tools <module>', 'a module exporting `tools` for attached runs, besides the built-in ones (repeatable)', collect)
    .option('--plugin <module>', 'a plugin for attached runs (repeatable; replaces the default task_enforcer unless it is named too)', collect)
    .option('--plugin-config <file>', 'JSON object: plugin name or module → its options')
    .option('--mcp-tools <module>', 'a module exporting tools to serve over MCP at /mcp beside the task tools (repeatable; high-risk tools and tools that need a card are refused)', collect)
    .option('--no-mcp', 'serve no MCP endpoint at /mcp')
    .option('--grace <duration>', 'how long attached runs may take to reach a step boundary at shutdown (default 10s)')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const parsed = usage(() => {
          const leaseMs = o.lease === undefined ? undefined : duration(o.lease, '--lease');
          // The lease and the agent obey the daemon's rules: attached runs are claimed as a daemon's are.
          checkDaemonOptions({ dbPath: ctx.dbPath, leaseMs, agent: o.agent }, { leaseMs: '--lease', agent: '--agent' });
          return {
            graceMs: o.grace === undefined ? 10_000 : duration(o.grace, '--grace'),
            port: o.port === undefined ? undefined : portArg(o.port, '--port'),
            leaseMs,
            capabilities: o.capabilities === undefined ? undefined : list(o.capabilities),
            plugins: pluginSpecs(o.plugin, o.pluginConfig),
          };
        });
        const { graceMs, plugins } = parsed;
        const tm = ctx.manager();
        const runs = ctx.runs();
        await checkModuleOptions(o.tools, plugins);
        const mcp = o.mcp === false ? false : await mcpServing(tm, o.mcpTools, o.plugin, o.pluginConfig);
        const server = await startHttp(ctx, {
          mcp,
          tm,
          runs,
          host: o.host,
          port: parsed.port,
          agent: o.agent,
          capabilities: parsed.capabilities,
          leaseMs: parsed.leaseMs,
          toolModules: o.tools,
          plugins,
        });
        const stopSweeping = startSweeping(tm, runs, ctx);
        await untilSignal(ctx);
        stopSweeping();
        await server.close(graceMs);
        ctx.log('server stopped');
      }),
    );
}
