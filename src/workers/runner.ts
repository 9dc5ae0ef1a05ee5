/**
 * The one way to run a claimed task, for every host of task loops: a daemon's worker thread
 * (worker.ts, many runs at once on one thread) and the HTTP server's stream-owned runs
 * (monitor/http/loop-host.ts). The host loads its tools and plugins once; each run gets its
 * own hook registry (plugins are registered afresh, so no plugin state crosses runs, which
 * matters when many runs share a thread) and the planner its card names.
 */
import {
  type BreakerPolicy,
  type ClaimedTask,
  type ControlState,
  type EngineError,
  type OpenRunResult,
  type RunStore,
  type TaskManager,
} from '../engine/index.js';
import { type PluginSpec, loadPlugins } from '../plugins/load.js';
import type { ToolRegistry, ToolServices } from '../tools/registry.js';
import { checkCardWithTools, visionRefusal } from './card-check.js';
import { type RunResult, type TaskLoopEvent, runTaskLoop } from './loop.js';
import { plannerFor } from './planners/choose.js';

/** What the daemon and the HTTP server use unless configured otherwise. */
export const DEFAULT_BREAKER: BreakerPolicy = { threshold: 3, cooldownMs: 300_000, probeTimeoutMs: 60_000 };

export interface RunnerOptions {
  tm: TaskManager;
  runs: RunStore;
  tools: ToolRegistry;
  /** Plugins, in order, registered afresh for each run. @defaultValue [task_enforcer] */
  plugins?: PluginSpec[];
  /** @defaultValue DEFAULT_BREAKER */
  breaker?: Partial<BreakerPolicy>;
  /** What the tools get besides the task manager (the ticket demo's `db`). */
  services?: ToolServices;
}

export interface RunOptions {
  /** The run opened in the claim's own transaction (RunStore.claimRun); else the loop opens it. */
  opened?: OpenRunResult;
  /** True once the host shuts down: the run is released at its next step boundary. */
  draining(): boolean;
}

export interface Runner {
  /** The loop of one claimed task, to drive event by event (a stream shows them). */
  start(claim: ClaimedTask, opts: RunOptions): Promise<AsyncGenerator<TaskLoopEvent, RunResult, undefined>>;
  /** Drives one claimed task's run to its end. */
  drive(claim: ClaimedTask, opts: RunOptions): Promise<RunResult>;
  /** A refusal of a valid card that no run could get past (MODEL_LACKS_VISION), or null. */
  preflight(card: unknown): EngineError | null;
}

export function createRunner(opts: RunnerOptions): Runner {
  const { tm, runs, tools } = opts;
  const plugins = opts.plugins ?? [{ module: 'task_enforcer' }];
  const breakerPolicy: BreakerPolicy = { ...DEFAULT_BREAKER, ...opts.breaker };
  const services: ToolServices = { ...opts.services, manager: tm };
  const controls = sharedControls(runs, tm);

  const start: Runner['start'] = async (claim, o) => {
    const hooks = await loadPlugins(plugins);
    const planner = await plannerFor(claim.card);
    return runTaskLoop({
      task: claim,
      fence: { taskId: claim.id, claimToken: claim.claimToken, agent: claim.assignee! },
      opened: o.opened,
      runs: controls.runs,
      tools,
      planner,
      services,
      breakerPolicy,
      watch: controls.watch,
      now: Date.now,
      draining: o.draining,
      hooks,
    });
  };

  return {
    start,
    async drive(claim, o) {
      const loop = await start(claim, o);
      for (;;) {
        const next = await loop.next();
        if (next.done === true) return next.value;
      }
    },
    preflight(card) {
      // An invalid card is left to the run, which ends rejected listing every problem.
      const checked = checkCardWithTools(card, tools);
      return checked.ok ? visionRefusal(checked.card, tools) : null;
    },
  };
}

/**
 * One store subscription and one read of the controls per change for every run of this
 * host, instead of each run reading its own control at every commit anywhere: with many
 * runs on a thread that was runs × commits reads. A run reads its control from the snapshot
 * taken after the latest change (a stop still reaches it within a step: each change
 * notifies every run, which aborts its call in flight on `stopped`).
 */
function sharedControls(runs: RunStore, tm: TaskManager): { runs: RunStore; watch(fn: () => void): () => void } {
  const listeners = new Set<() => void>();
  let snapshot: Promise<Map<number, ControlState>> | undefined;
  let unwatch: (() => void) | undefined;
  const changed = () => {
    snapshot = undefined;
    for (const fn of [...listeners]) fn();
  };
  return {
    runs: {
      ...runs,
      getControl: async (taskId, opts) => {
        // Without subscribers no change would clear the snapshot: read afresh.
        if (unwatch === undefined || opts?.fresh === true) return runs.getControl(taskId);
        const current = (snapshot ??= runs.listControls());
        current.catch(() => {
          if (snapshot === current) snapshot = undefined;
        });
        return (await current).get(taskId) ?? 'running';
      },
    },
    watch(fn) {
      listeners.add(fn);
      unwatch ??= runs.watchControls?.(changed) ?? tm.store.watch(changed);
      return () => {
        listeners.delete(fn);
        if (listeners.size === 0) {
          unwatch?.();
          unwatch = undefined;
          snapshot = undefined;
        }
      };
    },
  };
}
