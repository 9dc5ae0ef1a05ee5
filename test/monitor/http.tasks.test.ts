import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers.js';
import { startDaemonProcess } from '../workers/daemon-helpers.js';
import { api, card, createAttached, openStream, startServer } from './http-helpers.js';

const noStack = (body: unknown) => expect(JSON.stringify(body)).not.toMatch(/\n\s+at |\.ts:\d+|node_modules/);

describe('POST /api/tasks', () => {
  it('creates an attached task queued (201) that no daemon claims; a task with "attach": false is run by the daemon', async () => {
    const { url, op, auth, path } = await startServer();
    const daemon = await startDaemonProcess(path, ['--workers', '1']);

    const attached = await api(op, 'POST', '/api/tasks', { title: 'streamed', card: card() });
    expect(attached.status).toBe(201);
    expect(attached.json).toMatchObject({ state: 'pending', queue: 'attached', attached: true, created: true, creator: 'operator', events_url: `/api/tasks/${attached.json.id}/events` });

    // Newer than the attached task, same priority: a daemon that could claim the attached one would take it first.
    const queued = await api(op, 'POST', '/api/tasks', { title: 'for the daemon', card: card(), attach: false });
    expect(queued.status).toBe(201);
    expect(queued.json).toMatchObject({ queue: 'default', attached: false });
    await waitFor(async () => (await api(op, 'GET', `/api/tasks/${queued.json.id}`)).json.state === 'completed', 20_000, 'the daemon to run its task');

    const still = (await api(op, 'GET', `/api/tasks/${attached.json.id}`)).json;
    expect(still).toMatchObject({ state: 'pending', attempts: 0, assignee: null, runs: [] });
    expect(still.events.map((e: { type: string }) => e.type)).toEqual(['task.created']);
    expect(daemon.child.exitCode).toBeNull();
  });

  it('maps the body to the engine: priority, dependencies, run_after, idempotency (200 and created false on a repeat)', async () => {
    const { url, op, auth } = await startServer();
    const dep = (await api(op, 'POST', '/api/tasks', { title: 'dep', attach: false })).json.id;
    const body = { title: 'full', card: card(), priority: 5, depends_on: [dep], idempotency_key: 'k-1', run_after: '2030-01-01T00:00:00+01:00', requires: [], max_attempts: 2 };
    const first = await api(op, 'POST', '/api/tasks', body);
    expect(first.status).toBe(201);
    expect(first.json).toMatchObject({ priority: 5, depends_on: [dep], idempotency_key: 'k-1', run_after: '2029-12-31T23:00:00.000Z', max_attempts: 2 });
    const again = await api(op, 'POST', '/api/tasks', body);
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ id: first.json.id, created: false });
    const daemonTask = await api(op, 'POST', '/api/tasks', { title: 'x', attach: false, queue: 'q1', for_agent: 'bob', requires: ['gpu'] });
    expect(daemonTask.json).toMatchObject({ queue: 'q1', for_agent: 'bob', requires: ['gpu'] });
  });

  it('refuses bad bodies with 400 VALIDATION_FAILED naming the field, and bodies over 1 MiB with 413', async () => {
    const { url, op, auth, tm } = await startServer();
    const cases: Array<[unknown, RegExp]> = [
      ['{not json', /not valid JSON/],
      [[1, 2], /create/],
      [{}, /title/],
      [{ title: 42 }, /title: must be a string/],
      [{ title: '   ' }, /title: must not be empty/],
      [{ title: 't', colour: 'red' }, /colour/],
      [{ title: 't', card: 'x' }, /card: must be a JSON object/],
      [{ title: 't', priority: 1.5 }, /priority/],
      [{ title: 't', depends_on: [0] }, /depends_on\.0/],
      [{ title: 't', run_after: 'tomorrow' }, /run_after: must be an ISO 8601/],
      [{ title: 't', attach: 'yes' }, /attach/],
      [{ title: 't', queue: 'default' }, /queue: 'default' is a daemon queue/],
      [{ title: 't', for_agent: 'bob' }, /for_agent/],
      [{ title: 't', requires: ['gpu'] }, /requires: this server does not offer gpu/],
      [{ title: 't', depends_on: [999], attach: false }, /999/],
    ];
    for (const [body, message] of cases) {
      const r = await api(op, 'POST', '/api/tasks', body);
      expect(r.status, JSON.stringify(body)).toBe(r.json.error.code === 'TASK_NOT_FOUND' ? 404 : 400);
      expect(r.json.error.message, JSON.stringify(body)).toMatch(message);
      noStack(r.json);
    }
    const big = await api(op, 'POST', '/api/tasks', { title: 'big', card: { goal: 'x'.repeat(1024 * 1024) } });
    expect(big.status).toBe(413);
    expect(big.json.error.code).toBe('PAYLOAD_TOO_LARGE');
    const reasons = await api(op, 'POST', '/api/tasks/stop-all', { reason: 'r'.repeat(3000) });
    expect(reasons.status).toBe(400);
    expect((await tm.findTasks()).length).toBe(0);
  });
  it('refuses a 10 KB body nested 5,000 levels with 400 VALIDATION_FAILED naming the depth limit, writes nothing, and goes on serving', async () => {
    const { op, tm } = await startServer();
    const body = `{"title":"deep","card":{"goal":"g","x":${'['.repeat(5000)}${']'.repeat(5000)}}}`;
    expect(body.length).toBeGreaterThan(10_000);
    const r = await api(op, 'POST', '/api/tasks', body);
    expect(r.status).toBe(400);
    expect(r.json.error).toEqual({ code: 'VALIDATION_FAILED', message: 'create: the body nests deeper than 64 levels (JSON input may nest at most 64)' });
    noStack(r.json);
    expect((await tm.stats()).lastEventId).toBe(0);
    const fine = await api(op, 'POST', '/api/tasks', { title: 'shallow', card: { goal: 'g', x: [[1]] }, attach: false });
    expect(fine.status).toBe(201);
    expect((await tm.findTasks()).map((t) => t.title)).toEqual(['shallow']);
  });
});

