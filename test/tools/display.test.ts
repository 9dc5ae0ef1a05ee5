import { existsSync, writeFileSync } from 'node:fs';
import { type Server, type Socket, createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { displayNumber, parseDisplay, probeDisplay } from '../../src/tools/desktop/display.js';
import { tempDir } from '../helpers.js';
import { freeDisplay, socketPath, startXvfb as startXvfbProcess } from '../fixtures/xvfb.js';

const COOKIE = 'MIT-MAGIC-COOKIE-1';
/** An environment that sends no cookie unless the test gives one. */
const noAuth = (dir: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({ XAUTHORITY: join(dir, 'absent'), HOME: dir, ...extra });

/** Xauthority records: family, then address, number, name and data as u16-BE counted strings. */
function xauthority(records: Array<{ number: string; name: string; data: Buffer }>): Buffer {
  const counted = (b: Buffer) => Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
  return Buffer.concat(
    records.map((r) =>
      Buffer.concat([Buffer.from([0x01, 0x00]), counted(Buffer.from('host')), counted(Buffer.from(r.number)), counted(Buffer.from(r.name)), counted(r.data)]),
    ),
  );
}

/** A real Xvfb on a free display, stopped when the test finishes; `stop()` ends it early. */
async function startXvfb(args: string[] = []): Promise<{ n: number; stop: () => Promise<void> }> {
  const x = await startXvfbProcess({ args });
  onTestFinished(x.stop);
  return x;
}

/** A fake X server on 127.0.0.1:6000+N that hands each complete setup request to `reply`. */
async function fakeTcpServer(reply: (request: Buffer, socket: Socket) => void): Promise<number> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    let got = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (got.length < 12) return;
      const size = 12 + ((got.readUInt16LE(6) + 3) & ~3) + ((got.readUInt16LE(8) + 3) & ~3);
      if (got.length >= size) reply(got.subarray(0, size), socket);
    });
    socket.on('error', () => {});
  });
  for (let n = 50; n < 150; n++) {
    const listening = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(6000 + n, '127.0.0.1', () => resolve(true));
    });
    if (listening) {
      onTestFinished(() => {
        for (const s of sockets) s.destroy();
        return new Promise<void>((resolve) => server.close(() => resolve()));
      });
      return n;
    }
  }
  throw new Error('no free TCP port in 6050..6149');
}

function failedReply(reason: string): Buffer {
  const padded = (reason.length + 3) & ~3;
  const head = Buffer.from([0, reason.length, 11, 0, 0, 0, 0, 0]);
  head.writeUInt16LE(padded / 4, 6);
  return Buffer.concat([head, Buffer.from(reason.padEnd(padded, '\0'), 'latin1')]);
}

