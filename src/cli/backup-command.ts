/**
 * `taskloop backup FILE`: a consistent copy of a live database, safe while daemons write.
 * It uses SQLite's online backup (through better-sqlite3's `db.backup()`), copying every
 * page within one read transaction, so the copy is one commit's state and the writers go
 * on meanwhile; copying the main file with cp while it is written is not (README: Operating
 * a live database). The copy never overwrites a file, and is checked (quick_check) before
 * the command reports success; a copy that failed is removed.
 */
import { closeSync, existsSync, openSync, rmSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { EngineError, createSqliteStore, storeError, unsafeFolder } from '../engine/index.js';
import type { Run } from './task-commands.js';

export function registerBackupCommand(program: Command, run: Run): void {
  program
    .command('backup <file>')
    .description('write a consistent copy of the database to FILE (a new file) while daemons keep running')
    .action(async (target: string, _o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const file = resolve(target);
        if (file === ctx.dbPath) throw new EngineError('VALIDATION_FAILED', `backup: ${file} is the database itself`);
        // A copy of everything, where no one else may plant its -wal (folder-check.ts).
        const unsafe = unsafeFolder(file, 'backup to');
        if (unsafe !== undefined) throw unsafe;
        const source = ctx.sqlite('backup (for PostgreSQL, use pg_dump)');
        // Created exclusively: an existing file (a previous backup, the database of another
        // install) is refused, never overwritten, and nothing else can take the name meanwhile.
        try {
          closeSync(openSync(file, 'wx', 0o600)); // a copy of everything: as private as a new database
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          throw new EngineError('VALIDATION_FAILED', code === 'EEXIST' ? `backup: ${file} exists; a backup never overwrites a file (remove it or name another)` : `backup: cannot create ${file}: ${code ?? String(err)}`);
        }
        let pages: number;
        try {
          // Everything in the second step: one read transaction, so no writer restarts it.
          ({ totalPages: pages } = await source.db.backup(file, { progress: () => 0x7fffffff }));
          const copy = createSqliteStore({ path: file, readonly: true });
          try {
            copy.quickCheck();
          } finally {
            await copy.close();
          }
          removeEmptyWal(file);
        } catch (err) {
          rmSync(file, { force: true });
          throw storeError(err, file, 'backup');
        }
        const bytes = statSync(file).size;
        ctx.out({ file, pages, bytes }, () => `backed up ${ctx.dbPath} to ${file} (${pages} pages, ${bytes} bytes, quick_check ok)`);
      }),
    );
}

/**
 * The copy is a WAL database (its header says so), and the check opened it: that leaves an
 * empty -wal and a -shm beside it, which belong to no one and make a one-file backup look
 * like three. The pages are all in the main file (the online backup writes there), so an
 * empty -wal and its index go; a -wal with anything in it is left as it is.
 */
function removeEmptyWal(file: string): void {
  const wal = `${file}-wal`;
  if (existsSync(wal) && statSync(wal).size > 0) return;
  rmSync(wal, { force: true });
  rmSync(`${file}-shm`, { force: true });
}
