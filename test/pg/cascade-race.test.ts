/**
 * A cascade of cancels on PostgreSQL and a create hanging a new task on one of the tasks it
 * cancels, at the same moment (moves.ts cancelDependents). The cascade's first statement reads
 * task_deps as of its start and then waits, at its row locks, for the create to commit: what
 * that create added was never seen, and its task stayed pending behind a cancelled dependency
 * for good (a hostile review found 1,050 such tasks in 30 s of four processes).
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { DOOMED } from '../../src/engine/postgres/moves.js';
import { execSql, querySql } from '../stores.js';
import { agent, freshManager, operator } from '../helpers.js';

describe('a cascade of cancels racing a create on PostgreSQL', () => {
  it('a task created on a dependent while its dependency is being cancelled is cancelled too, or refused', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const root = (await tm.createTask({ title: 'root' }, operator)).task;
    const middle = (await tm.createTask({ title: 'middle', dependsOn: [root.id] }, agent('a'))).task;
    // The create holds its lock on `middle` (FOR SHARE) while it writes its dependency row,
    // slowly: the cancel's walk starts meanwhile, and its lock on `middle` waits for the commit.
    await execSql(
      tm,
      `CREATE FUNCTION slow_dep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
         IF NEW.depends_on = ${middle.id} THEN PERFORM pg_sleep(1); END IF; RETURN NEW; END $$`,
    );
    await execSql(tm, 'CREATE TRIGGER slow_dep BEFORE INSERT ON task_deps FOR EACH ROW EXECUTE FUNCTION slow_dep()');

    const creating = tm.createTask({ title: 'late', dependsOn: [middle.id] }, agent('b'));
    await new Promise((r) => setTimeout(r, 300));
    await tm.cancelTask({ taskId: root.id, actor: operator, reason: 'not needed' });
    const late = await creating;

    const got = await tm.getTask(late.task.id);
    expect(got.state).toBe('cancelled');
    expect(got.events.at(-1)).toMatchObject({ type: 'task.cancelled', actor: 'system', data: { reason: `dependency ${middle.id} ended cancelled` } });
    expect((await tm.stats()).byState).toMatchObject({ pending: 0, cancelled: 3 });
  });

  it("the walk looks dependents up by their dependency's index even after an agent's 20,000-task fan is analysed", async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const hub = (await tm.createTask({ title: 'the agent\'s own' }, agent('mallory'))).task;
    // The rows 20,000 creates of `{ dependsOn: [hub] }` write, in bulk; then the statistics.
    await execSql(
      tm,
      `INSERT INTO tasks (id, title, state, creator, creator_role, max_attempts, queue, depends_on, run_after, unmet_deps, created_at, updated_at, card, delayed)
       SELECT $1::bigint + g, 'fan', 'pending', 'mallory', 'agent', 3, 'default', $2, 0, 1, 0, 0, '{}', false FROM generate_series(1, 20000) g`,
      [hub.id, `[${hub.id}]`],
    );
    await execSql(tm, 'INSERT INTO task_deps (task_id, depends_on) SELECT $1::bigint + g, $1::bigint FROM generate_series(1, 20000) g', [hub.id]);
    await execSql(tm, `SELECT setval(pg_get_serial_sequence('tasks', 'id'), $1::bigint)`, [hub.id + 20000]);
    await execSql(tm, 'ANALYZE task_deps');
    const root = (await tm.createTask({ title: 'root' }, operator)).task;
    await tm.createTasks(Array.from({ length: 50 }, (_, i) => (i === 0 ? { title: 'l', dependsOn: [root.id], ref: 'l0' } : { title: 'l', dependsOnRefs: [`l${i - 1}`], ref: `l${i}` })), operator);

    const plan = (await querySql<{ 'QUERY PLAN': string }>(tm, `EXPLAIN ${DOOMED}`, [[root.id]])).map((r) => r['QUERY PLAN']).join('\n');
    // Version 10 pins the estimate of one task's dependents; without it the planner expected the
    // whole table for each and read task_deps_pkey (or all of task_deps) at every step.
    expect(plan).toMatch(/task_deps_reverse on task_deps d_1/);
    expect(plan).not.toMatch(/task_deps_pkey|Seq Scan on task_deps/);
    await tm.cancelTask({ taskId: root.id, actor: operator });
    expect((await tm.stats()).byState).toMatchObject({ cancelled: 51 });
  });
});
