import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { type TaskEvent, createTaskManager } from '../../src/engine/index.js';
import { openTaskStore } from '../stores.js';
import { ROOT, freshManager, operator } from '../helpers.js';

const run = promisify(execFile);

describe('following the event log', () => {
  it('replays from a cursor, then wakes on a commit made by another process (file watch, not polling)', async () => {
    const seed = freshManager();
    await seed.createTask({ title: 'before' }, operator);
    // The fallback poll is set to an hour: only the change notification can wake the tail.
    const tm = createTaskManager({ store: openTaskStore(seed.path, { watchFallbackMs: 3_600_000 }) });
    const ac = new AbortController();
    const seen: TaskEvent[] = [];
    const following = (async () => {
      for await (const event of tm.follow({ signal: ac.signal })) {
        seen.push(event);
        if (seen.length === 2) ac.abort();
      }
    })();
    const { stdout } = await run(process.execPath, [join(ROOT, 'test/fixtures/create.mjs'), seed.path, 'from another process']);
    await following;
    await tm.close();
    expect(seen.map((e) => [e.type, e.taskId])).toEqual([
      ['task.created', 1],
      ['task.created', Number(stdout.trim())],
    ]);
  });

  it('follows one task only when asked, starting after the given cursor', async () => {
    const tm = freshManager();
    const a = (await tm.createTask({ title: 'a' }, operator)).task;
    await tm.createTask({ title: 'b' }, operator); // between a's events: must be filtered out
    await tm.cancelTask({ taskId: a.id, actor: operator });
    const ac = new AbortController();
    const seen: string[] = [];
    const first = (await tm.getTask(a.id)).events[0]!.id;
    const following = (async () => {
      for await (const e of tm.follow({ taskId: a.id, afterId: first, signal: ac.signal })) {
        seen.push(e.type);
        ac.abort();
      }
    })();
    await following;
    expect(seen).toEqual(['task.cancelled']);
  });
});
