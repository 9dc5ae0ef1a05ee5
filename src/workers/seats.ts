/**
 * What a daemon's threads share to keep its limits while each claims for itself: how many
 * runs are in flight in the daemon (at most `--concurrency`), and which thread holds the
 * exclusive capabilities (the display: one desktop run per daemon). Each thread's share is
 * counted apart, so that when a thread dies the main thread gives back exactly what it held
 * (a leaked seat would shrink the daemon for good: with `--concurrency 1`, to nothing).
 *
 * It also holds the daemon's drain flag: a thread that is still starting when the daemon
 * drains (a replacement for one that crashed, or any thread of a daemon stopped within
 * moments of its start) has no channel yet to hear the broadcast on, and reads the flag.
 *
 * And it says which thread looks when a task becomes claimable (firstToClaim), so that one
 * thread of the daemon looks, not all of them. Every thread hears the same wake-ups; when each
 * raced to claim the one new task, all but one paid for a look (and often a write) for
 * nothing, and the runs spread over connections whose page caches each commit elsewhere
 * empties. The first thread that has room and is not busy takes it; a busy thread (its event
 * loop more than BUSY of the time at work, as it publishes) leaves it to the next. So at a
 * light load one thread takes the wake-ups, and the others join in as it gets busy (a drain
 * is not driven by wake-ups: each thread claims again as its own runs end).
 *
 * Layout (Int32Array over a SharedArrayBuffer): [0] seats taken in all, [1] the token's
 * holder (0 none, else thread + 1), [2] draining (0 or 1), [3] claims begun by any thread (a
 * counter), [4 + t] seats taken by thread t, [4 + threads + t] thread t claims (0 or 1),
 * [4 + 2·threads + t] thread t's event loop utilisation, in thousandths, [4 + 3·threads + t]
 * when it published that (Date.now() modulo 2^31).
 */
const TOTAL = 0;
const TOKEN = 1;
const DRAINING = 2;
const CLAIMS = 3;
const HEAD = 4;
const threadsOf = (seats: Int32Array) => (seats.length - HEAD) / 4;
const mine = (thread: number) => HEAD + thread;
const claiming = (seats: Int32Array, thread: number) => HEAD + threadsOf(seats) + thread;
const load = (seats: Int32Array, thread: number) => HEAD + 2 * threadsOf(seats) + thread;
const loadAt = (seats: Int32Array, thread: number) => HEAD + 3 * threadsOf(seats) + thread;
const stamp = (ms: number) => ms % 2 ** 31;
/** A thread whose event loop works more than this share of the time is busy (thousandths). */
export const BUSY = 800;
/**
 * A thread that has not published its load for this long is busy too: its event loop is held
 * up (a tool in a long synchronous call), so it cannot even run its timer.
 */
export const LOAD_STALE_MS = 500;

export const createSeats = (threads: number): Int32Array => new Int32Array(new SharedArrayBuffer(4 * (HEAD + 4 * threads)));

/** The daemon drains: no thread claims again. */
export const drainSeats = (seats: Int32Array): void => void Atomics.store(seats, DRAINING, 1);
export const seatsDraining = (seats: Int32Array): boolean => Atomics.load(seats, DRAINING) === 1;

export const seatsTaken = (seats: Int32Array): number => Atomics.load(seats, TOTAL);

/** Takes a seat for `thread` if fewer than `limit` are taken. */
export function takeSeat(seats: Int32Array, thread: number, limit: number): boolean {
  if (Atomics.add(seats, TOTAL, 1) >= limit) {
    Atomics.sub(seats, TOTAL, 1);
    return false;
  }
  Atomics.add(seats, mine(thread), 1);
  return true;
}

export function freeSeat(seats: Int32Array, thread: number): void {
  Atomics.sub(seats, mine(thread), 1);
  Atomics.sub(seats, TOTAL, 1);
}

/** Takes the exclusive capabilities' token for `thread` if no thread holds it. */
export const takeToken = (seats: Int32Array, thread: number): boolean => Atomics.compareExchange(seats, TOKEN, 0, thread + 1) === 0;

