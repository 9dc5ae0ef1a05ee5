/**
 * Daemon heartbeats and the leases they keep, on PostgreSQL. A daemon writes once per beat:
 * its own row and the leases of the tasks its busy worker slots hold (slot ids are
 * `daemonId/n`, workers/holder.ts), in one statement. A daemon whose process is gone (same
 * host, pid not alive) is recognised at once; a daemon on another machine by its silence
 * (reclaimSilent). Either way its tasks are reclaimed without waiting for their leases.
 *
 * Concurrency, where SQLite had one writer at a time:
 * - the heartbeat's UPDATE locks the task rows it renews, and only renews a row that is
 *   still claimed by the slot once it holds it (READ COMMITTED re-reads a row updated
 *   meanwhile), so a beat racing a reclaim either renews first or finds the task gone;
 * - reclaims take the gone daemon's row and then its tasks with `FOR UPDATE SKIP LOCKED`:
 *   two daemons reclaiming the same dead one split nothing twice, the second skips the
 *   row the first holds. A task skipped because another transaction holds it (an operator's
 *   cancel, say) is not lost: its lease is no longer renewed, so the sweep returns it.
 */
import { type DaemonTableRow as Row, deadDaemonReason, silentDaemonReason, toDaemon } from '../daemon-rows.js';
import type { DaemonRow } from '../run-store.js';
import type { TaskRow } from '../task-rows.js';
import type { TaskEvent } from '../types.js';
import type { Query } from './connection.js';
import { reclaimTask } from './moves.js';

type LockedTask = TaskRow & Record<string, unknown>;
type DaemonRecord = Row & Record<string, unknown>;

/** The LIKE pattern of a daemon's slot ids (`${id}/…`), its own `%`, `_` and `\` taken literally. */
const slotsOf = (daemonId: string): string => `${daemonId.replace(/[\\%_]/g, '\\$&')}/%`;

/** Reclaims what the daemon's slots hold and forgets the daemon; pushes the task ids. */
async function reclaimAll(q: Query, daemon: Row, reason: string, now: number, events: TaskEvent[], reclaimed: number[]): Promise<void> {
  // LIKE, not SQLite's range `>= 'id/' AND < 'id0'`: text order here is the database's
  // collation, which need not put '0' right after '/'.
  const held = await q<LockedTask>(
    `SELECT * FROM tasks WHERE worker_id LIKE $1 ESCAPE '\\' AND state IN ('claimed', 'in_progress') ORDER BY id FOR UPDATE SKIP LOCKED`,
    [slotsOf(daemon.id)],
  );
  for (const row of held) {
    await reclaimTask(q, row, reason, now, events);
    reclaimed.push(row.id);
  }
  await q('DELETE FROM daemons WHERE id = $1', [daemon.id]);
}

export const pgDaemons = {
  async register(q: Query, row: Omit<DaemonRow, 'startedAt' | 'heartbeatAt'>, now: number): Promise<void> {
    // SQLite's INSERT OR REPLACE: a daemon registering again under its id starts afresh.
    await q(
      `INSERT INTO daemons (id, host, pid, agent, threads, started_at, heartbeat_at) VALUES ($1, $2, $3, $4, $5, $6, $6)
       ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, agent = excluded.agent, threads = excluded.threads,
         started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`,
      [row.id, row.host, row.pid, row.agent, row.threads, now],
    );
  },

  /**
   * One statement: the daemon's row, and the leases its busy slots hold, renewed from `now`.
   * `registered` is false when the daemon's row is gone (its peers reclaimed it as silent);
   * `schemaOid` is the schema's identity now, which the caller holds to the one it opened.
   */
  async heartbeat(q: Query, id: string, busySlots: string[], now: number): Promise<{ registered: boolean; schemaOid: number | null }> {
    const [row] = await q<{ registered: boolean; schema_oid: number | null }>(
      `WITH beat AS (UPDATE daemons SET heartbeat_at = $1 WHERE id = $2 RETURNING 1),
       leases AS (UPDATE tasks SET lease_expires_at = $1 + lease_ms, stale_since = NULL
         WHERE worker_id = ANY($3::text[]) AND state IN ('claimed', 'in_progress'))
       SELECT EXISTS (SELECT 1 FROM beat) AS registered, (SELECT oid::bigint FROM pg_namespace WHERE nspname = current_schema()) AS schema_oid`,
      [now, id, busySlots],
    );
    return { registered: row?.registered === true, schemaOid: row?.schema_oid ?? null };
  },

  async unregister(q: Query, id: string): Promise<void> {
    await q('DELETE FROM daemons WHERE id = $1', [id]);
  },

  /** Reclaims the tasks of daemons on `host` (but `selfId`) whose process is gone; returns the task ids. */
  async reclaimDead(q: Query, host: string, selfId: string, isAlive: (pid: number) => boolean, now: number, events: TaskEvent[]): Promise<number[]> {
    const reclaimed: number[] = [];
    // Read first, unlocked: a live daemon's row is not locked (its beat would wait on us).
    const onHost = await q<DaemonRecord>('SELECT * FROM daemons WHERE host = $1 AND id <> $2 ORDER BY id', [host, selfId]);
    for (const seen of onHost) {
      if (isAlive(seen.pid)) continue;
      // Gone meanwhile, or another daemon is reclaiming it now: nothing for us to do.
      const [daemon] = await q<DaemonRecord>('SELECT * FROM daemons WHERE id = $1 FOR UPDATE SKIP LOCKED', [seen.id]);
      if (daemon === undefined) continue;
      await reclaimAll(q, daemon, deadDaemonReason(daemon), now, events, reclaimed);
    }
    return reclaimed;
  },

  /**
   * Reclaims the tasks held by every daemon but `selfId` whose last heartbeat is older than
   * `now - silentMs`, on any host, and removes those daemons' rows; returns the task ids.
   * A daemon beating right now holds its row: it is skipped, and is not silent anyway.
   */
  async reclaimSilent(q: Query, selfId: string, silentMs: number, now: number, events: TaskEvent[]): Promise<number[]> {
    const reclaimed: number[] = [];
    const silent = await q<DaemonRecord>(
      'SELECT * FROM daemons WHERE id <> $1 AND heartbeat_at < $2::bigint - $3::bigint ORDER BY id FOR UPDATE SKIP LOCKED',
      [selfId, now, silentMs],
    );
    for (const daemon of silent) await reclaimAll(q, daemon, silentDaemonReason(daemon, now), now, events, reclaimed);
    return reclaimed;
  },

  /** Lets the leases held by one worker slot run out now, so the sweep returns its task. */
  async expireSlot(q: Query, slotId: string, now: number): Promise<void> {
    await q(`UPDATE tasks SET lease_expires_at = $1 WHERE worker_id = $2 AND state IN ('claimed', 'in_progress')`, [now - 1, slotId]);
  },

  async list(q: Query): Promise<DaemonRow[]> {
    return (await q<DaemonRecord>('SELECT * FROM daemons ORDER BY id')).map(toDaemon);
  },
};
