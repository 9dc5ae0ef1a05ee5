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
 * holds, under any standard_conforming_strings). Anything else is refused. A string is given
 * the database's default collation, as a bound parameter has: convert_from's result takes
 * "C" from its encoding's name, and a column compared with it under another collation is not
 * an index condition, so behind a pooler (`wakeups=poll`, where these are written into the
 * statement) a claim read its whole part of the queue's claimable tasks and sorted it.
 */
export function literal(v: number | string | null): string {
  if (v === null) return 'NULL';
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new EngineError('VALIDATION_FAILED', `${String(v)} is not a safe integer`);
    return String(v);
  }
  if (typeof v !== 'string') throw new EngineError('VALIDATION_FAILED', 'only integers and strings are written into SQL text');
  return `(convert_from(decode('${Buffer.from(v, 'utf8').toString('hex')}', 'hex'), 'UTF8') COLLATE pg_catalog."default")`;
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
