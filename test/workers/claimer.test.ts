/**
 * The claimer tells each claim whether its last round found a task for every claim it made
 * (`likely`): a host then skips the read that spares an idle claimer a write lock.
 */
import { describe, expect, it } from 'vitest';
import { faultReporter } from '../../src/engine/index.js';
import { startClaimer } from '../../src/workers/claimer.js';

describe('the claimer', () => {
  it('a burst after a round that found all it asked for is likely; the first claim and every claim after a miss are not', async () => {
    let supply = 7;
    const asked: boolean[][] = [];
    let round: boolean[] | undefined;
    let woke!: () => void;
    const drained = new Promise<void>((resolve) => (woke = resolve));
    const claimer = startClaimer<number>({
      hasRoom: () => true,
      room: () => 4,
      claim: async (likely) => {
        // The claims of one round are asked for before any of them settles.
        if (round === undefined) {
          round = [];
          asked.push(round);
          queueMicrotask(() => (round = undefined));
        }
        round.push(likely);
        if (supply === 0) woke();
        return supply > 0 ? supply-- : null;
      },
      start: () => undefined,
      report: faultReporter('claimer test', () => undefined),
      idleMs: 5,
    });
    await drained;
    // After the miss the claimer naps, then looks again with a read: not likely.
    await new Promise((r) => setTimeout(r, 20));
    claimer.stop();
    await claimer.done;
    // 1 found of 1, 2 of 2, 4 of 4, then 0 of 4 (7 in all): a miss drops back to one read-first claim.
    expect(asked.slice(0, 4)).toEqual([[false], [true, true], [true, true, true, true], [true, true, true, true]]);
    expect(asked.length).toBeGreaterThan(4);
    expect(asked.slice(4).every((r) => r.length === 1 && r[0] === false)).toBe(true);
  });
});
