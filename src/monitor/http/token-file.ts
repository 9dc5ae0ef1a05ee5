/**
 * The operator token a server generates when none is configured, kept in a file only its
 * owner can read (as Jupyter does). Reaching 127.0.0.1 is then not enough to act as the
 * operator: reading this file is, and that takes being this Unix user.
 *
 * Contract:
 * - Where: `<database>.http-token`, beside the database file (`tokenFileFor`). Whoever can read
 *   the database is trusted anyway; the file follows the database and outlives restarts. A
 *   PostgreSQL database has no file: its token lives in `data/` of the working directory,
 *   named by a hash of the URL without its password (never the URL itself: a password in a
 *   file name would be readable by anyone who may list the folder).
 * - Its folder must be a directory owned by this user (or root) that neither its group nor
 *   others may write, so no one else can plant, swap or remove names in it.
 * - Created under a temporary name opened `O_CREAT | O_EXCL | O_NOFOLLOW` with mode 0600,
 *   written and fsynced, then hard-linked to its name (which fails if the name exists): the
 *   file is never readable by anyone else, never seen half-written, and two servers starting
 *   at once end up with the same token.
 * - An existing file is reused only if it is a regular file (opened `O_NOFOLLOW`: a symlink is
 *   refused), owned by this user, with no permission bits for group or others, and holds one
 *   token. Anything else is refused with a one-line error naming the file and what to do; the
 *   file is never rewritten or deleted by the server.
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, constants, mkdirSync, fchmodSync, fstatSync, fsyncSync, linkSync, openSync, readSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { databasePath } from '../../engine/sqlite/connection.js';
import { otherWriters } from '../../engine/index.js';

/** The token file of the server of a database: `<db>.http-token`, or `data/postgres-<hash>.http-token` for a URL. */
export function tokenFileFor(dbPath: string): string {
  if (/^postgres(ql)?:\/\//.test(dbPath)) {
    const u = new URL(dbPath);
    u.password = '';
    return resolve('data', `postgres-${createHash('sha256').update(u.toString()).digest('hex').slice(0, 16)}.http-token`);
  }
  // Beside the database file itself, where SQLite keeps its -wal (a --db symlink followed).
  return `${resolve(databasePath(dbPath))}.http-token`;
}

export interface TokenFile {
  /** The file's absolute path. */
  path: string;
  token: string;
  /** Whether this call created the file (false: an earlier start's token is reused). */
  created: boolean;
}

/** A generated token: 256 random bits, base64url. */
const newToken = (): string => randomBytes(32).toString('base64url');
/** What a token file may hold (a token of TASKLOOP_TOKEN's form), with an optional final newline. */
const TOKEN_TEXT = /^(\S{16,4096})\n?$/;
const MAX_READ = 4200;

const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, '0');

function refuse(path: string, why: string): Error {
  return new Error(`refusing the token file ${path}: ${why}`);
}

function currentUid(path: string): number {
  if (typeof process.getuid !== 'function') throw refuse(path, 'owner-only files need a POSIX system here; set TASKLOOP_TOKEN instead');
  return process.getuid();
}

function checkFolder(path: string, uid: number): void {
  const dir = dirname(path);
  let st;
  // A PostgreSQL server's token goes in data/, which no database file has made yet: made here, owner only.
  if (basename(path).startsWith('postgres-')) mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    st = statSync(dir);
  } catch (err) {
    throw refuse(path, `its folder cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  if (!st.isDirectory()) throw refuse(path, `${dir} is not a folder`);
  if (st.uid !== uid && st.uid !== 0) throw refuse(path, `its folder ${dir} belongs to another user (uid ${st.uid}); keep the database in a folder of your own`);
  // The database's rule (engine/local-files.ts): a group's write on a folder of your own is
  // your choice (a umask of 002 gives it to every folder you make: a fresh clone's data/);
  // on root's it is a team's.
  const writers = otherWriters(st, uid);
  if (writers !== undefined) {
    const who = writers === 'every user' ? 'others' : 'its group';
    throw refuse(path, `its folder ${dir} is writable by ${who} (mode ${octal(st.mode)}): run chmod go-w ${dir}, or set TASKLOOP_TOKEN`);
  }
}

/** The token in an existing file, or undefined when there is no file of that name. */
function readExisting(path: string, uid: number): string | undefined {
  let fd: number;
  try {
    // O_NONBLOCK: a planted FIFO must not hang the start; fstat below refuses it.
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw refuse(path, 'it is a symbolic link; remove it (the server creates the file itself)');
    throw refuse(path, `it cannot be opened (${code ?? String(err)})`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw refuse(path, 'it is not a regular file; remove it');
    if (st.uid !== uid) throw refuse(path, `it belongs to another user (uid ${st.uid}); remove it`);
    if ((st.mode & 0o077) !== 0) throw refuse(path, `others may access it (mode ${octal(st.mode)}); remove it to have a new token made, or run chmod 600 on it if no one else has read it`);
    const buf = Buffer.alloc(MAX_READ);
    const n = readSync(fd, buf, 0, MAX_READ, 0);
    const match = TOKEN_TEXT.exec(buf.subarray(0, n).toString('utf8'));
    if (match === null) throw refuse(path, 'it does not hold one token (16 to 4096 characters, no spaces); remove it to have a new one made');
    return match[1]!;
  } finally {
    closeSync(fd);
  }
}

function create(path: string): string {
  const token = newToken();
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    fchmodSync(fd, 0o600); // the umask may have taken bits off; it cannot have added any
    writeSync(fd, `${token}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temp, path);
  } finally {
    unlinkSync(temp);
  }
  return token;
}

/** The operator token of `path`, reused or created under the rules above; throws a one-line Error. */
export function loadOrCreateTokenFile(file: string): TokenFile {
  const path = resolve(file);
  const uid = currentUid(path);
  checkFolder(path, uid);
  const existing = readExisting(path, uid);
  if (existing !== undefined) return { path, token: existing, created: false };
  try {
    return { path, token: create(path), created: true };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Another server on this database made it first: use theirs, under the same checks.
    if (code === 'EEXIST') {
      const raced = readExisting(path, uid);
      if (raced !== undefined) return { path, token: raced, created: false };
    }
    throw refuse(path, `it cannot be created (${code ?? String(err)})`);
  }
}
