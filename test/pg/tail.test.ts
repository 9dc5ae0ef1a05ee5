/**
 * The event log without gaps on PostgreSQL: an event id taken by a transaction that commits
 * later than a higher one must still be read, in order, by every cursor reader (reads.ts).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it, onTestFinished } from 'vitest';
import { type TaskEvent, createTaskManager } from '../../src/engine/index.js';
import { ROOT, freshManager, operator, tempDir, waitFor } from '../helpers.js';
import { newDatabase, openTaskStore } from '../stores.js';

/** A raw connection to the test's schema, closed when the test finishes. */
async function rawClient(url: string): Promise<pg.Client> {
  const schema = new URL(url).searchParams.get('schema')!;
  const bare = new URL(url);
  bare.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: bare.toString(), options: `-c search_path=${schema}` });
  await client.connect();
  onTestFinished(() => client.end());
  return client;
}

const eventSql = "INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at) VALUES (NULL, $1, 'operator', 'operator', '{}', 0) RETURNING id";

describe('the event log on PostgreSQL misses nothing', () => {
  it('an id taken before a higher one that commits first is neither skipped nor read out of order', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'first' }, operator); // migrates the schema
    expect((await tm.stats()).lastEventId).toBe(1); // the horizon has seen it settle
    const slow = await rawClient(tm.path);
    const fast = await rawClient(tm.path);
    await slow.query('BEGIN');
    const low = Number((await slow.query(eventSql, ['test.slow'])).rows[0].id);
    const high = Number((await fast.query(eventSql, ['test.fast'])).rows[0].id); // autocommit: committed now
    expect(high).toBeGreaterThan(low);

    // While `slow` is open, a reader stops below its id: the committed `high` waits too.
    const before = await tm.store.readEvents({ afterId: 0 });
    expect(before.map((e) => e.type)).toEqual(['task.created']);
    expect((await tm.stats()).lastEventId).toBeLessThan(low);

    await slow.query('COMMIT');
    const after = await waitFor(async () => {
      const events = await tm.store.readEvents({ afterId: before.at(-1)!.id });
      return events.length === 2 ? events : undefined;
    });
    expect(after.map((e) => [e.type, e.id])).toEqual([
      ['test.slow', low],
      ['test.fast', high],
    ]);
  });

  it('a rolled-back id does not hold the log back, and a follower is woken without a NOTIFY from it', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'first' }, operator);
    const start = (await tm.stats()).lastEventId;
    const ac = new AbortController();
    const seen: TaskEvent[] = [];
    const following = (async () => {
      for await (const e of tm.follow({ afterId: start, signal: ac.signal })) {
        seen.push(e);
        if (seen.length === 1) ac.abort();
      }
    })();
    const aborted = await rawClient(tm.path);
    const other = await rawClient(tm.path);
    await aborted.query('BEGIN');
    await aborted.query(eventSql, ['test.rolled_back']);
    await other.query(eventSql, ['test.kept']);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toEqual([]); // held back behind the open transaction
    await aborted.query('ROLLBACK'); // sends no NOTIFY
    await following;
    expect(seen.map((e) => e.type)).toEqual(['test.kept']);
  });

  it('a commit that sends no NOTIFY between a subscription and the watcher’s first look wakes the subscriber (poll-only mode)', async () => {
    const seed = freshManager();
    await seed.createTask({ title: 'migrate' }, operator);
    const raw = await rawClient(seed.path);
    // Behind a pooler (wakeups=poll) with the slow poll at an hour: only the follow poll,
    // every 100 ms, can wake it. Its first look used to be taken as where things stood.
    const store = openTaskStore(`${seed.path}&wakeups=poll`, { watchFallbackMs: 3_600_000 });
    onTestFinished(() => store.close());
    let woken = 0;
    onTestFinished(store.watch(() => void woken++));
    await raw.query(eventSql, ['test.quiet']); // before the first look, 100 ms after the subscription
    await waitFor(() => woken > 0, 5000, 'the subscriber to be woken');
    expect(woken).toBeGreaterThan(0);
  });

  it('4 writer processes and a follower: the follower reads every event exactly once, in id order', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'seed' }, operator);
    const follower = createTaskManager({ store: openTaskStore(tm.path) });
    onTestFinished(() => follower.close());
    const ac = new AbortController();
    const seen: number[] = [];
    const following = (async () => {
      for await (const e of follower.follow({ signal: ac.signal })) seen.push(e.id);
    })();
    const writers: ChildProcess[] = Array.from({ length: 4 }, () =>
      fork(join(ROOT, 'test/fixtures/create-many.mjs'), [tm.path, '150', '{}'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] }),
    );
    for (const w of writers) onTestFinished(() => void w.kill('SIGKILL'));
    await Promise.all(writers.map((w) => new Promise((r) => w.on('exit', r))));
    expect(writers.map((w) => w.exitCode)).toEqual([0, 0, 0, 0]);
    const total = 1 + 4 * 150;
    await waitFor(() => seen.length >= total, 20_000, `${total} events`);
    ac.abort();
    await following;
    const all = (await tm.store.readEvents({ afterId: 0, limit: 10_000 })).map((e) => e.id);
    expect(all).toHaveLength(total);
    expect(seen).toEqual(all);
  });

  it('a watcher whose subscribers come and go (one per wait) keeps its LISTEN connection: woken by NOTIFY, not the poll', async () => {
    const seed = freshManager();
    await seed.createTask({ title: 'migrate' }, operator);
    // The poll is an hour: only a notification can wake it.
    const store = openTaskStore(seed.path, { watchFallbackMs: 3_600_000 });
    onTestFinished(() => store.close());
    store.watch(() => undefined)(); // subscribed and gone before the LISTEN connection is up
    await new Promise((r) => setTimeout(r, 500));
    const woken = new Promise<void>((resolve) => {
      const off = store.watch(() => {
        off();
        resolve();
      });
    });
    const child = fork(join(ROOT, 'test/fixtures/create.mjs'), [seed.path, 'later'], { stdio: 'ignore' });
    await new Promise((r) => child.on('exit', r));
    const timeout = new Promise<string>((r) => setTimeout(() => r('timeout'), 5000));
    expect(await Promise.race([woken.then(() => 'woken'), timeout])).toBe('woken');
  });

  it('a follower in poll-only mode (wakeups=poll, for PgBouncer) still sees another process’s commit', async () => {
    const url = `${newDatabase(tempDir())}&wakeups=poll`;
    const tm = createTaskManager({ store: openTaskStore(url) });
    onTestFinished(() => tm.close());
    expect((await tm.store.info()).capabilities.pushWakeups).toBe(false);
    const ac = new AbortController();
    const seen: string[] = [];
    const following = (async () => {
      for await (const e of tm.follow({ signal: ac.signal })) {
        seen.push(e.type);
        ac.abort();
      }
    })();
    const child = fork(join(ROOT, 'test/fixtures/create.mjs'), [url, 'from elsewhere'], { stdio: 'ignore' });
    await new Promise((r) => child.on('exit', r));
    await following;
    expect(seen).toEqual(['task.created']);
  });
});
