/**
 * Each crash point of a step, with a real daemon process that really dies (SIGKILL) there,
 * and another daemon that resumes the run: the final state and the side-effect counts are
 * right. The points: right after a decision commits, after an action step begins, during
 * acceptance, and between acceptance and the run's end.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type SqliteTaskStore, type TaskManager, createSqliteRunStore } from '../../src/engine/index.js';
import { ROOT, freshManager, operator, waitFor } from '../helpers.js';
import { type DaemonProcess, daemonCard, startDaemonProcess } from './daemon-helpers.js';

const CRASH_PLUGIN = join(ROOT, 'test/fixtures/crash-plugin.mjs');
const TERMINAL = ['completed', 'failed', 'cancelled'];

interface Crash {
  tm: TaskManager & { path: string };
  dir: string;
  file: string;
  marker: string;
}

function setup(): Crash {
  const tm = freshManager();
  const dir = join(tm.path, '..');
  return { tm, dir, file: join(dir, 'paid.txt'), marker: join(dir, 'crashed') };
}

/** A card that pays once (a non-idempotent write), then is done. */
function payCard(c: Crash, over: Record<string, unknown> = {}) {
  return daemonCard({
    allowed_tools: ['log_append', 'noop', 'crash_once'],
    budget: { max_steps: 12, max_write_calls: 3 },
    script: [{ action: 'tool', tool: 'noop' }, { action: 'tool', tool: 'log_append', args: { file: c.file, line: 'paid' } }, { action: 'done' }],
    ...over,
  });
}

/** Runs the task on a daemon that crashes at `at` (or wherever the card makes it), then on a rescuer. */
async function crashAndResume(c: Crash, card: Record<string, unknown>, at?: string): Promise<{ id: number; rescuer: DaemonProcess }> {
  const env = { ...process.env, TASKLOOP_TEST_CRASH: JSON.stringify({ marker: c.marker, at, tool: 'log_append' }) };
  const victim = await startDaemonProcess(c.tm.path, ['--workers', '1', '--plugin', CRASH_PLUGIN], env);
  const { task } = await c.tm.createTask({ title: 'pay once', card }, operator);
  const code = await victim.exited;
  expect(code, `the victim died of its crash point\n${victim.lines.join('\n')}`).toBeNull();
  expect(existsSync(c.marker)).toBe(true);
  const rescuer = await startDaemonProcess(c.tm.path, ['--workers', '1', '--plugin', CRASH_PLUGIN], env);
  await waitFor(async () => {
    const t = await c.tm.getTask(task.id);
    return TERMINAL.includes(t.state) || t.state === 'waiting';
  }, 30_000, `task ${task.id} to settle\n${rescuer.lines.join('\n')}`);
  return { id: task.id, rescuer };
}

const lines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8') : '');

async function stop(d: DaemonProcess) {
  d.child.kill('SIGTERM');
  expect(await d.exited).toBe(0);
}

