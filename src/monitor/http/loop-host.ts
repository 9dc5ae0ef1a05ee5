/**
 * Hosting task loops in the server's own process, for the runs its event streams own. The
 * LoopContext is built as a daemon worker thread builds it (src/workers/worker.ts): the
 * built-in tools plus configured tool modules, the configured plugins, the scripted or LLM
 * planner the card names. This file is the one place the HTTP surface imports `workers`
 * and `plugins` at run time (run-owner.ts imports a type). DESIGN §1 lets monitor import
 * workers only to start a pool in the daemon; hosting the loop of a stream-owned run is the
 * same kind of use — running tasks in this process — and stays confined here.
 */
import {
  type BreakerPolicy,
  type ClaimedTask,
  type RunStore,
  type SqliteTaskStore,
  type TaskManager,
  type EngineError,
} from '../../engine/index.js';
import { type PluginSpec, loadPlugins } from '../../plugins/load.js';
import type { ToolRegistry } from '../../tools/registry.js';
import { type RunResult, type TaskLoopEvent, runTaskLoop } from '../../workers/loop.js';
import { checkCardWithTools, visionRefusal } from '../../workers/card-check.js';
import { plannerFor } from '../../workers/planners/choose.js';
import { loadTools } from '../../workers/tool-modules.js';

export interface LoopHostOptions {
  tm: TaskManager;
  runs: RunStore;
  /** Modules exporting `tools`, offered besides the built-in ones. @defaultValue none */
  toolModules?: string[];
  /** Plugins, in order; loaded afresh for each run so no plugin state crosses runs. @defaultValue [task_enforcer] */
  plugins?: PluginSpec[];
  /** @defaultValue threshold 3, cooldown 5 min, probe timeout 1 min (as the daemon's) */
  breaker?: Partial<BreakerPolicy>;
}

export interface LoopHost {
  /** Drives one claimed task's run; `draining` releases it at the next step boundary. */
  run(claim: ClaimedTask, draining: () => boolean): Promise<AsyncGenerator<TaskLoopEvent, RunResult, undefined>>;
  /** A refusal of a valid card that no run could get past (MODEL_LACKS_VISION), or null. */
  preflight(card: unknown): EngineError | null;
}

/** Loads the tool modules and checks the plugins load, so a bad configuration fails at start-up. */
export async function createLoopHost(opts: LoopHostOptions): Promise<LoopHost> {
  const tools: ToolRegistry = await loadTools(opts.toolModules ?? []);
  const plugins = opts.plugins ?? [{ module: 'task_enforcer' }];
  await loadPlugins(plugins);
  const breakerPolicy: BreakerPolicy = { threshold: 3, cooldownMs: 300_000, probeTimeoutMs: 60_000, ...opts.breaker };
  const { tm, runs } = opts;
  // The ticket demo's tools need the database handle of an SQLite store.
  const db = (tm.store as Partial<SqliteTaskStore>).db;

  return {
    preflight(card) {
      // An invalid card is left to the run, which ends rejected listing every problem.
      const checked = checkCardWithTools(card, tools);
      return checked.ok ? visionRefusal(checked.card, tools) : null;
    },
    async run(claim, draining) {
      const hooks = await loadPlugins(plugins);
      const planner = await plannerFor(claim.card);
      return runTaskLoop({
        task: claim,
        fence: { taskId: claim.id, claimToken: claim.claimToken, agent: claim.assignee! },
        runs,
        tools,
        planner,
        services: { manager: tm, db },
        breakerPolicy,
        watch: (fn) => tm.store.watch(fn),
        now: Date.now,
        draining,
        hooks,
      });
    },
  };
}
