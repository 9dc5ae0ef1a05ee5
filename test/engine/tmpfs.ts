/**
 * A real small filesystem for the disk-full tests: a tmpfs mounted for one test. Mounting
 * needs root (CI runs as root); without it the test fails saying so, rather than passing
 * by not running.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/** Mounts a tmpfs of `size` (mount's syntax: `2m`) on a new folder, unmounted when the test finishes. */
export function mountTmpfs(size = '2m'): string {
  if (process.getuid?.() !== 0) {
    throw new Error('this test mounts a tmpfs to fill a real disk, which needs root (CI runs as root): run it as root');
  }
  const dir = mkdtempSync(join(tmpdir(), 'taskloop-tmpfs-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir]);
  onTestFinished(() => {
    // Lazy: a daemon child still holding a file there (it is killed by its own cleanup) must not keep the mount.
    execFileSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Bytes an unprivileged writer may still use on the filesystem holding `dir`. */
export function freeBytes(dir: string): number {
  const s = statfsSync(dir);
  return s.bavail * s.bsize;
}

/** Writes `file` until the filesystem is full (ENOSPC). */
export function fill(file: string): void {
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(4096, 0x5a);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
}
