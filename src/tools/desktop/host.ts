/**
 * The desktop host: a child process that makes the nut.js calls for one daemon thread.
 * nut.js is native code; a crash in it (it segfaults on a display that goes away) ends
 * this process only, and the caller's step fails. Requests come one at a time over IPC.
 * The host exits when its parent goes away; it leads its own process group, so a stop that
 * kills it kills an xdotool it started too.
 */
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { PNG } from 'pngjs';
import type { HostOp, HostReply, HostRequest, Snapshot, WindowInfo } from './protocol.js';
import { nutKeyCode } from './keys.js';
import { nutStrokes } from './us-keys.js';

const execFileAsync = promisify(execFile);
/**
 * The least pause between keys of a line with remapped characters. xdotool maps a spare
 * keycode to each character in turn, and the window reads the mapping when it gets to the
 * key: with xdotool's own 12 ms a loaded machine drops characters, since the mapping has
 * already moved on (the desktop test failed 2 of 5 times beside two busy loops on 2 cores;
 * with 50 ms, 0 of 5).
 */
const XDOTOOL_DELAY_MS = 50;

/** The part of nut.js the host uses (typed here: nut.js is an optional dependency). */
interface Nut {
  screen: { grab(): Promise<{ width: number; height: number; data: Buffer; channels: number; colorMode: number }>; width(): Promise<number>; height(): Promise<number> };
  /** pressKey / releaseKey take modifiers first and the key last, in the same order for both. */
  keyboard: { config: { autoDelayMs: number }; pressKey(...keys: number[]): Promise<unknown>; releaseKey(...keys: number[]): Promise<unknown> };
  mouse: { config: { autoDelayMs: number }; setPosition(p: unknown): Promise<unknown>; click(b: number): Promise<unknown>; doubleClick(b: number): Promise<unknown> };
  getWindows(): Promise<Array<{ title: Promise<string>; region: Promise<{ left: number; top: number; width: number; height: number }> }>>;
  Point: new (x: number, y: number) => unknown;
  Button: Record<'LEFT' | 'RIGHT' | 'MIDDLE', number>;
  Key: Record<string, unknown>;
}

/** The code of a nut.js `Key` name; a name nut.js does not have is an error, never a prototype value. */
function keyCode(n: Nut, name: string): number {
  const code = nutKeyCode(n.Key, name);
  if (code === null) throw new Error(`nut.js has no key ${name}`);
  return code;
}

/** nut.js's ColorMode.BGR: the byte order X11 grabs come in. */
const BGR = 0;
/** Windows smaller than this are toolkit helpers (leader and focus windows), not something to act on. */
const MIN_WINDOW_PX = 32;
const NUT = '@nut-tree-fork/nut-js';

class Unavailable extends Error {}

