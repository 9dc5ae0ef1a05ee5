/**
 * TaskManager: the validating facade over a TaskStore. It parses every input at the edge
 * (schemas.ts), delegates the decision and the write to the store (one transaction each),
 * and publishes the committed events on the in-process bus.
 */
import { assertActorName, assertBindableName } from './actors.js';
import { assertReadable, checkCardAuthor, mayDelay, mayUsePriority } from './authority.js';
import { eventsForReader } from './reader-view.js';
import { EngineError } from './errors.js';
import { type EventBus, createEventBus } from './bus.js';
import * as S from './schemas.js';
import type { EventWindow, TaskStore } from './store.js';
import { type FollowOptions, createFollowHub } from './tail.js';
import type {
  Actor,
  BatchTaskInput,
  ClaimInput,
  ClaimedTask,
  CreateResult,
  CreateTaskInput,
  FindTasksQuery,
  HeartbeatInput,
  SweepResult,
  Task,
  TaskEvent,
  TaskStats,
  TaskWithEvents,
  TransitionInput,
} from './types.js';

export interface TaskManager {
  readonly store: TaskStore;
  readonly bus: EventBus;
  createTask(input: CreateTaskInput, creator: Actor): Promise<CreateResult>;
  /** Creates a batch in one transaction; `ref`/`dependsOnRefs` link tasks of the batch. */
  createTasks(inputs: BatchTaskInput[], creator: Actor): Promise<CreateResult[]>;
  /** The best claimable task for this claimer with a fresh claim token, or null. */
  claimTask(input: ClaimInput): Promise<ClaimedTask | null>;
  heartbeat(input: HeartbeatInput): Promise<{ leaseExpiresAt: number }>;
  transitionTask(input: TransitionInput): Promise<Task>;
  cancelTask(input: { taskId: number; actor: Actor; reason?: string }): Promise<Task>;
  /**
   * One task with its events (all of them, or the window `events` names); with `as`, refused
   * FORBIDDEN unless that actor may read it (authority.ts).
   */
  getTask(id: number, opts?: { as?: Actor; events?: EventWindow }): Promise<TaskWithEvents>;
  findTasks(query?: FindTasksQuery): Promise<Task[]>;
  sweep(opts?: { graceMs?: number }): Promise<SweepResult>;
  stats(): Promise<TaskStats>;
  /**
   * Follows the event log from a cursor across processes (see tail.ts). The followers of one
   * TaskManager share their reads, and so the event objects they yield: read them, do not
   * change them (as with `bus` listeners).
   */
  follow(opts?: FollowOptions): AsyncGenerator<TaskEvent, void, undefined>;
  close(): Promise<void>;
}

export interface TaskManagerOptions {
  store: TaskStore;
  /** @defaultValue a new bus */
  bus?: EventBus;
  /** Grace of the stale sweep's second phase. @defaultValue 1000 */
  sweepGraceMs?: number;
}

/** Refuses, before anything is written, a card whose powers its author may not use, or a priority or a delay its creator may not give (authority.ts). */
function checkAuthors(inputs: ReadonlyArray<{ card?: unknown; forAgent?: string; priority?: number; runAfter?: number }>, creator: Actor): Actor {
  for (const input of inputs) {
    const rank = mayUsePriority(input.priority ?? 0, creator);
    if (!rank.ok) throw new EngineError(rank.code, rank.message);
    const delay = mayDelay(input.runAfter, creator);
    if (!delay.ok) throw new EngineError(delay.code, delay.message);
    // A task reserved for `operator` (or any reserved name) reads as the operator's own
    // work in every list, yet no agent may bear that name to claim it.
    if (input.forAgent !== undefined) assertBindableName(input.forAgent, 'for_agent');
    if (input.card === undefined) continue;
    const verdict = checkCardAuthor(input.card, creator);
    if (!verdict.ok) throw new EngineError(verdict.code, verdict.message);
  }
  return creator;
}

export function createTaskManager(opts: TaskManagerOptions): TaskManager {
  const { store } = opts;
  const bus = opts.bus ?? createEventBus();
  // Followers in this process share their reads of the log (tail.ts).
  const hub = createFollowHub(store);
  const publish = <T>(outcome: { value: T; events: TaskEvent[] }): T => {
    bus.emitAll(outcome.events);
    return outcome.value;
  };

  return {
    store,
    bus,
    async createTask(input, creator) {
      const parsed = S.parse(S.createTaskInput, input, 'create');
      const who = checkAuthors([parsed], assertActorName(S.parse(S.actor, creator, 'creator'), 'creator'));
      const [result] = publish(await store.createTasks([parsed], who));
      return result!;
    },
    async createTasks(inputs, creator) {
      const parsed = S.parse(S.batchInput, inputs, 'create batch');
      return publish(await store.createTasks(parsed, checkAuthors(parsed, assertActorName(S.parse(S.actor, creator, 'creator'), 'creator'))));
    },
    claimTask(input) {
      // Not async (one promise less per call on the hot path), but it still only rejects.
      try {
        const parsed = S.parseClaimInput(input);
        assertBindableName(parsed.agent, 'claim');
        return store.claim(parsed).then(publish);
      } catch (err) {
        return Promise.reject(err);
      }
    },
    heartbeat: async (input) => {
      const parsed = S.parse(S.heartbeatInput, input, 'heartbeat');
      assertBindableName(parsed.agent, 'heartbeat');
      return store.heartbeat(parsed);
    },
    transitionTask(input) {
      try {
        const parsed = S.parseTransitionInput(input);
        assertActorName(parsed.actor, 'transition');
        for (const step of parsed.then ?? []) assertActorName(step.actor, 'transition');
        return store.transition(parsed).then(publish);
      } catch (err) {
        return Promise.reject(err);
      }
    },
    async cancelTask(input) {
      const parsed = S.parse(S.transitionInput, { ...input, to: 'cancelled' }, 'cancel') as TransitionInput;
      assertActorName(parsed.actor, 'cancel');
      // An agent that may not read the task is refused FORBIDDEN whatever its state, by the
      // store's move itself (task-rows.ts checkStepActor), as for every transition.
      return publish(await store.transition(parsed));
    },
    async getTask(id, o = {}) {
      // With `as`, a task it may not read is refused before its events are read.
      const task = await store.getTask(S.parse(S.taskId, id, 'task id'), o.events === undefined ? true : S.parse(S.eventWindow, o.events, 'event window'), o.as);
      if (o.as === undefined) return task;
      assertReadable(o.as, task);
      return { ...task, events: eventsForReader(o.as, task, task.events) };
    },
    findTasks: async (query = {}) => store.findTasks(S.parse(S.findTasksQuery, query, 'list')),
    async sweep(o = {}) {
      return publish(await store.sweep({ graceMs: o.graceMs ?? opts.sweepGraceMs ?? 1000 }));
    },
    stats: () => store.stats(),
    follow: (o) => hub.follow(o),
    close: () => store.close(),
  };
}
