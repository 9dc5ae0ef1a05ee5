/**
 * Whether another local user could change what is at a path: plant or swap a file beside it
 * (the database's -wal), or edit it (a tools module). Shared by the store's folder check
 * (sqlite/folder-check.ts) and the loading of `--tools` and `--plugin` files.
 *
 * What passes: folders owned by this user or root, none writable by every user except sticky
 * ones above the path's own folder (`/tmp` itself, whose entries only their owners may
 * rename). A folder or file writable by its group is the owner's sharing choice, as a file's
 * mode is. Not checked where there are no Unix owners (Windows). Same rule as the HTTP token
 * file's folder (monitor/http/token-file.ts), which also refuses a group's write.
 */
import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** Where another user reaches: the folder (or file) and why, in words for a one-line refusal. */
export interface OthersReach {
  at: string;
  why: string;
  fix: string;
  mode: string;
  uid: number;
}

const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, '0');

/**
 * The first place on the way to `path` (absolute or relative to the working directory) that
 * another user owns or may write; with `file`, the file itself too (when it exists).
 */
export function othersReach(path: string, opts: { file?: boolean } = {}): OthersReach | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const full = resolve(path);
  const own = dirname(full);
  for (let at = opts.file === true ? full : own; ; at = dirname(at)) {
    const top = at === dirname(at);
    let st;
    try {
      st = statSync(at);
    } catch {
      if (top) return undefined;
      continue; // not there (yet): the caller's own open or import says why
    }
    const reach = (why: string, fix: string): OthersReach => ({ at, why, fix, mode: octal(st.mode), uid: st.uid });
    const what = at === full ? 'the file' : 'the folder';
    if (st.uid !== uid && st.uid !== 0) return reach(`${what} ${at} belongs to another user (uid ${st.uid})`, `keep it in a folder of your own, or run as that user`);
    const sticky = st.isDirectory() && (st.mode & 0o1000) !== 0;
    if ((st.mode & 0o002) !== 0 && (at === full || at === own || !sticky)) {
      return reach(`${what} ${at} is writable by every user (mode ${octal(st.mode)})`, at === own ? 'keep it in a folder of its own, e.g. mkdir -m 700' : `run chmod o-w ${at}`);
    }
    if (top) return undefined;
  }
}
