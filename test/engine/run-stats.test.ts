/**
 * The monitor's windowed counts: completions and stale reclaims come from the event log,
 * read incrementally into per-second bins (event-tally.ts), so they must slide with the
 * window, grow with new events, and survive a longer window asked after a shorter one.
 */
import { describe, expect, it } from 'vitest';
import type { TaskManager } from '../../src/engine/index.js';
import { portsOf } from '../stores.js';
import { agent, fakeClock, freshManager, operator, system } from '../helpers.js';

async function complete(tm: TaskManager, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await tm.createTask({ title: `t${i}` }, operator);
    const claim = (await tm.claimTask({ agent: 'w', start: true }))!;
    await tm.transitionTask({ taskId: claim.id, to: 'review', actor: agent('w'), claimToken: claim.claimToken });
    await tm.transitionTask({ taskId: claim.id, to: 'completed', actor: system });
  }
}

describe('run stats over a window', () => {
  it('counts completions and reclaims in the window, sliding and growing with the log', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const runs = portsOf(tm).runs;
    const t0 = clock.now();
    const stats = async () => {
      const s = await runs.runStats(clock.now() - 60_000);
      return { completed: s.completed, reclaims: s.staleReclaims };
    };
    expect(await stats()).toEqual({ completed: 0, reclaims: 0 });

    await complete(tm, 3);
    clock.advance(30_000);
    await complete(tm, 2);
    await tm.createTask({ title: 'stale' }, operator);
    await tm.claimTask({ agent: 'w', leaseMs: 1000, start: true });
    clock.advance(1001);
    await tm.sweep({ graceMs: 0 });
    expect(await stats()).toEqual({ completed: 5, reclaims: 1 });

    // 75 s after the first three: they slid out of the 60 s window.
    clock.set(t0 + 75_000);
    expect(await stats()).toEqual({ completed: 2, reclaims: 1 });
    await complete(tm, 4);
    expect(await stats()).toEqual({ completed: 6, reclaims: 1 });

    // A longer window than before is counted afresh, from the log.
    expect((await runs.runStats(t0 - 1000)).completed).toBe(9);
    expect(await stats()).toEqual({ completed: 6, reclaims: 1 });

    clock.set(t0 + 500_000);
    expect(await stats()).toEqual({ completed: 0, reclaims: 0 });
    // A second store over the same file (another process's view) agrees.
    const other = portsOf(tm).runs;
    expect((await other.runStats(t0 - 1000)).completed).toBe(9);
  });
});
