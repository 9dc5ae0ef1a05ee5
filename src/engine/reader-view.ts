/**
 * What an agent is shown of a task it may read but whose runs it may not see (authority.ts
 * maySeeRuns: a task it merely may claim, or holds without having created it). The task's
 * own log stays readable — its moves and who made them — but the events its runs wrote
 * carry the runs' data: a call's arguments in `approval.requested`, a tool's error text in
 * `run.step_finished`, a stop's reason. Those keep only what says which step of which run
 * did what, not with what. Pure.
 */
import { maySeeRuns, type AuthoritySubject } from './authority.js';
import type { Actor, TaskEvent } from './types.js';

/** The fields a run's or an approval's event keeps for such a reader. */
const KEPT = ['run_id', 'seq', 'kind', 'tool', 'status', 'phase', 'stop_reason', 'approval_id', 'duration_ms', 'intent'] as const;

const ofRuns = (type: string): boolean => type.startsWith('run.') || type.startsWith('approval.');

/** The event as `actor` may see it, on a task whose runs it `seesRuns` or not. */
export function eventForReader(event: TaskEvent, seesRuns: boolean): TaskEvent {
  if (seesRuns || !ofRuns(event.type)) return event;
  const data: Record<string, unknown> = {};
  for (const key of KEPT) if (Object.hasOwn(event.data, key)) data[key] = event.data[key];
  return { ...event, data };
}

/** The events as `actor` may see them on `task`. */
export function eventsForReader(actor: Actor, task: AuthoritySubject, events: TaskEvent[]): TaskEvent[] {
  const sees = maySeeRuns(actor, task);
  return sees ? events : events.map((e) => eventForReader(e, false));
}
