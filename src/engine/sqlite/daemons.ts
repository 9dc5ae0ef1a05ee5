/**
 * Daemon heartbeats and the leases they keep. A daemon writes once per beat: its own row
 * and the leases of the tasks its busy worker slots hold (slot ids are `daemonId/n`).
 * A daemon whose process is gone (same host, pid not alive) is recognised at once and its
 * tasks reclaimed without waiting for their leases to run out.
 */
import type { DaemonRow } from '../run-store.js';
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { type ApplyMove, reclaim } from './moves.js';
import type { TaskRow } from './rows.js';

interface Row {
  id: string;
  host: string;
  pid: number;
  agent: string;
  threads: number;
  started_at: number;
  heartbeat_at: number;
}

export interface Daemons {
  register(row: Omit<DaemonRow, 'startedAt' | 'heartbeatAt'>, now: number): void;
  heartbeat(id: string, busySlots: string[], now: number): void;
  unregister(id: string): void;
  reclaimDead(host: string, selfId: string, isAlive: (pid: number) => boolean, now: number, events: TaskEvent[]): number[];
  expireSlot(slotId: string, now: number): void;
  list(): DaemonRow[];
}

const toDaemon = (r: Row): DaemonRow => ({
  id: r.id,
  host: r.host,
  pid: r.pid,
  agent: r.agent,
  threads: r.threads,
  startedAt: r.started_at,
  heartbeatAt: r.heartbeat_at,
});

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
  const heldBy = db.prepare<[string, string], TaskRow>(
    `SELECT * FROM tasks WHERE worker_id >= ? AND worker_id < ? AND state IN ('claimed', 'in_progress') ORDER BY id`,
  );
  const expire = db.prepare(
    `UPDATE tasks SET lease_expires_at = ? WHERE worker_id = ? AND state IN ('claimed', 'in_progress')`,
  );
  const all = db.prepare<[], Row>('SELECT * FROM daemons ORDER BY id');

  return {
    register(row, now) {
      insert.run(row.id, row.host, row.pid, row.agent, row.threads, now, now);
    },
    heartbeat(id, busySlots, now) {
      beat.run(now, id);
      for (const slot of busySlots) extend.run({ slot, now });
    },
    unregister(id) {
      remove.run(id);
    },
    reclaimDead(host, selfId, isAlive, now, events) {
      const reclaimed: number[] = [];
      for (const daemon of onHost.all(host, selfId)) {
        if (isAlive(daemon.pid)) continue;
        // Slot ids are `${daemon.id}/${n}`: '0' sorts right after '/', closing the range.
        for (const row of heldBy.all(`${daemon.id}/`, `${daemon.id}0`)) {
          reclaim(apply, row, `daemon ${daemon.id} (pid ${daemon.pid}) is gone`, now, events);
          reclaimed.push(row.id);
        }
        remove.run(daemon.id);
      }
      return reclaimed;
    },
    expireSlot(slotId, now) {
      expire.run(now - 1, slotId);
    },
    list: () => all.all().map(toDaemon),
  };
}
