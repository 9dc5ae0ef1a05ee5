/**
 * Which thread of a daemon looks when a task becomes claimable (seats.ts firstToClaim): the
 * first thread that claims, has room and is not busy; all threads read the same shared cells.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BUSY, LOAD_STALE_MS, countClaim, createSeats, firstToClaim, leaveToOthers, releaseThread, setClaiming, setLoad, takeSeat } from '../../src/workers/seats.js';

const PER_THREAD = 2;
// One clock for a test's loads and looks (a stalled test machine must not age them).
const NOW = Date.UTC(2026, 0, 1);
/** Which threads of `seats` take themselves for the one to look. */
const lookers = (seats: Int32Array, threads: number) => Array.from({ length: threads }, (_, t) => t).filter((t) => firstToClaim(seats, t, PER_THREAD, NOW));

function daemon(threads: number): Int32Array {
  const seats = createSeats(threads);
  for (let t = 0; t < threads; t++) {
    setClaiming(seats, t, true);
    setLoad(seats, t, 0, NOW);
  }
  return seats;
}

describe('one thread looks for a new task', () => {
  it('at a light load the first thread, whatever the others hold', () => {
    const seats = daemon(3);
    expect(lookers(seats, 3)).toEqual([0]);
    expect(takeSeat(seats, 0, 100)).toBe(true);
    // Runs waiting on a model cost the thread nothing: it still takes the next one.
    expect(lookers(seats, 3)).toEqual([0]);
  });

  it('a busy thread leaves it to the next, and a thread without room is passed over', () => {
    const seats = daemon(3);
    setLoad(seats, 0, (BUSY + 50) / 1000, NOW);
    expect(lookers(seats, 3)).toEqual([1]);
    takeSeat(seats, 1, 100);
    takeSeat(seats, 1, 100);
    expect(lookers(seats, 3)).toEqual([2]);
  });

  it('a thread that has not said how busy it is for a while is held up: the next looks', () => {
    const seats = daemon(2);
    const now = NOW;
    setLoad(seats, 0, 0, now - LOAD_STALE_MS - 100);
    expect(firstToClaim(seats, 1, PER_THREAD, now)).toBe(true);
    // The thread itself, if it asks, runs again whatever its last word said: both look once.
    expect(firstToClaim(seats, 0, PER_THREAD, now)).toBe(true);
    setLoad(seats, 0, 0, now);
    expect(firstToClaim(seats, 0, PER_THREAD, now)).toBe(true);
    expect(firstToClaim(seats, 1, PER_THREAD, now)).toBe(false);
  });

  it('when every thread is busy, the least busy', () => {
    const seats = daemon(3);
    setLoad(seats, 0, 0.95, NOW);
    setLoad(seats, 1, 0.85, NOW);
    setLoad(seats, 2, 0.9, NOW);
    expect(lookers(seats, 3)).toEqual([1]);
  });

  it('a thread that stopped claiming (drained, or dead: its seats released) is passed over', () => {
    const seats = daemon(2);
    setClaiming(seats, 0, false);
    expect(lookers(seats, 2)).toEqual([1]);
    setClaiming(seats, 0, true);
    takeSeat(seats, 0, 100);
    releaseThread(seats, 0);
    expect(lookers(seats, 2)).toEqual([1]);
  });

  it('when no thread has room, each may look (none claims; a run that ends frees a seat and its thread looks)', () => {
    const seats = daemon(2);
    for (const t of [0, 1]) for (let i = 0; i < PER_THREAD; i++) takeSeat(seats, t, 100);
    expect(lookers(seats, 2)).toEqual([0, 1]);
  });
});

describe('a wake-up left to another thread', () => {
  afterEach(() => void vi.useRealTimers());
  const MS = 25;

  it('is looked at after the wait when no thread began a claim, and not when one did', () => {
    vi.useFakeTimers();
    const seats = daemon(2);
    let looks = 0;
    const others = leaveToOthers(seats, () => looks++, MS);
    others.left();
    vi.advanceTimersByTime(MS);
    expect(looks).toBe(1);
    others.left();
    countClaim(seats);
    vi.advanceTimersByTime(MS);
    expect(looks).toBe(1);
  });

  it('one left while a wait is open gets a wait of its own: a claim begun before it may not have seen its task', () => {
    vi.useFakeTimers();
    const seats = daemon(2);
    let looks = 0;
    const others = leaveToOthers(seats, () => looks++, MS);
    others.left(); // task A: the first thread claims it...
    countClaim(seats);
    vi.advanceTimersByTime(10);
    others.left(); // ...task B, 10 ms later, while that thread is held up in A's tool
    vi.advanceTimersByTime(MS - 10);
    expect(looks).toBe(0); // A's claim stands in for A
    vi.advanceTimersByTime(MS);
    expect(looks).toBe(1); // nobody began a claim after B
    vi.advanceTimersByTime(10 * MS);
    expect(looks).toBe(1);
  });

  it('cancel ends the wait', () => {
    vi.useFakeTimers();
    const seats = daemon(2);
    let looks = 0;
    const others = leaveToOthers(seats, () => looks++, MS);
    others.left();
    others.cancel();
    vi.advanceTimersByTime(10 * MS);
    expect(looks).toBe(0);
  });
});

