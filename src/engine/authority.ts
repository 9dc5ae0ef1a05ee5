/**
 * Authority beyond a task's state moves (those are states.ts): who may decide an approval,
 * stop or pause a run, read a task, and which card fields are powers only an operator may
 * write. One module, so adapters and surfaces ask it and never re-derive a rule.
 */
import { sameActor } from './actors.js';
import { EngineError } from './errors.js';
import type { MoveVerdict } from './states.js';
import type { Actor, ActorRole } from './types.js';

/** What the rules need to know of a task. */
export interface AuthoritySubject {
  id: number;
  creator: string;
  creatorRole: ActorRole;
  assignee: string | null;
}

const ok: MoveVerdict = { ok: true };
const forbidden = (message: string): MoveVerdict => ({ ok: false, code: 'FORBIDDEN', message });

const isCreator = (task: AuthoritySubject, actor: Actor): boolean => sameActor(actor, { id: task.creator, role: task.creatorRole });

/**
 * Approvals are decided by people who are not the agent: an operator, or a reviewer who did
 * not create the task. Never an agent — not the assignee, not the agent that created the
 * task (an agent that asks for a high-risk call must not be able to grant it) — and never a
 * system actor (expiry and revocation are not decisions).
 */
export function mayDecideApproval(actor: Actor, task: AuthoritySubject, approvalId: number): MoveVerdict {
  if (actor.role === 'operator') return ok;
  if (actor.role === 'reviewer') {
    // Four eyes by name, whatever the role: a reviewer who shares a name with the task's
    // creator or assignee is presumed to be the same party.
    if (actor.id === task.creator) return forbidden(`approval ${approvalId}: reviewer ${actor.id} bears the name of task ${task.id}'s creator and may not decide its requests`);
    if (actor.id === task.assignee) return forbidden(`approval ${approvalId}: reviewer ${actor.id} bears the name of task ${task.id}'s assignee and may not decide its requests`);
    return ok;
  }
  return forbidden(`approval ${approvalId}: only an operator or a reviewer may decide it (${actor.role} ${actor.id} may not)`);
}

/** Stop, pause and resume: an operator or the system, or the task's creator (same id and role). */
export function mayControl(actor: Actor, task: AuthoritySubject): MoveVerdict {
  if (actor.role === 'operator' || actor.role === 'system' || isCreator(task, actor)) return ok;
  return forbidden(`task ${task.id}: only its creator or an operator may stop, pause or resume it (${actor.role} ${actor.id} may not)`);
}

/** Removing a schedule: an operator or the system, or the schedule's creator (same id and role). */
export function mayRemoveSchedule(actor: Actor, schedule: { id: number; creator: string; creatorRole: ActorRole }): MoveVerdict {
  if (actor.role === 'operator' || actor.role === 'system' || sameActor(actor, { id: schedule.creator, role: schedule.creatorRole })) return ok;
  return forbidden(`schedule ${schedule.id}: only its creator or an operator may remove it (${actor.role} ${actor.id} may not)`);
}

/** Whether a card written by an author of this role may use card powers (CARD_POWERS): only an operator's. */
export function mayUseCardPowers(role: ActorRole): boolean {
  return role === 'operator';
}

/**
 * What an agent may read: the tasks it created, the tasks it holds or held (assignee), and
 * the tasks it may claim now (pending, for anyone or for it by name). Operators, reviewers
 * and the system read everything. Capabilities route work; they are not a security boundary,
 * so a task that requires a capability the agent lacks is still readable while it is open to
 * claims by name.
 */
export interface ReadSubject extends AuthoritySubject {
  state: string;
  forAgent: string | null;
}

export function mayRead(actor: Actor, task: ReadSubject): boolean {
  if (actor.role !== 'agent') return true;
  if (isCreator(task, actor) || task.assignee === actor.id) return true;
  return task.state === 'pending' && (task.forAgent === null || task.forAgent === actor.id);
}

/** FORBIDDEN unless `actor` may read the task (mayRead): the one refusal every surface gives. */
export function assertReadable(actor: Actor, task: ReadSubject): void {
  if (!mayRead(actor, task)) {
    throw new EngineError('FORBIDDEN', `task ${task.id} is not yours to read: ${actor.role} ${actor.id} did not create it, does not hold it and may not claim it`, { task_id: task.id });
  }
}

