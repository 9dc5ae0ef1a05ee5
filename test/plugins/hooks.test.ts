import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type HookName, type Plugin, type ToolCallContext, createHookRegistry } from '../../src/plugins/hooks.js';
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

  it('a tool_before hook that never resolves is cut at its time limit: the call is denied and the signal it was given has fired', async () => {
    let given: AbortSignal | undefined;
    const r = createHookRegistry({ timeoutMs: 50 });
    await r.use(plugin('sleeper', (c) => {
      given = c.signal;
      return new Promise(() => undefined);
    }));
    const run = new AbortController();
    expect(await r.toolBefore(call({ signal: run.signal }))).toEqual({ ok: false, reason: 'plugin sleeper failed in tool_before (timed out after 50 ms); denied' });
    expect(given).toBeDefined();
    expect(given).not.toBe(run.signal); // the hook's own signal, not the run's
    expect(given!.aborted).toBe(true);
    expect(given!.reason).toMatchObject({ name: 'TimeoutError', message: 'timed out after 50 ms' });
    expect(run.signal.aborted).toBe(false); // cutting a hook does not stop the run
  });

  it("a stop of the run fires the hook's signal with the run's reason and denies the call", async () => {
    let given: AbortSignal | undefined;
    let entered!: () => void;
    const inHook = new Promise<void>((resolve) => (entered = resolve));
    const r = createHookRegistry();
    await r.use(plugin('waiter', (c) => {
      given = c.signal;
      entered();
      return new Promise(() => undefined);
    }));
    const run = new AbortController();
    const verdict = r.toolBefore(call({ signal: run.signal }));
    await inHook;
    run.abort(new Error('user_stop'));
    expect(await verdict).toEqual({ ok: false, reason: 'plugin waiter failed in tool_before (aborted); denied' });
    expect(given!.aborted).toBe(true);
    expect(given!.reason).toMatchObject({ message: 'user_stop' });
  });

  it('a tool_before hook that was cut cannot affect the chain: its late {args} is dropped and no later hook runs', async () => {
    let release!: () => void;
    const late = new Promise<void>((resolve) => (release = resolve));
    let answered!: () => void;
    const lateAnswer = new Promise<void>((resolve) => (answered = resolve));
    const later: unknown[] = [];
    const r = createHookRegistry({ timeoutMs: 30 });
    await r.use(plugin('slowpoke', async (c) => {
      await late;
      c.args.line = 'mutated in place';
      answered();
      return { args: { line: 'late rewrite' } };
    }));
    await r.use(plugin('spy', (c) => void later.push(c.args)));
    const ctx = call();
    expect(await r.toolBefore(ctx)).toMatchObject({ ok: false, reason: expect.stringContaining('plugin slowpoke failed in tool_before (timed out after 30 ms)') });
    release();
    await lateAnswer;
    expect(later).toEqual([]);
    expect(ctx.args).toEqual({ line: 'x' }); // the hook had its own copy
  });

  it('a hook that mutates its arguments in place changes nothing; only a returned {args} rewrites them', async () => {
    const r = createHookRegistry();
    await r.use(plugin('sneaky', (c) => {
      c.args.line = 'widened';
    }));
    const ctx = call();
    const verdict = await r.toolBefore(ctx);
    expect(verdict).toEqual({ ok: true, args: { line: 'x' } });
    expect(verdict.ok && verdict.args).toBe(ctx.args); // unchanged: the gate need not re-check
  });

  it('an observer (run_end) that never resolves is cut and reported, naming the plugin and the hook, and emit resolves', async () => {
    const reports: Array<{ plugin: string; hook: HookName; err: unknown }> = [];
    let given: AbortSignal | undefined;
    const after: string[] = [];
    const r = createHookRegistry({ observerTimeoutMs: 50, onError: (p, hook, err) => reports.push({ plugin: p, hook, err }) });
    await r.use({ name: 'stuck', register: (api) => api.on('run_end', (e) => {
      given = e.signal;
      return new Promise<void>(() => undefined);
    }) });
    await r.use({ name: 'next', register: (api) => api.on('run_end', (e) => void after.push(e.phase)) });
    await r.emit('run_end', { taskId: 1, runId: 1, agent: 'bot', phase: 'completed', stopReason: 'done' });
    expect(reports).toEqual([{ plugin: 'stuck', hook: 'run_end', err: expect.objectContaining({ name: 'TimeoutError', message: 'timed out after 50 ms' }) }]);
    expect(given!.aborted).toBe(true);
    expect(after).toEqual(['completed']); // the next observer still ran
  });

  it('with no onError, a plugin failure goes to stderr on one line, escaped: its message may quote what an agent wrote', async () => {
    const written: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array) => written.push(String(chunk)) > 0) as typeof process.stderr.write;
    try {
      const r = createHookRegistry();
      await r.use({ name: 'boom', register: (api) => api.on('run_end', () => {
        throw new Error('refused "\u001b[2J\u202e"\nforged line');
      }) });
      await r.emit('run_end', { taskId: 1, runId: 1, agent: 'bot', phase: 'completed', stopReason: 'done' });
    } finally {
      process.stderr.write = write;
    }
    expect(written).toEqual(['taskloop: plugin boom failed in run_end: refused "\\u001b[2J\\u202e" forged line\n']);
  });

  it("an observer that throws is reported and the others run; a stopped run's observers are still told, with their signal fired", async () => {
    const reports: string[] = [];
    const seen: Array<{ tool: string; aborted: boolean }> = [];
    const r = createHookRegistry({ onError: (p, hook, err) => reports.push(`${p}/${hook}: ${(err as Error).message}`) });
    await r.use({ name: 'boom', register: (api) => api.on('tool_after', () => {
      throw new Error('webhook down');
    }) });
    await r.use({ name: 'audit', register: (api) => api.on('tool_after', (e) => void seen.push({ tool: e.tool, aborted: e.signal.aborted })) });
    const run = new AbortController();
    run.abort(new Error('user_stop'));
    await r.emit('tool_after', { ...call({ signal: run.signal }), ok: false, error: 'aborted' });
    expect(reports).toEqual(['boom/tool_after: webhook down']);
    expect(seen).toEqual([{ tool: 'log_append', aborted: true }]);
  });

  it('a verifier that hangs scores 0 at its time limit, and its signal fires', async () => {
    let given: AbortSignal | undefined;
    const r = createHookRegistry({ timeoutMs: 50 });
    await r.use({ name: 'judge', register: (api) => api.verifier((input) => {
      given = input.signal;
      return new Promise<number>(() => undefined);
    }) });
    await r.use({ name: 'fair', register: (api) => api.verifier(() => 3) });
    const decision = { action: 'done', reason: 'finished' };
    expect(await r.verify({ goal: 'g', decision, taskId: 1, runId: 1 })).toEqual({ score: 0, reason: 'the verifier timed out after 50 ms', plugin: 'judge' });
    expect(given!.aborted).toBe(true);
    expect(given!.reason).toMatchObject({ name: 'TimeoutError' });
  });

  it('time limits must be positive and within what a timer can hold', () => {
    expect(() => createHookRegistry({ timeoutMs: 0 })).toThrow('timeoutMs must be a positive number of milliseconds');
    expect(() => createHookRegistry({ observerTimeoutMs: Number.NaN })).toThrow('observerTimeoutMs must be a positive number');
    expect(() => createHookRegistry({ timeoutMs: 2 ** 31 })).toThrow('timeoutMs must be a positive number of milliseconds up to 2147483647');
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

  it('a tool hook registered for some kinds of tool sees only their calls; a bad kinds list is refused at registration', async () => {
    const seen: string[] = [];
    const r = createHookRegistry();
    await r.use({
      name: 'writes_only',
      register: (api) => {
        api.on('tool_before', (c) => (seen.push(`before ${c.tool}`), c.tool === 'deploy' ? { block: 'no deploys' } : undefined), { kinds: ['write'] });
        api.on('tool_after', (c) => void seen.push(`after ${c.tool}`), { kinds: ['write'] });
      },
    });
    expect(r.has('tool_before')).toBe(true);
    expect(r.has('tool_before', 'read')).toBe(false);
    expect(r.has('tool_before', 'write')).toBe(true);
    expect(r.has('tool_after', 'read')).toBe(false);
    // A read call passes the registry untouched (even if the caller asks it anyway).
    expect(await r.toolBefore(call({ kind: 'read', tool: 'deploy' }))).toEqual({ ok: true, args: { line: 'x' } });
    expect(await r.toolBefore(call({ tool: 'deploy' }))).toEqual({ ok: false, reason: 'blocked by plugin writes_only: no deploys' });
    await r.emit('tool_after', { ...call({ kind: 'read', tool: 'get_ticket' }), ok: true });
    await r.emit('tool_after', { ...call(), ok: true });
    expect(seen).toEqual(['before deploy', 'after log_append']);
    // A kind no filter can name (a tool built by hand) is seen by every filtered hook: filters fail closed.
    expect(r.has('tool_before', 'exec' as never)).toBe(true);
    expect(await r.toolBefore(call({ kind: 'exec' as never, tool: 'deploy' }))).toEqual({ ok: false, reason: 'blocked by plugin writes_only: no deploys' });
    for (const [options, message] of [
      [{ kinds: [] }, 'tool_before kinds must be a non-empty list of read, write, not []'],
      [{ kinds: ['reed'] }, 'tool_before kinds must be a non-empty list of read, write, not ["reed"]'],
      [{ kinds: 'write' }, 'tool_before kinds must be a non-empty list of read, write, not "write"'],
      // A hole is not a kind: a hook registered with one would see nothing at all.
      [{ kinds: new Array(1) }, 'tool_before kinds must be a non-empty list of read, write, not [null]'],
    ] as const) {
      await expect(createHookRegistry().use({ name: 'typo', register: (api) => api.on('tool_before', () => undefined, options as never) })).rejects.toThrow(`plugin typo: ${message}`);
    }
    await expect(createHookRegistry().use({ name: 'odd', register: (api) => api.on('run_end', () => undefined, { kinds: ['write'] } as never) })).rejects.toThrow('plugin odd: run_end takes no options');
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
    // Registered for write tools only: a read call costs the gate nothing.
    expect(r.has('tool_before', 'read')).toBe(false);
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

  it('in a run, a plugin whose run_end never resolves does not hold the run: it finishes and returns its result', async () => {
    const h = harness();
    const reports: string[] = [];
    const hooks = createHookRegistry({ observerTimeoutMs: 100, onError: (p, hook, err) => reports.push(`${p}/${hook}: ${(err as Error).message}`) });
    await hooks.use({ name: 'black_hole', register: (api) => api.on('run_end', () => new Promise<void>(() => undefined)) });
    hooks.close();
    const { result } = await runCard(h, card({ allowed_tools: ['noop'], script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }] }), { hooks });
    expect(result).toMatchObject({ phase: 'completed', stopReason: expect.any(String) });
    expect(result.envelope!.trace.used_tools).toEqual(['noop']);
    expect(reports).toEqual(['black_hole/run_end: timed out after 100 ms']);
    expect((await h.tm.getTask(result.taskId)).state).toBe('completed');
  });
});