export function freeToken(seats: Int32Array, thread: number): void {
  Atomics.compareExchange(seats, TOKEN, thread + 1, 0);
}

/** A thread is gone (it died, or drained): its seats and the token, if it held it, are free again. */
export function releaseThread(seats: Int32Array, thread: number): void {
  setClaiming(seats, thread, false);
  Atomics.sub(seats, TOTAL, Atomics.exchange(seats, mine(thread), 0));
  freeToken(seats, thread);
}

/** Whether `thread` claims: it is set up and has not stopped claiming (nor died). */
export function setClaiming(seats: Int32Array, thread: number, on: boolean): void {
  Atomics.store(seats, claiming(seats, thread), on ? 1 : 0);
}

/** Publishes how busy `thread`'s event loop was lately (0 to 1). */
export function setLoad(seats: Int32Array, thread: number, utilization: number, now = Date.now()): void {
  Atomics.store(seats, load(seats, thread), Math.round(utilization * 1000));
  Atomics.store(seats, loadAt(seats, thread), stamp(now));
}

/** How busy `thread` is, in thousandths: fully busy if its last word is older than LOAD_STALE_MS. */
function busyness(seats: Int32Array, thread: number, now: number): number {
  const age = (stamp(now) - Atomics.load(seats, loadAt(seats, thread)) + 2 ** 31) % 2 ** 31;
  return age > LOAD_STALE_MS ? 1000 : Atomics.load(seats, load(seats, thread));
}

/**
 * Whether `thread` is the one to look for a task that just became claimable: of the threads
 * that claim and have room (fewer than `perThread` runs), the first that is not busy, or if
 * all are busy the least busy. A thread that has gone quiet (LOAD_STALE_MS) counts as fully
 * busy: another thread looks at once instead of after LEFT_TO_ANOTHER_MS. Only a hint, read
 * without a lock: two threads may both take themselves for the one, and then both look, as
 * every thread did before. When no thread has room, every thread may look (none will claim;
 * a run's end frees a seat and its thread looks).
 */
export function firstToClaim(seats: Int32Array, thread: number, perThread: number, now = Date.now()): boolean {
  let least = -1;
  let leastLoad = Infinity;
  for (let t = 0; t < threadsOf(seats); t++) {
    if (Atomics.load(seats, claiming(seats, t)) === 0) continue;
    if (Atomics.load(seats, mine(t)) >= perThread) continue;
    // (This thread is running now, whatever its last word says.)
    const busy = t === thread ? Atomics.load(seats, load(seats, t)) : busyness(seats, t, now);
    if (busy < BUSY) return t === thread;
    if (busy < leastLoad) {
      least = t;
      leastLoad = busy;
    }
  }
  return least === -1 || least === thread;
}

/** Counts a claim begun by any thread (claimsBegun tells whether another thread looked since). */
export const countClaim = (seats: Int32Array): void => void Atomics.add(seats, CLAIMS, 1);
export const claimsBegun = (seats: Int32Array): number => Atomics.load(seats, CLAIMS);

/**
 * A thread's wake-ups left to another thread (firstToClaim said so): `left()` for each; if no
 * thread of the daemon begins a claim within `ms` of one, `look()` runs (the other thread may
 * be held up). Wake-ups left while a window is open get a window of their own once it closes:
 * a claim begun before them may not have seen their task.
 */
export interface LeftToOthers {
  left(): void;
  cancel(): void;
}

export function leaveToOthers(seats: Int32Array, look: () => void, ms: number): LeftToOthers {
  let timer: NodeJS.Timeout | undefined;
  let again = false;
  const open = (): void => {
    const seen = claimsBegun(seats);
    again = false;
    timer = setTimeout(() => {
      timer = undefined;
      if (claimsBegun(seats) === seen) look();
      else if (again) open();
    }, ms);
  };
  return {
    left() {
      if (timer === undefined) open();
      else again = true;
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
