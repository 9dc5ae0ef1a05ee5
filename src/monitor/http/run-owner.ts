/**
 * Runs owned by event streams (seed 000: the run's lifecycle belongs to GET …/events). The
 * owner claims an attached task for the server's agent, drives its loop in this process,
 * keeps its lease alive, and follows it through approval waits (the task comes back to
 * pending once the approval is decided; the owner claims it again and the run resumes).
 *
 * When the stream's client goes away, a run that started is stopped through its control
 * (the engine's stop: it aborts the tool call in flight and the run ends cancelled /
 * user_stop); a run that never started is left pending for the next stream. One owner per
 * task in this process: a second stream gets RUN_ACTIVE (409).
 */
import { type Actor, type ClaimedTask, type EngineError, type RunStore, type TaskManager, isEngineError, isTerminal } from '../../engine/index.js';
import type { RunResult } from '../../workers/loop.js';
import { HttpError } from './errors.js';
import type { LoopHost } from './loop-host.js';

/**
 * The queue of attached tasks: POST /api/tasks puts a task here unless the body says
 * `"attach": false`. Daemons serve `default` (or the queue they are given), so none claims
 * an attached task; only its stream's owner does, by id. (A daemon started with
 * `--queue attached` would compete for them: don't.)
 */
export const ATTACHED_QUEUE = 'attached';

/** How a run owned by a stream ended, as far as the stream is concerned. */
export type OwnerOutcome =
  | { type: 'finished'; result: RunResult }
  /** The client left before anything ran; the task stays as it was. */
  | { type: 'abandoned' }
  /** The task ended without this owner running it (cancelled, run elsewhere). */
  | { type: 'ended' }
  /** The server is shutting down: the run was given back, to be resumed. */
  | { type: 'released' }
  | { type: 'error'; error: { code: string; message: string } };

export interface OwnedRun {
  readonly taskId: number;
  /** True while the owning stream is connected. */
  readonly attached: boolean;
  /** The stream's client went away: stop what started, abandon what did not. */
  detach(): void;
  readonly done: Promise<OwnerOutcome>;
}

export interface RunOwner {
  get(taskId: number): OwnedRun | undefined;
  /** Takes ownership of the task's run for `actor`'s stream; RUN_ACTIVE if it has an owner. */
  own(taskId: number, actor: Actor): OwnedRun;
  /** A refusal of the card before any run starts (MODEL_LACKS_VISION), or null. */
  preflight(card: unknown): EngineError | null;
  /** Task ids with a live owner. */
  active(): number[];
  /** Releases owned runs at their next step boundary; waits up to `graceMs` for them. */
  close(graceMs?: number): Promise<void>;
}

export interface RunOwnerOptions {
  tm: TaskManager;
  runs: RunStore;
  host: LoopHost;
  /** The agent name the server claims attached tasks as. */
  agent: string;
  /** Capabilities the server offers to tasks that require some. @defaultValue none */
  capabilities?: string[];
  /** Lease of each claim, renewed every third of it. @defaultValue 30000 */
  leaseMs?: number;
  log?: (line: string) => void;
}

/** How often an owner waiting for its task to become claimable looks again, besides change notifications. */
const RECHECK_MS = 1000;

