/**
 * A cascade of cancels on PostgreSQL and a create hanging a new task on one of the tasks it
 * cancels, at the same moment (moves.ts cancelDependents). The cascade's first statement reads
 * task_deps as of its start and then waits, at its row locks, for the create to commit: what
 * that create added was never seen, and its task stayed pending behind a cancelled dependency
 * for good (a hostile review found 1,050 such tasks in 30 s of four processes).
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { execSql } from '../stores.js';
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
});