describe('reading tasks and runs', () => {
  it('lists tasks with filters and paging, shows a task with its events and runs, and a run with its steps', async () => {
    const { url, op, auth } = await startServer();
    const a = await createAttached(op, card());
    const b = (await api(op, 'POST', '/api/tasks', { title: 'b', attach: false, queue: 'q1' })).json.id;
    const c = (await api(op, 'POST', '/api/tasks', { title: 'c', attach: false })).json.id;
    await (await openStream(`${url}/api/tasks/${a}/events`, auth)).ended;

    const all = (await api(op, 'GET', '/api/tasks')).json;
    expect(all.tasks.map((t: { id: number }) => t.id)).toEqual([a, b, c]);
    expect(all.last_event_id).toBeGreaterThan(0);
    const list = async (q: string) => (await api(op, 'GET', `/api/tasks?${q}`)).json.tasks.map((t: { id: number }) => t.id);
    expect(await list('state=completed')).toEqual([a]);
    expect(await list('state=pending&state=completed')).toEqual([a, b, c]);
    expect(await list('state=pending,completed&queue=q1')).toEqual([b]);
    expect(await list(`limit=1&after=${a}`)).toEqual([b]);
    expect(await list(`assignee=${encodeURIComponent((await api(op, 'GET', '/api/health')).json.agent)}`)).toEqual([a]);
    for (const q of ['state=bogus', 'limit=0', 'after=-1', 'colour=red']) {
      const r = await api(op, 'GET', `/api/tasks?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.json.error.code).toBe('VALIDATION_FAILED');
    }

    const shown = (await api(op, 'GET', `/api/tasks/${a}`)).json;
    expect(shown).toMatchObject({ id: a, state: 'completed', runs: [{ phase: 'completed', stop_reason: 'accepted', task_id: a }] });
    expect(shown.events.map((e: { type: string }) => e.type)).toContain('run.finished');
    const run = (await api(op, 'GET', `/api/runs/${shown.runs[0].id}`)).json;
    expect(run.steps.map((s: { kind: string; tool: string | null }) => [s.kind, s.tool])).toEqual([['decide', null], ['action', 'noop'], ['decide', null]]);
    expect(run.envelope).toMatchObject({ phase: 'completed' });
  });

  it('answers unknown ids with 404, bad ids with 400, unknown paths with 404 and wrong methods with 405', async () => {
    const { url, op, auth } = await startServer();
    const expectError = async (method: string, path: string, status: number, code: string) => {
      const r = await api(op, method, path);
      expect(r.status, `${method} ${path}`).toBe(status);
      expect(r.json.error.code, `${method} ${path}`).toBe(code);
      noStack(r.json);
      return r;
    };
    await expectError('GET', '/api/tasks/42', 404, 'TASK_NOT_FOUND');
    await expectError('GET', '/api/runs/42', 404, 'RUN_NOT_FOUND');
    await expectError('POST', '/api/approvals/42/approve', 404, 'APPROVAL_NOT_FOUND');
    await expectError('POST', '/api/tasks/42/stop', 404, 'TASK_NOT_FOUND');
    await expectError('GET', '/api/tasks/abc', 400, 'VALIDATION_FAILED');
    await expectError('GET', '/api/nothing', 404, 'NOT_FOUND');
    const r = await expectError('DELETE', '/api/tasks', 405, 'METHOD_NOT_ALLOWED');
    expect(r.headers.get('allow')).toBe('GET, POST');
    expect((await api(op, 'GET', '/api/health')).json).toMatchObject({ status: 'ok', owned_runs: [] });
  });

  it('cancels a pending task for its creator; a second cancel is a 409', async () => {
    const { url, op, auth } = await startServer();
    const id = await createAttached(op, card());
    const r = await api(op, 'POST', `/api/tasks/${id}/cancel`, { reason: 'changed my mind' });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ id, state: 'cancelled' });
    const again = await api(op, 'POST', `/api/tasks/${id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe('INVALID_TRANSITION');
    // Its stream now has nothing to run: the task's events, then the end.
    const stream = await openStream(`${url}/api/tasks/${id}/events`, auth);
    await stream.ended;
    expect(stream.events.map((e) => e.event)).toEqual(['task.created', 'task.cancelled']);
  });
});
