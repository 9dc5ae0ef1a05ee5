/** Shared test fixtures: a fresh database file per test, a controllable clock. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { type Actor, type TaskManager, createTaskManager, isEngineError } from '../src/engine/index.js';
import { newDatabase, openTaskStore } from './stores.js';

export const ROOT = new URL('..', import.meta.url).pathname;

/** A new temporary folder removed when the test finishes. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'taskloop-test-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export interface Clock {
  now: () => number;
  advance(ms: number): void;
  set(ms: number): void;
}

export function fakeClock(start = Date.UTC(2026, 0, 1)): Clock {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms), set: (ms) => void (t = ms) };
}

/** A TaskManager over a fresh database (the test project's store), closed when the test finishes. */
export function freshManager(opts: { clock?: Clock; path?: string } = {}): TaskManager & { path: string } {
  // `path`: a SQLite file, or (the postgres project) a URL naming a fresh schema (stores.ts).
  const path = opts.path ?? newDatabase(tempDir());
  const store = openTaskStore(path, { now: opts.clock?.now });
  const manager = createTaskManager({ store });
  onTestFinished(() => manager.close());
  return Object.assign(manager, { path });
}

export const agent = (id: string): Actor => ({ id, role: 'agent' });
export const operator: Actor = { id: 'operator', role: 'operator' };
export const system: Actor = { id: 'acceptance', role: 'system' };

/** Polls `check` until it returns a truthy value or the deadline passes. */
export async function waitFor<T>(check: () => T | Promise<T>, timeoutMs = 10_000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The engine error code a promise rejects with, or 'NO_ERROR'; anything else is rethrown. */
export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (isEngineError(err)) return err.code;
    throw err;
  }
  return 'NO_ERROR';
}
