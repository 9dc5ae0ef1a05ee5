/** Read queries: one task with its events, filtered lists, the event log by cursor, counts. */
import { mayRead } from '../authority.js';
import { EngineError } from '../errors.js';
import type { EventWindow, ReadEventsQuery } from '../store.js';
import type { Actor, FindTasksQuery, Task, TaskEvent, TaskStats, TaskWithEvents } from '../types.js';
import { TASK_STATES } from '../types.js';
import type { Statement } from 'better-sqlite3';
import type { Db } from './connection.js';
import { type EventRow, PREV_OF, type TaskRow, toEvent, toTask } from './rows.js';
import { SUMMARY_COLUMNS } from '../task-rows.js';

export interface Reads {
  getTask(id: number, withEvents: boolean | EventWindow, reader?: Actor): TaskWithEvents;
  findTasks(query: FindTasksQuery): Task[];
  readEvents(query: ReadEventsQuery): TaskEvent[];
  stats(): TaskStats;
  lastEventId(): number;
}

export const DEFAULT_PAGE = 100;
/** Below this many tasks after the cursor, findTasks reads a state's own index range. */
const SMALL_STATE = 5000;
/** Entries stats counts per state and round (see countByState). */
const COUNT_CHUNK = 20_000;

// A task's events: its own chain (from tasks.last_event_id back through prev_id) merged with
// its other events, which task_events_by_task holds (see the migration). The chain is read
// first (CROSS JOIN fixes SQLite's join order): with a plain JOIN, `e.id > @after` led the
// planner to scan the whole log past the cursor, every task's events, probing the chain for
// each: 31.7 ms to read a one-event task in a 200,000-event log, against 0.1 ms now.

/** A task's chain events after @after, in id order. */
export const CHAIN_AFTER_SQL = `WITH RECURSIVE chain(id) AS (
       SELECT last_event_id FROM tasks WHERE id = @task
       UNION ALL
       SELECT ${PREV_OF} FROM chain JOIN task_events e ON e.id = chain.id WHERE ${PREV_OF} > @after AND ${PREV_OF} < e.id
     )
     SELECT e.* FROM chain CROSS JOIN task_events e ON e.id = chain.id
     WHERE e.id > @after AND e.task_id = @task ORDER BY e.id`;
/**
 * The newest @last of a task's chain events below @before: the chain walked back from its
 * head only as far as it takes to pass @last of them (`taken` counts those below @before).
 */
export const CHAIN_BEFORE_SQL = `WITH RECURSIVE chain(id, taken) AS (
       SELECT last_event_id, 0 FROM tasks WHERE id = @task
       UNION ALL
       SELECT ${PREV_OF}, chain.taken + (chain.id < @before) FROM chain JOIN task_events e ON e.id = chain.id
       WHERE ${PREV_OF} BETWEEN 1 AND e.id - 1 AND chain.taken + (chain.id < @before) < @last
     )
     SELECT e.* FROM chain CROSS JOIN task_events e ON e.id = chain.id
     WHERE e.id < @before AND e.task_id = @task`;

