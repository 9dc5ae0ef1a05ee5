/**
 * What a daemon's worker thread does with its one `serve` request: it claims for itself and
 * runs what it claimed, many runs at once, until the daemon drains. Claiming on the thread
 * that runs the task saves the hand-off a main-thread claimer cost (the claimed row crossing
 * threads, a wake of the main thread and of the worker per task): measured alternately in
 * bench:scale, one daemon drained 288–347 one-tool tasks/s before and 374–420 after
 * (BENCHMARKS.md, issue 12 session 8).
 *
 * Back-pressure across the threads (seats.ts): a thread holds at most `perThread` runs, and
 * a seat in the daemon's shared count is taken before each claim, so the daemon never holds
 * more than `concurrency` tasks, `--concurrency 1` included. An exclusive capability
 * (desktop: one run per display) is offered only by the thread that holds the daemon's
 * token, taken before the claim and kept while the run it claimed holds the display, so two
 * threads never both claim a desktop task.
 *
 * The thread tells the main thread what it holds (ThreadNote, protocol.ts): the main thread's
 * one heartbeat renews those leases, logs how each run ended, lets go of the lease of a run
 * a store fault cut short, and lets go of everything a thread held if the thread dies.
 */
import type { MessagePort } from 'node:worker_threads';
import { type ClaimedRun, type RunStore, type TaskStore, DEFAULT_QUEUE, FATAL_FAULTS, faultReporter, isEngineError, storeError, describeError } from '../engine/index.js';
import { budgetOfTask, capRun } from './budget.js';
import { startClaimer } from './claimer.js';
import { type RunEnding, type ServeReply, type ThreadNote, type WorkerConfig, EXCLUSIVE_CAPABILITIES } from './protocol.js';
import type { Runner } from './runner.js';
import { countClaim, firstToClaim, freeSeat, freeToken, leaveToOthers, seatsTaken, setClaiming, setLoad, takeSeat, takeToken } from './seats.js';

/**
 * How long a thread that left a wake-up to another thread of its daemon waits before it looks
 * itself, if no thread has begun a claim since (the other's event loop held up by a long
 * synchronous tool, say). Any thread also looks every second (the claimer's idleMs).
 */
export const LEFT_TO_ANOTHER_MS = 25;
/** How often a thread publishes how busy its event loop was (seats.ts setLoad). */
const LOAD_EVERY_MS = 100;

export interface ServeContext {
  config: WorkerConfig;
  thread: number;
  generation: number;
  port: MessagePort;
  store: TaskStore;
  runs: RunStore;
  runner: Runner;
  /** True once the daemon drains (its broadcast). */
  draining(): boolean;
  /** Called once when the daemon drains. */
  onDrain(fn: () => void): void;
}

interface Claimed {
  claimed: ClaimedRun;
  slot: string;
  exclusive: boolean;
}

