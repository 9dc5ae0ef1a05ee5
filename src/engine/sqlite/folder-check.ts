/**
 * Before a database is opened for writing (or a backup written): its folder must be beyond
 * other local users' reach. SQLite keeps the `-wal` and `-shm` beside the file and uses the
 * ones it finds there: another user who may create files in the folder (a shared `/tmp`,
 * sticky or not) plants them first, then reads every commit of the owner's and writes frames
 * of their own (a task whose card runs a command, as the owner). A folder another user owns,
 * or one above it they may rename entries in, is theirs to swap. Refused with STORE_UNSAFE,
 * nothing opened or created; the same rule as the HTTP token file's folder.
 *
 * What passes: folders owned by this user or root, none writable by others except the
 * sticky ones above the database's own (`/tmp` itself, whose entries only their owners may
 * rename). A folder writable by its group is the owner's sharing choice, as the file's mode
 * is. Not checked where there are no Unix owners (Windows).
 */
import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { EngineError } from '../errors.js';

const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, '0');

/** STORE_UNSAFE for a folder of `file` (its real path: databasePath) that another user may write or owns. */
export function unsafeFolder(file: string, what: string): EngineError | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const own = dirname(resolve(file));
  for (let dir = own; ; dir = dirname(dir)) {
    let st;
    try {
      st = statSync(dir);
    } catch {
      if (dir === dirname(dir)) return undefined;
      continue; // not there yet: made 0700 by the open, or it says why not
    }
    const refuse = (why: string, fix: string) =>
      new EngineError('STORE_UNSAFE', `${what} ${file}: ${why}; another local user could plant its -wal and read or write every task (${fix}); nothing was opened`, {
        folder: dir,
        mode: octal(st.mode),
        owner_uid: st.uid,
      });
    if (st.uid !== uid && st.uid !== 0) {
      return refuse(`the folder ${dir} belongs to another user (uid ${st.uid})`, 'keep the database in a folder of your own, or run as that user');
    }
    const sticky = (st.mode & 0o1000) !== 0;
    if ((st.mode & 0o002) !== 0 && (dir === own || !sticky)) {
      return refuse(`the folder ${dir} is writable by every user (mode ${octal(st.mode)})`, dir === own ? 'keep the database in a folder of its own, e.g. mkdir -m 700' : `run chmod o-w ${dir}`);
    }
    if (dir === dirname(dir)) return undefined;
  }
}
