import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers.js';
import { type SseEvent, api, card, createAttached, openStream, startServer, waitCard } from './http-helpers.js';

const ids = (events: SseEvent[]) => events.map((e) => e.id);

describe('GET /api/tasks/:id/events owns the run of an attached task (seed 000)', () => {
  it('the stream starts the run, streams every loop event with event-log cursors as SSE ids, and closes after run_finished', async () => {
    const { url, op, auth, tm } = await startServer();
    const id = await createAttached(op, card({ script: [{ action: 'tool', tool: 'noop' }, { action: 'tool', tool: 'noop' }, { action: 'done' }] }));
    expect((await tm.getTask(id)).state).toBe('pending');

    const stream = await openStream(`${url}/api/tasks/${id}/events`, auth);
    expect(stream.status).toBe(200);
    await stream.ended;

    const names = stream.events.map((e) => e.event);
    // decide, noop, decide, noop, decide (this card observes nothing). A decision is
    // written once it is made (workers/journal.ts): one step_finished; so is a read that
    // completed within the journal's flush interval (noop is a read). A write's intent is
    // written before it runs (step_started, then step_finished), and so is the begin of a
    // read still running at a flush (the wait calls below; on a loaded machine a noop may
    // be one too: the flush is timed).
    expect(names.filter((n) => n.startsWith('run_') || n.startsWith('step_finished'))).toEqual(['run_started', ...Array(5).fill('step_finished'), 'run_finished']);
    const begun = stream.events.filter((e) => e.event === 'step_started');
    for (const b of begun) {
      expect(b.data.step).toMatchObject({ kind: 'action', tool: 'noop' });
      const at = stream.events.indexOf(b);
      expect(stream.events.slice(at + 1).some((e) => e.event === 'step_finished' && e.data.step.seq === b.data.step.seq)).toBe(true);
    }
    const finished = stream.events.find((e) => e.event === 'run_finished')!;
    expect(finished.data.envelope).toMatchObject({ phase: 'completed', stop_reason: 'accepted', task_id: id });
    expect(finished.data.run).toMatchObject({ phase: 'completed', task_id: id });
    const action = stream.events.find((e) => e.event === 'step_finished' && e.data.step.kind === 'action')!;
    expect(action.data.step).toMatchObject({ tool: 'noop', status: 'ok', result: { ok: true } });

    // The SSE ids are exactly the task's event log, in order, from its creation on.
    const task = await tm.getTask(id);
    expect(task.state).toBe('completed');
    expect(ids(stream.events)).toEqual(task.events.map((e) => e.id));
    expect(stream.events[0]).toMatchObject({ event: 'task.created' });
  });

  it('a second stream on an active run gets 409 RUN_ACTIVE', async () => {
    const { url, op, auth, tm } = await startServer();
    const id = await createAttached(op, waitCard());
    const first = await openStream(`${url}/api/tasks/${id}/events`, auth);
    await first.next((e) => e.event === 'step_started' && e.data.step.tool === 'wait', 'the wait call');

    const second = await openStream(`${url}/api/tasks/${id}/events`, auth);
    expect(second.status).toBe(409);
    expect(second.error).toEqual({ error: { code: 'RUN_ACTIVE', message: expect.stringContaining(`task ${id}`) } });
    expect(first.done).toBe(false);
    first.close();
    await waitFor(async () => (await tm.getTask(id)).state === 'cancelled', 10_000, 'the run to stop');
  });

  it('a finished run is replayed: its stored steps as step_finished, then run_finished, then the stream closes', async () => {
    const { url, op, auth } = await startServer();
    const id = await createAttached(op, card());
    const live = await openStream(`${url}/api/tasks/${id}/events`, auth);
    await live.ended;

    const replay = await openStream(`${url}/api/tasks/${id}/events`, auth);
    await replay.ended;
    const run = (await api(op, 'GET', `/api/tasks/${id}`)).json.runs[0];
    const steps = (await api(op, 'GET', `/api/runs/${run.id}`)).json.steps;
    expect(replay.events.map((e) => e.event)).toEqual([...steps.map(() => 'step_finished'), 'run_finished']);
    expect(replay.events.slice(0, -1).map((e) => e.data.step)).toEqual(steps);
    // The replay is the live stream's messages for those rows: same ids, same data.
    const liveByid = new Map(live.events.map((e) => [e.id, e]));
    for (const e of replay.events) expect(e).toEqual(liveByid.get(e.id));
  });

  it('a client that disconnects mid-run stops the run: it ends cancelled / user_stop and the tool call in flight is aborted', async () => {
    const { url, op, auth, tm, runs } = await startServer();
    const id = await createAttached(op, waitCard());
    const stream = await openStream(`${url}/api/tasks/${id}/events`, auth);
    await stream.next((e) => e.event === 'step_started' && e.data.step.tool === 'wait', 'the wait call');
    const started = Date.now();
    stream.close();

    await waitFor(async () => (await tm.getTask(id)).state === 'cancelled', 10_000, 'the task to be cancelled');
    expect(Date.now() - started).toBeLessThan(10_000);
    const [run] = await runs.runsOf(id);
    expect(run).toMatchObject({ phase: 'cancelled', stopReason: 'user_stop' });
    const steps = (await runs.getRun(run!.id)).steps;
    expect(steps.find((s) => s.tool === 'wait')).toMatchObject({ status: 'failed', error: expect.stringContaining('aborted') });
    const task = await tm.getTask(id);
    expect(task.events.find((e) => e.type === 'run.stop_requested')).toMatchObject({ actor: 'operator', data: { reason: 'user_stop' } });
  });

  it('a client that leaves before the run can start leaves the task pending for the next stream', async () => {
    const { url, op, auth, tm, server } = await startServer();
    const dep = (await api(op, 'POST', '/api/tasks', { title: 'dependency', attach: false })).json.id as number;
    const id = await createAttached(op, card(), { depends_on: [dep] });
    const stream = await openStream(`${url}/api/tasks/${id}/events`, auth);
    await stream.next((e) => e.event === 'task.created', 'the first event');
    stream.close();
    await waitFor(() => server.owner.active().length === 0, 5000, 'the owner to give up');
    const task = await tm.getTask(id);
    expect(task).toMatchObject({ state: 'pending', attempts: 0 });
    expect(task.events.map((e) => e.type)).toEqual(['task.created']);
  });

  it('a client that comes back with Last-Event-ID gets exactly the events it missed, then the stream ends with the run', async () => {
    const { url, op, auth, tm, server } = await startServer();
    const id = await createAttached(op, waitCard());
    const first = await openStream(`${url}/api/tasks/${id}/events`, auth);
    const seen = await first.next((e) => e.event === 'step_started' && e.data.step.tool === 'wait', 'the wait call');
    first.close();
    await first.ended;
    // (An EventSource waits its retry delay; here the server only has to notice the close.)
    await waitFor(() => server.owner.get(id)?.attached !== true, 5000, 'the server to notice the disconnect');
    const lastId = first.events.at(-1)!.id!;
    expect(lastId).toBe(seen.id);

    const again = await openStream(`${url}/api/tasks/${id}/events`, { ...auth, 'last-event-id': String(lastId) });
    expect(again.status).toBe(200);
    await again.ended;
    const log = (await tm.getTask(id)).events.map((e) => e.id);
    expect(ids(again.events)).toEqual(log.filter((e) => e > lastId));
    expect(again.events.map((e) => e.event)).toContain('run_finished');
    expect(again.events.at(-1)!.data).toMatchObject({ type: 'task.cancelled' });
    // Together the two connections saw the whole log once each.
    expect([...ids(first.events), ...ids(again.events)]).toEqual(log);

    // Nothing is left after the last id of a finished stream: 204 tells EventSource to stop reconnecting.
    const done = await fetch(`${url}/api/tasks/${id}/events`, { headers: { ...auth, 'last-event-id': String(log.at(-1)) } });
    expect(done.status).toBe(204);
  });

  it('refuses a malformed cursor and an unknown task', async () => {
    const { url, op, auth } = await startServer();
    const id = await createAttached(op, card());
    const bad = await openStream(`${url}/api/tasks/${id}/events`, { ...auth, 'last-event-id': 'abc' });
    expect(bad.status).toBe(400);
    expect(bad.error.error.code).toBe('VALIDATION_FAILED');
    const missing = await openStream(`${url}/api/tasks/999/events`, auth);
    expect(missing.status).toBe(404);
    expect(missing.error.error.code).toBe('TASK_NOT_FOUND');
  });
});

