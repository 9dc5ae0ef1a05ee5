/**
 * Change notifications on PostgreSQL: one LISTEN connection per store, kept while anyone
 * subscribes (and a second after). Two kinds of wait, because a commit that sends NOTIFY
 * takes a server-wide lock to queue it, which serializes commits and defeats group commit
 * (bench:pg: the bare floor with NOTIFY on each commit drains at 0.59x the floor):
 * - `work` (claimers): woken by the NOTIFY a writer sends only when its commit may have made
 *   a task claimable (claims.ts `workWakeOf`), no payload; a burst wakes them once. A create
 *   notifies its queue's bucket's channel (`taskloop_<schema>$w<bucket>`) and the channel of
 *   claimers of any queue (`…$wany`, which the followers hear too); a move back to pending and
 *   a freed dependent notify `taskloop_<schema>`, which every claimer hears. So a claimer that
 *   names its queue is not woken by creates in other queues.
 * - `all` (followers of the log, waiters for an outcome): woken by those NOTIFYs and by a
 *   poll of the event sequence every `followMs` while they are subscribed, so a claim or a
 *   step is seen within it without costing every writer a NOTIFY.
 * - `controls` (runs): their own channel, sent with each stop, pause or resume.
 *
 * Beside them the slow poll (every `pollMs`), for what LISTEN cannot promise: the connection
 * drops (it reconnects, and the poll covers the gap), and a pooler in transaction mode
 * (`wakeups=poll`, PgBouncer), where it is all there is. And a horizon that waits for writers
 * to end (reads.ts) wakes `all` again soon after, so an event behind a transaction that
 * rolled back is still read.
 */
import type pg from 'pg';
import { type WorkWake, wakeBucket, wakeBuckets } from '../claims.js';
import type { PgConnection } from './connection.js';
import type { Horizon } from './reads.js';

export type PgWatchTopic = 'all' | 'work' | 'controls';

export interface PgWatcher {
  /** `queue`: a `work` subscriber's queue (without one it hears the creates of every queue). */
  subscribe(onChange: () => void, topic?: PgWatchTopic, queue?: string): () => void;
  close(): void;
}

/** The SQL a write runs (inside its transaction) when it changed a control: wakes the runs' control watchers. */
export const NOTIFY_CONTROLS = "SELECT pg_catalog.pg_notify(pg_catalog.concat('taskloop_', pg_catalog.current_schema(), '_controls'), '')";

/** The `work` key of claimers of any queue (channel `…$wany`); the others' key is their queue's bucket. */
const ANY = 'any';
/**
 * Between the store's channel and a work key. A schema name cannot hold a `$` (connection.ts
 * SCHEMA), so no schema's own channel is another's work channel (`<s>_wany`'s would be `<s>`'s
 * `_wany`); in an unquoted identifier it is a plain character, and the `w` after it keeps a
 * bucket that starts with a digit from reading as a parameter (`$1f`).
 */
const WORK_MARK = '$w';

/**
 * The suffixes (after `taskloop_<schema>`) of the channels a wake of claimers notifies: the
 * one every claimer hears, or the buckets of the queues and the channel of claimers of any
 * queue (which the followers of the log hear too).
 */
export function workChannels(work: WorkWake | undefined): string[] {
  if (work === undefined) return [];
  if (work.all) return [''];
  return [...[...wakeBuckets(work.queues)].map((b) => `${WORK_MARK}${b}`), `${WORK_MARK}${ANY}`];
}

export interface PgWatchOptions {
  /** The slow poll's interval: every change is seen within it even without LISTEN. @defaultValue 1000 with LISTEN, 50 without */
  pollMs?: number;
  /** How soon a follower (`all`) sees a commit that sent no NOTIFY. @defaultValue 100, at most pollMs */
  followMs?: number;
  log?: (line: string) => void;
}

const LINGER_MS = 1000;

/** Subscribers of one topic, each called once per tick however many wake-ups came. */
function fanout(): { set: Set<() => void>; fire: () => void } {
  const set = new Set<() => void>();
  let queued = false;
  return {
    set,
    fire() {
      if (queued) return;
      queued = true;
      setImmediate(() => {
        queued = false;
        for (const s of [...set]) s();
      });
    },
  };
}

