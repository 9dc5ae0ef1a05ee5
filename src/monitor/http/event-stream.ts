/**
 * GET /api/events — every `task_events` row, live, for the board: the engine's follow
 * (TaskManager.follow) from a cursor. The cursor is `Last-Event-ID`, else `?after=`, else
 * the newest event (only what happens from now on). Messages are unnamed (EventSource's
 * `message`), each with its row's id as the SSE id and the wire event as data;
 * `?task_id=` narrows the stream to one task.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Actor, EngineError, type TaskManager, eventForReader, mayRead, maySeeRuns, toWireEvent } from '../../engine/index.js';
import { idParam, readableTask, refuseAgents } from './request.js';
import type { Handler } from './router.js';
import { type SseStream, resumeCursor } from './sse.js';

export function eventsHandler(tm: TaskManager, open: (req: IncomingMessage, res: ServerResponse, actor: Actor) => SseStream): Handler {
  return async ({ req, res, query, actor }) => {
    const raw = resumeCursor(req, query);
    if (raw !== undefined && !/^\d{1,15}$/.test(raw)) throw new EngineError('VALIDATION_FAILED', `event cursor: '${raw}' is not an event id (a non-negative integer)`);
    const taskId = query.has('task_id') ? idParam(query.get('task_id') ?? undefined, 'task_id') : undefined;
    // The whole log is the operators'; an agent follows one task it may read.
    if (taskId === undefined) refuseAgents(actor, 'the event log of every task (GET /api/events without ?task_id=)');
    else await readableTask(tm, actor, taskId);
    const afterId = raw === undefined ? await tm.store.lastEventId() : Number(raw);
    const stream = open(req, res, actor);
    for await (const event of tm.follow({ afterId, taskId, signal: stream.signal })) {
      // An agent's right to read is checked for every event, not only when the stream opened.
      let seen = event;
      if (actor.role === 'agent' && taskId !== undefined) {
        const task = await tm.store.getTask(taskId, false);
        if (!mayRead(actor, task)) {
          await stream.send({ event: 'stream_error', data: { error: { code: 'FORBIDDEN', message: `task ${taskId} is no longer yours to read` } } });
          break;
        }
        // Its runs' data only to those who may see its runs (reader-view.ts).
        seen = eventForReader(event, maySeeRuns(actor, task));
      }
      await stream.send({ id: event.id, data: toWireEvent(seen) });
    }
    stream.end();
  };
}