let nut: Promise<Nut> | undefined;
function loadNut(): Promise<Nut> {
  nut ??= (import(NUT) as Promise<Nut>).then(
    (mod) => {
      mod.mouse.config.autoDelayMs = 0;
      return mod;
    },
    (err: unknown) => {
      throw new Unavailable(`${NUT} cannot be loaded (install the optional dependency): ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
    },
  );
  return nut;
}

async function windows(n: Nut): Promise<WindowInfo[]> {
  const out: WindowInfo[] = [];
  for (const w of await n.getWindows()) {
    const [title, r] = await Promise.all([w.title, w.region]);
    if (title === '' || r.width < MIN_WINDOW_PX || r.height < MIN_WINDOW_PX) continue;
    out.push({ title, x: r.left, y: r.top, width: r.width, height: r.height });
  }
  return out;
}

/** The screen as an opaque PNG: X11 grabs come as BGRA with a zero alpha under Xvfb. */
async function snapshot(n: Nut, withWindows: boolean): Promise<Snapshot> {
  const img = await n.screen.grab();
  const rgba = Buffer.alloc(img.width * img.height * 4);
  const src = img.data;
  const step = img.channels;
  for (let i = 0, o = 0; o < rgba.length; i += step, o += 4) {
    rgba[o] = src[img.colorMode === BGR ? i + 2 : i]!;
    rgba[o + 1] = src[i + 1]!;
    rgba[o + 2] = src[img.colorMode === BGR ? i : i + 2]!;
    rgba[o + 3] = 255;
  }
  // Written as RGB (colour type 2): no alpha channel at all, and a smaller file.
  const png = PNG.sync.write({ width: img.width, height: img.height, data: rgba } as PNG, { colorType: 2 });
  const shot: Snapshot = { width: img.width, height: img.height, image_png: png.toString('base64') };
  if (withWindows) shot.windows = await windows(n);
  return shot;
}

/**
 * Printable ASCII, Enter and Tab are pressed key by key through nut.js (see us-keys.ts).
 * Text with any other character goes to xdotool, a line at a time (this xdotool drops
 * newlines; Enter is pressed between lines); for a character with no key it maps a spare
 * keycode to it in turn.
 */
async function typeText(n: Nut, text: string, delayMs: number): Promise<{ typed: number; via: 'nut.js' | 'xdotool' }> {
  const normal = text.replace(/\r\n?/g, '\n');
  const typed = [...normal].length;
  const strokes = nutStrokes(normal);
  if (strokes !== null) {
    n.keyboard.config.autoDelayMs = 0;
    for (const keys of strokes) {
      const codes = keys.map((k) => keyCode(n, k));
      await n.keyboard.pressKey(...codes);
      await n.keyboard.releaseKey(...codes);
      if (delayMs > 0) await sleep(delayMs);
    }
    return { typed, via: 'nut.js' };
  }
  const lines = normal.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const remaps = /[^\x20-\x7e\t]/.test(line);
    // A remapped character needs a pause: the window must see each mapping before the next.
    if (line !== '') await xdotool(['type', '--delay', String(remaps ? Math.max(delayMs, XDOTOOL_DELAY_MS) : delayMs), '--', line]);
    if (i < lines.length - 1) await xdotool(['key', 'Return']);
  }
  return { typed, via: 'xdotool' };
}

async function xdotool(args: string[]): Promise<void> {
  try {
    await execFileAsync('xdotool', args);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error('text beyond ASCII needs xdotool (nut.js has no key for it): install xdotool');
    }
    throw new Error(`xdotool ${args[0]} failed: ${(err as Error).message.split('\n')[0]}`);
  }
}

async function perform(req: HostOp): Promise<unknown> {
  const n = await loadNut();
  switch (req.op) {
    case 'snapshot':
      return snapshot(n, req.windows);
    case 'windows':
      return { windows: await windows(n) };
    case 'type':
      return typeText(n, req.text, req.delayMs);
    case 'keys': {
      const codes = req.keys.map((k) => keyCode(n, k));
      await n.keyboard.pressKey(...codes);
      await n.keyboard.releaseKey(...codes);
      return { pressed: req.keys };
    }
    case 'click': {
      const [width, height] = await Promise.all([n.screen.width(), n.screen.height()]);
      if (req.x >= width || req.y >= height) throw new Error(`(${req.x}, ${req.y}) is outside the ${width}x${height} screen`);
      await n.mouse.setPosition(new n.Point(req.x, req.y));
      const button = n.Button[req.button.toUpperCase() as 'LEFT' | 'RIGHT' | 'MIDDLE'];
      await (req.double ? n.mouse.doubleClick(button) : n.mouse.click(button));
      return { x: req.x, y: req.y, button: req.button, double: req.double };
    }
  }
}

process.on('disconnect', () => process.exit(0));
process.on('message', (message: HostRequest) => {
  perform(message).then(
    (result) => reply({ id: message.id, ok: true, result }),
    (err: unknown) =>
      reply({ id: message.id, ok: false, error: err instanceof Error ? err.message.split('\n')[0]! : String(err), ...(err instanceof Unavailable ? { unavailable: true } : {}) }),
  );
});

function reply(r: HostReply): void {
  process.send?.(r);
}
