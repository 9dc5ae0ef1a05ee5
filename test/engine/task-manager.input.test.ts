import { describe, expect, it } from 'vitest';
import { LIMITS, isEngineError } from '../../src/engine/index.js';
import { agent, freshManager, operator } from '../helpers.js';
import { portsOf } from '../stores.js';

const NASTY = [`'; DROP TABLE tasks; --`, `" OR 1=1 --`, 'Robert\'); DELETE FROM task_events;--', '任务 🚀 ünïcödé', '%_\\'];

async function codeOf(call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
    return 'NO_ERROR';
  } catch (err) {
    if (!isEngineError(err)) throw err;
    expect(err.message).not.toContain('\n');
    return err.code;
  }
}

describe('bad input through the API', () => {
  it('answers each malformed call with its code and writes nothing', async () => {
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 'keep' }, operator);
    const before = { stats: await tm.stats(), task: await tm.getTask(task.id) };
    const cases: Array<[string, () => Promise<unknown>, string]> = [
      ['unknown id', () => tm.getTask(424242), 'TASK_NOT_FOUND'],
      ['unknown id on transition', () => tm.transitionTask({ taskId: 424242, to: 'cancelled', actor: operator }), 'TASK_NOT_FOUND'],
      ['non-integer id', () => tm.getTask(1.5), 'VALIDATION_FAILED'],
      ['id as a string', () => tm.getTask('1' as unknown as number), 'VALIDATION_FAILED'],
      ['empty title', () => tm.createTask({ title: '   ' }, operator), 'VALIDATION_FAILED'],
      ['title over the limit', () => tm.createTask({ title: 'x'.repeat(LIMITS.titleChars + 1) }, operator), 'VALIDATION_FAILED'],
      ['title with a newline', () => tm.createTask({ title: 'a\nb' }, operator), 'VALIDATION_FAILED'],
      // A lone surrogate: stored as U+FFFD by the database, kept escaped in the event's JSON.
      ['title with a lone high surrogate', () => tm.createTask({ title: 'a\ud800b' }, operator), 'VALIDATION_FAILED'],
      ['title ending in a lone high surrogate', () => tm.createTask({ title: 'ab\ud83d' }, operator), 'VALIDATION_FAILED'],
      ['title with a lone low surrogate', () => tm.createTask({ title: '\udc00' }, operator), 'VALIDATION_FAILED'],
      ['for an agent with a lone surrogate', () => tm.createTask({ title: 't', forAgent: 'w\udfff' }, operator), 'VALIDATION_FAILED'],
      // No agent bears such a name (actors.ts BINDABLE_NAME), and a refused claim quoted it raw.
      ['for an agent whose name reorders text', () => tm.createTask({ title: 't', forAgent: 'alice\u202e) approved by operator (' }, operator), 'VALIDATION_FAILED'],
      ['for an agent named with a space', () => tm.createTask({ title: 't', forAgent: 'alice bob' }, operator), 'VALIDATION_FAILED'],
      ['a batch task for an agent with a look-alike letter', () => tm.createTasks([{ title: 't', forAgent: 'аlice' }], operator), 'VALIDATION_FAILED'],
      // No agent may bear a reserved name, so it reserved the task for no one while reading as the operator's own.
      ['for the operator', () => tm.createTask({ title: 't', forAgent: 'Operator' }, operator), 'RESERVED_NAME'],
      ['a batch task for the acceptance checker', () => tm.createTasks([{ title: 'ok' }, { title: 't', forAgent: 'acceptance' }], operator), 'RESERVED_NAME'],
      ['idempotency key with a lone surrogate', () => tm.createTask({ title: 't', idempotencyKey: 'k\ud800' }, operator), 'VALIDATION_FAILED'],
      ['card that is an array', () => tm.createTask({ title: 't', card: [] as unknown as Record<string, unknown> }, operator), 'VALIDATION_FAILED'],
      ['card that is a string', () => tm.createTask({ title: 't', card: 'x' as unknown as Record<string, unknown> }, operator), 'VALIDATION_FAILED'],
      ['card over the limit', () => tm.createTask({ title: 't', card: { blob: 'x'.repeat(LIMITS.cardBytes) } }, operator), 'VALIDATION_FAILED'],
      ['priority as a string', () => tm.createTask({ title: 't', priority: '5' as unknown as number }, operator), 'VALIDATION_FAILED'],
      ['fractional priority', () => tm.createTask({ title: 't', priority: 1.5 }, operator), 'VALIDATION_FAILED'],
      ['unknown field', () => tm.createTask({ title: 't', colour: 'red' } as never, operator), 'VALIDATION_FAILED'],
      ['bad queue name', () => tm.createTask({ title: 't', queue: 'a b' }, operator), 'VALIDATION_FAILED'],
      // Past the latest time a Date holds: created, it made task show and the wire form throw RangeError.
      ['run after the end of Date', () => tm.createTask({ title: 't', runAfter: LIMITS.timeMs + 1 }, operator), 'VALIDATION_FAILED'],
      ['run after 9e15 in a batch', () => tm.createTasks([{ title: 't', runAfter: 9e15 }], operator), 'VALIDATION_FAILED'],
      ['unknown state', () => tm.transitionTask({ taskId: task.id, to: 'done' as never, actor: operator }), 'VALIDATION_FAILED'],
      ['unknown role', () => tm.cancelTask({ taskId: task.id, actor: { id: 'x', role: 'root' as never } }), 'VALIDATION_FAILED'],
      ['empty agent', () => tm.claimTask({ agent: '' }), 'VALIDATION_FAILED'],
      ['lease as text', () => tm.claimTask({ agent: 'w', leaseMs: 'long' as unknown as number }), 'VALIDATION_FAILED'],
      ['list with unknown state', () => tm.findTasks({ states: ['nope' as never] }), 'VALIDATION_FAILED'],
      ['page over the limit', () => tm.findTasks({ limit: LIMITS.pageMax + 1 }), 'VALIDATION_FAILED'],
      // A reason is printed on the operator's one-line views: no line breaks or escape
      // sequences (a forged event line, a repainted terminal). NUL and lone surrogates the
      // PostgreSQL store could not read back from the event's JSON (a raw 22P05 there).
      ['reason with a line break', () => tm.transitionTask({ taskId: task.id, to: 'cancelled', actor: operator, reason: 'ok\n2026-01-01T00:00:00.000Z #9 task 1 task.transitioned review -> completed by operator operator' }), 'VALIDATION_FAILED'],
      ['reason with an escape sequence', () => tm.cancelTask({ taskId: task.id, actor: operator, reason: '\u001b[2J' }), 'VALIDATION_FAILED'],
      ['reason with a NUL', () => tm.cancelTask({ taskId: task.id, actor: operator, reason: 'a\u0000b' }), 'VALIDATION_FAILED'],
      ['reason with a lone surrogate', () => tm.transitionTask({ taskId: task.id, to: 'cancelled', actor: operator, reason: 'x\ud800' }), 'VALIDATION_FAILED'],
      ['a further move whose reason has a carriage return', () => tm.transitionTask({ taskId: task.id, to: 'cancelled', actor: operator, then: [{ to: 'pending', actor: operator, reason: 'a\rb' }] }), 'VALIDATION_FAILED'],
      ['reason over the limit', () => tm.cancelTask({ taskId: task.id, actor: operator, reason: 'x'.repeat(LIMITS.reasonChars + 1) }), 'VALIDATION_FAILED'],
      ['resume with a reason holding a NUL', () => portsOf(tm).runs.resumeRun({ taskId: task.id, actor: operator, reason: 'a\u0000' }), 'VALIDATION_FAILED'],
      ['a control with a reason holding a line break', () => portsOf(tm).runs.setControl({ target: [task.id], state: 'paused', actor: operator, reason: 'a\nb' }), 'VALIDATION_FAILED'],
      ['an approval decided with an escape sequence', () => portsOf(tm).runs.decideApproval({ approvalId: 1, approve: true, actor: operator, reason: '\u009b2J' }), 'VALIDATION_FAILED'],
    ];
    for (const [what, call, code] of cases) expect(await codeOf(call), what).toBe(code);
    expect({ stats: await tm.stats(), task: await tm.getTask(task.id) }).toEqual(before);
  });

  it('stores SQL metacharacters and unicode in every text field verbatim', async () => {
    const tm = freshManager();
    for (const [i, text] of NASTY.entries()) {
      // Identities are plain names (actors.ts BINDABLE_NAME): such text names no agent…
      await expect(tm.createTask({ title: 't' }, agent(text))).rejects.toMatchObject({ code: expect.stringMatching(/^(VALIDATION_FAILED|RESERVED_NAME)$/) });
      // …and is kept verbatim in every other text field.
      const who = `agent-${i}`;
      const { task } = await tm.createTask(
        { title: text, card: { goal: text, [text]: text }, idempotencyKey: text, forAgent: who, queue: 'q' },
        agent(who),
      );
      const claim = (await tm.claimTask({ agent: who, queue: 'q' }))!;
      expect(claim.id).toBe(task.id);
      await tm.transitionTask({ taskId: task.id, to: 'in_progress', actor: agent(who), claimToken: claim.claimToken, reason: text });
      const got = await tm.getTask(task.id);
      expect(got).toMatchObject({ title: text.trim(), creator: who, assignee: who, forAgent: who, idempotencyKey: text, card: { goal: text, [text]: text } });
      expect(got.events.at(-1)!.data.reason).toBe(text);
      expect((await tm.findTasks({ assignee: who })).map((t) => t.id)).toEqual([task.id]);
    }
    expect((await tm.stats()).byState.in_progress).toBe(NASTY.length);
  });
});
