/**
 * A daemon's pick reads the index of the tasks that carry a card (migration 8): tasks without
 * one, waiting for agents, are not in its way however many there are.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteRunStore, createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { pickSql, releaseSql, windowSql } from '../../src/engine/sqlite/claim.js';
import { RELEASE_LIMIT } from '../../src/engine/claims.js';
import { claimNeeds } from '../../src/engine/claim-needs.js';
import { MIGRATIONS } from '../../src/engine/sqlite/migrations.js';
import { budgetOfTask } from '../../src/workers/budget.js';
import { operator, tempDir } from '../helpers.js';

const CARD = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] }, script: [{ action: 'done' }] };
const plan = (db: Database.Database, withCard: boolean, caps: string[] = []) => {
  const needs = claimNeeds(caps);
  return (db.prepare(`EXPLAIN QUERY PLAN ${pickSql(withCard, needs.shape)}`).all({ queue: 'default', now: Date.now(), agent: 'a', caps: needs.param }) as Array<{ detail: string }>)
    .map((r) => r.detail)
    .join('\n');
};

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

  it('a claim never steps over tasks reserved for another agent, requiring what it lacks or not yet due: each kind has its own index (migrations 11, 12, 13)', async () => {
    const path = join(tempDir(), 'flood.db');
    const store = createSqliteStore({ path });
    const tm = createTaskManager({ store });
    try {
      // A hostile agent's flood, at the priority everyone's work has, ahead of the real task.
      const mallory = { id: 'mallory', role: 'agent' as const };
      await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `for a ghost ${i}`, forAgent: 'ghost', card: CARD })), mallory);
      await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `needs magic ${i}`, requires: ['magic'], card: CARD })), mallory);
      // Aimed at one agent: reserved for alice, requiring what she does not offer.
      await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `for alice, needs magic ${i}`, forAgent: 'alice', requires: ['magic'], card: CARD })), mallory);
      // Aimed at a claimer that offers gpu: requiring it and what it lacks.
      await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `for alice, needs gpu and magic ${i}`, forAgent: 'alice', requires: ['magic', 'gpu'], card: CARD })), mallory);
      // An operator's reminders, due in 2100: in no part until due (migration 13).
      await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `reminder ${i}`, runAfter: Date.UTC(2100, 0, 1), card: CARD })), operator);
      await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `reminder, needs gpu ${i}`, requires: ['gpu'], runAfter: Date.UTC(2100, 0, 1), card: CARD })), operator);
      const real = (await tm.createTask({ title: 'real', card: CARD }, operator)).task.id;
      const realGpu = (await tm.createTask({ title: 'real, needs gpu', requires: ['gpu'], priority: -1, card: CARD }, operator)).task.id;
      for (const withCard of [false, true]) {
        const twin = withCard ? '_card' : '';
        const eight = ['gpu', 'display', 'a', 'b', 'c', 'd', 'e', 'f'];
        for (const caps of [[], ['gpu'], ['gpu', 'display'], eight.slice(0, 6), eight]) {
          const p = plan(store.db, withCard, caps);
          // Each part is read from its own index, the reserved one by the claimer's name, the
          // ones requiring capabilities by each set the claimer's cover (one correlated lookup
          // per set, over the sets' JSON array): nothing else is searched.
          expect(p).toMatch(new RegExp(`SEARCH tasks USING INDEX tasks_claimable_open${twin} \\(queue=\\?\\)`));
          expect(p).toMatch(new RegExp(`SEARCH tasks USING INDEX tasks_claimable_for${twin} \\(for_agent=\\? AND queue=\\?\\)`));
          const searches = (re: string) => (p.match(new RegExp(`SEARCH tasks USING INDEX ${re}`, 'g')) ?? []).length;
          const looked = caps.length === 0 ? 0 : 1;
          expect(searches(`tasks_claimable_needs_set${twin} \\(queue=\\? AND requires=\\?\\)`)).toBe(looked);
          expect(searches(`tasks_claimable_needs_for${twin} \\(for_agent=\\? AND queue=\\? AND requires=\\?\\)`)).toBe(looked);
          expect((p.match(/CORRELATED SCALAR SUBQUERY/g) ?? []).length).toBe(2 * looked);
          expect(p.includes(`tasks_claimable_needs${twin} `)).toBe(false);
          expect(p).not.toMatch(/SCAN tasks\b/);
        }
        // Five to eight first read the part's first entries in claim order (claim.ts WINDOW),
        // from its index, without a sort.
        const window = (store.db.prepare(`EXPLAIN QUERY PLAN ${windowSql(withCard)}`).all({ queue: 'default' }) as Array<{ detail: string }>).map((r) => r.detail).join('\n');
        expect(window).toMatch(new RegExp(`^SEARCH tasks USING INDEX tasks_claimable_needs${twin} \\(queue=\\?\\)$`));
        // Past eight capabilities a claimer walks the part in claim order (claim-needs.ts).
        expect(plan(store.db, withCard, [...eight, 'g'])).toMatch(new RegExp(`SEARCH tasks USING INDEX tasks_claimable_needs${twin} \\(queue=\\?\\)`));
      }
      // The ghost's tasks are only in the reserved index under its name; the magic ones only in the requiring one.
      // Each part's entries, read through its index (its WHERE, as the pick writes it).
      const entries = (index: string, terms: string) =>
        store.db.prepare(`SELECT count(*) FROM tasks INDEXED BY ${index} WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND ${terms} AND queue = 'default'`).pluck().get();
      // What a claimer offering gpu reads of the tasks requiring capabilities: the entries of the set ["gpu"].
      const gpuSet = (forAgent: string) => entries(forAgent === 'for_agent IS NULL' ? 'tasks_claimable_needs_set' : 'tasks_claimable_needs_for', `requires = '["gpu"]' AND ${forAgent}`);
      expect([
        entries('tasks_claimable_open', 'for_agent IS NULL AND requires IS NULL'),
        entries('tasks_claimable_for', "for_agent = 'ghost' AND requires IS NULL"),
        entries('tasks_claimable_for', "for_agent = 'alice' AND requires IS NULL"),
        entries('tasks_claimable_needs', 'requires IS NOT NULL'),
        gpuSet('for_agent IS NULL'),
        gpuSet("for_agent = 'alice'"),
      ]).toEqual([1, 1000, 0, 3001, 1, 0]);
      expect(store.db.prepare("SELECT count(*) FROM tasks INDEXED BY tasks_delayed WHERE state = 'pending' AND delayed = 1 AND queue = 'default'").pluck().get()).toBe(2000);
      expect((await tm.claimTask({ agent: 'alice' }))?.id).toBe(real);
      expect((await tm.claimTask({ agent: 'alice', capabilities: ['gpu'] }))?.id).toBe(realGpu);
    } finally {
      await tm.close();
    }
  });

  it('the window of a claimer offering five to eight capabilities reads due tasks only: those not yet due are in no part', async () => {
    const path = join(tempDir(), 'window.db');
    const store = createSqliteStore({ path });
    const tm = createTaskManager({ store });
    try {
      await tm.createTasks(Array.from({ length: 40 }, (_, i) => ({ title: `in 2100 ${i}`, requires: ['a'], runAfter: Date.UTC(2100, 0, 1), card: CARD })), operator);
      const due = (await tm.createTask({ title: 'due', requires: ['a'], card: CARD }, operator)).task.id;
      const rows = store.db.prepare(windowSql(true)).raw(true).all({ queue: 'default' }) as unknown[][];
      expect(rows).toEqual([[due, '["a"]', null, expect.any(Number)]]);
      expect((await tm.claimTask({ agent: 'd', capabilities: ['a', 'b', 'c', 'd', 'e'] }))?.id).toBe(due);
    } finally {
      await tm.close();
    }
  });

  it('a claim releases its queue\'s due tasks RELEASE_LIMIT at a time, read from tasks_delayed alone; all are claimed once', async () => {
    let now = Date.UTC(2026, 0, 1);
    const store = createSqliteStore({ path: join(tempDir(), 'release.db'), now: () => now });
    const tm = createTaskManager({ store });
    try {
      const n = RELEASE_LIMIT * 2 + 200;
      for (let i = 0; i < n; i += 600) await tm.createTasks(Array.from({ length: Math.min(600, n - i) }, (_, j) => ({ title: `at nine ${i + j}`, priority: (i + j) % 3, runAfter: now + 1000 })), operator);
      await tm.createTasks([{ title: 'other queue', queue: 'other', runAfter: now + 1000 }], operator);
      const released = () => store.db.prepare("SELECT count(*) FROM tasks WHERE queue = 'default' AND delayed = 0").pluck().get();
      const plan = (store.db.prepare(`EXPLAIN QUERY PLAN ${releaseSql}`).all({ queue: 'default', now }) as Array<{ detail: string }>).map((r) => r.detail).join('\n');
      expect(plan).toMatch(/SEARCH tasks USING COVERING INDEX tasks_delayed \(queue=\? AND run_after<\?\)/);
      expect(await tm.claimTask({ agent: 'w' })).toBeNull();
      expect(released()).toBe(0);
      now += 1000;
      const first = await tm.claimTask({ agent: 'w' });
      expect(first?.priority).toBe(2);
      expect(released()).toBe(RELEASE_LIMIT);
      const ids = new Set([first!.id]);
      for (let t = await tm.claimTask({ agent: 'w' }); t !== null; t = await tm.claimTask({ agent: 'w' })) ids.add(t.id);
      expect(ids.size).toBe(n);
      // The other queue's task is released by a claim in its queue only.
      expect(store.db.prepare("SELECT delayed FROM tasks WHERE queue = 'other'").pluck().get()).toBe(1);
      expect((await tm.claimTask({ agent: 'w', queue: 'other' }))?.title).toBe('other queue');
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

  it('a file at version 9 to 12 gets the parts when it is opened, its pending tasks each in theirs (those not yet due in none), and claims take them in order', async () => {
    for (const from of [9, 10, 11, 12]) {
      const path = join(tempDir(), `v${from}.db`);
      // As a build of that version left the file: its tables, its indexes, its version.
      const old = new Database(path);
      old.pragma('journal_mode = WAL');
      for (const step of MIGRATIONS.slice(0, from)) old.exec(step);
      old.pragma(`user_version = ${from}`);
      old.close();
      // Tasks of every kind, written by the old build's claim path (SQL, no store).
      const raw = new Database(path);
      const add = raw.prepare(
        `INSERT INTO tasks (title, state, priority, creator, creator_role, max_attempts, queue, for_agent, requires, depends_on, run_after, unmet_deps, lease_ms, created_at, updated_at, card)
         VALUES (?, 'pending', ?, 'op', 'operator', 3, 'default', ?, ?, '[]', 0, 0, 60000, 0, 0, ?)`,
      );
      add.run('open', 1, null, null, '{}');
      add.run('for alice', 3, 'alice', null, '{}');
      add.run('needs gpu', 2, null, '["gpu"]', '{}');
      add.run('for alice, needs gpu', 4, 'alice', '["gpu"]', '{}');
      add.run('needs gpu and tpu', 5, null, '["gpu","tpu"]', '{}');
      // Delayed by an operator: one due by now, one in 2100 (created at 0, as the rows above).
      const delayed = raw.prepare(
        `INSERT INTO tasks (title, state, priority, creator, creator_role, max_attempts, queue, depends_on, run_after, unmet_deps, lease_ms, created_at, updated_at, card)
         VALUES (?, 'pending', ?, 'op', 'operator', 3, 'default', '[]', ?, 0, 60000, 0, 0, '{}')`,
      );
      delayed.run('was delayed, due', 0, 5);
      delayed.run('in 2100', 9, Date.UTC(2100, 0, 1));
      raw.close();
      const store = createSqliteStore({ path });
      const tm = createTaskManager({ store });
      try {
        expect(store.db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
        const titles: string[] = [];
        for (let t = await tm.claimTask({ agent: 'alice', capabilities: ['gpu'] }); t !== null; t = await tm.claimTask({ agent: 'alice', capabilities: ['gpu'] })) titles.push(t.title);
        expect(titles, `from version ${from}`).toEqual(['for alice, needs gpu', 'for alice', 'needs gpu', 'open', 'was delayed, due']);
        expect(store.db.prepare("SELECT title FROM tasks WHERE state = 'pending' AND delayed = 1").pluck().all()).toEqual(['in 2100']);
      } finally {
        await tm.close();
      }
    }
  });
});
