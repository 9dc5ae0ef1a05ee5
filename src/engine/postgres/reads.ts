/**
 * Read queries on PostgreSQL, and the event log's horizon: the tail that misses nothing.
 *
 * PostgreSQL hands out event ids before commit: a writer can take id 7, another id 8 and
 * commit first, and a reader that saw 8 and moved its cursor past 7 would never see 7. So a
 * cursor read returns only events up to the *horizon*: an id such that every transaction that
 * took an id at or below it has ended (committed or rolled back). It is found this way:
 * 1. read the sequence's last value H, then (next statement) the transactions holding the
 *    schema's event lock. Every transaction takes that lock before its first id
 *    (migrations.ts: next_event_id) and holds it to its end, so each holder of an id ≤ H has
 *    either ended already or is among those holders.
 * 2. H is settled once all of those holders have ended: at once when there were none, else
 *    when a later look finds none of them holding the lock any more.
 * The horizon trails the newest commit only while event writes of this schema are in flight,
 * by about one look. A long transaction that wrote an event holds it back until it ends:
 * events behind it arrive late, never out of order and never lost.
 */
import { mayRead } from '../authority.js';
import { EngineError } from '../errors.js';
import { type EventRow, type TaskRow, SUMMARY_COLUMNS, toEvent, toTask } from '../task-rows.js';
import type { EventWindow, ReadEventsQuery } from '../store.js';
import { TASK_STATES } from '../types.js';
import type { Actor, FindTasksQuery, Task, TaskEvent, TaskStats, TaskWithEvents } from '../types.js';
import type { PgConnection } from './connection.js';
import { EVENT_LOCK_CLASS, eventLockKey } from './event-lock.js';

const DEFAULT_PAGE = 100;

export interface Horizon {
  /** Events with ids up to this one are settled: none will ever commit below it. */
  settled(): Promise<number>;
  /** Whether ids were handed out above the horizon at the last look (a later look may settle them). */
  readonly unsettled: boolean;
  /** Called after a look that left the horizon unsettled (the watcher looks again soon). */
  onUnsettled?: () => void;
}

type Entry = { hi: number; holders: Set<string> };

export function createHorizon(conn: PgConnection): Horizon {
  const key = eventLockKey(conn.location.schema);
  const holdersSql =
    `SELECT virtualtransaction AS vx FROM pg_locks WHERE locktype = 'advisory' AND classid = ${EVENT_LOCK_CLASS} AND objid = ${key} ` +
    'AND objsubid = 2 AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())';
  const look = `SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS hi FROM task_events_id_seq; ${holdersSql}`;
  let safe = 0;
  // Each look's H above `safe` with the holders it saw still running, oldest first (H
  // rising). An H is settled once none of its holders holds the lock any more, whatever the
  // older ones still do (a holder of an id at or below an older H, still running, was among
  // this look's holders too). Keeping only the oldest lost a newer H when the older one
  // settled during a re-check, and followers waited for the next write.
  let waiting: Entry[] = [];
  /**
   * What a read of the holders, `now`, tells the entries `asked` (those that were waiting when
   * it was sent): a holder it does not see has ended (a virtual transaction id is never used
   * twice). Only those entries: one pushed by a concurrent call whose answer came first may
   * have read the sequence after this read ran on the server, and a writer that took its id
   * between the two is missing from `now` though it runs (events were lost that way).
   */
  const settle = (now: ReadonlySet<string>, asked: ReadonlySet<Entry>): void => {
    for (const w of waiting) {
      if (!asked.has(w)) continue;
      for (const vx of w.holders) if (!now.has(vx)) w.holders.delete(vx);
      if (w.holders.size === 0) safe = Math.max(safe, w.hi);
    }
    prune();
  };
  /**
   * Drops the settled entries, and an older entry whose holders include all of a newer one's:
   * it settles no sooner and covers less. So the list holds one H per set of running writers;
   * past 32 (33 staggered long writers) one next to the newest goes: the oldest, which may
   * wait for a writer the newer ones do not, is kept, and dropping an entry only delays.
   */
  const prune = (): void => {
    waiting = waiting.filter((w, i) => w.hi > safe && !waiting.slice(i + 1).some((n) => [...n.holders].every((vx) => w.holders.has(vx))));
    if (waiting.length > 32) waiting.splice(waiting.length - 2, 1);
  };
  const horizon: Horizon = {
    get unsettled() {
      return waiting.length > 0;
    },
    async settled() {
      const asked = new Set(waiting);
      const [seq, locks] = (await conn.multi(look)) as [Array<{ hi: number }>, Array<{ vx: string }>];
      const hi = seq[0]!.hi;
      const holders = new Set(locks.map((l) => l.vx));
      // The look's own two reads ran in order: no holder of an id up to H means H is settled.
      if (holders.size === 0) safe = Math.max(safe, hi);
      settle(holders, asked);
      if (hi > safe && (waiting.length === 0 || hi > waiting[waiting.length - 1]!.hi)) {
        waiting.push({ hi, holders });
        prune();
      }
      // Under a steady stream of writes there are always holders at a look: a caller that would
      // learn nothing new (a one-shot `events` command, a cursor to start from) looks at the
      // holders again for a few milliseconds, long enough for those transactions to end.
      for (let wait = 1; waiting.length > 0 && wait <= 16; wait *= 2) {
        await new Promise((r) => setTimeout(r, wait));
        const sent = new Set(waiting);
        settle(new Set((await conn.query<{ vx: string }>(holdersSql)).map((l) => l.vx)), sent);
      }
      if (waiting.length > 0) horizon.onUnsettled?.();
      return safe;
    },
  };
  return horizon;
}

