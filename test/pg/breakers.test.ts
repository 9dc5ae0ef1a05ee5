/**
 * Tool breakers on PostgreSQL (postgres/breakers.ts), called as the assembly will call them:
 * the half-open probe granted once when two processes ask at once, failures counted from two
 * processes without a loss.
 */
import { describe, expect, it } from 'vitest';
import { pgBreakers } from '../../src/engine/postgres/breakers.js';
import type { PgTaskStore } from '../../src/engine/postgres/task-store.js';
import type { TaskEvent } from '../../src/engine/types.js';
import { fakeClock, freshManager, operator } from '../helpers.js';
import { behindLock, forcedRounds, second, sql, storeOf } from './race.js';

const POLICY = { threshold: 3, cooldownMs: 1_000, probeTimeoutMs: 500 };
const eventTypes = (events: TaskEvent[]) => events.map((e) => e.type);

describe('tool breakers on PostgreSQL', () => {
  it('closed → open after the threshold → one half-open probe after the cooldown → closed or open again', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const s = storeOf(tm);
    await s.ready;
    const q = s.conn.query;
    const record = (ok: boolean, taskId: number | null = null) => s.write('breaker', (qq, now, ev) => pgBreakers.record(qq, 'shell', ok, POLICY, taskId, now, ev));
    const acquire = () => s.write('breaker', (qq, now, ev) => pgBreakers.acquire(qq, 'shell', POLICY, now, ev));
    expect(await pgBreakers.clean(q, 'shell')).toBe(true);
    expect(await record(true)).toEqual({ value: 'closed', events: [] });
    expect(await pgBreakers.list(q)).toEqual([]); // a success on a clean tool writes nothing
    expect((await acquire()).value).toEqual({ allowed: true, state: 'closed', probe: false });
    expect((await record(false)).value).toBe('closed');
    expect((await record(false)).value).toBe('closed');
    expect(await pgBreakers.clean(q, 'shell')).toBe(false);
    expect(await pgBreakers.list(q)).toEqual([{ tool: 'shell', state: 'closed', failures: 2, openedAt: null }]);
    expect(await record(true)).toEqual({ value: 'closed', events: [] }); // reset, but it never opened
    expect(await pgBreakers.clean(q, 'shell')).toBe(true);

    const { task } = await tm.createTask({ title: 'uses shell' }, operator);
    for (let i = 0; i < 2; i++) await record(false);
    const opened = await record(false, task.id);
    expect(opened.value).toBe('open');
    expect(opened.events).toMatchObject([{ type: 'breaker.opened', taskId: task.id, actor: 'breaker', actorRole: 'system', data: { tool: 'shell', failures: 3 } }]);
    const openedAt = clock.now();
    expect((await acquire()).value).toEqual({ allowed: false, state: 'open', probe: false });
    clock.advance(500);
    expect((await record(false)).events).toEqual([]); // a late failure keeps the cooldown
    expect(await pgBreakers.list(q)).toEqual([{ tool: 'shell', state: 'open', failures: 4, openedAt }]);
    clock.advance(500);
    const probe = await acquire();
    expect(probe.value).toEqual({ allowed: true, state: 'half_open', probe: true });
    expect(probe.events).toMatchObject([{ type: 'breaker.half_opened', taskId: null, data: { tool: 'shell' } }]);
    expect((await acquire()).value).toEqual({ allowed: false, state: 'half_open', probe: false });
    clock.advance(501); // the probe was lost: another is granted
    expect((await acquire()).value).toEqual({ allowed: true, state: 'half_open', probe: true });
    const reopened = await record(false);
    expect(reopened.value).toBe('open');
    expect(eventTypes(reopened.events)).toEqual(['breaker.opened']);
    expect((await acquire()).value.allowed).toBe(false);
    clock.advance(1_000);
    expect((await acquire()).value.probe).toBe(true);
    const closed = await record(true, task.id);
    expect(closed.value).toBe('closed');
    expect(closed.events).toMatchObject([{ type: 'breaker.closed', taskId: task.id, data: { tool: 'shell' } }]);
    expect(await pgBreakers.list(q)).toEqual([{ tool: 'shell', state: 'closed', failures: 0, openedAt: null }]);
    await s.write('breaker', (qq, now, ev) => pgBreakers.record(qq, 'Zebra', false, POLICY, null, now, ev));
    await s.write('breaker', (qq, now, ev) => pgBreakers.record(qq, 'apt', false, POLICY, null, now, ev));
    expect((await pgBreakers.list(q)).map((b) => b.tool)).toEqual(['Zebra', 'apt', 'shell']); // byte order, as SQLite
  });

  it('two processes acquire a cooled breaker at once: exactly one probe is granted', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const other = second(tm, clock);
    const acquire = (s: PgTaskStore) => s.write('breaker', (q, now, ev) => pgBreakers.acquire(q, 'shell', POLICY, now, ev));
    for (let i = 0; i < 3; i++) await storeOf(tm).write('breaker', (q, now, ev) => pgBreakers.record(q, 'shell', false, POLICY, null, now, ev));
    const forced = forcedRounds();
    for (let round = 0; round < 3; round++) {
      clock.advance(POLICY.cooldownMs);
      const results = await behindLock(tm, 'SELECT 1 FROM tool_breakers WHERE tool = $1 FOR UPDATE', ['shell'], () => [acquire(storeOf(tm)), acquire(other)]);
      forced.add(results);
      const verdicts = results.map((r) => (r as PromiseFulfilledResult<{ value: { probe: boolean; allowed: boolean } }>).value.value);
      expect(verdicts.filter((v) => v.probe)).toHaveLength(1);
      expect(verdicts.filter((v) => v.allowed)).toHaveLength(1);
      // The probe fails: open again, a new cooldown.
      await other.write('breaker', (q, now, ev) => pgBreakers.record(q, 'shell', false, POLICY, null, now, ev));
    }
    expect(await sql(tm, "SELECT count(*)::int AS n FROM task_events WHERE type = 'breaker.half_opened'")).toEqual([{ n: 3 }]);
    expect(forced.n, 'rounds in which both acquirers waited for the same lock').toBeGreaterThan(0);
  });

  it('two processes counting failures of a new tool at once lose no count', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const other = second(tm, clock);
    const policy = { ...POLICY, threshold: 1_000 };
    await storeOf(tm).ready;
    const fail = (s: PgTaskStore) => s.write('breaker', (q, now, ev) => pgBreakers.record(q, 'fresh', false, policy, null, now, ev));
    await Promise.all(Array.from({ length: 20 }, (_, i) => fail(i % 2 === 0 ? storeOf(tm) : other)));
    expect(await pgBreakers.list(storeOf(tm).conn.query)).toEqual([{ tool: 'fresh', state: 'closed', failures: 20, openedAt: null }]);
  });
});
