/**
 * Where a PostgreSQL store lives, from its URL. taskloop's options ride on the URL and are
 * taken off it before `pg` sees it:
 * - `schema=<name>`: the schema holding taskloop's tables (created if missing); several
 *   taskloop installations can share one database this way. @defaultValue `taskloop`
 * - `wakeups=poll`: no LISTEN connection, for a pooler in transaction mode (PgBouncer),
 *   which cannot hold a LISTEN. @defaultValue `listen`
 * - `pool=<n>`: connections in this store's pool. @defaultValue see `poolSizeFor`
 * - `options=<settings>`: libpq's own, server settings sent before taskloop's.
 */
import { EngineError } from '../errors.js';

export interface PgLocation {
  /** The URL as `pg` takes it: ours options removed. */
  connectionString: string;
  /** The URL without its password, for messages and `taskloop info`. */
  display: string;
  schema: string;
  wakeups: 'listen' | 'poll';
  poolSize: number | undefined;
  /** The URL's own `options` (server settings such as `-c statement_timeout=5s`), sent before taskloop's. */
  serverOptions: string;
}

// At most 45 characters: its channels (`taskloop_<schema>_controls`) must fit PostgreSQL's
// 63-byte names whole, since pg_notify refuses a longer one where NOTIFY would cut it.
const SCHEMA = /^[a-z_][a-z0-9_]{0,44}$/;
// PostgreSQL's reserved words (pg_get_keywords() catcode R and T, PostgreSQL 17): not a
// schema name written unquoted, as taskloop writes it.
const RESERVED = new Set(
  ('all analyse analyze and any array as asc asymmetric authorization binary both case cast check collate collation column ' +
    'concurrently constraint create cross current_catalog current_date current_role current_schema current_time ' +
    'current_timestamp current_user default deferrable desc distinct do else end except false fetch for foreign freeze ' +
    'from full grant group having ilike in initially inner intersect into is isnull join lateral leading left like limit ' +
    'localtime localtimestamp natural not notnull null offset on only or order outer overlaps placing primary references ' +
    'returning right select session_user similar some symmetric system_user table tablesample then to trailing true union ' +
    'unique user using variadic verbose when where window with').split(' '),
);

/** Parses a `postgres://` URL and taskloop's own options on it; VALIDATION_FAILED names what is wrong. */
export function parsePgUrl(url: string): PgLocation {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new EngineError('VALIDATION_FAILED', `'${redact(url)}' is not a valid postgres:// URL`);
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new EngineError('VALIDATION_FAILED', `'${redact(url)}': only postgres:// and postgresql:// URLs name a database`);
  }
  const schema = parsed.searchParams.get('schema') ?? 'taskloop';
  if (!SCHEMA.test(schema)) {
    throw new EngineError('VALIDATION_FAILED', `schema '${schema}' must be 1 to 45 lowercase letters, digits or _, starting with a letter or _`);
  }
  if (RESERVED.has(schema)) throw new EngineError('VALIDATION_FAILED', `schema '${schema}' is a word PostgreSQL reserves; choose another name`);
  const wakeups = parsed.searchParams.get('wakeups') ?? 'listen';
  if (wakeups !== 'listen' && wakeups !== 'poll') throw new EngineError('VALIDATION_FAILED', `wakeups '${wakeups}' is not listen or poll`);
  const pool = parsed.searchParams.get('pool');
  const poolSize = pool === null ? undefined : Number(pool);
  if (poolSize !== undefined && !(Number.isInteger(poolSize) && poolSize >= 1 && poolSize <= 100)) {
    throw new EngineError('VALIDATION_FAILED', `pool '${pool}' is not a whole number from 1 to 100`);
  }
  // `pg` lets a URL's options replace the ones it is given: taken out here, they go first
  // and taskloop's after them, so a URL can add settings but not move the search path.
  const given = parsed.searchParams.getAll('options');
  if (given.length > 1) throw new EngineError('VALIDATION_FAILED', `options is given ${given.length} times; give it once, with every setting in it`);
  const serverOptions = given[0] ?? '';
  checkServerOptions(serverOptions);
  for (const key of ['schema', 'wakeups', 'pool', 'options']) parsed.searchParams.delete(key);
  return { connectionString: parsed.toString(), display: redact(parsed.toString()), schema, wakeups, poolSize, serverOptions };
}

/**
 * A URL's `options` as the server will split them (whitespace separates, a backslash takes
 * the next character as it is): only settings, `-c name=value` or `--name=value`. Anything
 * else (another switch, a `-c` without its setting, a trailing backslash that would join
 * taskloop's own options to the last word) is refused here rather than by the server at each
 * connection, where it surfaced as a raw error.
 */
function checkServerOptions(options: string): void {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < options.length; i++) {
    const ch = options[i]!;
    if (/\s/.test(ch)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (ch === '\\') {
      if (i + 1 === options.length) throw new EngineError('VALIDATION_FAILED', `options '${options}' ends in a backslash`);
      word = (word ?? '') + options[++i];
    } else word = (word ?? '') + ch;
  }
  if (word !== undefined) words.push(word);
  const setting = /^[A-Za-z_][A-Za-z0-9_.-]*=/;
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    const ok = w === '-c' ? setting.test(words[++i] ?? '') : w.startsWith('--') ? setting.test(w.slice(2)) : w.startsWith('-c') && setting.test(w.slice(2));
    if (!ok) throw new EngineError('VALIDATION_FAILED', `options '${options}': only settings are taken, each as -c name=value or --name=value ('${w}' is not one)`);
  }
}

/** The URL with its password replaced by `…`. */
export function redact(url: string): string {
  return url.replace(/(\/\/[^:@/]*):[^@/]*@/, '$1:…@');
}