export function prepareReads(db: Db): Reads {
  const getRow = db.prepare<[number], TaskRow>('SELECT * FROM tasks WHERE id = ?');
  const eventsAfter = db.prepare<[number, number], EventRow>('SELECT * FROM task_events WHERE id > ? ORDER BY id LIMIT ?');
  const chainAfter = db.prepare<{ task: number; after: number }, EventRow>(CHAIN_AFTER_SQL);
  const othersAfter = db.prepare<[number, number, number], EventRow>(
    'SELECT * FROM task_events WHERE task_id = ? AND prev_id IS NULL AND id > ? ORDER BY id LIMIT ?',
  );
  const chainBefore = db.prepare<{ task: number; before: number; last: number }, EventRow>(CHAIN_BEFORE_SQL);
  const othersBefore = db.prepare<[number, number, number], EventRow>(
    'SELECT * FROM task_events WHERE task_id = ? AND prev_id IS NULL AND id < ? ORDER BY id DESC LIMIT ?',
  );
  /** The newest `w.last` of the task's events below `w.beforeId`, chain and indexed, in id order. */
  const taskEventsBefore = (taskId: number, w: EventWindow): EventRow[] => {
    const before = w.beforeId ?? Number.MAX_SAFE_INTEGER;
    const own = chainBefore.all({ task: taskId, before, last: w.last });
    const others = othersBefore.all(taskId, before, w.last);
    return [...own, ...others].sort((a, b) => b.id - a.id).slice(0, w.last).reverse();
  };
  /** The task's events with id > after, in id order, at most `limit` (negative: all). */
  const taskEventsAfter = (taskId: number, after: number, limit: number): EventRow[] => {
    const own = chainAfter.all({ task: taskId, after });
    const others = othersAfter.all(taskId, after, limit);
    if (own.length === 0) return others;
    const merged = others.length === 0 ? own : [...own, ...others].sort((a, b) => a.id - b.id);
    return limit < 0 ? merged : merged.slice(0, limit);
  };
  // A task's events are read by two statements (its chain, its indexed events) and its row by
  // a third: one read transaction makes them one snapshot. Without it an event committed
  // between the two showed while an earlier one of the other kind did not, and a reader whose
  // cursor moved past it (a task's stream, task_get's pages) never saw that one.
  const oneTask = db.transaction((id: number, withEvents: boolean | EventWindow, reader: Actor | undefined): TaskWithEvents => {
    const row = getRow.get(id);
    if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${id} does not exist`, { task_id: id });
    const task = toTask(row);
    if (withEvents === false || (reader !== undefined && !mayRead(reader, task))) return { ...task, events: [] };
    const events = withEvents === true ? taskEventsAfter(id, 0, -1) : taskEventsBefore(id, withEvents);
    return { ...task, events: events.map(toEvent) };
  });
  const oneTaskEvents = db.transaction((taskId: number, after: number, limit: number) => taskEventsAfter(taskId, after, limit));
  // Counting a state reads its whole index range. stats counts the states in chunks, round
  // robin, until at most one is left unfinished: that one (the biggest, usually completed)
  // is the table's count minus the others, and SQLite takes the table's count from the
  // b-tree pages' cell counts without reading the entries. So a million completed tasks
  // cost about what the second-biggest state costs. One read transaction: one snapshot.
  const total = db.prepare<[], number>('SELECT count(*) FROM tasks').pluck(true);
  const countChunk = db
    .prepare<[string, number, number], [number, number | null]>(
      'SELECT count(*), max(id) FROM (SELECT id FROM tasks WHERE state = ? AND id > ? ORDER BY id LIMIT ?)',
    )
    .raw(true);
  const lastEvent = db.prepare<[], { id: number | null }>('SELECT max(id) AS id FROM task_events');
  const countByState = db.transaction((): TaskStats => {
    const byState = Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as TaskStats['byState'];
    const open = new Map<keyof TaskStats['byState'], number>(TASK_STATES.map((s) => [s, 0])); // state -> id counted up to
    let counted = 0;
    while (open.size > 1) {
      for (const [state, after] of open) {
        const [n, last] = countChunk.get(state, after, COUNT_CHUNK)!;
        byState[state] += n;
        counted += n;
        if (n < COUNT_CHUNK) open.delete(state);
        else open.set(state, last!);
      }
    }
    for (const state of open.keys()) byState[state] = total.get()! - (counted - byState[state]);
    return { byState, lastEventId: lastEvent.get()?.id ?? 0 };
  });

  // How many tasks an agent created and holds or held, each counted up to a cap, from the indexes alone.
  const ownTasks = db
    .prepare<[string, number, string, number], number>(
      `SELECT (SELECT count(*) FROM (SELECT 1 FROM tasks INDEXED BY tasks_by_creator WHERE creator = ? AND creator_role = 'agent' LIMIT ?))
            + (SELECT count(*) FROM (SELECT 1 FROM tasks INDEXED BY tasks_by_assignee WHERE assignee = ? LIMIT ?))`,
    )
    .pluck(true);
  const smallState = db
    .prepare<[string, number, number], number>('SELECT count(*) FROM (SELECT 1 FROM tasks WHERE state = ? AND id > ? LIMIT ?)')
    .pluck(true);
  // findTasks builds its SQL from the filters given; each variant is prepared once.
  const statements = new Map<string, Statement<unknown[], TaskRow>>();
  const prepared = (sql: string): Statement<unknown[], TaskRow> => {
    let stmt = statements.get(sql);
    if (stmt === undefined) statements.set(sql, (stmt = db.prepare<unknown[], TaskRow>(sql)));
    return stmt;
  };

  const listing = db.transaction((query: FindTasksQuery): Task[] => {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.assignee !== undefined) (where.push('assignee = ?'), params.push(query.assignee));
    if (query.creator !== undefined) (where.push('creator = ?'), params.push(query.creator));
    if (query.queue !== undefined) (where.push('queue = ?'), params.push(query.queue));
    if (query.afterId !== undefined) (where.push('id > ?'), params.push(query.afterId));
    const reader = query.visibleTo;
    const limit = query.limit ?? DEFAULT_PAGE;
    const states = [...new Set(query.states ?? [])];
    const columns = query.summary === true ? SUMMARY_COLUMNS : '*';
    // What an agent may read (authority.ts mayRead): what it created, what it holds or held,
    // what it may claim now. One keyset page from each of those, each from its own index,
    // merged: as one OR the planner read the state's whole range and checked each row, so
    // an agent with no completed task asking for the completed ones read all of them (80 ms
    // at 181,000). Now a page costs what the agent's own tasks cost (migration 9).
    // authority.ts mayRead as SQL, each term with the index that reads it: the one copy both ways use.
    const visibleTerms = (agent: string): Array<[index: string, cond: string, args: unknown[]]> => [
      ['tasks_by_creator', "creator = ? AND creator_role = 'agent'", [agent]],
      ['tasks_by_assignee', 'assignee = ?', [agent]],
      ['tasks_by_state', "state = 'pending' AND (for_agent IS NULL OR for_agent = ?)", [agent]],
    ];
    const orPage = (agent: string, state: string | undefined): Task[] => {
      const terms = visibleTerms(agent);
      const all = [...(state === undefined ? where : ['state = ?', ...where]), `(${terms.map(([, cond]) => `(${cond})`).join(' OR ')})`];
      // In id order, stopping at a page: through the state's range, or with no state and no
      // other filter the table itself (NOT INDEXED: the planner would union the three terms'
      // indexes and sort them all). With an assignee or queue the planner picks its index.
      const onlyCursor = where.length === (query.afterId === undefined ? 0 : 1);
      const hint = state !== undefined ? 'INDEXED BY tasks_by_state' : onlyCursor ? 'NOT INDEXED' : '';
      const sql = `SELECT ${columns} FROM tasks ${hint} WHERE ${all.join(' AND ')} ORDER BY id LIMIT ?`;
      return prepared(sql).all(...(state === undefined ? params : [state, ...params]), ...terms.flatMap(([, , args]) => args), limit).map(toTask);
    };
    const branchPage = (agent: string, state: string | undefined): Task[] => {
      const own = state === undefined ? where : ['state = ?', ...where];
      const ownParams = state === undefined ? params : [state, ...params];
      // The claimable term only where it can match: with another state it would walk that state's range.
      const branches = visibleTerms(agent).filter(([index]) => index !== 'tasks_by_state' || state === undefined || state === 'pending');
      const byId = new Map<number, TaskRow>();
      for (const [index, cond, args] of branches) {
        const sql = `SELECT ${columns} FROM tasks INDEXED BY ${index} WHERE ${[...own, cond].join(' AND ')} ORDER BY id LIMIT ?`;
        for (const row of prepared(sql).all(...ownParams, ...args, limit)) byId.set(row.id, row);
      }
      return [...byId.values()].sort((a, b) => a.id - b.id).slice(0, limit).map(toTask);
    };
    // The branches cost what the agent's own tasks cost; the one OR, what the state's range
    // costs until a page is found. Capped counts tell which is small; when neither is, the OR.
    const visiblePage = (agent: string, state: string | undefined): Task[] => {
      const bigState = state === undefined || smallState.get(state, 0, SMALL_STATE)! >= SMALL_STATE;
      return bigState && ownTasks.get(agent, SMALL_STATE, agent, SMALL_STATE)! < SMALL_STATE ? branchPage(agent, state) : orPage(agent, state);
    };
    const page = (state: string | undefined): Task[] => {
      if (reader !== undefined && reader.role === 'agent') return visiblePage(reader.id, state);
      const all = state === undefined ? where : ['state = ?', ...where];
      // With a state and an assignee or queue, SQLite picks one index and filters by the
      // other column: the assignee/queue index is the right one unless the state has few
      // tasks (e.g. failed among a million completed), which a capped count tells cheaply.
      const byState =
        state !== undefined &&
        where.length > (query.afterId === undefined ? 0 : 1) &&
        smallState.get(state, query.afterId ?? 0, SMALL_STATE)! < SMALL_STATE;
      const sql = `SELECT ${columns} FROM tasks${byState ? ' INDEXED BY tasks_by_state' : ''} ${all.length > 0 ? `WHERE ${all.join(' AND ')}` : ''} ORDER BY id LIMIT ?`;
      return prepared(sql).all(...(state === undefined ? params : [state, ...params]), limit).map(toTask);
    };
    if (states.length === 0) return page(undefined);
    if (states.length === 1) return page(states[0]);
    // One keyset page per state, each read in id order from its own index range, merged:
    // `state IN (...) ORDER BY id` would sort every matching row first.
    return states
      .flatMap((state) => page(state))
      .sort((a, b) => a.id - b.id)
      .slice(0, limit);
  });

  return {
    getTask: (id, withEvents, reader) => oneTask.deferred(id, withEvents, reader),
    // One read transaction: an agent's page is several statements (its branches, a page per
    // state), and a task moving between two of them (claimed away from the pending branch into
    // the held one) must be seen on one side or the other, never on neither.
    findTasks: (query) => listing.deferred(query),
    readEvents(query) {
      const after = query.afterId ?? 0;
      const limit = query.limit ?? 1000;
      const rows = query.taskId === undefined ? eventsAfter.all(after, limit) : oneTaskEvents.deferred(query.taskId, after, limit);
      return rows.map(toEvent);
    },
    lastEventId: () => lastEvent.get()?.id ?? 0,
    stats() {
      return countByState.deferred();
    },
  };
}
