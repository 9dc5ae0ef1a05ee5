/**
 * Whether another local user could change what is at a path: plant or swap a file beside it
 * (the database's -wal), edit it, or put a package where its imports look (a tools module).
 * Shared by the store's folder check (sqlite/folder-check.ts) and the loading of `--tools`
 * and `--plugin` files. The HTTP token file's folder (monitor/http/token-file.ts) is held to
 * the same rule for that one folder.
 *
 * What passes, judged on real paths (through symbolic links, also for folders not made yet):
 * - the path's own folder: owned by this user or root, not writable by others, and writable
 *   by its group only if it is this user's own (a group's write on a folder of yours is your
 *   choice — and with a umask of 002, where each user has a group of their own, every folder
 *   you make has it —, on root's it is a team's: root:team 2775);
 * - every folder above: owned by this user or root, and writable by others (or, on root's,
 *   by its group) only with the sticky bit (`/tmp` itself: only an entry's owner may rename
 *   it);
 * - the files named (the path itself, the -wal and -shm), where they exist: the same as a
 *   folder holding it;
 * - for code (`modules`): no `node_modules` of another user's in a folder above that
 *   everyone may write, where Node would look for the file's bare imports.
 * Sharing a database with a group is for reading (`chmod 640`); several users writing one
 * store is PostgreSQL's job. Not checked where there are no Unix owners (Windows).
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

/** Where another user reaches: the folder (or file) and why, in words for a one-line refusal. */
export interface OthersReach {
  at: string;
  why: string;
  fix: string;
  mode: string;
  uid: number;
}

export interface ReachOptions {
  /** Also the file at `path` itself. */
  file?: boolean;
  /** Files beside it to judge as the file (suffixes: `-wal`, `-shm`). */
  beside?: string[];
  /** The path is code: its bare imports must not find another user's `node_modules`. */
  modules?: boolean;
}

const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, '0');
const stat = (path: string) => {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
};

/** The real path of `path`: its deepest existing folder resolved through links, the rest as given. */
function realPath(path: string): string {
  let at = resolve(path);
  const rest: string[] = [];
  for (;;) {
    try {
      return join(realpathSync(at), ...rest);
    } catch {
      if (at === dirname(at)) return resolve(path);
      rest.unshift(basename(at));
      at = dirname(at);
    }
  }
}

/**
 * Who besides `uid` may write a file or folder of this owner and mode: every user, or its
 * group when it is not `uid`'s own (see the module's rule), else undefined.
 */
export function otherWriters(st: { uid: number; mode: number }, uid: number): 'every user' | 'its group' | undefined {
  if ((st.mode & 0o002) !== 0) return 'every user';
  return (st.mode & 0o020) !== 0 && st.uid !== uid ? 'its group' : undefined;
}

/** The first place on the way to `path` that another user owns or may write (see the module's rule). */
export function othersReach(path: string, opts: ReachOptions = {}): OthersReach | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const full = realPath(path);
  const own = dirname(full);
  const theirs = (st: { uid: number }) => st.uid !== uid && st.uid !== 0;
  const writers = (st: { uid: number; mode: number }) => otherWriters(st, uid);
  const files = [...(opts.file === true ? [full] : []), ...(opts.beside ?? []).map((suffix) => `${full}${suffix}`)];
  for (const file of files) {
    const st = stat(file);
    if (st === undefined) continue;
    const reach = (why: string, fix: string): OthersReach => ({ at: file, why, fix, mode: octal(st.mode), uid: st.uid });
    if (theirs(st)) return reach(`the file ${file} belongs to another user (uid ${st.uid})`, 'remove it, or run as that user');
    const w = writers(st);
    if (w !== undefined) return reach(`the file ${file} is writable by ${w} (mode ${octal(st.mode)})`, `run chmod go-w ${file}`);
  }
  for (let at = own; ; at = dirname(at)) {
    const top = at === dirname(at);
    const st = stat(at);
    if (st !== undefined) {
      const reach = (why: string, fix: string): OthersReach => ({ at, why, fix, mode: octal(st.mode), uid: st.uid });
      if (theirs(st)) return reach(`the folder ${at} belongs to another user (uid ${st.uid})`, 'keep it in a folder of your own, or run as that user');
      const sticky = (st.mode & 0o1000) !== 0;
      const who = writers(st);
      if (who !== undefined && (at === own || !sticky)) {
        return reach(`the folder ${at} is writable by ${who} (mode ${octal(st.mode)})`, at === own && sticky ? 'keep it in a folder of its own, e.g. mkdir -m 700' : `run chmod go-w ${at}`);
      }
      if (opts.modules === true && (st.mode & 0o002) !== 0) {
        const lookedIn = join(at, 'node_modules');
        const found = existsSync(lookedIn) ? stat(lookedIn) : undefined;
        if (found !== undefined && theirs(found)) {
          return reach(`${lookedIn}, where its imports are looked for, belongs to another user (uid ${found.uid})`, `keep it out of ${at}`);
        }
      }
    }
    if (top) return undefined;
  }
}
