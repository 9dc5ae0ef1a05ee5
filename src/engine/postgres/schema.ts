/**
 * The PostgreSQL schema's version and its migration (the steps are migrations.ts's). Migrations
 * run under a transaction-scoped advisory lock keyed by the schema's name, so many processes
 * starting at once apply each step exactly once and the rest wait for it. A schema newer than
 * this taskloop knows is refused STORE_TOO_NEW and left as it is.
 */
import { EngineError } from '../errors.js';
import type { PgConnection } from './connection.js';
import { eventLockKey } from './event-lock.js';
import { PG_MIGRATIONS } from './migrations.js';

/** Brings the schema to the newest version; see the module comment. Returns the version. */
export async function migratePg(conn: PgConnection, opts: { existing?: boolean; oid?: number } = {}): Promise<{ version: number; oid: number }> {
  const { schema, display } = conn.location;
  const known = PG_MIGRATIONS.length;
  const tooNew = (version: number) =>
    new EngineError('STORE_TOO_NEW', `migrate on ${display}: schema ${schema} is version ${version}, newer than version ${known} that this taskloop knows; nothing was written`, {
      location: display,
      schema_version: version,
      known_version: known,
    });
  const { version: current, oid } = await probeSchema(conn);
  // A daemon's thread joins the schema its main thread opened, not one made since under its name.
  if (opts.oid !== undefined && oid !== null && oid !== opts.oid) {
    throw new EngineError('STORE_REPLACED', `open on ${display}: schema ${schema} is not the one this process opened (dropped and made again?); nothing was written`, { location: display, schema });
  }
  if (current === known && oid !== null) return { version: current, oid };
  // A daemon's thread that starts late (or again) must not make a schema dropped under the
  // daemon anew: its other threads and its main thread would go on, quietly, in an empty one.
  if (current === 0 && opts.existing === true) {
    throw new EngineError('STORE_REPLACED', `open on ${display}: schema ${schema} is gone (dropped since this process opened it?); it is not created again here`, { location: display, schema });
  }
  if (current > known) throw tooNew(current);
  return conn.tx('migrate', async (q) => {
    // Unquoted identifiers are safe: parsePgUrl checked the schema's name.
    await q('SELECT pg_advisory_xact_lock(hashtext($1))', [`taskloop:migrate:${schema}`]);
    await q(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await q(`CREATE TABLE IF NOT EXISTS ${schema}.schema_version (version integer NOT NULL)`);
    const rows = await q<{ version: number }>(`SELECT version FROM ${schema}.schema_version`);
    if (rows.length === 0) await q(`INSERT INTO ${schema}.schema_version (version) VALUES (0)`);
    const version = rows[0]?.version ?? 0;
    if (version > known) throw tooNew(version);
    for (let v = version; v < known; v++) await q(PG_MIGRATIONS[v]!.replaceAll('{{event_lock}}', String(eventLockKey(schema))));
    await q(`UPDATE ${schema}.schema_version SET version = $1`, [known]);
    const [made] = await q<{ oid: number }>('SELECT oid::bigint AS oid FROM pg_namespace WHERE nspname = $1', [schema]);
    return { version: known, oid: made!.oid };
  });
}

/** The schema's version: 0 when taskloop has never written to it. */
export async function readVersion(conn: PgConnection): Promise<number> {
  return (await probeSchema(conn)).version;
}

/** The schema's version, and its identity (pg_namespace oid; null when there is no such schema), in one round trip. */
async function probeSchema(conn: PgConnection): Promise<{ version: number; oid: number | null }> {
  const { schema, display } = conn.location;
  const [found] = await conn.query<{ exists: boolean; path: string; oid: number | null }>(
    "SELECT to_regclass($1) IS NOT NULL AS exists, current_setting('search_path') AS path, (SELECT oid::bigint FROM pg_namespace WHERE nspname = $2) AS oid",
    [`${schema}.schema_version`, schema],
  );
  // taskloop's names are unqualified: they must find its schema alone (connection.ts sends
  // the path with the connection's startup options). A pooler that drops those would have
  // the migration create the tables in whatever schema the server's default path finds.
  if (found !== undefined && found.path !== schema) {
    throw new EngineError(
      'STORE_UNAVAILABLE',
      `open on ${display}: the server gave this connection the search path '${found.path}', not '${schema}' as asked in its startup options (a pooler in between that does not pass them on?); nothing was written`,
      { location: display, schema },
    );
  }
  const oid = found?.oid ?? null;
  if (found?.exists !== true) return { version: 0, oid };
  const rows = await conn.query<{ version: number | null }>(`SELECT max(version) AS version FROM ${schema}.schema_version`);
  return { version: rows[0]?.version ?? 0, oid };
}
