/**
 * A daemon's pick reads the index of the tasks that carry a card (migration 8): tasks without
 * one, waiting for agents, are not in its way however many there are.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteRunStore, createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { pickSql } from '../../src/engine/sqlite/claim.js';
import { MIGRATIONS } from '../../src/engine/sqlite/migrations.js';
import { budgetOfTask } from '../../src/workers/budget.js';
import { operator, tempDir } from '../helpers.js';

const CARD = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] }, script: [{ action: 'done' }] };
const plan = (db: Database.Database, withCard: boolean, withCaps = false) =>
  (db.prepare(`EXPLAIN QUERY PLAN ${pickSql(withCard, withCaps)}`).all({ queue: 'default', now: Date.now(), agent: 'a', caps: '[]' }) as Array<{ detail: string }>).map((r) => r.detail).join('\n');

describe('the daemon pick', () => {
  it('a daemon reads tasks_claimable_open_card, an agent tasks_claimable_open; the daemon takes the task with a card behind 200 without one', async () => {
    const path = join(tempDir(), 'tasks.db');
    const store = createSqliteStore({ path });
    const tm = createTaskManager({ store });
    await tm.createTasks(Array.from({ length: 200 }, (_, i) => ({ title: `for an agent ${i}`, priority: 5 })), operator);
    const carded = (await tm.createTask({ title: 'for a daemon', card: CARD }, operator)).task.id;
    expect(plan(store.db, true)).toMatch(/USING INDEX tasks_claimable_open_card\b/);
    expect(plan(store.db, false)).toMatch(/USING INDEX tasks_claimable_open\b/);
    const claimed = await createSqliteRunStore(store).claimRun({ agent: 'daemon-x', withCard: true }, (t, now) => budgetOfTask(t.card, now));
    expect(claimed?.task.id).toBe(carded);
    await tm.close();
  });

  it('a claim never steps over tasks reserved for another agent or requiring what it lacks: each kind has its own index (migration 10)', async () => {
    const path = join(tempDir(), 'flood.db');
    const store = createSqliteStore({ path });
    const tm = createTaskManager({ store });
    try {
      // A hostile agent's flood, at the priority everyone's work has, ahead of the real task.
      const mallory = { id: 'mallory', role: 'agent' as const };
      await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `for a ghost ${i}`, forAgent: 'ghost', card: CARD })), mallory);
      await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `needs magic ${i}`, requires: ['magic'], card: CARD })), mallory);
      const real = (await tm.createTask({ title: 'real', card: CARD }, operator)).task.id;
      for (const withCard of [false, true]) {
        const twin = withCard ? '_card' : '';
        for (const withCaps of [false, true]) {
          const p = plan(store.db, withCard, withCaps);
          // Each part is read from its own index, the reserved one by the claimer's name: nothing else is searched.
          expect(p).toMatch(new RegExp(`SEARCH tasks USING INDEX tasks_claimable_open${twin} \\(queue=\\?\\)`));
          expect(p).toMatch(new RegExp(`SEARCH tasks USING INDEX tasks_claimable_reserved${twin} \\(for_agent=\\? AND queue=\\?\\)`));
          expect(p.includes(`tasks_claimable_requiring${twin} `)).toBe(withCaps);
          expect(p).not.toMatch(/SCAN tasks\b/);
        }
      }
      // The ghost's tasks are only in the reserved index under its name; the magic ones only in the requiring one.
      const entries = (index: string) => store.db.prepare(`SELECT count(*) FROM tasks INDEXED BY ${index} WHERE state = 'pending' AND unmet_deps = 0 AND ${index.includes('reserved') ? 'for_agent IS NOT NULL' : `for_agent IS NULL AND requires IS ${index.includes('requiring') ? 'NOT ' : ''}NULL`} AND queue = 'default'`).pluck().get();
      expect([entries('tasks_claimable_open'), entries('tasks_claimable_reserved'), entries('tasks_claimable_requiring')]).toEqual([1, 1000, 1000]);
      expect((await tm.claimTask({ agent: 'alice' }))?.id).toBe(real);
    } finally {
      await tm.close();
    }
  });

  it('a claim without its look (a burst) claims what is there, and finds nothing without a write when nothing is', async () => {
    const path = join(tempDir(), 'nolook.db');
    const store = createSqliteStore({ path });
    const tm = createTaskManager({ store });
    // The store's reads outside a write, by name: the look is the one named 'claim'.
    const looks: string[] = [];
    const runs = createSqliteRunStore({ ...store, read: (what, fn) => (looks.push(what), store.read(what, fn)) });
    const budget = (t: { card: unknown }, now: number) => budgetOfTask(t.card as typeof CARD, now);
    try {
      const id = (await tm.createTask({ title: 'one', card: CARD }, operator)).task.id;
      await tm.createTask({ title: 'for an agent' }, operator);
      expect(await runs.claimRun({ agent: 'nobody-has-cards-for', withCard: true, queue: 'empty' }, budget)).toBeNull();
      expect(looks).toEqual(['claim']);
      const first = await runs.claimRun({ agent: 'daemon-x', withCard: true }, budget, { look: false });
      expect(looks).toEqual(['claim']);
      expect(first?.task.id).toBe(id);
      expect(first?.opened.run.id).toBeGreaterThan(0);
      // Rows this connection has changed so far (SQLite's own count).
      const changes = () => store.db.prepare('SELECT total_changes()').pluck().get();
      const before = changes();
      // Nothing with a card is left: the write finds nothing and changes nothing.
      expect(await runs.claimRun({ agent: 'daemon-x', withCard: true }, budget, { look: false })).toBeNull();
      expect(changes()).toBe(before);
      expect((await tm.getTask(id)).state).toBe('in_progress');
    } finally {
      await tm.close();
    }
  });

  it('a file at version 7 gets the index when it is opened, with the tasks already pending in it', async () => {
    const path = join(tempDir(), 'v7.db');
    const old = new Database(path);
    old.pragma('journal_mode = WAL');
    for (const step of MIGRATIONS.slice(0, 7)) old.exec(step);
    old.pragma('user_version = 7');
    old.close();
    const store = createSqliteStore({ path });
    try {
      expect(store.db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
      expect(store.db.prepare("SELECT sql FROM sqlite_master WHERE name = 'tasks_claimable_open_card'").pluck().get()).toMatch(/card <> '\{\}'/);
    } finally {
      await store.close();
    }
  });
});
