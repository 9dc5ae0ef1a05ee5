/**
 * The agent task tools (seed 002's five, plus task_get and task_heartbeat). The acting
 * agent is `ctx.agent`, bound by whatever hosts the tool (a daemon worker, the MCP
 * server); no argument names it, so a model cannot act as someone else. The engine's
 * actor rules apply as for any agent. Requires `services.manager` (a TaskManager).
 */
import { z } from 'zod/v4';
import { type Actor, EngineError, type FindTasksQuery, LIMITS, AGENT_MAX_CAPABILITIES, type Task, type TaskManager, TASK_STATES, type WireEvent, type WireTask, toWireEvent, toWireTask } from '../engine/index.js';
import { type Tool, type ToolContext, defineTool } from './registry.js';

function manager(ctx: ToolContext): TaskManager {
  const tm = ctx.services.manager as TaskManager | undefined;
  if (tm === undefined) throw new Error('task tools need services.manager');
  return tm;
}
/** Whom the call acts for: the host's agent, or inside a run the card's author (ToolContext.actor). */
const me = (ctx: ToolContext): Actor => ctx.actor ?? { id: ctx.agent, role: 'agent' };
/** Claims are an agent's: a run for an operator's card claims as its runner, anyone else's as its author. */
function claimer(ctx: ToolContext): string {
  const actor = me(ctx);
  if (actor.role !== 'agent') throw new EngineError('FORBIDDEN', `only agents claim tasks; this call acts for ${actor.role} ${actor.id}`);
  return actor.id;
}
/** What task_get and task_list answer with at most: under the default 64 KiB output cap, with room for what wraps it. */
export const ANSWER_BYTES = 60 * 1024;
/**
 * The output cap of the tools that answer with a whole task: its card and result at their
 * largest, an events page (task_get) and the rest. Under the default 64 KiB a task with a card
 * of 64 KiB or more could not be read, and a write's answer was dropped after it took effect:
 * task_claim's without its claim_token, so the agent held a task it could not move.
 */
export const TASK_ANSWER_CAP = LIMITS.cardBytes + LIMITS.resultBytes + ANSWER_BYTES + 32 * 1024;
const taskId = z.int().positive().describe('the task id');
const state = z.enum(TASK_STATES);

export const taskCreate = defineTool({
  name: 'task_create',
  description: 'Create a task (state pending). You become its creator. Returns the task.',
  kind: 'write',
  maxOutputBytes: TASK_ANSWER_CAP,
  args: z.strictObject({
    title: z.string().min(1).max(500).describe('what the task is'),
    card: z.record(z.string(), z.unknown()).optional().describe('the task card (goal, allowed_tools, acceptance, budget …)'),
    priority: z.int().optional().describe('higher runs first; default 0, which is also the highest an agent may give'),
    depends_on: z.array(taskId).optional().describe('tasks that must complete first'),
    idempotency_key: z.string().min(1).max(100).optional().describe('the same key returns the same task'),
    queue: z.string().optional(),
    for_agent: z.string().optional().describe('only this agent may claim it'),
    requires: z.array(z.string()).optional().describe('capabilities the claimer must have'),
  }),
  execute: async (a, ctx) => {
    const { task, created } = await manager(ctx).createTask(
      {
        title: a.title,
        card: a.card,
        priority: a.priority,
        dependsOn: a.depends_on,
        idempotencyKey: a.idempotency_key,
        queue: a.queue,
        forAgent: a.for_agent,
        requires: a.requires,
      },
      me(ctx),
    );
    return { ...toWireTask(task), created };
  },
});

/**
 * A task as task_list shows it: without its card and result. Cards are up to 256 KiB: a page
 * of 200 whole tasks was read, parsed and serialised (50 MB, ~300 ms of the worker thread its
 * run shares with others) only to be refused for the output cap, as often as an agent asked.
 */
function listed(task: Task): Omit<WireTask, 'card' | 'result'> {
  const { card: _card, result: _result, ...rest } = toWireTask(task);
  return rest;
}

/** A listing's page: the first tasks, in order, that fit in `room` bytes (a listed task is at most ~10 KB). */
function fittingTasks(tasks: Task[], room: number): Array<ReturnType<typeof listed>> {
  const shown: Array<ReturnType<typeof listed>> = [];
  for (const t of tasks) {
    const l = listed(t);
    room -= Buffer.byteLength(JSON.stringify(l)) + 1;
    if (room < 0 && shown.length > 0) break;
    shown.push(l);
  }
  return shown;
}

