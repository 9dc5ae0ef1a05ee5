/**
 * createWorker: taskloop's queue, leases, fencing and dead-peer recovery around a handler of
 * the user's own (a LangGraph graph, an OpenAI Agents SDK run, plain code), without cards,
 * the task loop or worker threads. The handler runs in this process; up to `concurrency` at
 * once.
 *
 * What it does as the daemon does (daemon.ts):
 * - it is a holder (holder.ts), the one lease-renewal mechanism for everything a process
 *   holds: a row in the daemons registry, a slot `<worker id>/<n>` for each claim, and one
 *   heartbeat write per beat for all of them, however many handlers run; a peer on the same
 *   host that sees its pid gone (reclaimDeadDaemons, every `deadCheckMs`) requeues its tasks
 *   at once;
 * - one claimer (claimer.ts, the loop a daemon's threads run too), with back-pressure: it
 *   claims only while fewer than `concurrency` handlers run, and after a claim that found
 *   nothing it waits for the next commit that may concern its queue (a create in it, a task
 *   anywhere back to pending, a freed dependent), a handler ending (or `idleMs`), so idle
 *   slots cost nothing: a commit makes one claim attempt, not one per slot;
 * - it runs the stale sweep (for peers on other hosts, whose death shows only as a lease
 *   running out);
 * - every write for a task presents its claim token: a worker that lost its claim gets
 *   STALE_CLAIM and the handler's result is not written (worker-outcome.ts).
 *
 * Which tasks: every pending task of `queue` it may claim (for its agent, capabilities
 * met), with or without a card — the card, if any, is the handler's input. A daemon claims
 * only tasks with a card from its own queue, so give the handler's tasks a queue of their own.
 *
 * A handler that returns moves the task in_progress → review → completed (or stops at
 * review with `finish: 'review'`) with the returned value as its result. One that throws
 * requeues the task while attempts remain (max_attempts), else fails it; the reason names
 * the error.
 */
import { type ClaimedTask, describeError, faultReporter } from '../engine/index.js';
import { repeat } from './backoff.js';
import { startClaimer } from './claimer.js';
import { startHolder } from './holder.js';
import { type Held, createHeldTasks } from './worker-held.js';
import { type HandlerOutcome, createOutcomeWriter } from './worker-outcome.js';
import { type Worker, type WorkerOptions, workerSettings } from './worker-options.js';

export type { Worker, WorkerContext, WorkerHandler, WorkerOptions } from './worker-options.js';

