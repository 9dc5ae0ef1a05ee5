import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type Plugin, type ToolCallContext, createHookRegistry } from '../../src/plugins/hooks.js';
import { loadPlugins } from '../../src/plugins/load.js';
import { taskEnforcer } from '../../src/plugins/task-enforcer.js';
import { ROOT, freshManager, operator } from '../helpers.js';
import { card, harness, runCard } from '../workers/harness.js';

const call = (over: Partial<ToolCallContext> = {}): ToolCallContext => ({
  tool: 'log_append',
  kind: 'write',
  risk: 'low',
  args: { line: 'x' },
  taskId: 1,
  runId: 1,
  agent: 'bot',
  card: {},
  signal: new AbortController().signal,
  services: {},
  ...over,
});

const plugin = (name: string, handler: (c: ToolCallContext) => unknown): Plugin => ({
  name,
  register: (api) => api.on('tool_before', handler as never),
});

describe('hooks and plugins', () => {
  it('the gate fails closed: a tool_before hook that throws, times out or is aborted denies the call, naming the plugin', async () => {
    const throws = createHookRegistry();
    await throws.use(plugin('thrower', () => {
      throw new Error('database down');
    }));
    expect(await throws.toolBefore(call())).toEqual({ ok: false, reason: 'plugin thrower failed in tool_before (database down); denied' });

    const slow = createHookRegistry({ timeoutMs: 50 });
    await slow.use(plugin('sleeper', () => new Promise(() => undefined)));
    expect(await slow.toolBefore(call())).toMatchObject({ ok: false, reason: expect.stringContaining('plugin sleeper failed in tool_before (timed out after 50 ms)') });

    const aborted = createHookRegistry();
    await aborted.use(plugin('waiter', () => new Promise(() => undefined)));
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 20);
    expect(await aborted.toolBefore(call({ signal: ac.signal }))).toMatchObject({ ok: false, reason: expect.stringContaining('plugin waiter failed in tool_before (aborted)') });
  });

  it('hooks run in order: a block wins, rewritten arguments reach the next hook', async () => {
    const seen: unknown[] = [];
    const r = createHookRegistry();
    await r.use(plugin('redact', (c) => ({ args: { ...c.args, line: '[redacted]' } })));
    await r.use(plugin('spy', (c) => void seen.push(c.args)));
    expect(await r.toolBefore(call())).toEqual({ ok: true, args: { line: '[redacted]' } });
    expect(seen).toEqual([{ line: '[redacted]' }]);
    await r.use(plugin('wall', () => ({ block: 'no writes' })));
    expect(await r.toolBefore(call())).toEqual({ ok: false, reason: 'blocked by plugin wall: no writes' });
  });

  it('a plugin that registers no hook is refused at start-up; unknown hooks and late registration are errors', async () => {
    await expect(loadPlugins([{ module: join(ROOT, 'test/fixtures/silent-plugin.mjs') }])).rejects.toThrow('plugin silent registered no hooks');
    const r = createHookRegistry();
    await expect(r.use({ name: 'typo', register: (api) => api.on('tool_befor' as never, (() => undefined) as never) })).rejects.toThrow("unknown hook 'tool_befor'");
    let late: Parameters<Plugin['register']>[0] | undefined;
    await r.use({ name: 'keeper', register: (api) => { late = api; api.on('run_end', () => {}); } });
    r.close();
    expect(() => late!.on('run_start', () => {})).toThrow('cannot register run_start after start-up');
  });

  it('task_enforcer blocks execution tools for an agent without an active task, and reads its config at call time', async () => {
    const tm = freshManager();
    const r = createHookRegistry();
    await r.use(taskEnforcer);
    const services = { manager: tm };
    expect(await r.toolBefore(call({ services }))).toMatchObject({ ok: false, reason: expect.stringContaining('agent bot holds no active task') });
    expect(await r.toolBefore(call({ services, kind: 'read', tool: 'get_ticket' }))).toMatchObject({ ok: true });
    expect(await r.toolBefore(call({ services, tool: 'task_claim' }))).toMatchObject({ ok: true });
    process.env.TASKLOOP_ENFORCER_EXEMPT = 'log_append';
    try {
      expect(await r.toolBefore(call({ services }))).toMatchObject({ ok: true });
    } finally {
      delete process.env.TASKLOOP_ENFORCER_EXEMPT;
    }
    await tm.createTask({ title: 'work' }, operator);
    await tm.claimTask({ agent: 'bot' });
    expect(await r.toolBefore(call({ services }))).toMatchObject({ ok: true });
  });

  it('in a run, a blocked call is a rejected call the planner hears about', async () => {
    const h = harness();
    const hooks = await loadPlugins([{ module: join(ROOT, 'test/fixtures/plugins.mjs'), options: { tool: 'log_append' } }]);
    const file = join(h.dir, 'log.txt');
    const { result } = await runCard(h, card({
      allowed_tools: ['log_append', 'noop'],
      budget: { max_steps: 5, max_write_calls: 2 },
      script: [{ action: 'tool', tool: 'log_append', args: { file, line: 'x' } }, { action: 'tool', tool: 'noop' }, { action: 'done' }],
    }), { hooks });
    expect(result.phase).toBe('completed');
    expect(result.envelope!.trace.rejected_calls).toEqual([expect.objectContaining({ tool: 'log_append', reason: 'blocked by plugin no_logs: logs are read-only today' })]);
  });
});