/**
 * One of task_list's lists, read one past `limit` to know whether more follow: at most `limit`
 * tasks, as many as fit in `room`, and the cursor to pass as `after` for the rest (or null).
 * Titles are up to 500 characters: 200 tasks, or 50 and 50 in the default view, could be over
 * the tool's 64 KiB output cap, which failed the call, and nothing paged past the first 200.
 */
async function listPage(tm: TaskManager, query: Omit<FindTasksQuery, 'limit' | 'summary'>, limit: number, room: number) {
  const tasks = await tm.findTasks({ ...query, limit: limit + 1, summary: true });
  const shown = fittingTasks(tasks.slice(0, limit), room);
  return { shown, after: shown.length < tasks.length ? shown[shown.length - 1]!.id : null };
}
const HELD = ['claimed', 'in_progress', 'waiting', 'review'] as const;

export const taskList = defineTool({
  name: 'task_list',
  description:
    'List the tasks you may read (those you created, hold or may claim), oldest first: by default the pending ones you could claim and the ones assigned to you (claimed, in_progress, waiting, review). Each without its card and result: task_get reads one whole. When more follow, more_after is the id to pass as after, with the same states and mine, for the next page; from the default view, pass more_pending_after with states ["pending"], and more_assigned_after with mine true and those four states.',
  kind: 'read',
  args: z.strictObject({
    states: z.array(state).optional().describe('only these states'),
    mine: z.boolean().optional().describe('only tasks assigned to you'),
    after: z.int().nonnegative().optional().describe('only tasks with a higher id (from more_after); needs states or mine'),
    limit: z.int().min(1).max(200).optional(),
  }),
  execute: async (a, ctx) => {
    const tm = manager(ctx);
    const limit = a.limit ?? 50;
    const as = me(ctx);
    if (a.states === undefined && a.mine === undefined) {
      if (a.after !== undefined) throw new EngineError('VALIDATION_FAILED', 'task_list: after pages one listing: give states (e.g. ["pending"]) or mine with it');
      // The tasks an agent holds are few; they have the first half of the room, and the pending the rest.
      const mine = await listPage(tm, { assignee: as.id, states: [...HELD], visibleTo: as }, limit, ANSWER_BYTES / 2);
      const used = Buffer.byteLength(JSON.stringify(mine.shown));
      const pending = await listPage(tm, { states: ['pending'], visibleTo: as }, limit, ANSWER_BYTES - used);
      return { pending: pending.shown, assigned_to_you: mine.shown, more_pending_after: pending.after, more_assigned_after: mine.after };
    }
    const page = await listPage(tm, { states: a.states, assignee: a.mine === true ? as.id : undefined, afterId: a.after, visibleTo: as }, limit, ANSWER_BYTES);
    return { tasks: page.shown, more_after: page.after };
  },
});

export const taskClaim = defineTool({
  name: 'task_claim',
  description: 'Claim a pending task (the given one, or the best one for you). Returns it with its claim_token, which later calls must present.',
  kind: 'write',
  maxOutputBytes: TASK_ANSWER_CAP,
  args: z.strictObject({
    task_id: taskId.optional(),
    queue: z.string().optional(),
    // At most AGENT_MAX_CAPABILITIES: a claim looks up each set they cover, twice (2^n - 1
    // sets), in the store's write lock; past MAX_LOOKED_UP it walks every task that requires
    // capabilities, and an agent that had created thousands requiring one it left out could
    // hold that lock for each of its claims (claim-needs.ts).
    capabilities: z
      .array(z.string())
      .max(AGENT_MAX_CAPABILITIES)
      .optional()
      .describe(`what you can do (at most ${AGENT_MAX_CAPABILITIES}): tasks that require only these may be yours`),
    lease_seconds: z.int().min(1).max(86_400).optional(),
  }),
  execute: async (a, ctx) => {
    const claimed = await manager(ctx).claimTask({
      agent: claimer(ctx),
      taskId: a.task_id,
      queue: a.queue,
      capabilities: a.capabilities,
      leaseMs: a.lease_seconds === undefined ? undefined : a.lease_seconds * 1000,
    });
    return claimed === null ? { claimed: null, message: 'nothing to claim' } : { claimed: toWireTask(claimed) };
  },
});

