/**
 * Before a database is opened for writing (or a backup written): it and its folder must be
 * beyond other local users' reach (local-files.ts). SQLite keeps the `-wal` and `-shm` beside
 * the file and uses the ones it finds there: another user who may create files in the folder
 * (a shared `/tmp`, sticky or not) plants them first, then reads every commit of the owner's
 * and writes frames of their own (a task whose card runs a command, as the owner). A file or
 * folder another user owns or may write, or a folder above it they may rename entries in, is
 * theirs to change or swap. Refused with STORE_UNSAFE before anything is written. Opening
 * makes the folder first and checks it then, so a folder someone else made meanwhile is seen.
 */
import { EngineError } from '../errors.js';
import { othersReach } from '../local-files.js';

/** STORE_UNSAFE for a database (or backup) file that another user may write or swap, or undefined. */
export function unsafeFolder(file: string, what: string): EngineError | undefined {
  const reach = othersReach(file, { file: true, beside: ['-wal', '-shm'] });
  if (reach === undefined) return undefined;
  return new EngineError('STORE_UNSAFE', `${what} ${file}: ${reach.why}; another local user could read or change the database, or plant its -wal (${reach.fix}); nothing was written`, {
    at: reach.at,
    mode: reach.mode,
    owner_uid: reach.uid,
  });
}
