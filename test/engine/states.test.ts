import { describe, expect, it } from 'vitest';
import {
  type Actor,
  type TaskManager,
  type TaskState,
  TASK_STATES,
  TRANSITIONS,
  checkMove,
  isTerminal,
  mayRead,
} from '../../src/engine/index.js';
import { agent, codeOf, freshManager, operator, system } from '../helpers.js';

const CREATOR = agent('alice');
const WORKER = agent('bob');
const OTHER = agent('carol');

/** Puts a fresh task into `state` through legal moves; returns its id and the worker's token. */
async function taskIn(tm: TaskManager, state: TaskState): Promise<{ id: number; token?: string }> {
  const { task } = await tm.createTask({ title: `to ${state}` }, CREATOR);
  if (state === 'pending') return { id: task.id };
  if (state === 'cancelled') {
    await tm.cancelTask({ taskId: task.id, actor: CREATOR });
    return { id: task.id };
  }
  const claimed = (await tm.claimTask({ agent: WORKER.id, taskId: task.id }))!;
  const token = claimed.claimToken;
  if (state === 'claimed') return { id: task.id, token };
  await tm.transitionTask({ taskId: task.id, to: 'in_progress', actor: WORKER, claimToken: token });
  if (state === 'in_progress') return { id: task.id, token };
  if (state === 'waiting' || state === 'failed') {
    await tm.transitionTask({ taskId: task.id, to: state, actor: WORKER, claimToken: token });
    return { id: task.id, token };
  }
  await tm.transitionTask({ taskId: task.id, to: 'review', actor: WORKER, claimToken: token });
  if (state === 'review') return { id: task.id, token };
  await tm.transitionTask({ taskId: task.id, to: 'completed', actor: operator });
  return { id: task.id, token };
}

/** The actors that the table names for a move, as concrete identities. */
function actorsFor(from: TaskState, to: TaskState): Actor[] {
  const movers = TRANSITIONS[from][to] ?? [];
  const out: Actor[] = [];
  for (const m of movers) {
    if (m === 'assignee') out.push(WORKER);
    if (m === 'creator') out.push(CREATOR);
    if (m === 'operator') out.push(operator);
    if (m === 'system') out.push(system);
  }
  return out;
}

async function snapshot(tm: TaskManager, id: number) {
  const task = await tm.getTask(id);
  return { task, stats: await tm.stats() };
}

describe('the state machine', () => {
  it('has exactly the 8 states of DESIGN §3 and no move out of a terminal state', () => {
    expect(TASK_STATES).toEqual(['pending', 'claimed', 'in_progress', 'waiting', 'review', 'completed', 'failed', 'cancelled']);
    for (const s of ['completed', 'failed', 'cancelled'] as const) expect(Object.keys(TRANSITIONS[s])).toEqual([]);
  });

  it('never lets the assignee decide its own review, even when it is also the creator', () => {
    const subject = { id: 1, state: 'review' as const, creator: 'bob', creatorRole: 'agent' as const, assignee: 'bob' };
    for (const to of ['completed', 'failed', 'in_progress'] as const) {
      const verdict = checkMove(subject, to, WORKER);
      expect(verdict).toMatchObject({ ok: false, code: 'FORBIDDEN' });
    }
    expect(checkMove(subject, 'completed', operator)).toEqual({ ok: true });
    expect(checkMove(subject, 'completed', system)).toEqual({ ok: true });
  });

  for (const from of TASK_STATES) {
    for (const to of TASK_STATES) {
      const allowed = TRANSITIONS[from][to] !== undefined && to !== 'claimed';
      it(`${from} -> ${to} is ${allowed ? 'allowed for its movers only' : 'refused with INVALID_TRANSITION'}, and a refusal writes nothing`, async () => {
        const tm = freshManager();
        if (!allowed) {
          const { id, token } = await taskIn(tm, from);
          const before = await snapshot(tm, id);
          for (const actor of [WORKER, CREATOR, operator, system]) {
            const code = await codeOf(
              // A finished task has no current claim: its old token would be refused as stale.
              tm.transitionTask({ taskId: id, to, actor, claimToken: actor === WORKER && !isTerminal(from) ? token : undefined }),
            );
            // An agent that may not read the task (bob never held one cancelled while pending)
            // is refused before the state machine is asked, and learns no state (authority.ts).
            const task = await tm.getTask(id);
            const readable = mayRead(actor, task);
            expect(readable || (actor === WORKER && from === 'cancelled'), `${actor.id} may read a task in ${from}`).toBe(true);
            expect(code, `${actor.id}`).toBe(readable ? 'INVALID_TRANSITION' : 'FORBIDDEN');
          }
          expect(await snapshot(tm, id)).toEqual(before);
          return;
        }
        const movers = actorsFor(from, to);
        const strangers = [OTHER, WORKER, CREATOR, operator, system].filter((a) => !movers.includes(a));
        for (const stranger of strangers) {
          const { id, token } = await taskIn(tm, from);
          const before = await snapshot(tm, id);
          const code = await codeOf(tm.transitionTask({ taskId: id, to, actor: stranger, claimToken: stranger === WORKER ? token : undefined }));
          expect(code, `${stranger.id} moving ${from} -> ${to}`).toBe('FORBIDDEN');
          expect(await snapshot(tm, id)).toEqual(before);
        }
        for (const mover of movers) {
          const { id, token } = await taskIn(tm, from);
          const moved = await tm.transitionTask({ taskId: id, to, actor: mover, claimToken: mover === WORKER ? token : undefined });
          expect(moved.state).toBe(to);
          const events = (await tm.getTask(id)).events;
          expect(events.at(-1)).toMatchObject({ data: { from, to }, actor: mover.id, actorRole: mover.role });
        }
      });
    }
  }
});