export async function createWorker(opts: WorkerOptions): Promise<Worker> {
  const s = workerSettings(opts);
  const { tm, runs } = opts.store;
  const { agent, log, concurrency } = s;
  const heldTasks = createHeldTasks({ tm, agent, log });
  const held = heldTasks.all;
  const { multipleHosts } = (await tm.store.info()).capabilities;
  const holder = await startHolder({ runs, agent, threads: 0, leaseMs: s.leaseMs, log, onBeat: heldTasks.checkSoon, multiHost: multipleHosts });
  const { id } = holder;
  const outcomes = createOutcomeWriter({ tm, runs, agent, finish: s.finish, log });

  let closing = false;
  let inFlight = 0;
  const running = new Set<Promise<unknown>>();

  /** Runs the handler on a claimed task and writes how it ended; the slot's lease is renewed until then. */
  let unwatchHeld: (() => void) | undefined;
  const run = async (task: ClaimedTask, slotId: string): Promise<void> => {
    const h: Held = { task, slotId, abort: new AbortController(), released: false };
    held.set(task.id, h);
    if (unwatchHeld === undefined) {
      unwatchHeld = tm.store.watch(heldTasks.checkSoon);
      // A cancel that committed between the claim and this watch is not heard by it: look.
      heldTasks.checkSoon();
    }
    let outcome: HandlerOutcome;
    try {
      outcome = { ok: true, value: await opts.handler(task, { signal: h.abort.signal, agent, slotId, tm }) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    held.delete(task.id);
    if (held.size === 0) {
      unwatchHeld?.();
      unwatchHeld = undefined;
    }
    if (h.released) {
      log(`task ${task.id}: its handler ended after the task was given back; its ${outcome.ok ? 'result' : 'error'} is not written`);
      return;
    }
    await outcomes.settle(task, slotId, outcome);
  };

  const start = (task: ClaimedTask, slotId: string) => {
    inFlight++;
    const done = run(task, slotId)
      .catch((err: unknown) => log(`task ${task.id}: ${describeError(err)}`))
      .finally(() => {
        holder.free(slotId);
        inFlight--;
        running.delete(done);
        claimer.freed();
      });
    running.add(done);
  };

  // The claimer hears what may make a task claimable in its queue; the held tasks' watch (a
  // cancel, a lease taken over) hears every commit, but only while a handler runs: an idle
  // worker is not woken by the other processes' claims, steps and creates elsewhere.
  // Subscribed before the claimer starts: a create during its first claim is not missed.
  let wake = (): void => undefined;
  const unwatch = tm.store.watch(() => wake(), 'work', s.queue);
  // The one claimer (claimer.ts): a slot of its own for each claim.
  const claimer = startClaimer<{ task: ClaimedTask; slotId: string }>({
    hasRoom: () => inFlight < concurrency,
    claim: async (likely) => {
      const caps = s.capabilities === undefined ? {} : { capabilities: s.capabilities };
      // A look first (a read), unless the last claims all found a task: an idle worker woken
      // by a commit that may concern its queue (another agent's task, a freed dependent
      // elsewhere) must not take SQLite's one write lock each time to find nothing (when every
      // commit woke them, four idle workers cut another process's creates from ~11,000 to
      // ~3,000 a second).
      if (!likely && !(await tm.store.claimable({ agent, queue: s.queue, ...caps }))) return null;
      const slotId = holder.take();
      try {
        const task = await tm.claimTask({ agent, queue: s.queue, leaseMs: s.leaseMs, start: true, workerId: slotId, ...caps });
        if (task === null) holder.free(slotId);
        return task === null ? null : { task, slotId };
      } catch (err) {
        holder.free(slotId);
        throw err;
      }
    },
    start: ({ task, slotId }) => {
      if (!closing) return start(task, slotId);
      // Claimed as close() began: given back at once, before close() resolves.
      const given = outcomes.giveBack(task, 'worker closing').finally(() => {
        holder.free(slotId);
        running.delete(given);
      });
      running.add(given);
    },
    report: faultReporter(`worker ${id}: claim`, log),
    idleMs: s.idleMs,
  });
  wake = () => claimer.committed();

  const jobs = [
    repeat(s.deadCheckMs, 5000, async () => {
      const reclaimed = await holder.reclaimGone();
      if (reclaimed.length > 0) {
        log(`reclaimed tasks ${reclaimed.join(', ')} from a peer that is gone`);
        claimer.committed();
      }
    }, faultReporter('dead-peer check', log)),
  ];
  if (s.sweepMs > 0) {
    jobs.push(repeat(s.sweepMs, Math.max(s.sweepMs, 5000), async () => {
      const swept = await tm.sweep();
      if (swept.requeued.length + swept.failed.length > 0) claimer.committed();
    }, faultReporter('sweep', log)));
  }

  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  let closing$: Promise<void> | undefined;
  const close = (graceMs = 10_000): Promise<void> => {
    closing$ ??= (async () => {
      closing = true;
      claimer.stop();
      for (const j of jobs) j.stop();
      // The heartbeat goes on meanwhile: a handler that ends within the grace keeps its lease.
      const drained = claimer.done.then(() => Promise.all([...running])).then(() => true);
      let timer: NodeJS.Timeout | undefined;
      const inTime = await Promise.race([drained, new Promise<false>((r) => (timer = setTimeout(() => r(false), graceMs)))]);
      clearTimeout(timer);
      for (const h of [...held.values()]) {
        // Given back first, then aborted: a handler that returns at once finds it released.
        h.released = true;
        await outcomes.giveBack(h.task, `worker closing: the handler did not finish within ${graceMs} ms`);
        h.abort.abort(new Error('worker closing'));
      }
      if (!inTime) log(`grace period of ${graceMs} ms over; ${held.size} task(s) given back`);
      unwatch();
      unwatchHeld?.();
      unwatchHeld = undefined;
      await heldTasks.stop();
      await holder.stop();
      resolveClosed();
    })();
    return closing$;
  };

  log(`worker ${id} started: ${concurrency} slot(s) as ${agent} on queue ${s.queue}`);
  return {
    id,
    agent,
    get active() {
      return held.size;
    },
    close,
    closed,
  };
}