export async function serve(ctx: ServeContext): Promise<ServeReply> {
  const { config, port, runs, runner, generation } = ctx;
  const { agent, capabilities, queue, leaseMs } = config.claim;
  const seats = config.seats;
  // Notes go to the main thread in batches: one message a note woke the main thread twice a
  // run, and each wake-up could preempt a thread of the daemon while it held the write lock
  // (BENCHMARKS.md, session 20). A port keeps the order of the notes, batched or not.
  // - `held`: at the next microtask checkpoint, with the rest of its claim burst; the run
  //   starts after that (see start), so the main thread hears of a run before the run can
  //   block its thread in a tool: otherwise no heartbeat renews its lease and a stop cannot
  //   let go of it.
  // - `ended` for a run that ran to its end: once in a turn of this thread's event loop (a late
  //   one renews a lease its run no longer holds, which the claim's fence makes a no-op).
  // - the rest at once, an `ended` for a failed or lost run among them: its lease is let go,
  //   or a fault stops the daemon, without waiting on whatever the thread does next.
  //   (A thread that dies loses at most its last turn's `ran` endings: the main thread lets go
  //   of those slots, which touches no task they no longer hold.)
  let queued: ThreadNote[] = [];
  let soon = false;
  let later = false;
  const flushNotes = (): void => {
    soon = false;
    const batch = queued;
    queued = [];
    if (batch.length > 0) port.postMessage(batch);
  };
  const note = (n: ThreadNote): void => {
    queued.push(n);
    if (n.type === 'held') {
      if (!soon) queueMicrotask(flushNotes);
      soon = true;
    } else if (n.type === 'ended' && n.ending.type === 'ran') {
      if (!later) {
        setImmediate(() => {
          later = false;
          flushNotes();
        });
      }
      later = true;
    } else flushNotes();
  };
  const wantsExclusive = capabilities.some((c) => EXCLUSIVE_CAPABILITIES.has(c));
  const shared = capabilities.filter((c) => !EXCLUSIVE_CAPABILITIES.has(c));
  let inFlight = 0;
  let next = 0;
  const running = new Set<Promise<void>>();

  const { thread } = ctx;
  const hasRoom = () => !ctx.draining() && inFlight < config.perThread && seatsTaken(seats) < config.concurrency;
  const room = () => (ctx.draining() ? 0 : Math.min(config.perThread - inFlight, config.concurrency - seatsTaken(seats)));

  const runOne = async ({ claimed, slot, exclusive }: Claimed): Promise<void> => {
    const { task, opened } = claimed;
    let ending: RunEnding;
    try {
      const r = await runner.drive(task, { opened, draining: ctx.draining });
      ending = { type: 'ran', taskId: r.taskId, runId: r.runId, phase: r.phase, stopReason: r.stopReason };
    } catch (err) {
      // A lost claim (STALE_CLAIM) ends this thread's part: the new owner carries on. A
      // SQLite error is told by its fault's code; anything else is a failed run.
      const e = storeError(err, config.dbPath, 'worker');
      ending = isEngineError(e) ? { type: 'lost', taskId: task.id, error: e.toJSON() } : { type: 'failed', taskId: task.id, error: { message: describeError(e) } };
    } finally {
      inFlight--;
      freeSeat(seats, thread);
      if (exclusive) freeToken(seats, thread);
    }
    note({ type: 'ended', slot, ending });
    claimer?.freed();
  };

  // Subscribed before the claimer starts: a commit during its first claim is not missed.
  let claimer: ReturnType<typeof startClaimer<Claimed>> | undefined;
  let stopped = false;
  // One thread of the daemon looks for the task a commit may have made claimable: the first
  // that is not busy (seats.ts firstToClaim). Another looks if none began a claim meanwhile.
  const others = leaveToOthers(seats, () => claimer?.committed(), LEFT_TO_ANOTHER_MS);
  const onWork = (): void => {
    if (claimer === undefined) return;
    if (firstToClaim(seats, thread, config.perThread)) claimer.committed();
    else others.left();
  };
  // Only what can make a task claimable in this daemon's queue (on PostgreSQL a step of
  // another daemon sends no NOTIFY; a create in another queue wakes neither store's claimers).
  const unwatch = ctx.store.watch(onWork, 'work', queue ?? DEFAULT_QUEUE);
  note({ type: 'ready' });
  claimer = startClaimer<Claimed>({
    hasRoom,
    room,
    claim: async (likely) => {
      // (A burst's later claims, once the daemon drains, claim nothing only to release it.)
      if (ctx.draining() || !takeSeat(seats, thread, config.concurrency)) return null;
      // Back from a failed claim's backoff (see the catch below).
      if (!stopped) setClaiming(seats, thread, true);
      // The display's token first, so that no two threads claim a desktop task at once.
      const token = wantsExclusive && takeToken(seats, thread);
      // A claim that looks for every kind of task this daemon runs stands in for the others'.
      if (token || !wantsExclusive) countClaim(seats);
      const slot = `${config.daemonId}/${thread}.${generation}.${next++}`;
      let claimed: ClaimedRun | null;
      try {
        // A daemon runs cards: a task without one is left for an agent to claim.
        claimed = await runs.claimRun({ agent, capabilities: token ? capabilities : shared, queue, leaseMs, workerId: slot, withCard: true }, (t, now) => capRun(budgetOfTask(t.card, now), now, config.maxRunMs), { look: !likely });
      } catch (err) {
        freeSeat(seats, thread);
        if (token) freeToken(seats, thread);
        // The claimer waits before it tries again, deaf to wake-ups: others look meanwhile.
        setClaiming(seats, thread, false);
        throw err;
      }
      const exclusive = token && claimed !== null && claimed.task.requires.some((c) => EXCLUSIVE_CAPABILITIES.has(c));
      if (token && !exclusive) freeToken(seats, thread);
      if (claimed === null) freeSeat(seats, thread);
      return claimed === null ? null : { claimed, slot, exclusive };
    },
    start: (c) => {
      inFlight++;
      note({ type: 'held', slot: c.slot, taskId: c.claimed.task.id });
      // After the burst's held notes have gone (a microtask queued before this one).
      const done = Promise.resolve(c).then(runOne);
      running.add(done);
      void done.finally(() => running.delete(done));
    },
    fatal: (err) => {
      const e = storeError(err, config.dbPath, 'worker');
      if (!isEngineError(e) || !FATAL_FAULTS.has(e.code)) return false;
      note({ type: 'fault', error: e.toJSON() });
      return true;
    },
    report: faultReporter(`thread ${thread}: claim`, (line) => note({ type: 'log', line })),
    idleMs: 1000,
  });
  const claiming = claimer;
  let since = performance.eventLoopUtilization();
  const loadTimer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    setLoad(seats, thread, performance.eventLoopUtilization(now, since).utilization);
    since = now;
  }, LOAD_EVERY_MS);
  loadTimer.unref();
  setLoad(seats, thread, 0);
  setClaiming(seats, thread, true);
  const stop = () => {
    stopped = true;
    setClaiming(seats, thread, false);
    others.cancel();
    clearInterval(loadTimer);
    claiming.stop();
  };
  ctx.onDrain(stop);
  if (ctx.draining()) stop();
  try {
    await claiming.done;
    stop();
    // Runs let go at their next step boundary once draining (runner.ts).
    while (running.size > 0) await Promise.all([...running]);
  } finally {
    stop();
    unwatch();
  }
  note({ type: 'served' });
  return { type: 'served' };
}