describe('probeDisplay', () => {
  it('parses [host]:N[.S] and rejects anything else', () => {
    expect(parseDisplay(':0')).toEqual({ host: '', number: 0 });
    expect(parseDisplay('unix:12.1')).toEqual({ host: 'unix', number: 12 });
    expect(parseDisplay('localhost:10.0')).toEqual({ host: 'localhost', number: 10 });
    expect(displayNumber('x.example:3')).toBe(3);
    expect(displayNumber('nonsense')).toBeNull();
    expect(displayNumber(':')).toBeNull();
  });

  it('reports an unset or unparseable DISPLAY without connecting anywhere', async () => {
    expect(await probeDisplay({})).toEqual({ ok: false, reason: 'DISPLAY is not set' });
    expect(await probeDisplay({ DISPLAY: '' })).toEqual({ ok: false, reason: 'DISPLAY is not set' });
    const bad = await probeDisplay({ DISPLAY: 'nonsense' });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.reason).toMatch(/"nonsense" is not of the form/);
  });

  it('answers quickly, naming the display, when no server owns the display number', async () => {
    const n = freeDisplay(93);
    const started = Date.now();
    const status = await probeDisplay(noAuth(tempDir(), { DISPLAY: `:${n}` }));
    expect(status).toEqual({ ok: false, reason: `no X server at :${n} (connect ENOENT ${socketPath(n)})` });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('finds a live Xvfb, and no longer finds it once it has exited', async () => {
    const env = noAuth(tempDir());
    const xvfb = await startXvfb();
    expect(await probeDisplay({ ...env, DISPLAY: `:${xvfb.n}` })).toEqual({ ok: true, display: `:${xvfb.n}` });
    expect(await probeDisplay({ ...env, DISPLAY: `unix:${xvfb.n}.0` })).toEqual({ ok: true, display: `unix:${xvfb.n}.0` });
    await xvfb.stop();
    const after = await probeDisplay({ ...env, DISPLAY: `:${xvfb.n}` });
    expect(after.ok).toBe(false);
    expect(!after.ok && after.reason).toContain(`no X server at :${xvfb.n} (`);
  });

  it('probes back to back through the server resets they cause (Xvfb resets when its last client leaves)', async () => {
    const env = noAuth(tempDir());
    const xvfb = await startXvfb();
    const failures: string[] = [];
    // Without retries about 1 probe in 70 met a connection dropped mid-reset (ECONNRESET).
    for (let i = 0; i < 150; i++) {
      const status = await probeDisplay({ ...env, DISPLAY: `:${xvfb.n}` });
      if (!status.ok) failures.push(status.reason);
    }
    expect(failures).toEqual([]);
  });

  it('a real Xvfb started with -auth accepts the matching cookie and refuses a client without one', async () => {
    const dir = tempDir();
    const cookie = Buffer.from('00112233445566778899aabbccddeeff', 'hex');
    const authFile = join(dir, 'Xauthority');
    writeFileSync(authFile, xauthority([{ number: '', name: COOKIE, data: cookie }]));
    const xvfb = await startXvfb(['-auth', authFile]);
    expect(await probeDisplay({ DISPLAY: `:${xvfb.n}`, XAUTHORITY: authFile })).toEqual({ ok: true, display: `:${xvfb.n}` });
    const refused = await probeDisplay(noAuth(dir, { DISPLAY: `:${xvfb.n}` }));
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.reason).toMatch(new RegExp(`^X server at :${xvfb.n} refused the connection: .*[Aa]uthorization`));
  });

  it('reports the reason string of a Failed setup reply', async () => {
    let request: Buffer = Buffer.alloc(0);
    const n = await fakeTcpServer((req, socket) => {
      request = req;
      socket.end(failedReply('Protocol version mismatch, try again'));
    });
    const status = await probeDisplay(noAuth(tempDir(), { DISPLAY: `127.0.0.1:${n}` }));
    expect(status).toEqual({ ok: false, reason: `X server at 127.0.0.1:${n} refused the connection: Protocol version mismatch, try again` });
    // Little-endian, protocol 11.0, empty auth name and data.
    expect([...request]).toEqual([0x6c, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  });

  it('sends the first MIT-MAGIC-COOKIE-1 for the display number from the Xauthority file', async () => {
    const dir = tempDir();
    const cookie = Buffer.from('deadbeefcafef00d0123456789abcdef', 'hex');
    let request: Buffer = Buffer.alloc(0);
    const n = await fakeTcpServer((req, socket) => {
      request = req;
      socket.write(Buffer.from([1, 0, 11, 0, 0, 0, 0, 0]));
    });
    const authFile = join(dir, 'xauth');
    writeFileSync(
      authFile,
      xauthority([
        { number: String(n + 1), name: COOKIE, data: Buffer.alloc(16, 1) },
        { number: String(n), name: 'XDM-AUTHORIZATION-1', data: Buffer.alloc(16, 2) },
        { number: String(n), name: COOKIE, data: cookie },
        { number: '', name: COOKIE, data: Buffer.alloc(16, 3) },
      ]),
    );
    expect(await probeDisplay({ DISPLAY: `127.0.0.1:${n}`, XAUTHORITY: authFile })).toEqual({ ok: true, display: `127.0.0.1:${n}` });
    expect(request.subarray(0, 6)).toEqual(Buffer.from([0x6c, 0, 11, 0, 0, 0]));
    expect(request.readUInt16LE(6)).toBe(COOKIE.length);
    expect(request.readUInt16LE(8)).toBe(16);
    expect(request.subarray(12, 12 + COOKIE.length).toString('latin1')).toBe(COOKIE);
    expect(request.subarray(12, 32).subarray(COOKIE.length)).toEqual(Buffer.alloc(2)); // padded to 4 bytes
    expect(request.subarray(32)).toEqual(cookie);
  });

  it('says the server asks for authentication on an Authenticate reply, and gives up on a silent server', async () => {
    const env = noAuth(tempDir());
    const asks = await fakeTcpServer((_req, socket) => socket.end(Buffer.from([2, 0, 0, 0, 0, 0, 0, 0])));
    expect(await probeDisplay({ ...env, DISPLAY: `127.0.0.1:${asks}` })).toEqual({ ok: false, reason: `X server at 127.0.0.1:${asks} asks for authentication` });
    const silent = await fakeTcpServer(() => {});
    const started = Date.now();
    expect(await probeDisplay({ ...env, DISPLAY: `127.0.0.1:${silent}` }, 200)).toEqual({ ok: false, reason: `no X server at 127.0.0.1:${silent} (no reply within 200 ms)` });
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it.runIf(process.platform === 'linux')('falls back to the abstract socket when the socket file is absent', async () => {
    const n = freeDisplay(120);
    // resume(): the request must be drained, or the connection never closes and neither does the server.
    const server = createServer((socket) => socket.resume().end(Buffer.from([1, 0, 11, 0, 0, 0, 0, 0])));
    await new Promise<void>((resolve) => server.listen(`\0${socketPath(n)}`, () => resolve()));
    onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
    expect(existsSync(socketPath(n))).toBe(false);
    expect(await probeDisplay(noAuth(tempDir(), { DISPLAY: `:${n}` }))).toEqual({ ok: true, display: `:${n}` });
  });
});
