/**
 * Helpers of the wake-up tests (wake files, NOTIFY channels, createWorker's watches): a
 * subscriber's wake count, a wait for it to move, and this process's inotify watches.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** A subscriber's wake count (`hit` is the listener) and when each wake came. */
export function counter() {
  const c = { n: 0, at: [] as number[], hit: () => void (c.n++, c.at.push(performance.now())) };
  return c;
}

/** Whether `c` was woken past `mark` within `ms`. */
export async function wokeAfter(c: { n: number }, mark: number, ms = 3000): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until && c.n <= mark) await sleep(10);
  return c.n > mark;
}

/** The inodes this process's inotify watches are on (libuv's inotify fd, /proc/self/fdinfo). */
export function inotifyInodes(): number[] {
  const out: number[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) !== 'anon_inode:inotify') continue;
      for (const m of readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8').matchAll(/inotify wd:\S+ ino:([0-9a-f]+)/g)) out.push(parseInt(m[1]!, 16));
    } catch {
      // closed meanwhile
    }
  }
  return out;
}