/**
 * Who may see a task's runs (their steps with the tools' arguments and results, their
 * envelopes, the screens they observed — the operator's desktop —, the run data in its
 * events: reader-view.ts): people and the task's creator.
 * Not an agent that may claim it: a released task is pending, readable by every agent so
 * that it may decide whether to claim it, and its earlier runs are someone else's work. Nor
 * the agent holding it: any agent may claim a pending task, so holding it proves nothing.
 * (A daemon reads the runs it carries on from the store, not through this rule.)
 */
export function maySeeRuns(actor: Actor, task: AuthoritySubject): boolean {
  return actor.role !== 'agent' || isCreator(task, actor);
}

/**
 * The highest priority an agent may give a task it creates. Claims take the highest priority
 * first, so a priority ranks the task against everyone else's work: an agent that could give
 * its tasks 1,000,000 would put them ahead of every operator's task in every daemon's queue,
 * and with enough of them hold every seat. So an agent's task ranks at most with a task
 * created at the default (0) — first come, first served among those — and the agent orders
 * its own below that (-1, -2, …). Operators, reviewers and the system may use the whole
 * range: an operator's urgent task (priority 1 or more) runs before any agent's.
 */
export const AGENT_MAX_PRIORITY = 0;

/** Whether `creator` may create a task at `priority` (AGENT_MAX_PRIORITY). */
export function mayUsePriority(priority: number, creator: Actor): MoveVerdict {
  if (creator.role !== 'agent' || priority <= AGENT_MAX_PRIORITY) return ok;
  return forbidden(
    `priority ${priority}: an agent's task may rank at most ${AGENT_MAX_PRIORITY} (the default), so that no agent's work goes ahead of an operator's; order your own tasks below it (agent ${creator.id})`,
  );
}

/**
 * Delaying a task is a power too. It was made one when every claim read its queue's claimable
 * tasks in claim order with the tasks not yet due among them: an agent that created 25,000
 * delayed tasks (the HTTP API and the library took run_after from anyone; MCP's task_create
 * never offered it) made every claim in its queue ~6 ms, inside SQLite's write lock (session
 * 30's review). Tasks not yet due are now held apart until due (SQLite's migration 13,
 * PostgreSQL's version 9) and cost a claim nothing. What a delay still does: the task's release
 * into the claimable parts is written by whichever claim in its queue comes next after it falls
 * due (~3 µs a task on SQLite, ~30 on PostgreSQL), so an agent's delays would place
 * its writes in other parties' transactions at a moment of its choosing. It stays an operator's
 * (reviewer's, the system's) power; an agent's task is due when it is created.
 */
export function mayDelay(runAfter: number | undefined, creator: Actor): MoveVerdict {
  if (creator.role !== 'agent' || runAfter === undefined) return ok;
  return forbidden(
    `run_after: delaying a task is an operator's power; an agent's task is due when it is created (agent ${creator.id})`,
  );
}

/**
 * Card fields that run a program or widen what a run may touch. Honoured only on a card an
 * operator wrote: refused at creation for anyone else, and again when the run starts
 * (defence in depth: a task written past TaskManager, or before this rule, is not trusted).
 * A field added later that starts programs or widens scope belongs in this list.
 */
export const CARD_POWERS = ['launch_allowlist', 'acceptance.checks[].command'] as const;

/** The powers a (raw, unparsed) card uses. */
export function cardPowers(card: unknown): string[] {
  if (typeof card !== 'object' || card === null) return [];
  const used: string[] = [];
  if (Object.hasOwn(card, 'launch_allowlist')) used.push('launch_allowlist');
  const acceptance = Object.hasOwn(card, 'acceptance') ? (card as { acceptance?: unknown }).acceptance : undefined;
  const checks = typeof acceptance === 'object' && acceptance !== null && Object.hasOwn(acceptance, 'checks') ? (acceptance as { checks?: unknown }).checks : undefined;
  if (Array.isArray(checks) && checks.some((c) => typeof c === 'object' && c !== null && Object.hasOwn(c, 'command'))) {
    used.push('acceptance.checks[].command');
  }
  return used;
}

/** Whether a card written by `author` may carry the powers it uses. */
export function checkCardAuthor(card: unknown, author: { role: ActorRole; id?: string }): MoveVerdict {
  if (mayUseCardPowers(author.role)) return ok;
  const used = cardPowers(card);
  if (used.length === 0) return ok;
  return forbidden(
    `the card uses ${used.join(' and ')}, which only a card an operator wrote may carry (this one is by ${author.role}${author.id === undefined ? '' : ` ${author.id}`})`,
  );
}
