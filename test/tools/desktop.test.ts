/**
 * The desktop tools against a real Xvfb and a real editor (mousepad), through the real
 * nut.js in the host child process. The host runs compiled: `npm test` builds first.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCardWithTools } from '../../src/workers/card-check.js';
import { executeTool } from '../../src/workers/execute.js';
import { createDesktopClient } from '../../src/tools/desktop/client.js';
import { desktopTools } from '../../src/tools/desktop/tools.js';
import { builtInTools } from '../../src/tools/builtin.js';
import { createToolRegistry, type Tool } from '../../src/tools/registry.js';
import { ROOT, waitFor } from '../helpers.js';
import { freeDisplay, startXvfb, type Xvfb } from '../fixtures/xvfb.js';

const tool = (name: string): Tool => desktopTools.find((t) => t.name === name)!;
const ctx = { taskId: 1, runId: 1, agent: 'desk', idempotencyKey: 'k', services: {} };
const run = (name: string, args: Record<string, unknown>, signal = new AbortController().signal) => executeTool(tool(name), tool(name).parse(args), ctx, signal);
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('desktop tools without a display', () => {
  it('fail with DESKTOP_UNAVAILABLE before any host starts', async () => {
    const saved = process.env.DISPLAY;
    delete process.env.DISPLAY;
    try {
      const out = await run('screen_snapshot', {});
      expect(out).toMatchObject({ ok: false, error: 'screen_snapshot: DESKTOP_UNAVAILABLE: no live X display: DISPLAY is not set' });
    } finally {
      if (saved !== undefined) process.env.DISPLAY = saved;
    }
    const client = createDesktopClient({ env: { DISPLAY: `:${freeDisplay(140)}` } });
    const err = await client.call({ op: 'type', text: 'x', delayMs: 0 }, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DESKTOP_UNAVAILABLE', message: expect.stringMatching(/^no live X display: no X server at :\d+ \(connect ENOENT/) });
    expect(client.hostPid()).toBeNull();
  });
});

describe('desktop tools under Xvfb', () => {
  let x: Xvfb;
  const dir = mkdtempSync(join(tmpdir(), 'taskloop-desktop-'));
  const file = join(dir, 'note.txt');
  const pids: number[] = [];

  beforeAll(async () => {
    x = await startXvfb({ size: '1024x768x24', from: 100 });
    process.env.DISPLAY = x.display;
    process.env.NO_AT_BRIDGE = '1';
    process.env.XDG_CONFIG_HOME = join(dir, 'config');
  });
  afterAll(async () => {
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
    await x.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('launch_app starts only an allowlisted argv; a card allowing it must list some', async () => {
    const launch = tool('launch_app');
    const card = { launch_allowlist: [['mousepad', file]] } as never;
    expect(launch.admit({ argv: ['mousepad', file] }, card)).toBeNull();
    expect(launch.admit({ argv: ['mousepad', '/etc/passwd'] }, card)).toBe(`launch_app: ["mousepad","/etc/passwd"] is not in the card's launch_allowlist`);
    const tools = createToolRegistry(builtInTools());
    const base = { goal: 'g', allowed_tools: ['launch_app'], budget: { max_steps: 3 }, acceptance: { manual: ['look'] }, script: [{ action: 'done' }] };
    const checked = checkCardWithTools(base, tools);
    expect(checked.ok ? [] : checked.problems).toEqual(['launch_allowlist: required because launch_app is allowed (list the exact argv it may start)']);
    expect(checkCardWithTools({ ...base, launch_allowlist: [['mousepad', file]] }, tools).ok).toBe(true);

    const missing = await run('launch_app', { argv: ['/nonexistent/editor'] });
    expect(missing).toMatchObject({ ok: false, error: 'launch_app: cannot start /nonexistent/editor: spawn /nonexistent/editor ENOENT' });
    const started = await run('launch_app', { argv: ['mousepad', file] });
    expect(started).toMatchObject({ ok: true, result: { argv: ['mousepad', file], running: true } });
    pids.push((started as { result: { pid: number } }).result.pid);
  });

  it('screen_snapshot returns an opaque PNG of the screen and the windows with their geometry', async () => {
    const found = await run('wait_for_window', { title: 'note.txt' });
    expect(found).toMatchObject({ ok: true, result: { window: { title: expect.stringContaining(file), width: expect.any(Number) } } });
    const out = await run('screen_snapshot', {});
    expect(out.ok).toBe(true);
    const shot = (out as { result: { width: number; height: number; windows: Array<Record<string, unknown>>; image_png: string } }).result;
    expect([shot.width, shot.height]).toEqual([1024, 768]);
    expect(shot.windows).toContainEqual({ title: expect.stringContaining('note.txt - Mousepad'), x: 0, y: 0, width: expect.any(Number), height: expect.any(Number) });
    // Toolkit helper windows (tiny, untitled) are left out.
    expect(shot.windows.every((w) => (w.width as number) >= 32 && (w.height as number) >= 32 && w.title !== '')).toBe(true);

    const bytes = Buffer.from(shot.image_png, 'base64');
    mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
    writeFileSync(join(ROOT, 'test-artifacts/desktop-snapshot.png'), bytes);
    const png = PNG.sync.read(bytes);
    expect([png.width, png.height]).toEqual([1024, 768]);
    // Xvfb grabs come with alpha 0: decoded, every pixel must be opaque.
    let transparent = 0;
    const colours = new Set<number>();
    for (let i = 0; i < png.data.length; i += 4) {
      if (png.data[i + 3] !== 255) transparent++;
      colours.add(png.data.readUInt32BE(i));
    }
    expect(transparent).toBe(0);
    // The editor's window is drawn (a blank screen has one colour).
    expect(colours.size).toBeGreaterThan(10);
  });

  it('click, type_text and press_keys drive the editor: ctrl+s saves the text', async () => {
    expect(await run('click', { x: 320, y: 240 })).toMatchObject({ ok: true, result: { x: 320, y: 240, button: 'left' } });
    expect(await run('type_text', { text: 'hello from taskloop' })).toMatchObject({ ok: true, result: { typed: 19 } });
    expect(await run('press_keys', { keys: 'ctrl+s' })).toMatchObject({ ok: true, result: { pressed: ['LeftControl', 'S'] } });
    // The title loses its * once the file is saved.
    expect(await run('wait_for_window', { title: `${file} - Mousepad`, exact: true })).toMatchObject({ ok: true });
    expect(readFileSync(file, 'utf8')).toBe('hello from taskloop');
  });

  it('type_text types every ASCII character, lines, tabs and text beyond ASCII exactly; no key stays down', async () => {
    const second = join(dir, 'second.txt');
    const started = await run('launch_app', { argv: ['mousepad', second] });
    pids.push((started as { result: { pid: number } }).result.pid);
    expect(await run('wait_for_window', { title: 'second.txt' })).toMatchObject({ ok: true });
    await run('click', { x: 320, y: 240 });
    const ascii = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');
    expect(await run('type_text', { text: `${ascii}\nTab\there\r\n` })).toMatchObject({ ok: true, result: { typed: 95 + 10, via: 'nut.js' } });
    expect(await run('type_text', { text: 'Grüße, 你好\nnext line' })).toMatchObject({ ok: true, result: { typed: 19, via: 'xdotool' } });
    // After ctrl+s nothing is held: the s of the next text comes out once.
    expect(await run('press_keys', { keys: 'ctrl+s' })).toMatchObject({ ok: true });
    expect(await run('type_text', { text: '\nss' })).toMatchObject({ ok: true, result: { via: 'nut.js' } });
    expect(await run('press_keys', { keys: 'ctrl+s' })).toMatchObject({ ok: true });
    await run('wait_for_window', { title: `${second} - Mousepad`, exact: true });
    expect(readFileSync(second, 'utf8')).toBe(`${ascii}\nTab\there\nGrüße, 你好\nnext line\nss`);
  });

  it('refuses bad keys and off-screen clicks without crashing the host', async () => {
    expect(() => tool('press_keys').parse({ keys: 'ctrl+bogus' })).toThrow(/press_keys: argument keys: unknown key "bogus"/);
    expect(() => tool('press_keys').parse({ keys: 'ctrl++' })).toThrow(/an empty key/);
    expect(() => tool('click').parse({ x: -1, y: 0 })).toThrow(/click: argument x/);
    expect(await run('click', { x: 5000, y: 10 })).toMatchObject({ ok: false, error: 'click: (5000, 10) is outside the 1024x768 screen' });
    expect(await run('wait_for_window', { title: 'no such window', timeout_ms: 300 })).toMatchObject({ ok: false, error: expect.stringMatching(/no window titled like "no such window" within 300 ms \(on screen: ".*Mousepad"/) });
  });

  it('a host that crashes fails only the call in flight; the next call starts a new host', async () => {
    const client = createDesktopClient();
    const signal = new AbortController().signal;
    // Typed over the bare root window (the editor covers 640x480 from the corner): the keys go nowhere.
    await client.call({ op: 'click', x: 900, y: 700, button: 'left', double: false }, signal);
    const first = client.hostPid()!;
    const typing = client.call({ op: 'type', text: 'z'.repeat(2000), delayMs: 5 }, signal).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 300));
    process.kill(first, 'SIGSEGV');
    // What it typed before it died is not known: the call's outcome is unknown, not failed.
    expect(await typing).toMatchObject({ code: 'TOOL_OUTCOME_UNKNOWN', message: expect.stringMatching(/^the desktop host crashed \(SIGSEGV\) during type/) });
    const after = (await client.call({ op: 'windows' }, signal)) as { windows: unknown[] };
    expect(after.windows.length).toBeGreaterThan(0);
    expect(client.hostPid()).not.toBe(first);
    client.close();
  });

  it('a host that cannot start fails the call with its last words, and nothing else', async () => {
    const client = createDesktopClient({ hostPath: join(dir, 'no-such-host.js') });
    const err = await client.call({ op: 'windows' }, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ message: expect.stringMatching(/^the desktop host exited with code 1 during windows: .*Cannot find module/) });
    expect(client.hostPid()).toBeNull();
  });

  it('an aborted call (a stop) kills the host at once, so typing stops mid-text', async () => {
    const client = createDesktopClient();
    const stop = new AbortController();
    await client.call({ op: 'click', x: 900, y: 700, button: 'left', double: false }, stop.signal);
    const pid = client.hostPid()!;
    const typing = client.call({ op: 'type', text: 'z'.repeat(2000), delayMs: 5 }, stop.signal).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 200));
    stop.abort('user_stop');
    expect(await typing).toBe('user_stop');
    await waitFor(() => !alive(pid), 2000, 'the host to be gone');
    expect(client.hostPid()).toBeNull();
  });
});

describe('a display that goes away', () => {
  it('fails the call in flight (the host dies with the X connection), then DESKTOP_UNAVAILABLE', async () => {
    const x = await startXvfb({ from: 150 });
    const client = createDesktopClient({ env: { ...process.env, DISPLAY: x.display } });
    const signal = new AbortController().signal;
    try {
      const typing = client.call({ op: 'type', text: 'x'.repeat(3000), delayMs: 5 }, signal).catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 500));
      await x.stop();
      // libX11 ends the host on a lost server: exit(1) on its IO error, or a signal (SIGPIPE) when a write hits the closed socket.
      expect(await typing).toMatchObject({ message: expect.stringMatching(/^the desktop host (exited with code 1|crashed \(SIG[A-Z]+\)) during type/) });
      const next = await client.call({ op: 'windows' }, signal).catch((e: unknown) => e);
      expect(next).toMatchObject({ code: 'DESKTOP_UNAVAILABLE', message: expect.stringMatching(/^no live X display: no X server at :\d+/) });
      expect(client.hostPid()).toBeNull();
    } finally {
      client.close();
      await x.stop();
    }
  });
});
