/**
 * What `--tools` and `--plugin` name: a file (a path starting with `.` or `/`, or a name that
 * exists as a file under the working directory) or a package (resolved from taskloop's own
 * install, as Node resolves a bare specifier). A file's code runs with every power of the
 * process, so one that another local user could have written or swapped — the file, its
 * folder or one above it theirs or writable by others (local-files.ts has the rule) — is refused: a
 * name the owner meant as a package must not become a file another user planted in a shared
 * working folder (`@acme/tools` made there by someone else).
 */
import { existsSync, realpathSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { othersReach } from '../engine/index.js';

/** The specifier to import for `spec`; throws a one-line Error for a file within another user's reach. */
export function moduleUrl(spec: string, kind: 'tool' | 'plugin'): string {
  if (!(spec.startsWith('.') || isAbsolute(spec) || existsSync(resolve(spec)))) return spec;
  // Through any symbolic link: the file Node loads, in the folders that hold it.
  let file = resolve(spec);
  try {
    file = realpathSync(file);
  } catch {
    // Not there: the import says so.
  }
  const reach = othersReach(file, { file: true, modules: true });
  if (reach !== undefined) {
    throw new Error(`${kind} module ${spec} was not loaded: ${reach.why}, so another local user could change the code it runs as you (${reach.fix})`);
  }
  return pathToFileURL(file).href;
}
