/**
 * Schema migrations, numbered by `PRAGMA user_version`. Append new entries; never edit a
 * shipped one. Applied at open inside one BEGIN IMMEDIATE transaction that re-reads the
 * version, so several processes opening a fresh file at once apply each step exactly once.
 */
import type { Database } from 'better-sqlite3';
import { storeFault } from './faults.js';

export const MIGRATIONS: readonly string[] = [
  // 1: tasks, dependencies, the event log.
  //
  // Index design (each index a state change touches costs a page write per transaction).
  // Every index entry ends with the rowid, so an index on (state) is ordered by (state, id):
  // naming id as a column too would store it twice and make each entry ~20% bigger.
  // - tasks_claimable: the claim reads the first eligible entry of its queue.
  // - tasks_by_state (state): stats, findTasks by state (keyset paging by id), and the
  //   stale sweep, which scans the few claimed/in_progress entries instead of a lease index.
  //   A move deletes one entry and inserts its neighbour (the busy states sort next to each
  //   other), so it usually costs one page.
  // - tasks_by_assignee (assignee): written once, at the claim; later moves keep the
  //   assignee and leave it alone.
  // - tasks_by_key: partial, so tasks without an idempotency key never write it.
  // - tasks_by_queue (queue): findTasks by queue. A task's queue never changes, so only
  //   the insert writes it.
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
    idempotency_key  TEXT,
    run_after        INTEGER NOT NULL,
    unmet_deps       INTEGER NOT NULL DEFAULT 0,
    lease_ms         INTEGER,
    lease_expires_at INTEGER,
    stale_since      INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    card             TEXT    NOT NULL,
    result           TEXT,
    last_event_id    INTEGER
  );
  CREATE INDEX tasks_claimable ON tasks (queue, priority DESC) WHERE state = 'pending' AND unmet_deps = 0;
  CREATE INDEX tasks_by_state ON tasks (state);
  CREATE INDEX tasks_by_assignee ON tasks (assignee) WHERE assignee IS NOT NULL;
  CREATE UNIQUE INDEX tasks_by_key ON tasks (idempotency_key) WHERE idempotency_key IS NOT NULL;
  CREATE INDEX tasks_by_queue ON tasks (queue);

  CREATE TABLE task_deps (
    task_id    INTEGER NOT NULL REFERENCES tasks (id),
    depends_on INTEGER NOT NULL REFERENCES tasks (id),
    PRIMARY KEY (task_id, depends_on)
  ) WITHOUT ROWID;
  CREATE INDEX task_deps_reverse ON task_deps (depends_on, task_id);

  -- No AUTOINCREMENT (it writes sqlite_sequence on every insert): a new id is max(id) + 1,
  -- so ids stay strictly increasing and are never reused as long as the newest event row
  -- is never deleted. Any retention or pruning of task_events MUST keep the row with the
  -- highest id (or append a newer event in the same transaction, as retention.ts does).
  --
  -- A task's own events (task.created, task.claimed, task.transitioned, task.cancelled,
  -- task.stale_reclaimed: the ones written with a change of its row) form a chain:
  -- tasks.last_event_id is the newest, and each one's prev_id the one before (0 for the
  -- first; -1 for "id - 1", when it was written right after the one before, in the same
  -- transaction, so the writer need not know ids before inserting). Every other event of a task (run.*, breaker.*, ...) has prev_id NULL and is
  -- found through task_events_by_task. Reading a task's events walks the chain and merges
  -- the indexed ones (reads.ts). The chain costs nothing to maintain, since the task row is
  -- written in the same transaction anyway, while an index entry per event cost a page write
  -- per transaction, often two: tasks are created well before they run, so the entries of a
  -- task's later events landed between those of other tasks, splitting full leaves.
  CREATE TABLE task_events (
    id         INTEGER PRIMARY KEY,
    task_id    INTEGER,
    type       TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    data       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    prev_id    INTEGER
  );
  CREATE INDEX task_events_by_task ON task_events (task_id) WHERE prev_id IS NULL;
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

  -- Command checks run only on cards an operator created: the creator's role is kept.
  ALTER TABLE tasks ADD COLUMN creator_role TEXT NOT NULL DEFAULT 'agent';

  CREATE TABLE schedules (
    id           INTEGER PRIMARY KEY,
    cron         TEXT    NOT NULL,
    title        TEXT    NOT NULL,
    card         TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    catch_up     TEXT    NOT NULL,
    overlap      INTEGER NOT NULL,
    creator      TEXT    NOT NULL,
    creator_role TEXT    NOT NULL,
    last_fire_at INTEGER NOT NULL,
    last_task_id INTEGER,
    created_at   INTEGER NOT NULL
  );
  `,
  // 3: approvals (human in the loop), and the ticket demo's tables (seed 003/004).
  `
  CREATE TABLE approvals (
    id          INTEGER PRIMARY KEY,
    task_id     INTEGER NOT NULL REFERENCES tasks (id),
    run_id      INTEGER NOT NULL REFERENCES runs (id),
    step_id     INTEGER NOT NULL REFERENCES steps (id),
    tool        TEXT    NOT NULL,
    args        TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    reason      TEXT,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    decided_at  INTEGER,
    decided_by  TEXT
  );
  CREATE INDEX approvals_by_state ON approvals (state, id);
  CREATE INDEX approvals_by_step ON approvals (step_id);

  CREATE TABLE tickets (
    id            TEXT PRIMARY KEY,
    title         TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    priority      TEXT    NOT NULL,
    notified      INTEGER NOT NULL DEFAULT 0,
    customer_note TEXT,
    version       INTEGER NOT NULL DEFAULT 1,
    updated_at    INTEGER NOT NULL
  );
  CREATE TABLE ticket_notifications (
    id              INTEGER PRIMARY KEY,
    ticket_id       TEXT    NOT NULL REFERENCES tickets (id),
    message         TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL UNIQUE,
    created_at      INTEGER NOT NULL
  );
  `,
  // 4: the monitor's run outcomes per window (run-stats.ts) read an index instead of every
  // run: at 1M runs a /metrics scrape scanned them all. Partial, and runs finish in time
  // order, so an entry is an append at the right edge of the tree.
  `
  CREATE INDEX runs_by_finish ON runs (finished_at) WHERE finished_at IS NOT NULL;
  `,
  // 5: the latest screen a run observed (desktop runs, screen_snapshot), for operators: one
  // PNG per run, replaced at each observation, deleted by retention with the run's steps.
  `
  CREATE TABLE run_screens (
    run_id   INTEGER PRIMARY KEY REFERENCES runs (id),
    seq      INTEGER NOT NULL,
    png      BLOB    NOT NULL,
    taken_at INTEGER NOT NULL
  );
  `,
  // 6: authority (issue 10). Every event records its actor's role next to its id, so an
  // agent named `operator` is told apart from the operator in the log; events written before
  // this version get the role their name implied then. Idempotency keys are scoped: a key
  // belongs to one creator (`role:id`), and the scheduler's keys to the scope
  // `system:scheduler`, which no agent can write, so one creator's key never matches
  // another's task.
  `
  ALTER TABLE task_events ADD COLUMN actor_role TEXT NOT NULL DEFAULT 'agent';
  UPDATE task_events SET actor_role = CASE
    WHEN actor IN ('system', 'sweeper', 'acceptance', 'approval', 'control', 'daemon', 'loop', 'scheduler', 'retention', 'breaker') THEN 'system'
    WHEN actor = 'operator' THEN 'operator'
    ELSE 'agent' END;

  ALTER TABLE tasks ADD COLUMN idempotency_scope TEXT;
  UPDATE tasks SET idempotency_scope = CASE
    WHEN idempotency_key LIKE 'schedule:%' AND creator_role = 'operator' THEN 'system:scheduler'
    ELSE creator_role || ':' || creator END
  WHERE idempotency_key IS NOT NULL;
  DROP INDEX tasks_by_key;
  ALTER TABLE approvals ADD COLUMN decided_by_role TEXT;
  ALTER TABLE controls ADD COLUMN set_by_role TEXT;
  CREATE UNIQUE INDEX tasks_by_key ON tasks (idempotency_scope, idempotency_key) WHERE idempotency_key IS NOT NULL;
  `,
  // 7: the table of processes that hold runs (daemons, an HTTP server's stream-owned runs,
  // createWorker) is named for what it holds: it never held worker threads.
  `
  ALTER TABLE workers RENAME TO daemons;
  `,
  // 8: a daemon claims only tasks that carry a card. Its pick read tasks_claimable and
  // stepped over every pending task without a card ahead of the first with one: with 2,000
  // tasks waiting for agents, each look of each daemon thread read 2,000 rows. This index
  // holds only the tasks a daemon can run (claim.ts names it for the daemon's pick).
  `
  CREATE INDEX IF NOT EXISTS tasks_claimable_card ON tasks (queue, priority DESC) WHERE state = 'pending' AND unmet_deps = 0 AND card <> '{}';
  `,
  // 9: the tasks an agent created, for what it may read (reads.ts findTasks): without it an
  // agent's listing of a state read the state's whole range and checked each row. One entry
  // per task, written once: a task's creator never changes.
  `
  CREATE INDEX IF NOT EXISTS tasks_by_creator ON tasks (creator, creator_role);
  `,
  // 10: the claimable tasks in three parts, each with a daemon's twin of the tasks with a card:
  // those anyone may claim, those reserved for one agent (by agent), those that require
  // capabilities. A claim reads the first of each part it may take from (claim.ts pickSql):
  // in one index it stepped over every task reserved for another agent or requiring what it
  // lacks, and an agent could make every claim slow by creating such tasks. A pending task is
  // in one part (and its twin): no more index writes than before.
  `
  DROP INDEX IF EXISTS tasks_claimable;
  DROP INDEX IF EXISTS tasks_claimable_card;
  CREATE INDEX tasks_claimable ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NULL AND requires IS NULL;
  CREATE INDEX tasks_claimable_card ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NULL AND requires IS NULL AND card <> '{}';
  CREATE INDEX tasks_claimable_reserved ON tasks (for_agent, queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NOT NULL;
  CREATE INDEX tasks_claimable_reserved_card ON tasks (for_agent, queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NOT NULL AND card <> '{}';
  CREATE INDEX tasks_claimable_requiring ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NULL AND requires IS NOT NULL;
  CREATE INDEX tasks_claimable_requiring_card ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NULL AND requires IS NOT NULL AND card <> '{}';
  `,
  // 11: the parts of migration 10, drawn again (its open part named tasks_claimable_open, as on
  // PostgreSQL): a task reserved for one agent that also requires capabilities was in the
  // reserved part, which that agent's every claim walked whatever it offered, so another agent
  // could flood one agent's claims with tasks reserved for it that require what it lacks. Now
  // every task that requires capabilities is in tasks_claimable_needs, read only by a claimer
  // that offers some; tasks_claimable_for holds the reserved ones that require nothing.
  `
  DROP INDEX IF EXISTS tasks_claimable;
  DROP INDEX IF EXISTS tasks_claimable_card;
  DROP INDEX IF EXISTS tasks_claimable_reserved;
  DROP INDEX IF EXISTS tasks_claimable_reserved_card;
  DROP INDEX IF EXISTS tasks_claimable_requiring;
  DROP INDEX IF EXISTS tasks_claimable_requiring_card;
  CREATE INDEX IF NOT EXISTS tasks_claimable_open ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NULL AND requires IS NULL;
  CREATE INDEX IF NOT EXISTS tasks_claimable_open_card ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NULL AND requires IS NULL AND card <> '{}';
  CREATE INDEX tasks_claimable_for ON tasks (for_agent, queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NOT NULL AND requires IS NULL;
  CREATE INDEX tasks_claimable_for_card ON tasks (for_agent, queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND for_agent IS NOT NULL AND requires IS NULL AND card <> '{}';
  CREATE INDEX tasks_claimable_needs ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND requires IS NOT NULL;
  CREATE INDEX tasks_claimable_needs_card ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND requires IS NOT NULL AND card <> '{}';
  `,
  // 12: the tasks that require capabilities also keyed by their requirement set (claim-needs.ts),
  // those reserved for an agent by agent first: a claimer that offers a few capabilities looks
  // up the sets they cover, not reserved and reserved for it. Through
  // tasks_claimable_needs alone (claim order), a claimer that offered any capability (a daemon
  // offering `desktop`) stepped over every task requiring one it lacked: 10.9 ms a claim, in the
  // write lock, behind 25,000 of them. A claimer offering more still walks tasks_claimable_needs.
  `
  CREATE INDEX tasks_claimable_needs_set ON tasks (queue, requires, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND requires IS NOT NULL AND for_agent IS NULL;
  CREATE INDEX tasks_claimable_needs_set_card ON tasks (queue, requires, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND requires IS NOT NULL AND for_agent IS NULL AND card <> '{}';
  CREATE INDEX tasks_claimable_needs_for ON tasks (for_agent, queue, requires, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND requires IS NOT NULL AND for_agent IS NOT NULL;
  CREATE INDEX tasks_claimable_needs_for_card ON tasks (for_agent, queue, requires, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND requires IS NOT NULL AND for_agent IS NOT NULL AND card <> '{}';
  `,
  // 13: a task not yet due (run_after ahead: an operator's delay) is `delayed` and out of every
  // claimable part until a claim in its queue releases it once due (claim.ts releaseSql), as
  // River's scheduled state and BullMQ's delayed set keep such jobs apart. In the parts, every
  // claim stepped over each of them in claim order: 6 ms a claim, inside the write lock, behind
  // an operator's 25,000 reminders due next week. tasks_delayed holds them by queue and due
  // time, so a release reads only the due ones. The parts are drawn again with `delayed = 0`;
  // a task already pending with its run_after past its creation is delayed until a claim
  // releases it (at once, if it is due already).
  `
  ALTER TABLE tasks ADD COLUMN delayed INTEGER NOT NULL DEFAULT 0;
  UPDATE tasks SET delayed = 1 WHERE state = 'pending' AND run_after > created_at;
  CREATE INDEX tasks_delayed ON tasks (queue, run_after) WHERE state = 'pending' AND delayed = 1;
  DROP INDEX tasks_claimable_open;
  DROP INDEX tasks_claimable_open_card;
  DROP INDEX tasks_claimable_for;
  DROP INDEX tasks_claimable_for_card;
  DROP INDEX tasks_claimable_needs;
  DROP INDEX tasks_claimable_needs_card;
  DROP INDEX tasks_claimable_needs_set;
  DROP INDEX tasks_claimable_needs_set_card;
  DROP INDEX tasks_claimable_needs_for;
  DROP INDEX tasks_claimable_needs_for_card;
  CREATE INDEX tasks_claimable_open ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND for_agent IS NULL AND requires IS NULL;
  CREATE INDEX tasks_claimable_open_card ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND for_agent IS NULL AND requires IS NULL AND card <> '{}';
  CREATE INDEX tasks_claimable_for ON tasks (for_agent, queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND for_agent IS NOT NULL AND requires IS NULL;
  CREATE INDEX tasks_claimable_for_card ON tasks (for_agent, queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND for_agent IS NOT NULL AND requires IS NULL AND card <> '{}';
  CREATE INDEX tasks_claimable_needs ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND requires IS NOT NULL;
  CREATE INDEX tasks_claimable_needs_card ON tasks (queue, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND requires IS NOT NULL AND card <> '{}';
  CREATE INDEX tasks_claimable_needs_set ON tasks (queue, requires, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND requires IS NOT NULL AND for_agent IS NULL;
  CREATE INDEX tasks_claimable_needs_set_card ON tasks (queue, requires, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND requires IS NOT NULL AND for_agent IS NULL AND card <> '{}';
  CREATE INDEX tasks_claimable_needs_for ON tasks (for_agent, queue, requires, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND requires IS NOT NULL AND for_agent IS NOT NULL;
  CREATE INDEX tasks_claimable_needs_for_card ON tasks (for_agent, queue, requires, priority DESC)
    WHERE state = 'pending' AND unmet_deps = 0 AND delayed = 0 AND requires IS NOT NULL AND for_agent IS NOT NULL AND card <> '{}';
  `,
];

/**
 * Brings the file to the newest version. A file newer than this build (another process, a
 * newer taskloop, migrated it meanwhile) is refused with STORE_TOO_NEW and left as it is.
 */
export function migrate(db: Database): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current === MIGRATIONS.length) return;
  const tooNew = (version: number) =>
    storeFault('STORE_TOO_NEW', db.name, 'migrate', `the file's schema is version ${version}, newer than version ${MIGRATIONS.length} that this taskloop knows; nothing was written`, {
      schema_version: version,
      known_version: MIGRATIONS.length,
    });
  if (current > MIGRATIONS.length) throw tooNew(current);
  db.transaction(() => {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > MIGRATIONS.length) throw tooNew(version);
    for (let v = version; v < MIGRATIONS.length; v++) {
      db.exec(MIGRATIONS[v]!);
    }
    db.pragma(`user_version = ${MIGRATIONS.length}`);
  }).immediate();
}
