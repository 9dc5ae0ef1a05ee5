/**
 * Desktop tools (seed 000): observe the screen, type, press keys, click, launch an
 * allowlisted program. nut.js (@nut-tree-fork/nut-js, an optional dependency) runs in a
 * host child process (client.ts); nothing here loads native code. Every call first checks
 * for a live X display and fails with DESKTOP_UNAVAILABLE without one.
 *
 * Every desktop tool is operatorOnly: the display is the operator's session, beyond any
 * scope a card can name, so an agent's card may neither watch it nor type, press or click
 * into it (a keystroke into a terminal starts programs as surely as launch_app does).
 *
 * `screen_snapshot` and `wait_for_window` only read; the others change the desktop and
 * count as write calls. None is idempotent: a write interrupted by a crash is an unknown
 * side effect, and the run asks a person rather than typing the text twice.
 */
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod/v4';
import type { TaskCard } from '../../engine/index.js';
import { type Tool, defineTool } from '../registry.js';
import { childEnv } from '../child-env.js';
import { desktopClient } from './client.js';
import { parseCombo } from './keys.js';
import type { WindowInfo } from './protocol.js';

export const screenSnapshot = defineTool({
  name: 'screen_snapshot',
  operatorOnly: true,
  description:
    'Takes a screenshot of the X display (attached to the next decision as an image) and lists the windows with their titles and geometry (x, y, width, height in screen pixels).',
  kind: 'read',
  image: true,
  timeoutMs: 15_000,
  maxOutputBytes: 16 * 1024 * 1024,
  args: z.object({ windows: z.boolean().default(true).describe('also list the windows') }),
  execute: ({ windows }, ctx) => desktopClient().call({ op: 'snapshot', windows }, ctx.signal),
});

export const waitForWindow = defineTool({
  name: 'wait_for_window',
  operatorOnly: true,
  description:
    'Waits until a window whose title contains the given text (or, with exact, is exactly it) is on screen, and returns it with its geometry.',
  kind: 'read',
  timeoutMs: 125_000,
  args: z.object({
    title: z.string().min(1).max(200).describe('text the window title contains (case-sensitive)'),
    exact: z.boolean().default(false).describe('the title must be exactly this (e.g. without the * of unsaved changes)'),
    timeout_ms: z.int().min(0).max(120_000).default(10_000),
  }),
  execute: async ({ title, exact, timeout_ms: timeoutMs }, ctx) => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const { windows } = (await desktopClient().call({ op: 'windows' }, ctx.signal)) as { windows: WindowInfo[] };
      const found = windows.find((w) => (exact ? w.title === title : w.title.includes(title)));
      if (found !== undefined) return { window: found };
      if (Date.now() >= until) throw new Error(`no window titled like ${JSON.stringify(title)} within ${timeoutMs} ms (on screen: ${windows.map((w) => JSON.stringify(w.title)).join(', ') || 'none'})`);
      await sleep(200, undefined, { signal: ctx.signal });
    }
  },
});

export const typeText = defineTool({
  name: 'type_text',
  operatorOnly: true,
  description: 'Types the text into the window that has the keyboard focus (move the pointer there or click it first).',
  kind: 'write',
  timeoutMs: 120_000,
  args: z.object({
    text: z.string().min(1).max(10_000),
    delay_ms: z.int().min(0).max(1000).default(0).describe('pause between keys'),
  }),
  execute: ({ text, delay_ms: delayMs }, ctx) => desktopClient().call({ op: 'type', text, delayMs }, ctx.signal),
});

export const pressKeys = defineTool({
  name: 'press_keys',
  operatorOnly: true,
  description: 'Presses a key or a combination of keys together, e.g. "ctrl+s", "ctrl+shift+t", "enter", "alt+f4".',
  kind: 'write',
  args: z.object({
    keys: z.string().min(1).max(100).superRefine((combo, ctx) => {
      const parsed = parseCombo(combo);
      if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.problem });
    }),
  }),
  execute: ({ keys }, ctx) => {
    const parsed = parseCombo(keys);
    if (!parsed.ok) throw new Error(parsed.problem);
    return desktopClient().call({ op: 'keys', keys: parsed.keys }, ctx.signal);
  },
});

export const click = defineTool({
  name: 'click',
  operatorOnly: true,
  description: 'Moves the pointer to (x, y) in screen pixels and clicks there.',
  kind: 'write',
  args: z.object({
    x: z.int().min(0).max(100_000),
    y: z.int().min(0).max(100_000),
    button: z.enum(['left', 'right', 'middle']).default('left'),
    double: z.boolean().default(false),
  }),
  execute: ({ x, y, button, double }, ctx) => desktopClient().call({ op: 'click', x, y, button, double }, ctx.signal),
});

const sameArgv = (a: string[], b: string[]) => a.length === b.length && a.every((s, i) => s === b[i]);
/** How long a started program is watched for an immediate failure (a bad flag, no display). */
const LAUNCH_SETTLE_MS = 500;

export const launchApp = defineTool({
  name: 'launch_app',
  operatorOnly: true,
  description: "Starts a program with exactly one of the argument vectors in the card's launch_allowlist; returns its pid.",
  kind: 'write',
  args: z.object({ argv: z.array(z.string().min(1).max(4096)).min(1).max(64) }),
  checkCard: (card: TaskCard) =>
    card.launch_allowlist === undefined || card.launch_allowlist.length === 0
      ? ['launch_allowlist: required because launch_app is allowed (list the exact argv it may start)']
      : [],
  admit: ({ argv }, card) =>
    (card.launch_allowlist ?? []).some((allowed) => sameArgv(allowed, argv))
      ? null
      : `launch_app: ${JSON.stringify(argv)} is not in the card's launch_allowlist`,
  execute: async ({ argv }, ctx) => {
    await desktopClient().requireDisplay();
    const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: 'ignore', env: childEnv() });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (err) => reject(new Error(`cannot start ${argv[0]}: ${err.message}`)));
    });
    // A desktop program outlives the run that started it; a quick failure still fails the step.
    const early = await Promise.race([
      new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))),
      sleep(LAUNCH_SETTLE_MS, 'running' as const, { signal: ctx.signal }),
    ]);
    if (early !== 'running' && early !== 0) throw new Error(`${argv[0]} exited at once with code ${early}`);
    child.unref();
    return { pid: child.pid, argv, running: early === 'running' };
  },
});

export const desktopTools: Tool[] = [screenSnapshot, waitForWindow, typeText, pressKeys, click, launchApp];
