/**
 * The desktop host: a child process that makes the nut.js calls for one daemon thread.
 * nut.js is native code; a crash in it (it segfaults on a display that goes away) ends
 * this process only, and the caller's step fails. Requests come one at a time over IPC.
 * The host exits when its parent goes away.
 */
import { PNG } from 'pngjs';
import type { HostOp, HostReply, HostRequest, Snapshot, WindowInfo } from './protocol.js';

/** The part of nut.js the host uses (typed here: nut.js is an optional dependency). */
interface Nut {
  screen: { grab(): Promise<{ width: number; height: number; data: Buffer; channels: number; colorMode: number }>; width(): Promise<number>; height(): Promise<number> };
  keyboard: { config: { autoDelayMs: number }; type(text: string): Promise<unknown>; pressKey(...keys: number[]): Promise<unknown>; releaseKey(...keys: number[]): Promise<unknown> };
  mouse: { config: { autoDelayMs: number }; setPosition(p: unknown): Promise<unknown>; click(b: number): Promise<unknown>; doubleClick(b: number): Promise<unknown> };
  getWindows(): Promise<Array<{ title: Promise<string>; region: Promise<{ left: number; top: number; width: number; height: number }> }>>;
  Point: new (x: number, y: number) => unknown;
  Button: Record<'LEFT' | 'RIGHT' | 'MIDDLE', number>;
  Key: Record<string, number>;
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

async function perform(req: HostOp): Promise<unknown> {
  const n = await loadNut();
  switch (req.op) {
    case 'snapshot':
      return snapshot(n, req.windows);
    case 'windows':
      return { windows: await windows(n) };
    case 'type':
      n.keyboard.config.autoDelayMs = req.delayMs;
      await n.keyboard.type(req.text);
      return { typed: [...req.text].length };
    case 'keys': {
      const codes = req.keys.map((k) => {
        const code = n.Key[k];
        if (code === undefined) throw new Error(`nut.js has no key ${k}`);
        return code;
      });
      await n.keyboard.pressKey(...codes);
      await n.keyboard.releaseKey(...[...codes].reverse());
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
