/**
 * Before a database is opened for writing (or a backup written): its folder must be beyond
 * other local users' reach (local-files.ts). SQLite keeps the `-wal` and `-shm` beside the
 * file and uses the ones it finds there: another user who may create files in the folder (a
 * shared `/tmp`, sticky or not) plants them first, then reads every commit of the owner's and
 * writes frames of their own (a task whose card runs a command, as the owner). A folder
 * another user owns, or one above it they may rename entries in, is theirs to swap. Refused
 * with STORE_UNSAFE, nothing opened or created.
 */
import { EngineError } from '../errors.js';
import { othersReach } from '../local-files.js';

/** STORE_UNSAFE for a folder of `file` (its real path: databasePath) that another user may write or owns. */
export function unsafeFolder(file: string, what: string): EngineError | undefined {
  const reach = othersReach(file);
  if (reach === undefined) return undefined;
  return new EngineError('STORE_UNSAFE', `${what} ${file}: ${reach.why}; another local user could plant its -wal and read or write every task (${reach.fix}); nothing was opened`, {
    folder: reach.at,
    mode: reach.mode,
    owner_uid: reach.uid,
  });
}
