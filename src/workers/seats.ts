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
 * Layout (Int32Array over a SharedArrayBuffer): [0] seats taken in all, [1] the token's
 * holder (0 none, else thread + 1), [2] draining (0 or 1), [3 + t] seats taken by thread t.
 */
const TOTAL = 0;
const TOKEN = 1;
const DRAINING = 2;
const mine = (thread: number) => 3 + thread;

export const createSeats = (threads: number): Int32Array => new Int32Array(new SharedArrayBuffer(4 * (3 + threads)));

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
  Atomics.sub(seats, TOTAL, Atomics.exchange(seats, mine(thread), 0));
  freeToken(seats, thread);
}