export function createRunOwner(opts: RunOwnerOptions): RunOwner {
  const { tm, runs, host, agent } = opts;
  const leaseMs = opts.leaseMs ?? 30_000;
  const log = opts.log ?? (() => undefined);
  const owned = new Map<number, OwnedRun>();
  let draining = false;
  const wakers = new Set<() => void>();

  /** Resolves on the next commit anywhere, on `wake`, or after `ms`. */
  const changeOrTimeout = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      let settled = false;
      const done = () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        unwatch();
        wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      const unwatch = tm.store.watch(done);
      wakers.add(done);
    });
  const wakeAll = () => {
    for (const w of [...wakers]) w();
  };

  /** The claim, null while the task cannot be claimed yet, or 'ended' once it is terminal. */
  async function tryClaim(taskId: number, slot: string): Promise<ClaimedTask | null | 'ended'> {
    // A read first: an owner waiting on an approval wakes at every commit anywhere, and
    // must not take the write lock each time just to be told the task is still waiting.
    const task = await tm.store.getTask(taskId, false);
    if (isTerminal(task.state)) return 'ended';
    if (task.state !== 'pending' || task.runAfter > Date.now()) return null;
    try {
      const claim = await tm.claimTask({ agent, taskId, start: true, leaseMs, capabilities: opts.capabilities, workerId: slot });
      return claim;
    } catch (err) {
      if (!isEngineError(err) || err.code !== 'INVALID_TRANSITION') throw err;
      // Taken meanwhile, or dependencies still open.
      return isTerminal((await tm.store.getTask(taskId, false)).state) ? 'ended' : null;
    }
  }

  /** Drives the run; its lease is renewed through the claim's slot (the host's one heartbeat). */
  async function drive(claim: ClaimedTask): Promise<RunResult | 'lost'> {
    try {
      const loop = await host.run(claim, () => draining);
      for (;;) {
        const next = await loop.next();
        if (next.done === true) return next.value;
      }
    } catch (err) {
      // A lost claim (STALE_CLAIM: cancelled or reclaimed meanwhile) ends this owner's part.
      if (isEngineError(err) && (err.code === 'STALE_CLAIM' || err.code === 'INVALID_TRANSITION')) {
        log(`task ${claim.id}: the run lost its claim (${err.code}): ${err.message}`);
        return 'lost';
      }
      throw err;
    }
  }

  function own(taskId: number, actor: Actor): OwnedRun {
    if (draining) throw new HttpError(503, 'UNAVAILABLE', 'the server is shutting down');
    if (owned.has(taskId)) throw new HttpError(409, 'RUN_ACTIVE', `task ${taskId}: its run is already owned by another stream`);
    let attached = true;
    let started = false;
    let stopRequested = false;

    const requestStop = async () => {
      if (stopRequested) return;
      stopRequested = true;
      try {
        await runs.setControl({ target: [taskId], state: 'stopped', actor, reason: 'user_stop' });
      } catch (err) {
        // The run may have ended in between (INVALID_TRANSITION): nothing is left to stop.
        if (!isEngineError(err)) throw err;
        log(`task ${taskId}: stop on disconnect refused (${err.code}): ${err.message}`);
      }
    };

    const run = async (): Promise<OwnerOutcome> => {
      for (;;) {
        if (draining) return { type: 'released' };
        if (!attached && !started) return { type: 'abandoned' };
        const slot = await host.slot();
        const claim = await tryClaim(taskId, slot).catch((err: unknown) => {
          host.free(slot);
          throw err;
        });
        if (claim === 'ended' || claim === null) host.free(slot);
        if (claim === 'ended') return { type: 'ended' };
        if (claim === null) {
          await changeOrTimeout(RECHECK_MS);
          continue;
        }
        started = true;
        // The client left while the claim was being made: the run starts and stops at once.
        if (!attached) await requestStop();
        const result = await drive(claim).finally(() => host.free(slot));
        if (result === 'lost') return { type: 'ended' };
        if (result.phase === 'released') return { type: 'released' };
        if (result.phase !== 'waiting_approval') return { type: 'finished', result };
        // Parked: wait for the decision (or a stop) to put the task back in the queue.
      }
    };

    const done = run()
      .catch((err: unknown): OwnerOutcome => {
        log(`task ${taskId}: the owned run failed: ${err instanceof Error ? err.message : String(err)}`);
        return { type: 'error', error: isEngineError(err) ? { code: err.code, message: err.message } : { code: 'INTERNAL', message: 'the run failed in the server; see its log' } };
      })
      .finally(() => owned.delete(taskId));

    const entry: OwnedRun = {
      taskId,
      get attached() {
        return attached;
      },
      detach() {
        if (!attached) return;
        attached = false;
        // At shutdown the streams end because the server does: the runs are released, not stopped.
        if (started && !draining) void requestStop().catch(() => undefined);
        wakeAll();
      },
      done,
    };
    owned.set(taskId, entry);
    return entry;
  }

  return {
    get: (taskId) => owned.get(taskId),
    own,
    preflight: (card) => host.preflight(card),
    active: () => [...owned.keys()],
    async close(graceMs = 10_000) {
      draining = true;
      wakeAll();
      const all = Promise.all([...owned.values()].map((o) => o.done));
      const inTime = await Promise.race([all.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), graceMs).unref())]);
      if (!inTime) log(`grace period of ${graceMs} ms over; ${owned.size} owned run(s) still busy are left to the stale sweep`);
      await host.close();
    },
  };
}