export function createPgWatcher(conn: PgConnection, horizon: Horizon, opts: PgWatchOptions = {}): PgWatcher {
  const listen = conn.location.wakeups === 'listen';
  const pollMs = opts.pollMs ?? (listen ? 1000 : 50);
  const followMs = Math.min(opts.followMs ?? 100, pollMs);
  const topics: Record<PgWatchTopic, ReturnType<typeof fanout>> = { all: fanout(), work: fanout(), controls: fanout() };
  // `work` subscribers by their queue's bucket or ANY (topics.work stays empty); each key's
  // channel is LISTENed to once it has had a subscriber.
  const workers = new Map<string, ReturnType<typeof fanout>>();
  const workCount = () => [...workers.values()].reduce((n, f) => n + f.set.size, 0);
  const size = () => topics.all.set.size + workCount() + topics.controls.set.size;
  const controlsChannel = `${conn.channel}_controls`;
  const workPrefix = `${conn.channel}${WORK_MARK}`;
  const keyOf = (channel: string): string | undefined => (channel.startsWith(workPrefix) ? channel.slice(workPrefix.length) : undefined);
  /** Wakes the claimers of `key` (every claimer without one) and the followers. */
  const fireWork = (key?: string) => {
    for (const [k, f] of workers) if (key === undefined || k === key) f.fire();
    topics.all.fire();
  };
  const listenTo = (key: string) => `LISTEN ${workPrefix}${key}`;
  const listened = new Set<string>(); // the keys the listener up now LISTENs to
  /**
   * LISTENs to the keys the listener does not yet, then wakes their claimers once: a create
   * that committed after their first look and before the LISTEN landed was heard by no one.
   */
  const listenNew = (): void => {
    const c = client;
    const fresh = [...workers.keys()].filter((k) => !listened.has(k));
    if (c === undefined || fresh.length === 0) return;
    for (const k of fresh) listened.add(k);
    c.query(fresh.map(listenTo).join('; ')).then(
      () => {
        for (const k of fresh) workers.get(k)?.fire();
      },
      () => {
        // Not listening after all: tried again with the next new key or the next connection.
        if (client === c) for (const k of fresh) listened.delete(k);
      },
    );
  };
  let client: pg.Client | undefined;
  let connecting: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running = false; // the poll runs (someone subscribed, or did within LINGER_MS)
  let linger: NodeJS.Timeout | undefined;
  let followSeq: number | undefined; // the sequence as the followers last saw it
  let slowSeq: number | undefined; // … and as the slow poll did
  let slowAt = 0;
  let closed = false;
  // While the horizon waits for writers to end, look again soon: 5 ms, doubling to 500 ms.
  let settle: NodeJS.Timeout | undefined;
  let settleDelay = 5;
  horizon.onUnsettled = () => {
    if (settle !== undefined || closed || topics.all.set.size === 0) return;
    settle = setTimeout(() => {
      settle = undefined;
      settleDelay = horizon.unsettled ? Math.min(500, settleDelay * 2) : 5;
      topics.all.fire();
    }, settleDelay);
    settle.unref();
  };

  let reopen: NodeJS.Timeout | undefined;
  /** A new LISTEN connection shortly after one dropped, not at the next tick (pollMs away). */
  function reopenSoon(): void {
    if (reopen !== undefined || closed) return;
    reopen = setTimeout(() => {
      reopen = undefined;
      if (running) openListener();
    }, 100);
    reopen.unref();
  }

  function openListener(): void {
    if (!listen || client !== undefined || connecting !== undefined || closed) return;
    connecting = (async () => {
      const c = await conn.dedicated();
      c.on('notification', (n) => {
        if (n.channel !== controlsChannel) return fireWork(keyOf(n.channel));
        topics.controls.fire();
        topics.all.fire(); // a control change is a commit too
      });
      let dead = false;
      c.on('error', () => {
        // Dropped: the poll covers the gap, and a new connection is opened in a moment.
        dead = true;
        if (client === c) {
          client = undefined;
          reopenSoon();
        }
        c.end().catch(() => undefined);
      });
      try {
        await c.connect();
        const keys = [...workers.keys()];
        // `…$wany` always: every create notifies it, so the followers hear creates at once too.
        await c.query([`LISTEN ${conn.channel}`, `LISTEN ${controlsChannel}`, listenTo(ANY), ...keys.filter((k) => k !== ANY).map(listenTo)].join('; '));
        listened.clear();
        for (const k of [ANY, ...keys]) listened.add(k);
      } catch (err) {
        opts.log?.(`${conn.location.display}: LISTEN failed (${String((err as Error).message ?? err)}); polling every ${pollMs} ms`);
        c.end().catch(() => undefined);
        return;
      }
      // Kept while the watcher runs (its poll), subscribers or not: a caller that subscribes
      // anew for each wait (a tail, a claimer) has none at some instants, and closing then
      // left it to the poll's second (pickup p50 was 988 ms with one consumer).
      if (closed || !running || dead) {
        c.end().catch(() => undefined);
        // Dropped while it connected: its 'error' found no client to clear, so nothing asked
        // for another yet; without this the next one waited for the slow poll (pollMs).
        if (dead) reopenSoon();
        return;
      }
      client = c;
      listenNew(); // keys subscribed while it connected (woken once their LISTEN lands)
      fireWork(); // anything committed while the listener was not there yet
      topics.controls.fire();
    })()
      .catch(() => undefined)
      .finally(() => (connecting = undefined));
  }

  async function tick(): Promise<void> {
    try {
      const [row] = await conn.query<{ v: number }>('SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS v FROM task_events_id_seq');
      const v = row?.v ?? 0;
      // The first look wakes too: a commit between a subscription and this look (one that sent
      // no NOTIFY, or any in poll-only mode) would otherwise be taken as where things stood.
      if (v !== followSeq) topics.all.fire();
      followSeq = v;
      // The slow poll: claimers too, and without LISTEN (or while it reconnects) everyone,
      // controls included (every control change writes an event, so it moves the sequence).
      const slow = client === undefined || Date.now() - slowAt >= pollMs;
      if (slow) {
        if (v !== slowSeq) {
          for (const f of workers.values()) f.fire();
          if (client === undefined) topics.controls.fire();
        }
        slowSeq = v;
        slowAt = Date.now();
      }
    } catch {
      // The server is away: the next tick tries again; writes meet the fault themselves.
    }
    openListener();
  }

  // One tick at a time, every followMs while followers wait, else every pollMs.
  let ticking = false;
  function schedule(): void {
    if (!running || ticking) return;
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(
      () => {
        timer = undefined;
        ticking = true;
        void tick().finally(() => {
          ticking = false;
          schedule();
        });
      },
      topics.all.set.size > 0 ? followMs : pollMs,
    );
    timer.unref();
  }

  function start(): void {
    if (linger !== undefined) {
      clearTimeout(linger);
      linger = undefined;
    }
    if (!running) {
      running = true;
      ticking = true;
      void tick().finally(() => {
        ticking = false;
        schedule();
      });
    } else if (topics.all.set.size === 1) {
      schedule(); // a follower arriving while the slow poll sleeps: look at followMs from now
    }
  }

  function stop(): void {
    running = false;
    if (reopen !== undefined) clearTimeout(reopen);
    reopen = undefined;
    if (settle !== undefined) clearTimeout(settle);
    settle = undefined;
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    followSeq = slowSeq = undefined;
    const c = client;
    client = undefined;
    if (c !== undefined) c.end().catch(() => undefined);
  }

  return {
    subscribe(onChange, topic = 'all', queue) {
      let set = topics[topic].set;
      if (topic === 'work') {
        const key = queue === undefined ? ANY : wakeBucket(queue);
        let f = workers.get(key);
        if (f === undefined) {
          workers.set(key, (f = fanout()));
          // A listener already up LISTENs to the new channel (one that connects later LISTENs
          // to every key's); a wake before its LISTEN lands is the poll's, as at the start.
          listenNew();
        }
        set = f.set;
      }
      set.add(onChange);
      start();
      return () => {
        set.delete(onChange);
        if (size() > 0 || linger !== undefined) return;
        linger = setTimeout(() => {
          linger = undefined;
          if (size() === 0) stop();
        }, LINGER_MS);
        linger.unref();
      };
    },
    close() {
      closed = true;
      if (linger !== undefined) clearTimeout(linger);
      linger = undefined;
      for (const t of Object.values(topics)) t.set.clear();
      workers.clear();
      stop();
    },
  };
}