describe('GET /api/events follows the whole event log', () => {
  it('streams every row after the cursor, then new rows live; Last-Event-ID resumes after it', async () => {
    const { url, op, auth, tm } = await startServer();
    const a = (await api(op, 'POST', '/api/tasks', { title: 'a', attach: false })).json.id as number;
    await api(op, 'POST', '/api/tasks', { title: 'b', attach: false });
    const all = await openStream(`${url}/api/events?after=0`, auth);
    await all.next((e) => e.data.task_id === a + 1, 'the second task');
    expect(all.events.map((e) => [e.event, e.data.type])).toEqual([
      ['message', 'task.created'],
      ['message', 'task.created'],
    ]);

    const resumed = await openStream(`${url}/api/events`, { ...auth, 'last-event-id': String(all.events[0]!.id) });
    await resumed.next((e) => e.data.task_id === a + 1, 'the row after the cursor');
    expect(ids(resumed.events)).toEqual([all.events[1]!.id]);

    // Live: a row committed now reaches both streams, the one from now on too.
    const fromNow = await openStream(`${url}/api/events`, auth);
    await api(op, 'POST', `/api/tasks/${a}/cancel`, { reason: 'not needed' });
    for (const s of [all, resumed, fromNow]) {
      const e = await s.next((x) => x.data.type === 'task.cancelled', 'the cancel');
      expect(e.data).toMatchObject({ task_id: a, actor: 'operator', data: { reason: 'not needed' } });
    }
    expect(fromNow.events).toHaveLength(1);
    expect(ids(all.events)).toEqual((await tm.store.readEvents({ afterId: 0 })).map((e) => e.id));
  });
});
