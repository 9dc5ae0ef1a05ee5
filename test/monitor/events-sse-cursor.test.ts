/**
 * Attacks on the shared follow hub, end to end: an agent's GET /api/events?task_id= with a cursor
 * far ahead of the log must not change what an operator's GET /api/events receives.
 */
import { describe, expect, it } from 'vitest';
import { OPERATOR } from '../../src/engine/index.js';
import { api, bearer, openStream, startServer } from '../monitor/http-helpers.js';

const OP = 'operator-token-0123456789';
const MALLORY = 'mallory-token-012345678';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('GET /api/events', () => {
  it("an agent's one-task stream with Last-Event-ID far ahead does not blind the operator's stream of the whole log", async () => {
    const { url, tm } = await startServer({ tokens: new Map([[OP, OPERATOR], [MALLORY, { id: 'mallory', role: 'agent' as const }]]) });
    const op = { url, headers: bearer(OP) };
    const mallory = { url, headers: bearer(MALLORY) };
    const own = (await api(mallory, 'POST', '/api/tasks', { title: "mallory's own", attach: false })).json.id as number;
    const board = await openStream(`${url}/api/events`, bearer(OP));
    await sleep(100);
    const hostile = await openStream(`${url}/api/events?task_id=${own}`, { ...bearer(MALLORY), 'last-event-id': '999999999999999' });
    expect(hostile.status).toBe(200);
    await sleep(100);
    const created: number[] = [];
    for (let i = 0; i < 5; i++) {
      created.push((await api(op, 'POST', '/api/tasks', { title: `ops ${i}`, attach: false })).json.id as number);
      await sleep(30);
    }
    for (const id of created) await board.next((e) => e.data.type === 'task.created' && e.data.task_id === id, `task.created of ${id}`, 2000);
    expect(board.events.map((e) => e.data.task_id)).toEqual(created);
    void tm;
  });

  it('after that agent has gone, a stream the operator opens later is still blind while another stream (or the metrics monitor) stays open', async () => {
    const { url } = await startServer({ tokens: new Map([[OP, OPERATOR], [MALLORY, { id: 'mallory', role: 'agent' as const }]]) });
    const op = { url, headers: bearer(OP) };
    const mallory = { url, headers: bearer(MALLORY) };
    const own = (await api(mallory, 'POST', '/api/tasks', { title: "mallory's own", attach: false })).json.id as number;
    const longLived = await openStream(`${url}/api/events`, bearer(OP)); // stands for the monitor of `taskloop serve`
    await sleep(100);
    const hostile = await openStream(`${url}/api/events?task_id=${own}`, { ...bearer(MALLORY), 'last-event-id': '999999999999999' });
    await sleep(100);
    await api(op, 'POST', '/api/tasks', { title: 'one commit', attach: false });
    await sleep(100);
    hostile.close();
    await sleep(100);
    const later = await openStream(`${url}/api/events`, bearer(OP));
    await sleep(100);
    const id = (await api(op, 'POST', '/api/tasks', { title: 'seen by the later stream?', attach: false })).json.id as number;
    await later.next((e) => e.data.type === 'task.created' && e.data.task_id === id, `task.created of ${id}`, 2000);
    expect(longLived.events.length).toBeGreaterThan(0);
  });
});
