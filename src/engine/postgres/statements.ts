/**
 * How taskloop's statements reach PostgreSQL: by name (prepared once per connection), and,
 * in a transaction's first round trip, as a PREPAREd statement EXECUTEd with its arguments
 * written as literals that cannot break out of their place.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { EngineError } from '../errors.js';

/**
 * A statement a transaction runs with its BEGIN, in the same round trip (simple protocol, so
 * without bind parameters): our own text with parameters `$1…` of `types`, prepared as `name`
 * on each connection and run with EXECUTE, its `args` written into that EXECUTE by `literal`.
 * `givesNow`: its one row has the transaction's clock in `now` (else the clock is read first).
 */
export interface Opening {
  name: string;
  sql: string;
  types: string[];
  args: Array<number | string | null>;
  givesNow?: boolean;
}

/**
 * A value as SQL text that cannot break out of its place: a safe integer as digits, a string
 * as the hex of its UTF-8 bytes (only 0-9 and a-f reach the text, whatever the string
 * holds, under any standard_conforming_strings). Anything else is refused.
 */
export function literal(v: number | string | null): string {
  if (v === null) return 'NULL';
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new EngineError('VALIDATION_FAILED', `${String(v)} is not a safe integer`);
    return String(v);
  }
  if (typeof v !== 'string') throw new EngineError('VALIDATION_FAILED', 'only integers and strings are written into SQL text');
  return `convert_from(decode('${Buffer.from(v, 'utf8').toString('hex')}', 'hex'), 'UTF8')`;
}

/**
 * Statements by name: each connection parses and plans a named statement once (after five
 * runs PostgreSQL keeps a generic plan), where an unnamed one is planned on every run. On
 * the tasks table with its indexes planning was half the server's time per task (bench:pg,
 * pg_stat_statements: a move planned in 444 µs and ran in 342). Only our own texts with few
 * parameters get a name (a batch's text varies with its size, and every connection keeps
 * every name it has seen), at most MAX_NAMED texts per process. Not behind a pooler in
 * transaction mode (`wakeups=poll`), where the next transaction may run on another server
 * connection that never saw the statement.
 */
const MAX_NAMED = 500;
const MAX_NAMED_PARAMS = 40;

export function namedStatements(enabled: boolean): (text: string, params: unknown[] | undefined) => pg.QueryConfig {
  const names = new Map<string, string>();
  return (text, params) => {
    const values = params as unknown[] | undefined;
    if (!enabled || values === undefined || values.length > MAX_NAMED_PARAMS) return { text, values };
    let name = names.get(text);
    if (name === undefined) {
      if (names.size >= MAX_NAMED) return { text, values };
      name = `taskloop_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      names.set(text, name);
    }
    return { name, text, values };
  };
}


/**
 * A bind value written into SQL text as pg would send it (text, untyped, so the statement's
 * context gives it its type, as for a parameter): an escape string in which every quote and
 * backslash is doubled, so only its closing quote ends it. Undefined for what is not a plain
 * value or holds a NUL (the caller then binds it as a parameter, as before).
 */
export function constant(v: unknown): string | undefined {
  if (v === null || v === undefined) return 'NULL';
  let text: string;
  if (typeof v === 'string') text = v;
  else if ((typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean' || typeof v === 'bigint') text = String(v);
  else return undefined;
  if (text.includes('\0')) return undefined;
  return `E'${text.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

/**
 * The statements a transaction leaves for its COMMIT's round trip (connection.ts hold), as
 * simple-protocol text: PREPAREd once per connection and EXECUTEd with constants when
 * `prepared` (few parameters, at most MAX_NAMED texts), else with the constants written in.
 * `rowsAt`: which of the text's results holds the statement's rows. Undefined when a value
 * cannot be written as a constant.
 */
export function heldStatements(prepared: boolean): (known: Set<string>, text: string, params: unknown[]) => { sql: string; rowsAt: number } | undefined {
  const names = new Map<string, string>();
  return (known, text, params) => {
    const values: string[] = [];
    for (const p of params) {
      const c = constant(p);
      if (c === undefined) return undefined;
      values.push(c);
    }
    let name = prepared && params.length <= MAX_NAMED_PARAMS ? names.get(text) : undefined;
    if (prepared && name === undefined && params.length <= MAX_NAMED_PARAMS && names.size < MAX_NAMED) {
      name = `taskloop_h${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      names.set(text, name);
    }
    if (name === undefined) {
      let missing = false;
      const sql = text.replace(/\$(\d+)/g, (_, n: string) => values[Number(n) - 1] ?? ((missing = true), ''));
      return missing ? undefined : { sql, rowsAt: 0 };
    }
    const run = `EXECUTE ${name}${values.length > 0 ? `(${values.join(', ')})` : ''}`;
    if (known.has(name)) return { sql: run, rowsAt: 0 };
    known.add(name);
    return { sql: `PREPARE ${name} AS ${text}; ${run}`, rowsAt: 1 };
  };
}
