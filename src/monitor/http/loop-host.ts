/**
 * Hosting task loops in the server's own process, for the runs its event streams own. Runs
 * go through the same entry point as a daemon's worker thread (workers/runner.ts): the
 * built-in tools plus configured tool modules, the configured plugins afresh for each run,
 * the planner the card names. Leases are kept as a daemon keeps them (workers/holder.ts):
 * the server registers as a holder on its first owned run, each claim takes a slot of it,
 * and one write per beat renews them all. This file is the one place the HTTP surface imports
 * `workers` and `plugins` at run time (run-owner.ts imports a type). DESIGN §1 lets monitor
 * import workers only to start a pool in the daemon; hosting the loop of a stream-owned run
 * is the same kind of use — running tasks in this process — and stays confined here.
 */
import type { BreakerPolicy, ClaimedTask, EngineError, RunStore, TaskManager } from '../../engine/index.js';
import { type PluginSpec, loadPlugins } from '../../plugins/load.js';
import { ticketStoreFor } from '../../tools/tickets.js';
import type { RunResult, TaskLoopEvent } from '../../workers/loop.js';
import { type Holder, startHolder } from '../../workers/holder.js';
import { createRunner } from '../../workers/runner.js';
import { loadTools } from '../../workers/tool-modules.js';

export interface LoopHostOptions {
  tm: TaskManager;
  runs: RunStore;
  /** The agent name the server claims as (its holder row says so). */
  agent: string;
  /** Lease of each claim, renewed every third of it. @defaultValue 30000 */
  leaseMs?: number;
  /** Modules exporting `tools`, offered besides the built-in ones. @defaultValue none */
  toolModules?: string[];
  /** Plugins, in order; loaded afresh for each run so no plugin state crosses runs. @defaultValue [task_enforcer] */
  plugins?: PluginSpec[];
  /** @defaultValue threshold 3, cooldown 5 min, probe timeout 1 min (as the daemon's) */
  breaker?: Partial<BreakerPolicy>;
  log?: (line: string) => void;
}

export interface LoopHost {
  /** Drives one claimed task's run; `draining` releases it at the next step boundary. */
  run(claim: ClaimedTask, draining: () => boolean): Promise<AsyncGenerator<TaskLoopEvent, RunResult, undefined>>;
  /** A refusal of a valid card that no run could get past (MODEL_LACKS_VISION), or null. */
  preflight(card: unknown): EngineError | null;
  /** A slot to claim with (as `workerId`): its lease is renewed until `free`. */
  slot(): Promise<string>;
  free(slot: string): void;
  /** Stops renewing and leaves the holders' registry. */
  close(): Promise<void>;
}

/** Loads the tool modules and checks the plugins load, so a bad configuration fails at start-up. */
export async function createLoopHost(opts: LoopHostOptions): Promise<LoopHost> {
  const tools = await loadTools(opts.toolModules ?? []);
  const plugins = opts.plugins ?? [{ module: 'task_enforcer' }];
  await loadPlugins(plugins);
  const { tm, runs } = opts;
  // The ticket demo's tools write their tables in the store's database.
  const runner = createRunner({ tm, runs, tools, plugins, breaker: opts.breaker, services: { tickets: ticketStoreFor(tm.store) } });
  let holder: Promise<Holder> | undefined;
  const held = () => {
    holder ??= tm.store.info().then(({ capabilities }) =>
      startHolder({ runs, agent: opts.agent, threads: 0, leaseMs: opts.leaseMs ?? 30_000, log: opts.log, multiHost: capabilities.multipleHosts }),
    );
    holder.catch(() => (holder = undefined));
    return holder;
  };

  return {
    preflight: (card) => runner.preflight(card),
    run: (claim, draining) => runner.start(claim, { draining }),
    slot: async () => (await held()).take(),
    free: (slot) => void holder?.then((h) => h.free(slot)).catch(() => undefined),
    async close() {
      const h = await holder?.catch(() => undefined);
      await h?.stop();
    },
  };
}
