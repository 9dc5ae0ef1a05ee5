/**
 * Daemon heartbeats and the leases they keep. A daemon writes once per beat: its own row
 * and the leases of the tasks its busy worker slots hold (slot ids are `daemonId/n`).
 * A daemon whose process is gone (same host, pid not alive) is recognised at once and its
 * tasks reclaimed without waiting for their leases to run out; a daemon on another machine
 * is recognised by its silence (reclaimSilent).
 */
import { type DaemonTableRow as Row, deadDaemonReason, silentDaemonReason, toDaemon } from '../daemon-rows.js';
import type { DaemonRow } from '../run-store.js';
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { type ApplyMove, reclaim } from './moves.js';
import type { TaskRow } from './rows.js';

export interface Daemons {
  register(row: Omit<DaemonRow, 'startedAt' | 'heartbeatAt'>, now: number): void;
  /** False when the daemon's row is gone (its peers reclaimed it). */
  heartbeat(id: string, busySlots: string[], now: number): boolean;
  unregister(id: string): void;
  reclaimDead(host: string, selfId: string, isAlive: (pid: number) => boolean, now: number, events: TaskEvent[]): number[];
  /**
   * Reclaims the tasks held by every daemon but `selfId` whose last heartbeat is older than
   * `silentMs`, on any host, and removes those daemons' rows; returns the task ids.
   */
  reclaimSilent(selfId: string, silentMs: number, now: number, events: TaskEvent[]): number[];
  expireSlot(slotId: string, now: number): void;
  list(): DaemonRow[];
}

export function prepareDaemons(db: Db, apply: ApplyMove): Daemons {
  const insert = db.prepare(
    `INSERT OR REPLACE INTO daemons (id, host, pid, agent, threads, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
  );
  const beat = db.prepare('UPDATE daemons SET heartbeat_at = ? WHERE id = ?');
  const extend = db.prepare(
    `UPDATE tasks SET lease_expires_at = @now + lease_ms, stale_since = NULL
     WHERE worker_id = @slot AND state IN ('claimed', 'in_progress')`,
  );
  const remove = db.prepare('DELETE FROM daemons WHERE id = ?');
  const onHost = db.prepare<[string, string], Row>('SELECT * FROM daemons WHERE host = ? AND id != ?');
  const silent = db.prepare<[string, number], Row>('SELECT * FROM daemons WHERE id != ? AND heartbeat_at < ? ORDER BY id');
  const heldBy = db.prepare<[string, string], TaskRow>(
    `SELECT * FROM tasks WHERE worker_id >= ? AND worker_id < ? AND state IN ('claimed', 'in_progress') ORDER BY id`,
  );
  const expire = db.prepare(
    `UPDATE tasks SET lease_expires_at = ? WHERE worker_id = ? AND state IN ('claimed', 'in_progress')`,
  );
  const all = db.prepare<[], Row>('SELECT * FROM daemons ORDER BY id');

  /** Reclaims what the daemon's slots hold and forgets the daemon; pushes the task ids. */
  const reclaimAll = (daemon: Row, reason: string, now: number, events: TaskEvent[], reclaimed: number[]) => {
    // Slot ids are `${daemon.id}/${n}`: '0' sorts right after '/', closing the range.
    for (const row of heldBy.all(`${daemon.id}/`, `${daemon.id}0`)) {
      reclaim(apply, row, reason, now, events);
      reclaimed.push(row.id);
    }
    remove.run(daemon.id);
  };

  return {
    register(row, now) {
      insert.run(row.id, row.host, row.pid, row.agent, row.threads, now, now);
    },
    heartbeat(id, busySlots, now) {
      if (beat.run(now, id).changes === 0) return false;
      for (const slot of busySlots) extend.run({ slot, now });
      return true;
    },
    unregister(id) {
      remove.run(id);
    },
    reclaimDead(host, selfId, isAlive, now, events) {
      const reclaimed: number[] = [];
      for (const daemon of onHost.all(host, selfId)) {
        if (isAlive(daemon.pid)) continue;
        reclaimAll(daemon, deadDaemonReason(daemon), now, events, reclaimed);
      }
      return reclaimed;
    },
    reclaimSilent(selfId, silentMs, now, events) {
      const reclaimed: number[] = [];
      for (const daemon of silent.all(selfId, now - silentMs)) reclaimAll(daemon, silentDaemonReason(daemon, now), now, events, reclaimed);
      return reclaimed;
    },
    expireSlot(slotId, now) {
      expire.run(now - 1, slotId);
    },
    list: () => all.all().map(toDaemon),
  };
}
