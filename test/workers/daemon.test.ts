import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteRunStore, type SqliteTaskStore } from '../../src/engine/index.js';
import { freshManager, operator, waitFor } from '../helpers.js';
import { spawnCli } from '../cli/helpers.js';
import { daemonCard, startDaemonProcess } from './daemon-helpers.js';

describe('taskloop daemon', () => {
  it('two daemons share one file: every task created by a third process runs exactly once', async () => {
    const tm = freshManager();
    const [a, b] = await Promise.all([startDaemonProcess(tm.path), startDaemonProcess(tm.path)]);
    for (let i = 0; i < 20; i++) {
      await tm.createTask({ title: `t${i}`, card: daemonCard({ script: [{ action: 'tool', tool: 'echo', args: { text: `n${i}` } }, { action: 'done' }], allowed_tools: ['echo'] }) }, operator);
    }
    await waitFor(async () => (await tm.stats()).byState.completed === 20, 30_000, 'all 20 tasks to complete');
    const runs = createSqliteRunStore(tm.store as SqliteTaskStore);
    for (const t of await tm.findTasks({ limit: 100 })) {
      const taskRuns = await runs.runsOf(t.id);
      expect(taskRuns, `task ${t.id}`).toHaveLength(1);
      expect(taskRuns[0]!.phase).toBe('completed');
    }
    // Each daemon logs its runs; the lines may trail the database by a moment.
    const ran = () => [...a.lines, ...b.lines].filter((l) => /run \d+: completed/.test(l));
    await waitFor(() => ran().length >= 20, 10_000, 'the daemons to log 20 runs');
    expect(ran()).toHaveLength(20);
    a.child.kill('SIGTERM');
    b.child.kill('SIGTERM');
    expect(await Promise.all([a.exited, b.exited])).toEqual([0, 0]);
  });

  it('SIGTERM releases the run in flight; another daemon resumes it after its last finished step', async () => {
    const tm = freshManager();
    const file = join(tm.path, '..', 'log.txt');
    const first = await startDaemonProcess(tm.path, ['--grace', '5s']);
    const { task } = await tm.createTask({ title: 'long', card: daemonCard({
      allowed_tools: ['log_append', 'wait'],
      budget: { max_steps: 10, max_write_calls: 5 },
      script: [
        { action: 'tool', tool: 'log_append', args: { file, line: 'before' } },
        { action: 'tool', tool: 'wait', args: { ms: 300 } },
        { action: 'tool', tool: 'log_append', args: { file, line: 'after' } },
        { action: 'done' },
      ],
    }) }, operator);
    await waitFor(() => existsSync(file), 20_000, 'the first write');
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const released = await tm.getTask(task.id);
    expect(released.state).toBe('pending');
    expect(released.events.map((e) => e.type)).toContain('run.paused');

    const second = await startDaemonProcess(tm.path);
    await waitFor(async () => (await tm.getTask(task.id)).state === 'completed', 20_000, 'the resumed run to complete');
    expect(readFileSync(file, 'utf8')).toBe('before\nafter\n');
    const types = (await tm.getTask(task.id)).events.map((e) => e.type);
    expect(types.filter((t) => t === 'run.started')).toHaveLength(1);
    expect(types).toContain('run.resumed');
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('a worker thread that crashes is replaced; its task comes back through the sweep; the daemon keeps serving', async () => {
    const tm = freshManager();
    // One seat in all: the dead thread's seat must come back, or nothing would run again.
    const d = await startDaemonProcess(tm.path, ['--workers', '1', '--concurrency', '1', '--sweep', '* * * * * *']);
    const crash = (await tm.createTask({ title: 'crash', card: daemonCard({ allowed_tools: ['crash_thread'], script: [{ action: 'tool', tool: 'crash_thread' }] }), maxAttempts: 1 }, operator)).task;
    await d.waitForLine(/worker .* failed: crash_thread: boom/);
    const fine = (await tm.createTask({ title: 'fine', card: daemonCard() }, operator)).task;
    await waitFor(async () => (await tm.getTask(fine.id)).state === 'completed', 20_000, 'the next task to run');
    await waitFor(async () => (await tm.getTask(crash.id)).state === 'failed', 20_000, 'the sweep to reclaim the crashed task');
    // Its last attempt spent, the sweep fails it, and the run it left open is ended with it.
    const tail = (await tm.getTask(crash.id)).events.slice(-2);
    expect(tail).toMatchObject([{ type: 'task.stale_reclaimed', data: { to: 'failed' } }, { type: 'run.finished', data: { phase: 'failed', stop_reason: 'task_failed' } }]);
    d.child.kill('SIGTERM');
    expect(await d.exited).toBe(0);
  });

  it('a stop from the CLI reaches a run in another process and aborts its tool call', async () => {
    const tm = freshManager();
    const d = await startDaemonProcess(tm.path);
    const { task } = await tm.createTask({ title: 'stoppable', card: daemonCard({ allowed_tools: ['wait', 'noop'], script: [{ action: 'tool', tool: 'noop' }, { action: 'tool', tool: 'wait', args: { ms: 60_000 } }, { action: 'done' }] }) }, operator);
    await waitFor(async () => (await tm.getTask(task.id)).events.some((e) => e.type === 'run.step_started' && e.data.tool === 'wait'), 20_000, 'the wait to start');
    const stopped = await spawnCli(['--db', tm.path, 'stop', String(task.id), '--reason', 'enough']);
    expect(stopped).toMatchObject({ code: 0, stdout: `stop: task ${task.id}` });
    await waitFor(async () => (await tm.getTask(task.id)).state === 'cancelled', 10_000, 'the run to stop');
    const runs = createSqliteRunStore(tm.store as SqliteTaskStore);
    expect((await runs.runsOf(task.id))[0]).toMatchObject({ phase: 'cancelled', stopReason: 'user_stop' });
    const usage = await spawnCli(['--db', tm.path, 'stop']);
    expect(usage.code).toBe(2);
    d.child.kill('SIGTERM');
    expect(await d.exited).toBe(0);
  });

  it('pause and resume from the CLI park and continue a run in another process', async () => {
    // The first step takes long enough for the pause, from a process of its own, to land during it.
    const tm = freshManager();
    const d = await startDaemonProcess(tm.path);
    // The first step holds until the pause has landed (a loaded machine may take seconds to
    // start the CLI), then the run pauses at the step boundary.
    const hold = join(tm.path, '..', 'hold');
    writeFileSync(hold, '');
    const log = join(tm.path, '..', 'log.txt');
    const { task } = await tm.createTask({ title: 'pausable', card: daemonCard({ allowed_tools: ['log_append', 'wait'], script: [{ action: 'tool', tool: 'log_append', args: { file: log, line: 'first', hold_while: hold } }, { action: 'tool', tool: 'wait', args: { ms: 1 } }, { action: 'done' }] }) }, operator);
    await waitFor(async () => (await tm.getTask(task.id)).events.some((e) => e.type === 'run.step_started' && e.data.tool === 'log_append'), 20_000, 'the first step to start');
    const paused = await spawnCli(['--db', tm.path, 'pause', String(task.id)]);
    expect(paused.code, paused.stderr).toBe(0);
    rmSync(hold);
    await waitFor(async () => (await tm.getTask(task.id)).events.some((e) => e.type === 'run.paused'), 10_000, 'the run to pause');
    const runs = createSqliteRunStore(tm.store as SqliteTaskStore);
    expect((await runs.runsOf(task.id))[0]!.phase).toBe('paused');
    expect((await tm.getTask(task.id)).state).toBe('in_progress'); // a paused run keeps its claim
    const resumed = await spawnCli(['--db', tm.path, 'resume', String(task.id)]);
    expect(resumed.code, resumed.stderr).toBe(0);
    await waitFor(async () => (await tm.getTask(task.id)).state === 'completed', 10_000, 'the run to finish after resume');
    d.child.kill('SIGTERM');
    expect(await d.exited, d.lines.join('\n')).toBe(0);
  });

  it('kill -9 of a daemon: another daemon restarts its tasks at once, losing nothing and running nothing twice', async () => {
    const tm = freshManager();
    const dir = join(tm.path, '..');
    const victim = await startDaemonProcess(tm.path, ['--workers', '2']);
    const ids: number[] = [];
    for (let i = 0; i < 2; i++) {
      const file = join(dir, `log${i}.txt`);
      ids.push((await tm.createTask({ title: `t${i}`, card: daemonCard({
        allowed_tools: ['log_append_once', 'wait'],
        budget: { max_steps: 10, max_write_calls: 5 },
        script: [
          { action: 'tool', tool: 'log_append_once', args: { file, line: 'one' } },
          { action: 'tool', tool: 'wait', args: { ms: 60_000 } },
          { action: 'tool', tool: 'log_append_once', args: { file, line: 'two' } },
          { action: 'done' },
        ],
      }) }, operator)).task.id);
    }
    await waitFor(async () => {
      const tasks = await Promise.all(ids.map((id) => tm.getTask(id)));
      return tasks.every((t) => t.events.some((e) => e.type === 'run.step_started' && e.data.tool === 'wait'));
    }, 20_000, 'both runs to reach their wait');
    const rescuer = await startDaemonProcess(tm.path, ['--workers', '2']);
    victim.child.kill('SIGKILL');
    await victim.exited;
    for (const id of ids) {
      await waitFor(async () => (await tm.getTask(id)).events.some((e) => e.type === 'task.stale_reclaimed'), 5000, `task ${id} to be reclaimed`);
      const t = await tm.getTask(id);
      expect(t.events.find((e) => e.type === 'task.stale_reclaimed')!.data.reason).toMatch(/is gone/);
    }
    // The resumed runs continue after their last finished step: the wait (interrupted, a read) runs again, 'one' is not written twice.
    await rescuer.waitForLine(/task \d+ run \d+: /, 5000).catch(() => undefined);
    await spawnCli(['--db', tm.path, 'stop', '--all']);
    for (const [i, id] of ids.entries()) {
      await waitFor(async () => (await tm.getTask(id)).state === 'cancelled', 10_000, `task ${id} to stop`).catch(async (err) => {
        const t = await tm.getTask(id);
        throw new Error(`${err.message}: ${t.state}\n${t.events.map((e) => `${e.type} ${JSON.stringify(e.data)}`).join('\n')}\n${rescuer.lines.join('\n')}`);
      });
      expect(readFileSync(join(dir, `log${i}.txt`), 'utf8')).toBe('one\n');
      const types = (await tm.getTask(id)).events.map((e) => e.type);
      expect(types.filter((t) => t === 'run.started')).toHaveLength(1);
      expect(types).toContain('run.resumed');
    }
    rescuer.child.kill('SIGTERM');
    expect(await rescuer.exited).toBe(0);
  });

  it('kill -9 during a non-idempotent write: the run waits for input and resumes as the same run only on an operator’s word', async () => {
    const tm = freshManager();
    const dir = join(tm.path, '..');
    const file = join(dir, 'paid.txt');
    const hold = join(dir, 'hold');
    writeFileSync(hold, '');
    const victim = await startDaemonProcess(tm.path, ['--workers', '1']);
    const { task } = await tm.createTask({ title: 'pay once', card: daemonCard({
      allowed_tools: ['log_append'],
      budget: { max_steps: 10, max_write_calls: 2 },
      script: [{ action: 'tool', tool: 'log_append', args: { file, line: 'paid', hold_while: hold } }, { action: 'done' }],
    }) }, operator);
    await waitFor(() => existsSync(file), 20_000, 'the write to land');
    victim.child.kill('SIGKILL');
    await victim.exited;
    const rescuer = await startDaemonProcess(tm.path, ['--workers', '1']);
    await waitFor(async () => (await tm.getTask(task.id)).state === 'waiting', 20_000, 'the run to wait for input');
    const runs = createSqliteRunStore(tm.store as SqliteTaskStore);
    const [run] = await runs.runsOf(task.id);
    expect(run).toMatchObject({ phase: 'waiting_input', stopReason: 'unknown_side_effect', finishedAt: null });
    expect(readFileSync(file, 'utf8')).toBe('paid\n');

    const unasked = await spawnCli(['--db', tm.path, 'task', 'resume', String(task.id)]);
    expect(unasked).toMatchObject({ code: 1 });
    expect(unasked.stderr).toMatch(/VALIDATION_FAILED: .*--side-effect happened\|not-happened/);
    const byAgent = await spawnCli(['--db', tm.path, '--as', 'rescuer', 'task', 'resume', String(task.id), '--side-effect', 'not-happened']);
    expect(byAgent.stderr).toMatch(/FORBIDDEN/);
    expect((await tm.getTask(task.id)).state).toBe('waiting');

    rmSync(hold);
    const declared = await spawnCli(['--db', tm.path, 'task', 'resume', String(task.id), '--side-effect', 'not-happened']);
    expect(declared).toMatchObject({ code: 0 });
    await waitFor(async () => (await tm.getTask(task.id)).state === 'completed', 20_000, 'the resumed run to finish');
    expect(readFileSync(file, 'utf8')).toBe('paid\npaid\n'); // carried out again, once, because the operator said it did not happen
    expect(await runs.runsOf(task.id)).toHaveLength(1);
    rescuer.child.kill('SIGTERM');
    expect(await rescuer.exited).toBe(0);
  });

  it('SIGTERM the moment a daemon has started: a thread still starting (it missed the drain broadcast) claims nothing, so every task is pending after the exit', async () => {
    const tm = freshManager();
    const card = daemonCard({ allowed_tools: ['wait'], script: [{ action: 'tool', tool: 'wait', args: { ms: 1000 } }, { action: 'done' }] });
    await tm.createTasks(Array.from({ length: 6 }, (_, i) => ({ title: `t${i}`, card })), operator);
    const d = await startDaemonProcess(tm.path, ['--workers', '2', '--grace', '10s']);
    d.child.kill('SIGTERM');
    expect(await d.exited, d.lines.join('\n')).toBe(0);
    // A thread that was up in time may have claimed: its run let go after its step. One that
    // was still starting must not claim at all (it used to, and ran tasks to their end).
    const tasks = await tm.findTasks({ limit: 10 });
    expect(tasks.map((t) => t.state)).toEqual(Array(6).fill('pending'));
    expect(d.lines.join('\n')).not.toMatch(/grace period .* over/);
  });

  it('a daemon runs cards: a task created without one is left pending for an agent to claim', async () => {
    const tm = freshManager();
    const bare = (await tm.createTask({ title: 'for a person or an agent', priority: 10 }, operator)).task;
    const carded = (await tm.createTask({ title: 'for the daemon', card: daemonCard() }, operator)).task;
    const d = await startDaemonProcess(tm.path, ['--workers', '1']);
    await waitFor(async () => (await tm.getTask(carded.id)).state === 'completed', 20_000, 'the card task to complete');
    expect((await tm.getTask(bare.id)).state).toBe('pending');
    const claimed = await spawnCli(['--db', tm.path, '--as', 'claude', '--json', 'task', 'claim']);
    expect(JSON.parse(claimed.stdout)).toMatchObject({ id: bare.id, state: 'claimed', assignee: 'claude' });
    d.child.kill('SIGTERM');
    expect(await d.exited).toBe(0);
  });

  it('--max-run-time caps every run it starts: a card with no deadline (or a later one) ends budget_exhausted / deadline at the cap, its read cut there', async () => {
    const tm = freshManager();
    // Deadlines long enough that a cold daemon under load starts each run's wait before them.
    const d = await startDaemonProcess(tm.path, ['--max-run-time', '3s']);
    const waits = (budget: Record<string, unknown>) => daemonCard({ allowed_tools: ['wait'], budget, script: [{ action: 'tool', tool: 'wait', args: { ms: 120_000 } }, { action: 'done' }] });
    const ids: number[] = [];
    for (const budget of [{ max_steps: 10 }, { max_steps: 10, deadline: '1h' }]) ids.push((await tm.createTask({ title: 'long', card: waits(budget) }, operator)).task.id);
    const { task: quick } = await tm.createTask({ title: 'quick', card: daemonCard({ allowed_tools: ['wait'], budget: { max_steps: 10, deadline: '1500ms' }, script: [{ action: 'tool', tool: 'wait', args: { ms: 120_000 } }, { action: 'done' }] }) }, operator);
    await waitFor(async () => (await tm.findTasks({ states: ['failed'] })).length === 3, 30_000, 'the three runs to end');
    const runs = createSqliteRunStore(tm.store as SqliteTaskStore);
    for (const id of [...ids, quick.id]) {
      const [run] = await runs.runsOf(id);
      expect(run, `task ${id}`).toMatchObject({ phase: 'budget_exhausted', stopReason: 'deadline' });
      // Fixed on the run: the cap, or the card's own deadline where it is earlier.
      expect(run!.budget.deadlineAt! - run!.startedAt, `task ${id}`).toBe(id === quick.id ? 1500 : 3000);
      const action = (await runs.getRun(run!.id)).steps.find((st) => st.kind === 'action');
      expect(action, `task ${id}`).toMatchObject({ tool: 'wait', status: 'failed', error: expect.stringMatching(/cut off at the run's deadline/) });
    }
    d.child.kill('SIGTERM');
    expect(await d.exited).toBe(0);
    for (const bad of ['0s', 'soon']) {
      const refused = await spawnCli(['--db', tm.path, 'daemon', '--max-run-time', bad]);
      expect(refused.code, `${bad}: ${refused.stderr}`).toBe(2);
      expect(refused.stderr).toMatch(/^taskloop: --max-run-time: /);
    }
  });
});
