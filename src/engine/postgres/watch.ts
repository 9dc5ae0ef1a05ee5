/**
 * Change notifications on PostgreSQL: one LISTEN connection per store, opened with the first
 * subscriber and closed a second after the last one leaves. Writers send `NOTIFY` with their
 * commit (no payload: subscribers read by cursor). A burst of commits wakes subscribers once:
 * notifications that arrive together are delivered in one call on the next tick.
 *
 * Beside it a poll, for what LISTEN cannot promise: the connection drops (it reconnects, and
 * the poll covers the gap), and a pooler in transaction mode (`wakeups=poll`, PgBouncer).
 * And a horizon that waits for writers to end (reads.ts) wakes subscribers again soon after,
 * so an event behind a transaction that rolled back (and sent no NOTIFY) is still read.
 */
import type pg from 'pg';
import type { PgConnection } from './connection.js';
import type { Horizon } from './reads.js';

export interface PgWatcher {
  /** `controls`: only after a stop, pause or resume is committed (channel `<channel>_controls`). */
  subscribe(onChange: () => void, topic?: 'all' | 'controls'): () => void;
  close(): void;
}

/** The SQL a write runs (inside its transaction) when it changed a control: wakes the runs' control watchers. */
export const NOTIFY_CONTROLS = "SELECT pg_notify('taskloop_' || current_schema() || '_controls', '')";

export interface PgWatchOptions {
  /** The poll's interval: every change is seen within it even without LISTEN. @defaultValue 1000 with LISTEN, 50 without */
  pollMs?: number;
  log?: (line: string) => void;
}

const LINGER_MS = 1000;

export function createPgWatcher(conn: PgConnection, horizon: Horizon, opts: PgWatchOptions = {}): PgWatcher {
  const listen = conn.location.wakeups === 'listen';
  const pollMs = opts.pollMs ?? (listen ? 1000 : 50);
  const subscribers = new Set<() => void>();
  // Runs watch their controls only: a commit of someone else's step must not make every run
  // of every thread read the controls again (a round trip each, on every commit).
  const controlSubscribers = new Set<() => void>();
  const controlsChannel = `${conn.channel}_controls`;
  let controlsQueued = false;
  const fireControls = (): void => {
    if (controlsQueued) return;
    controlsQueued = true;
    setImmediate(() => {
      controlsQueued = false;
      for (const s of [...controlSubscribers]) s();
    });
  };
  const size = () => subscribers.size + controlSubscribers.size;
  let client: pg.Client | undefined;
  let connecting: Promise<void> | undefined;
  let poll: NodeJS.Timeout | undefined;
  let linger: NodeJS.Timeout | undefined;
  let queued = false;
  let lastSeq: number | undefined;
  let closed = false;
  // While the horizon waits for writers to end, look again soon: 5 ms, doubling to 500 ms.
  let settle: NodeJS.Timeout | undefined;
  let settleDelay = 5;
  horizon.onUnsettled = () => {
    if (settle !== undefined || closed || subscribers.size === 0) return;
    settle = setTimeout(() => {
      settle = undefined;
      settleDelay = horizon.unsettled ? Math.min(500, settleDelay * 2) : 5;
      fire();
    }, settleDelay);
    settle.unref();
  };

  const fire = (): void => {
    if (queued) return;
    queued = true;
    setImmediate(() => {
      queued = false;
      for (const s of [...subscribers]) s();
    });
  };

  function openListener(): void {
    if (!listen || client !== undefined || connecting !== undefined || closed) return;
    connecting = (async () => {
      const c = await conn.dedicated();
      c.on('notification', (n) => (n.channel === controlsChannel ? fireControls() : fire()));
      c.on('error', () => {
        // Dropped: the poll covers the gap; a new connection is opened at the next poll.
        if (client === c) client = undefined;
        c.end().catch(() => undefined);
      });
      try {
        await c.connect();
        await c.query(`LISTEN ${conn.channel}; LISTEN ${controlsChannel}`);
      } catch (err) {
        opts.log?.(`${conn.location.display}: LISTEN failed (${String((err as Error).message ?? err)}); polling every ${pollMs} ms`);
        c.end().catch(() => undefined);
        return;
      }
      // Kept while the watcher runs (its poll), subscribers or not: a caller that subscribes
      // anew for each wait (a tail, a claimer) has none at some instants, and closing then
      // left it to the poll's second (pickup p50 was 988 ms with one consumer).
      if (closed || poll === undefined) return void c.end().catch(() => undefined);
      client = c;
      fire(); // anything committed while the listener was not there yet
      fireControls();
    })()
      .catch(() => undefined)
      .finally(() => (connecting = undefined));
  }

  async function tick(): Promise<void> {
    try {
      const [row] = await conn.query<{ v: number }>('SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS v FROM task_events_id_seq');
      const v = row?.v ?? 0;
      // Without LISTEN (or while it reconnects) the poll is all there is: every control
      // change writes an event, so a moved sequence wakes the control watchers too.
      if (lastSeq !== undefined && v !== lastSeq) {
        fire();
        if (client === undefined) fireControls();
      }
      lastSeq = v;
    } catch {
      // The server is away: the next tick tries again; writes meet the fault themselves.
    }
    openListener();
  }

  function start(): void {
    if (linger !== undefined) {
      clearTimeout(linger);
      linger = undefined;
    }
    if (poll !== undefined) return;
    poll = setInterval(() => void tick(), pollMs);
    poll.unref();
    void tick();
  }

  function stop(): void {
    if (settle !== undefined) clearTimeout(settle);
    settle = undefined;
    if (poll !== undefined) clearInterval(poll);
    poll = undefined;
    const c = client;
    client = undefined;
    if (c !== undefined) c.end().catch(() => undefined);
  }

  return {
    subscribe(onChange, topic = 'all') {
      const set = topic === 'controls' ? controlSubscribers : subscribers;
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
      subscribers.clear();
      controlSubscribers.clear();
      stop();
    },
  };
}
