/** Migration 7: the holders' registry keeps its rows under its new name. */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteRunStore, createSqliteStore } from '../../src/engine/index.js';
import { MIGRATIONS } from '../../src/engine/sqlite/migrations.js';
import { tempDir } from '../helpers.js';

describe('migration 7', () => {
  it('renames the workers table to daemons, keeping every registered daemon', async () => {
    const path = join(tempDir(), 'v6.db');
    const old = new Database(path);
    old.pragma('journal_mode = WAL');
    for (const step of MIGRATIONS.slice(0, 6)) old.exec(step);
    old.pragma('user_version = 6');
    old.prepare('INSERT INTO workers (id, host, pid, agent, threads, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run('h-1-abc', 'h', 1, 'daemon-h-1', 2, 10, 20);
    old.close();
    const store = createSqliteStore({ path });
    try {
      expect(store.db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
      expect(await createSqliteRunStore(store).daemons()).toEqual([{ id: 'h-1-abc', host: 'h', pid: 1, agent: 'daemon-h-1', threads: 2, startedAt: 10, heartbeatAt: 20 }]);
      expect(store.db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'workers'").pluck().get()).toBe(0);
    } finally {
      await store.close();
    }
  });
});
