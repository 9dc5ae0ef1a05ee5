/**
 * MCP sessions on a real HTTP server in this process, with the SDK's real client: the
 * per-identity bound they share with event streams, eviction of an identity's idle session,
 * DELETE, idle expiry, and the server's close.
 */
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { mcpTools } from '../../src/tools/mcp-tools.js';
import { defineTool } from '../../src/tools/registry.js';
import { MAX_STREAMS_PER_ACTOR } from '../../src/monitor/http/server.js';
import { waitFor } from '../helpers.js';
import { startServer } from './http-helpers.js';
import { type Connected, body, connectHttp, rawMcp } from './mcp-helpers.js';

const ALICE = 'alice-token-0123456789abcdef';
const BOB = 'bob-token-0123456789abcdef00';
const tokens = new Map([
  [ALICE, { id: 'alice', role: 'agent' as const }],
  [BOB, { id: 'bob', role: 'agent' as const }],
]);

/** A read tool whose calls wait until `release()`; `waiting` counts the calls in flight. */
function holdTool() {
  let open!: () => void;
  let gate = new Promise<void>((resolve) => (open = resolve));
  const state = { waiting: 0 };
  const tool = defineTool({
    name: 'hold',
    description: 'Waits until the test lets it go.',
    kind: 'read',
    args: z.strictObject({}),
    execute: async () => {
      state.waiting++;
      await gate;
      state.waiting--;
      return { held: true };
    },
  });
  return {
    tool,
    state,
    release() {
      open();
      gate = new Promise<void>((resolve) => (open = resolve));
    },
  };
}

const connectMany = (url: string, token: string, n: number): Promise<Connected[]> => Promise.all(Array.from({ length: n }, () => connectHttp(url, token)));

describe('MCP sessions over Streamable HTTP', () => {
  it(`an identity holds at most ${MAX_STREAMS_PER_ACTOR} sessions: past it a busy one is 429, an idle one gives way, and another identity is untouched`, async () => {
    const hold = holdTool();
    const { url } = await startServer({ tokens, mcp: { tools: mcpTools([hold.tool]) } });
    const sessions = await connectMany(url, ALICE, MAX_STREAMS_PER_ACTOR);
    const calls = sessions.map((s) => s.client.callTool({ name: 'hold', arguments: {} }));
    await waitFor(() => hold.state.waiting === MAX_STREAMS_PER_ACTOR, 15_000, 'every session to have a call in flight');

    // Every slot is busy: the next session is refused, and nothing is held for it.
    await expect(connectHttp(url, ALICE)).rejects.toThrow(/TOO_MANY_STREAMS/);
    // Bob's count is his own.
    const bob = await connectHttp(url, BOB);
    expect((await bob.client.listTools()).tools.map((t) => t.name)).toContain('hold');

    hold.release();
    for (const result of await Promise.all(calls)) expect(body(result)).toEqual({ held: true });
    // Now idle: one more session makes exactly one of Alice's older sessions give way.
    const another = await connectHttp(url, ALICE);
    expect((await another.client.listTools()).tools.length).toBeGreaterThan(0);
    const after = await Promise.allSettled(sessions.map((s) => s.client.listTools()));
    const gone = after.filter((r) => r.status === 'rejected');
    expect(gone).toHaveLength(1);
    expect(String((gone[0] as PromiseRejectedResult).reason)).toMatch(/404|Session not found/);
    expect(after.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_STREAMS_PER_ACTOR - 1);
  });

  it('DELETE ends a session and frees its slot; a session idle past idleMs is gone; the server’s close ends every session', async () => {
    let now = Date.UTC(2026, 0, 1);
    const { url, server } = await startServer({ tokens, now: () => now, mcp: { idleMs: 60_000 } });
    const a = await connectHttp(url, ALICE);
    const sid = a.transport.sessionId!;
    await a.transport.terminateSession();
    const ended = await rawMcp(url, 'POST', { jsonrpc: '2.0', id: 3, method: 'tools/list' }, { authorization: `Bearer ${ALICE}`, 'mcp-session-id': sid });
    expect(ended.status).toBe(404);

    const b = await connectHttp(url, ALICE);
    expect((await b.client.listTools()).tools.length).toBe(7);
    now += 59_000;
    expect((await b.client.listTools()).tools.length).toBe(7); // a request renews the session
    now += 61_000;
    await expect(b.client.listTools()).rejects.toThrow(/404|Session not found/);

    const c = await connectHttp(url, BOB);
    const cid = c.transport.sessionId!;
    await server.close(1000);
    await expect(rawMcp(url, 'POST', { jsonrpc: '2.0', id: 4, method: 'tools/list' }, { authorization: `Bearer ${BOB}`, 'mcp-session-id': cid })).rejects.toThrow(/ECONNREFUSED/);
  });
});
