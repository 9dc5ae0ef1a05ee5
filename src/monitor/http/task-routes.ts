/**
 * The task endpoints: list, create (attached by default), show, cancel, the run controls
 * (stop, pause, resume) and the emergency stop-all. Controls go through the engine's
 * `runs.setControl`, so they act on a run wherever it runs (this server, any daemon).
 */
import {
  type ControlState,
  type CreateTaskInput,
  EngineError,
  type RunStore,
  type TaskManager,
  eventsForReader,
  maySeeRuns,
  toWireEvent,
  toWireRun,
  toWireTask,
} from '../../engine/index.js';
import { idParam, parseWith, readJson, readableTask } from './request.js';
import type { Route } from './router.js';
import { ATTACHED_QUEUE } from './run-owner.js';
import { type CreateTaskBody, createTaskBody, listTasksQuery, queryObject, reasonBody, taskDetailQuery } from './schemas.js';

export interface TaskRouteDeps {
  tm: TaskManager;
  runs: RunStore;
  /** What the server offers attached tasks that require capabilities. */
  capabilities: string[];
}

/** An attached task is run by this server: it may not name a daemon's queue or agent, nor need what the server lacks. */
function checkAttached(body: CreateTaskBody, capabilities: string[]): void {
  const refuse = (field: string, why: string) => {
    throw new EngineError('VALIDATION_FAILED', `create: ${field}: ${why}; an attached task is run by its event stream in this server (pass "attach": false to queue it for daemons)`);
  };
  if (body.queue !== undefined && body.queue !== ATTACHED_QUEUE) refuse('queue', `'${body.queue}' is a daemon queue`);
  if (body.for_agent !== undefined) refuse('for_agent', 'names the agent that may claim it');
  const missing = (body.requires ?? []).filter((c) => !capabilities.includes(c));
  if (missing.length > 0) refuse('requires', `this server does not offer ${missing.join(', ')}`);
}

function toInput(body: CreateTaskBody): CreateTaskInput {
  return {
    title: body.title,
    card: body.card,
    priority: body.priority,
    dependsOn: body.depends_on,
    idempotencyKey: body.idempotency_key,
    runAfter: body.run_after === undefined ? undefined : Date.parse(body.run_after),
    queue: body.attach ? ATTACHED_QUEUE : body.queue,
    forAgent: body.for_agent,
    requires: body.requires,
    maxAttempts: body.max_attempts,
  };
}

export function taskRoutes(deps: TaskRouteDeps): Route[] {
  const { tm, runs } = deps;

  const control = (path: string, state: ControlState): Route => ({
    method: 'POST',
    path,
    async handler({ req, params, actor }) {
      const { reason } = await readJson(req, reasonBody, path.split('/').at(-1)!);
      const target = params.id === undefined ? ('all' as const) : [idParam(params.id, 'task id')];
      const tasks = await runs.setControl({ target, state, actor, reason });
      return { json: { state, tasks } };
    },
  });

  return [
    {
      method: 'GET',
      path: '/api/tasks',
      async handler({ query, actor }) {
        const q = parseWith(listTasksQuery, queryObject(query, ['state']), 'list');
        // The cursor is read first: a board that lists, then follows /api/events?after=it, misses nothing.
        // Only the cursor: stats() also counts the tasks by state (11.9 ms at 221,508 tasks), on every list.
        const lastEventId = await tm.store.lastEventId();
        const tasks = await tm.findTasks({ states: q.state, assignee: q.assignee, queue: q.queue, limit: q.limit, afterId: q.after, visibleTo: actor });
        // The log-wide cursor counts everyone's events: an agent, which may not follow the whole log, gets null.
        return { json: { tasks: tasks.map(toWireTask), last_event_id: actor.role === 'agent' ? null : lastEventId } };
      },
    },
    {
      method: 'POST',
      path: '/api/tasks',
      async handler({ req, actor }) {
        const body = await readJson(req, createTaskBody, 'create');
        if (body.attach) checkAttached(body, deps.capabilities);
        const { task, created } = await tm.createTask(toInput(body), actor);
        return {
          status: created ? 201 : 200,
          json: { ...toWireTask(task), created, attached: task.queue === ATTACHED_QUEUE, events_url: `/api/tasks/${task.id}/events` },
        };
      },
    },
    {
      method: 'GET',
      path: '/api/tasks/:id',
      async handler({ params, query, actor }) {
        const id = idParam(params.id, 'task id');
        const q = parseWith(taskDetailQuery, queryObject(query), 'task');
        // With a cursor, only the events past it are read: a board following /api/events has the rest.
        const { task, events } = q.events_after === undefined
          ? await tm.getTask(id, { as: actor }).then((t) => ({ task: t, events: t.events }))
          : await readableTask(tm, actor, id).then(async (t) => ({ task: t, events: eventsForReader(actor, t, await tm.store.readEvents({ taskId: id, afterId: q.events_after })) }));
        // An agent that merely may claim the task sees the task, not its runs (authority.ts maySeeRuns).
        const taskRuns = maySeeRuns(actor, task) ? await runs.runsOf(task.id) : [];
        return { json: { ...toWireTask(task), events: events.map(toWireEvent), runs: taskRuns.map(toWireRun) } };
      },
    },
    {
      method: 'POST',
      path: '/api/tasks/:id/cancel',
      async handler({ req, params, actor }) {
        const { reason } = await readJson(req, reasonBody, 'cancel');
        const task = await tm.cancelTask({ taskId: idParam(params.id, 'task id'), actor, reason });
        return { json: toWireTask(task) };
      },
    },
    control('/api/tasks/:id/stop', 'stopped'),
    control('/api/tasks/:id/pause', 'paused'),
    control('/api/tasks/:id/resume', 'running'),
    // The emergency stop (seed 000's Ctrl+Alt+Esc): every live run; the backlog is left alone.
    control('/api/tasks/stop-all', 'stopped'),
  ];
}
