/**
 * The daemons registry as both adapters store it: the row, its engine shape, and the
 * reasons a reclaim of a gone daemon's tasks gives (the same words on every store).
 */
import type { DaemonRow } from './run-store.js';

export interface DaemonTableRow {
  id: string;
  host: string;
  pid: number;
  agent: string;
  threads: number;
  started_at: number;
  heartbeat_at: number;
}

export const toDaemon = (r: DaemonTableRow): DaemonRow => ({
  id: r.id,
  host: r.host,
  pid: r.pid,
  agent: r.agent,
  threads: r.threads,
  startedAt: r.started_at,
  heartbeatAt: r.heartbeat_at,
});

/** A daemon on this host whose process is gone (reclaimDead). */
export const deadDaemonReason = (d: DaemonTableRow): string => `daemon ${d.id} (pid ${d.pid}) is gone`;

/** A daemon, on any host, that has not beaten for longer than the caller allows (reclaimSilent). */
export const silentDaemonReason = (d: DaemonTableRow, now: number): string =>
  `daemon ${d.id} on ${d.host} (pid ${d.pid}) sent no heartbeat for ${now - d.heartbeat_at} ms`;
