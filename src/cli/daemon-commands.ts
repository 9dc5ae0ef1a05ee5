/** `taskloop daemon`, and stop / pause / resume from any process. */
import type { Command } from 'commander';
import { type ControlState, isEngineError } from '../engine/index.js';
import { type DaemonOptions, checkDaemonOptions, startDaemon } from '../workers/daemon.js';
import { StartAborted } from '../workers/module-check.js';
import { UsageError } from './context.js';
import { asUsage, portArg, startHttp } from './serve-command.js';
import type { Run } from './task-commands.js';
import { duration, integer, list, pluginSpecs, taskIdArg, usage } from './parse.js';

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function registerDaemonCommands(program: Command, run: Run): void {
  program
    .command('daemon')
    .description('run worker threads that claim and run tasks, until SIGINT or SIGTERM')
    .option('--workers <n>', 'worker threads (default 2)')
    .option('--concurrency <n>', 'runs in flight in the whole daemon, spread over the threads (default 64, at least --workers)')
    .option('--agent <name>', 'the agent name the workers claim as (default daemon-HOST-PID)')
    .option('--capabilities <list>', 'comma-separated capabilities the workers offer')
    .option('--queue <q>', 'queue to serve (default: default)')
    .option('--lease <duration>', 'lease of each claim, kept alive by the daemon’s heartbeat (default 30s)')
    .option('--max-run-time <duration>', 'the longest a run started here may last, whatever its card says: its deadline is at most this long after it starts (default: the card’s own)')
    .option('--tools <module>', 'a module exporting `tools` to offer besides the built-in ones (repeatable)', collect)
    .option('--plugin <module>', 'a plugin to load in every worker (repeatable; replaces the default task_enforcer unless it is named too)', collect)
    .option('--plugin-config <file>', 'JSON object: plugin name or module → its options')
    .option('--grace <duration>', 'how long in-flight steps may take to finish at shutdown (default 10s)')
    .option('--retain <duration>', 'compact the steps and events of tasks finished longer ago than this (default: keep all)')
    .option('--sweep <cron>', 'when to run the stale sweep (default every 5 seconds: */5 * * * * *)')
    .option('--dead-after <duration>', 'on PostgreSQL: a daemon silent this long is taken for dead and its runs resume elsewhere (default 4s)')
    .option('--http <port>', 'also serve the HTTP API on 127.0.0.1:PORT in this process (0 picks a port), with the same tools and plugins and the same tokens as serve')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const { graceMs, httpPort, options } = usage(() => {
          const parsed: DaemonOptions = {
            dbPath: ctx.dbPath,
            durability: ctx.durability,
            workers: o.workers === undefined ? undefined : integer(o.workers, '--workers'),
            concurrency: o.concurrency === undefined ? undefined : integer(o.concurrency, '--concurrency'),
            agent: o.agent,
            capabilities: o.capabilities === undefined ? undefined : list(o.capabilities),
            queue: o.queue,
            leaseMs: o.lease === undefined ? undefined : duration(o.lease, '--lease'),
            maxRunMs: o.maxRunTime === undefined ? undefined : duration(o.maxRunTime, '--max-run-time'),
            toolModules: o.tools,
            plugins: pluginSpecs(o.plugin, o.pluginConfig),
            sweepCron: o.sweep,
            retainMs: o.retain === undefined ? undefined : duration(o.retain, '--retain'),
            silentMs: o.deadAfter === undefined ? undefined : duration(o.deadAfter, '--dead-after'),
            log: (line) => ctx.log(line),
          };
          checkDaemonOptions(parsed, { workers: '--workers', concurrency: '--concurrency', leaseMs: '--lease', maxRunMs: '--max-run-time', retainMs: '--retain', silentMs: '--dead-after', queue: '--queue', agent: '--agent' });
          return {
            graceMs: o.grace === undefined ? 10_000 : duration(o.grace, '--grace'),
            httpPort: o.http === undefined ? undefined : portArg(o.http, '--http'),
            options: parsed,
          };
        });
        // Heard from the start: a signal while the daemon starts (its threads, its server) is
        // kept and acted on once it has started, instead of killing the process untidily.
        // While the modules load, nothing is open yet: the start is given up at once (a module
        // that takes its time, or hangs until the check's timeout, must not hold Ctrl-C).
        let asked: string | undefined;
        const starting = new AbortController();
        let shutdown = (signal: string): void => {
          asked ??= signal;
          starting.abort();
        };
        process.once('SIGINT', () => shutdown('SIGINT'));
        process.once('SIGTERM', () => shutdown('SIGTERM'));
        // startDaemon loads --tools and --plugin in a throwaway thread first: one that will not load is a usage error.
        const daemon = await startDaemon({ ...options, startSignal: starting.signal }).catch((err: unknown) => {
          if (err instanceof StartAborted) return undefined;
          return asUsage(err);
        });
        if (daemon === undefined) {
          ctx.log(`${asked ?? 'signal'}: stopped while the modules were loading; the daemon did not start`);
          return;
        }
        const server = httpPort === undefined
          ? undefined
          : await startHttp(ctx, {
            tm: daemon.tm,
            runs: daemon.runs,
            port: httpPort,
            capabilities: o.capabilities === undefined ? undefined : list(o.capabilities),
            toolModules: o.tools,
            plugins: pluginSpecs(o.plugin, o.pluginConfig),
          }).catch(async (err: unknown) => {
            await daemon.stop(graceMs);
            throw err;
          });
        shutdown = (signal: string) => {
          ctx.log(`${signal}: stopping (grace ${graceMs} ms)`);
          // The server first: its runs are given back while the daemon's store is still open.
          void (server?.close(graceMs) ?? Promise.resolve()).finally(() => daemon.stop(graceMs));
        };
        if (asked !== undefined) shutdown(asked);
        await daemon.stopped;
        // Stopped by a fault (the file is damaged or was replaced): exit 1 naming it.
        if (daemon.fault !== undefined) {
          await server?.close(0).catch(() => undefined);
          throw daemon.fault;
        }
        ctx.log('daemon stopped');
      }),
    );

  const control = (name: string, state: ControlState, description: string) =>
    program
      .command(`${name} [ids...]`)
      .description(description)
      .option('--all', `${name} every live run`)
      .option('--reason <text>', 'why, recorded on the event')
      .action(async (ids: string[], o, cmd: Command) =>
        run(cmd, async (ctx) => {
          if ((ids.length === 0) === (o.all !== true)) throw new UsageError(`${name} needs task ids or --all (not both)`);
          const runs = ctx.runs();
          const affected = await runs.setControl({ target: o.all === true ? 'all' : ids.map(taskIdArg), state, actor: ctx.actor, reason: o.reason });
          ctx.out({ state, tasks: affected }, () => (affected.length === 0 ? `no live run to ${name}` : `${name}: task ${affected.join(', ')}`));
        }),
      );
  control('stop', 'stopped', 'stop runs (within one step, aborting the tool call in flight); --all is the emergency stop');
  control('pause', 'paused', 'pause runs between steps (they keep their lease)');
  control('resume', 'running', 'resume paused runs');
}
