/**
 * Schema migrations, numbered by `PRAGMA user_version`. Append new entries; never edit a
 * shipped one. Applied at open inside one BEGIN IMMEDIATE transaction that re-reads the
 * version, so several processes opening a fresh file at once apply each step exactly once.
 */
import type { Database } from 'better-sqlite3';

export const MIGRATIONS: readonly string[] = [
  // 1: tasks, dependencies, the event log.
  `
  CREATE TABLE tasks (
    id               INTEGER PRIMARY KEY,
    title            TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    creator          TEXT    NOT NULL,
    assignee         TEXT,
    claim_token      TEXT,
    worker_id        TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    queue            TEXT    NOT NULL,
    for_agent        TEXT,
    requires         TEXT,
    depends_on       TEXT,
    idempotency_key  TEXT UNIQUE,
    run_after        INTEGER NOT NULL,
    unmet_deps       INTEGER NOT NULL DEFAULT 0,
    lease_ms         INTEGER,
    lease_expires_at INTEGER,
    stale_since      INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    card             TEXT    NOT NULL,
    result           TEXT
  );
  -- Claim: the best pending task of a queue is the first entry of this partial index.
  CREATE INDEX tasks_claimable ON tasks (queue, priority DESC, id) WHERE state = 'pending' AND unmet_deps = 0;
  CREATE INDEX tasks_leased ON tasks (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
  CREATE INDEX tasks_by_state ON tasks (state, id);
  CREATE INDEX tasks_by_assignee ON tasks (assignee, state) WHERE assignee IS NOT NULL;

  CREATE TABLE task_deps (
    task_id    INTEGER NOT NULL REFERENCES tasks (id),
    depends_on INTEGER NOT NULL REFERENCES tasks (id),
    PRIMARY KEY (task_id, depends_on)
  ) WITHOUT ROWID;
  CREATE INDEX task_deps_reverse ON task_deps (depends_on, task_id);

  CREATE TABLE task_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    INTEGER,
    type       TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    data       TEXT    NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX task_events_by_task ON task_events (task_id, id);
  `,
  // 2: runs and steps of the task loop, stop/pause controls, shared tool breakers, daemon
  // heartbeats, schedules.
  `
  CREATE TABLE runs (
    id                 INTEGER PRIMARY KEY,
    task_id            INTEGER NOT NULL REFERENCES tasks (id),
    phase              TEXT    NOT NULL,
    stop_reason        TEXT,
    budget             TEXT    NOT NULL,
    usage              TEXT    NOT NULL,
    checkpoint_version INTEGER NOT NULL DEFAULT 0,
    restarts           INTEGER NOT NULL DEFAULT 0,
    started_at         INTEGER NOT NULL,
    finished_at        INTEGER,
    envelope           TEXT
  );
  CREATE INDEX runs_by_task ON runs (task_id, id);
  -- At most one unfinished run per task: a reclaim resumes it instead of starting another.
  CREATE UNIQUE INDEX runs_active ON runs (task_id) WHERE finished_at IS NULL;

  CREATE TABLE steps (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs (id),
    seq             INTEGER NOT NULL,
    kind            TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    tool            TEXT,
    args            TEXT,
    result          TEXT,
    error           TEXT,
    duration_ms     INTEGER,
    tokens          INTEGER NOT NULL DEFAULT 0,
    idempotency_key TEXT,
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    UNIQUE (run_id, seq)
  );

  CREATE TABLE controls (
    task_id    INTEGER PRIMARY KEY REFERENCES tasks (id),
    state      TEXT    NOT NULL,
    reason     TEXT,
    updated_at INTEGER NOT NULL
  );

  CREATE TABLE tool_breakers (
    tool        TEXT PRIMARY KEY,
    state       TEXT    NOT NULL,
    failures    INTEGER NOT NULL,
    opened_at   INTEGER,
    probe_until INTEGER,
    updated_at  INTEGER NOT NULL
  );

  CREATE TABLE workers (
    id           TEXT PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    agent        TEXT    NOT NULL,
    threads      INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
  );
  CREATE INDEX tasks_by_worker ON tasks (worker_id) WHERE worker_id IS NOT NULL;

  CREATE TABLE schedules (
    id           INTEGER PRIMARY KEY,
    cron         TEXT    NOT NULL,
    title        TEXT    NOT NULL,
    card         TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    catch_up     TEXT    NOT NULL,
    overlap      INTEGER NOT NULL,
    creator      TEXT    NOT NULL,
    last_fire_at INTEGER NOT NULL,
    last_task_id INTEGER,
    created_at   INTEGER NOT NULL
  );
  `,
];

export function migrate(db: Database): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current >= MIGRATIONS.length) return;
  db.transaction(() => {
    const version = db.pragma('user_version', { simple: true }) as number;
    for (let v = version; v < MIGRATIONS.length; v++) {
      db.exec(MIGRATIONS[v]!);
    }
    db.pragma(`user_version = ${MIGRATIONS.length}`);
  }).immediate();
}
