/** Baselines: a bare better-sqlite3 claim/complete, and plainjob 0.0.14. */
import Database from 'better-sqlite3';
import { better, defineQueue } from 'plainjob';
import { nowNs, seconds } from './util.mjs';

function openWal(path) {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  return db;
}

/**
 * 5. The floor: the simplest correct claim/complete. Claim is one BEGIN IMMEDIATE
 * transaction (UPDATE … WHERE id = (best pending) RETURNING id); complete is one UPDATE.
 */
export function benchBare(path, n) {
  const db = openWal(path);
  try {
    db.exec(`
      CREATE TABLE jobs (
        id       INTEGER PRIMARY KEY,
        priority INTEGER NOT NULL DEFAULT 0,
        state    TEXT    NOT NULL,
        payload  TEXT    NOT NULL
      );
      CREATE INDEX jobs_pending ON jobs (priority DESC, id) WHERE state = 'pending';
    `);
    const insert = db.prepare("INSERT INTO jobs (state, payload) VALUES ('pending', ?)");
    db.transaction(() => {
      for (let i = 0; i < n; i++) insert.run(JSON.stringify({ goal: 'benchmark', n: i }));
    })();

    const take = db.prepare(
      `UPDATE jobs SET state = 'running'
       WHERE id = (SELECT id FROM jobs WHERE state = 'pending' ORDER BY priority DESC, id LIMIT 1)
       RETURNING id`,
    );
    const finish = db.prepare("UPDATE jobs SET state = 'done' WHERE id = ?");
    const claim = db.transaction(() => take.get());

    const t0 = nowNs();
    let done = 0;
    for (;;) {
      const job = claim.immediate();
      if (job === undefined) break;
      finish.run(job.id);
      done++;
    }
    const s = seconds(t0, nowNs());
    const left = db.prepare("SELECT count(*) AS n FROM jobs WHERE state <> 'done'").get().n;
    if (done !== n || left !== 0) throw new Error(`bare floor: drained ${done} of ${n}, ${left} not done`);
    return { ops: done, seconds: s, perSec: done / s };
  } finally {
    if (db.open) db.close();
  }
}

const quiet = { error: console.error, warn: console.warn, info() {}, debug() {} };

/**
 * 6. plainjob: its own claim (`getAndMarkJobAsProcessing`, a BEGIN IMMEDIATE SELECT + UPDATE)
 * and complete (`markJobAsDone`, one UPDATE), called in a tight loop without the worker's polling.
 */
export function benchPlainjob(path, n) {
  const queue = defineQueue({ connection: better(openWal(path)), logger: quiet });
  try {
    const data = [];
    for (let i = 0; i < n; i++) data.push({ goal: 'benchmark', n: i });
    queue.addMany('bench', data);

    const t0 = nowNs();
    let done = 0;
    for (;;) {
      const job = queue.getAndMarkJobAsProcessing('bench');
      if (job === undefined) break;
      queue.markJobAsDone(job.id);
      done++;
    }
    const s = seconds(t0, nowNs());
    const left = queue.countJobs({ type: 'bench', status: 0 }) + queue.countJobs({ type: 'bench', status: 1 });
    if (done !== n || left !== 0) throw new Error(`plainjob: drained ${done} of ${n}, ${left} not done`);
    return { ops: done, seconds: s, perSec: done / s };
  } finally {
    queue.close();
  }
}