export const taskTransition = defineTool({
  name: 'task_transition',
  description: 'Move a task to another state: claimed → in_progress → review, or waiting/failed. Present your claim_token while the task is claimed or in progress. You cannot pass your own review.',
  kind: 'write',
  maxOutputBytes: TASK_ANSWER_CAP,
  args: z.strictObject({
    task_id: taskId,
    to: state,
    claim_token: z.string().optional(),
    reason: z.string().max(2000).optional(),
  }),
  execute: async (a, ctx) => toWireTask(await manager(ctx).transitionTask({ taskId: a.task_id, to: a.to, actor: me(ctx), claimToken: a.claim_token, reason: a.reason })),
});

export const taskCancel = defineTool({
  name: 'task_cancel',
  description: 'Cancel a task you created.',
  kind: 'write',
  maxOutputBytes: TASK_ANSWER_CAP,
  args: z.strictObject({ task_id: taskId, reason: z.string().max(2000).optional() }),
  execute: async (a, ctx) => toWireTask(await manager(ctx).cancelTask({ taskId: a.task_id, actor: me(ctx), reason: a.reason })),
});

/**
 * task_get's events are a page, newest first chosen, shown in order: at most `events_limit`,
 * and as many as fit in ANSWER_BYTES with the task. A run of 200 steps gives its task ~400
 * events (~185 KB), which read whole were over the tool's output cap: task_get failed on
 * exactly the tasks whose history an agent would want, after reading all of it. An event too
 * big for a page of its own shows with its data left out (`omitted_bytes`), so paging never
 * sticks. A big task (a card or result of tens of KiB) leaves its events at least 8 KiB,
 * under the tool's own cap (TASK_ANSWER_CAP).
 */
const EVENT_PAGE_DEFAULT = 50;

export function eventPage(events: WireEvent[], limit: number, room: number): { shown: WireEvent[]; more: boolean } {
  const shown: WireEvent[] = [];
  let bytes = 0;
  for (let i = events.length - 1; i >= 0 && shown.length < limit; i -= 1) {
    const e = events[i]!;
    const size = Buffer.byteLength(JSON.stringify(e)) + 1;
    if (bytes + size <= room) shown.push(e);
    else if (shown.length === 0) shown.push({ ...e, data: { omitted_bytes: size - 1 } });
    else return { shown: shown.reverse(), more: true };
    bytes += size;
  }
  return { shown: shown.reverse(), more: events.length > shown.length };
}

export const taskGet = defineTool({
  name: 'task_get',
  description:
    'One task you may read (you created it, hold it or may claim it) with its newest events. When there are earlier ones, more_events_before is the id to pass as events_before to read the page before these.',
  kind: 'read',
  maxOutputBytes: TASK_ANSWER_CAP,
  args: z.strictObject({
    task_id: taskId,
    events_before: z.int().positive().optional().describe('only events with a lower id (from more_events_before)'),
    events_limit: z.int().min(1).max(200).optional().describe(`at most this many events; default ${EVENT_PAGE_DEFAULT}`),
  }),
  execute: async (a, ctx) => {
    const limit = a.events_limit ?? EVENT_PAGE_DEFAULT;
    const t = await manager(ctx).getTask(a.task_id, { as: me(ctx), events: { last: limit + 1, beforeId: a.events_before } });
    const task = toWireTask(t);
    // The events have what the task leaves of ANSWER_BYTES, and at least 8 KiB beside a big task.
    const room = Math.max(ANSWER_BYTES - Buffer.byteLength(JSON.stringify(task)), 8 * 1024);
    const { shown, more } = eventPage(t.events.map(toWireEvent), limit, room);
    return { ...task, events: shown, more_events_before: more ? shown[0]!.id : null };
  },
});

export const taskHeartbeat = defineTool({
  name: 'task_heartbeat',
  description: 'Extend the lease of your claim on a task.',
  kind: 'write',
  idempotent: true,
  args: z.strictObject({ task_id: taskId, claim_token: z.string().min(1), lease_seconds: z.int().min(1).max(86_400).optional() }),
  execute: async (a, ctx) => {
    const { leaseExpiresAt } = await manager(ctx).heartbeat({
      taskId: a.task_id,
      agent: claimer(ctx),
      claimToken: a.claim_token,
      leaseMs: a.lease_seconds === undefined ? undefined : a.lease_seconds * 1000,
    });
    return { task_id: a.task_id, lease_expires_at: new Date(leaseExpiresAt).toISOString() };
  },
});

export const taskTools: Tool[] = [taskCreate, taskList, taskClaim, taskTransition, taskCancel, taskGet, taskHeartbeat];