describe('crash points of a step, with real processes killed there', () => {
  it('right after a decision is made, before it is written: it is taken again and its write lands once', async () => {
    const c = setup();
    const { id, rescuer } = await crashAndResume(c, payCard(c), 'after_decide');
    const runs = createSqliteRunStore(c.tm.store as SqliteTaskStore);
    const [run, ...more] = await runs.runsOf(id);
    expect(more).toEqual([]);
    expect(run).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    expect(lines(c.file)).toBe('paid\n');
    // The decision was held back to be written with its action step: the crash lost it, and
    // the resumed run took it again (three decisions written, none abandoned).
    const decides = (await runs.getRun(run!.id)).steps.filter((s) => s.kind === 'decide').map((s) => s.status);
    expect(decides).toEqual(['ok', 'ok', 'ok']);
    await stop(rescuer);
  });

  it('right after a decision was written: the decision is taken again and its write lands once', async () => {
    const c = setup();
    const { id, rescuer } = await crashAndResume(c, payCard(c), 'after_decide_written');
    const runs = createSqliteRunStore(c.tm.store as SqliteTaskStore);
    const [run, ...more] = await runs.runsOf(id);
    expect(more).toEqual([]);
    expect(run).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    expect(lines(c.file)).toBe('paid\n');
    const decides = (await runs.getRun(run!.id)).steps.filter((s) => s.kind === 'decide').map((s) => s.status);
    expect(decides).toEqual(['ok', 'abandoned', 'ok', 'ok']);
    await stop(rescuer);
  });

  it('during the gate (a tool_before hook): the decision is taken again and the write lands once', async () => {
    const c = setup();
    const { id, rescuer } = await crashAndResume(c, payCard(c), 'action_begun');
    const [run] = await createSqliteRunStore(c.tm.store as SqliteTaskStore).runsOf(id);
    expect(run).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    expect(lines(c.file)).toBe('paid\n'); // no action step had been written: nothing was unknown
    await stop(rescuer);
  });

  it('during a read whose begin and earlier reads were held back (journal.ts): the reads are made again, nothing is left started, the write lands once', async () => {
    const c = setup();
    const card = daemonCard({
      allowed_tools: ['log_append', 'noop', 'echo', 'crash_once'],
      budget: { max_steps: 20, max_write_calls: 3 },
      script: [
        { action: 'tool', tool: 'noop' },
        { action: 'tool', tool: 'echo', args: { text: 'seen' } },
        { action: 'tool', tool: 'crash_once', args: { marker: c.marker } },
        { action: 'tool', tool: 'log_append', args: { file: c.file, line: 'paid' } },
        { action: 'done' },
      ],
    });
    const { id, rescuer } = await crashAndResume(c, card, 'none');
    const runs = createSqliteRunStore(c.tm.store as SqliteTaskStore);
    const [run, ...more] = await runs.runsOf(id);
    expect(more).toEqual([]);
    expect(run).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    expect(lines(c.file)).toBe('paid\n');
    const steps = (await runs.getRun(run!.id)).steps;
    // One row per seq, in order, none left `started`; every read of the script is there, the write once.
    expect(steps.map((s) => s.seq)).toEqual(steps.map((_, i) => i + 1));
    expect(steps.filter((s) => s.status === 'started')).toEqual([]);
    const actions = steps.filter((s) => s.kind === 'action' && s.status === 'ok').map((s) => s.tool);
    expect(actions.filter((t) => t === 'log_append')).toEqual(['log_append']);
    for (const tool of ['noop', 'echo', 'crash_once']) expect(actions).toContain(tool);
    // Each read carries its call's key, written or recorded whole.
    expect(steps.filter((s) => s.kind === 'action').every((s) => typeof s.idempotencyKey === 'string')).toBe(true);
    await stop(rescuer);
  });

  it('after an action step begins: a non-idempotent write is never repeated; the run waits for input', async () => {
    const c = setup();
    const card = daemonCard({
      allowed_tools: ['log_append', 'noop'],
      budget: { max_steps: 12, max_write_calls: 3 },
      script: [{ action: 'tool', tool: 'noop' }, { action: 'tool', tool: 'log_append', args: { file: c.file, line: 'paid', crash_before: c.marker } }, { action: 'done' }],
    });
    const { id, rescuer } = await crashAndResume(c, card);
    const [run] = await createSqliteRunStore(c.tm.store as SqliteTaskStore).runsOf(id);
    expect(run).toMatchObject({ phase: 'waiting_input', stopReason: 'unknown_side_effect', finishedAt: null });
    expect(lines(c.file)).toBe(''); // killed as the tool began: it never wrote, and nothing ran it since
    await stop(rescuer);
  });

  it('during acceptance: the resumed run goes back into acceptance, not to the planner, and completes', async () => {
    const c = setup();
    const card = payCard(c, {
      final_state: { probe: { tool: 'crash_once', args: { marker: c.marker } } },
      acceptance: { checks: [{ id: 'probe_ok', path: 'probe.ok', equals: true }] },
    });
    const { id, rescuer } = await crashAndResume(c, card);
    const [run] = await createSqliteRunStore(c.tm.store as SqliteTaskStore).runsOf(id);
    expect(run).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    expect(lines(c.file)).toBe('paid\n');
    await stop(rescuer);
  });

  it('between acceptance and the run’s end (the last check kills the daemon): acceptance runs again and the run ends once', async () => {
    const c = setup();
    const killOnce = `if [ ! -e '${c.marker}' ]; then echo $PPID > '${c.marker}'; kill -9 $PPID; sleep 5; fi`;
    const card = payCard(c, { acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }, { id: 'last', command: ['sh', '-c', killOnce] }] } });
    const { id, rescuer } = await crashAndResume(c, card);
    const events = (await c.tm.getTask(id)).events.map((e) => e.type);
    expect(events.filter((t) => t === 'run.finished')).toHaveLength(1);
    expect((await c.tm.getTask(id)).state).toBe('completed');
    expect(lines(c.file)).toBe('paid\n');
    await stop(rescuer);
  });
});