export interface PgReads {
  getTask(id: number, withEvents: boolean | EventWindow, reader?: Actor): Promise<TaskWithEvents>;
  findTasks(query: FindTasksQuery): Promise<Task[]>;
  readEvents(query: ReadEventsQuery): Promise<TaskEvent[]>;
  stats(): Promise<TaskStats>;
}

type Row = TaskRow & Record<string, unknown>;
type Ev = EventRow & Record<string, unknown>;

/** findTasks as one statement: its text and parameters (exported for the plan test). */
export function listingSql(q: FindTasksQuery): { text: string; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (sql: string, ...values: unknown[]): void => {
    // Each `?` becomes the next numbered parameter.
    where.push(sql.replace(/\?/g, () => `$${params.push(values.shift())}`));
  };
  if (q.assignee !== undefined) add('assignee = ?', q.assignee);
  if (q.creator !== undefined) add('creator = ?', q.creator);
  if (q.queue !== undefined) add('queue = ?', q.queue);
  if (q.afterId !== undefined) add('id > ?', q.afterId);
  const others = [...where];
  const states = [...new Set(q.states ?? [])];
  if (states.length > 0) add('state = ANY(?::text[])', states);
  const reader = q.visibleTo;
  const columns = q.summary === true ? SUMMARY_COLUMNS : '*';
  const limit = `$${params.push(q.limit ?? DEFAULT_PAGE)}`;
  if (reader !== undefined && reader.role === 'agent') {
    // authority.ts mayRead: what it created, what it holds or held, what it may claim now.
    // As one OR the planner walked the primary key checking every row, so an agent with no
    // completed task listing the completed ones read them all (9.8 ms at 21,300 tasks,
    // growing with the table). Now a keyset page from each term's own index, merged, in one
    // statement (one snapshot): a page costs what the agent's own tasks cost (and the
    // pending range, for what it may claim), as on SQLite.
    // Each term's column is bounded by a range (x >= v AND x <= v, which under a deterministic
    // collation is x = v) and ordered by (column, id): PostgreSQL has no index hints, and
    // with `x = v ORDER BY id` it often walked the primary key instead (it assumes matches
    // are spread evenly by id; pending tasks sit at the end), reading 16,007 rows for one.
    const me = `$${params.push(reader.id)}`;
    const page = (cond: string, order: string, filters = where) =>
      `(SELECT ${columns} FROM tasks WHERE ${[...filters, cond].join(' AND ')} ORDER BY ${order} LIMIT ${limit})`;
    const pages = [
      page(`creator >= ${me} AND creator <= ${me} AND creator_role = 'agent'`, 'creator, creator_role, id'),
      page(`assignee >= ${me} AND assignee <= ${me}`, 'assignee, id'),
    ];
    // What it may claim: only where the listing can hold pending tasks.
    if (states.length === 0 || states.includes('pending')) {
      pages.push(page(`state >= 'pending' AND state <= 'pending' AND (for_agent IS NULL OR for_agent = ${me})`, 'state, id', others));
    }
    return { text: `SELECT DISTINCT ON (id) * FROM (${pages.join(' UNION ALL ')}) p ORDER BY id LIMIT ${limit}`, params };
  }
  return { text: `SELECT ${columns} FROM tasks ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ${limit}`, params };
}

export function createReads(conn: PgConnection, horizon: Horizon): PgReads {
  const { query } = conn;
  return {
    async getTask(id, withEvents, reader) {
      const [row] = await query<Row>('SELECT * FROM tasks WHERE id = $1', [id]);
      if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${id} does not exist`, { task_id: id });
      const task = toTask(row);
      if (withEvents === false || (reader !== undefined && !mayRead(reader, task))) return { ...task, events: [] };
      if (withEvents === true) {
        const all = await query<Ev>('SELECT * FROM task_events WHERE task_id = $1 ORDER BY id', [id]);
        return { ...task, events: all.map(toEvent) };
      }
      // A window stops at the settled horizon, as readEvents does: ids are handed out before
      // commit, and a task's events do not all commit in id order (its breaker events are
      // written under the breaker's lock, not the task's), so a page could show N + 1 before N
      // committed, and a reader paging back from its cursor never saw N.
      const upTo = await horizon.settled();
      const newest = await query<Ev>(
        'SELECT * FROM task_events WHERE task_id = $1 AND id < $2 AND id <= $3 ORDER BY id DESC LIMIT $4',
        [id, withEvents.beforeId ?? Number.MAX_SAFE_INTEGER, upTo, withEvents.last],
      );
      return { ...task, events: newest.reverse().map(toEvent) };
    },
    async findTasks(q) {
      const { text, params } = listingSql(q);
      return (await query<Row>(text, params)).map(toTask);
    },
    async readEvents(q) {
      const upTo = await horizon.settled();
      const after = q.afterId ?? 0;
      if (upTo <= after) return [];
      const limit = q.limit ?? 1000;
      const rows =
        q.taskId === undefined
          ? await query<Ev>('SELECT * FROM task_events WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3', [after, upTo, limit])
          : await query<Ev>('SELECT * FROM task_events WHERE task_id = $1 AND id > $2 AND id <= $3 ORDER BY id LIMIT $4', [q.taskId, after, upTo, limit]);
      return rows.map(toEvent);
    },
    async stats() {
      const rows = await query<{ state: string; n: number }>('SELECT state, count(*) AS n FROM tasks GROUP BY state');
      const byState = Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as TaskStats['byState'];
      for (const r of rows) if (r.state in byState) byState[r.state as keyof TaskStats['byState']] = r.n;
      // A cursor to start following from: the horizon, so nothing that commits later below it exists.
      return { byState, lastEventId: await horizon.settled() };
    },
  };
}
