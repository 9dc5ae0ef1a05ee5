/**
 * Is the X display live? Answered by speaking the first step of the X11 protocol over a
 * plain socket, so that no native code (nut.js, libX11) is loaded just to find out.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { type NetConnectOpts, connect } from 'node:net';
import { homedir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';

export type DisplayStatus = { ok: true; display: string } | { ok: false; reason: string };

const COOKIE = 'MIT-MAGIC-COOKIE-1';
const pad4 = (n: number): number => (n + 3) & ~3;

/** Splits `[host]:N[.S]`; null when the string is not in that form. */
export function parseDisplay(display: string): { host: string; number: number } | null {
  const m = /^(.*):(\d+)(?:\.\d+)?$/.exec(display);
  return m ? { host: m[1]!, number: Number(m[2]) } : null;
}

/** The display number N of `[host]:N[.S]`, or null when unparseable. */
export function displayNumber(display: string): number | null {
  return parseDisplay(display)?.number ?? null;
}

/**
 * The first MIT-MAGIC-COOKIE-1 record in an Xauthority file whose display number is `n`
 * (or empty). A missing, unreadable or truncated file yields no cookie, not an error.
 */
async function readCookie(file: string, n: number): Promise<Buffer | null> {
  let buf: Buffer;
  try {
    buf = await readFile(file);
  } catch {
    return null;
  }
  let at = 0;
  const counted = (): Buffer | null => {
    if (at + 2 > buf.length) return null;
    const len = buf.readUInt16BE(at);
    if (at + 2 + len > buf.length) return null;
    const s = buf.subarray(at + 2, at + 2 + len);
    at += 2 + len;
    return s;
  };
  while (at + 2 <= buf.length) {
    at += 2; // family: any, the display number decides
    const [, number, name, data] = [counted(), counted(), counted(), counted()];
    if (!number || !name || !data) return null;
    const num = number.toString('latin1');
    if ((num === '' || num === String(n)) && name.toString('latin1') === COOKIE) return Buffer.from(data);
  }
  return null;
}

/** The connection setup request: little-endian, protocol 11.0, optional auth. */
function setupRequest(cookie: Buffer | null): Buffer {
  const name = cookie ? Buffer.from(COOKIE, 'latin1') : Buffer.alloc(0);
  const data = cookie ?? Buffer.alloc(0);
  const req = Buffer.alloc(12 + pad4(name.length) + pad4(data.length));
  req.write('l', 0, 'latin1');
  req.writeUInt16LE(11, 2);
  req.writeUInt16LE(0, 4);
  req.writeUInt16LE(name.length, 6);
  req.writeUInt16LE(data.length, 8);
  name.copy(req, 12);
  data.copy(req, 12 + pad4(name.length));
  return req;
}

type Outcome = { status: number; reason: string } | { error: string };

/** A connection dropped by a server in the middle of a reset. */
const RESET_ERRORS = /ECONNRESET|EPIPE|closed without a reply/;
const RESET_RETRIES = 3;
const RESET_PAUSE_MS = 25;

/** One attempt: connect, send `request`, read the setup reply's status (and reason when Failed). */
function handshake(opts: NetConnectOpts, request: Buffer, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    let got = Buffer.alloc(0);
    let settled = false;
    const socket = connect(opts);
    const finish = (outcome: Outcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ error: `no reply within ${timeoutMs} ms` }), timeoutMs);
    const failedReason = (complete: boolean): string | null => {
      const len = got.length >= 2 ? got[1]! : 0;
      if (got.length < 8 + len && !complete) return null;
      return got.subarray(8, 8 + len).toString('latin1');
    };
    socket.on('connect', () => socket.write(request));
    socket.on('error', (err) => finish({ error: err.message.replaceAll('\0', '@') }));
    socket.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (got[0] !== 0) return finish({ status: got[0]!, reason: '' });
      const reason = failedReason(false);
      if (reason !== null) finish({ status: 0, reason });
    });
    socket.on('end', () => {
      if (got.length > 0) finish({ status: got[0]!, reason: got[0] === 0 ? (failedReason(true) ?? '') : '' });
      else finish({ error: 'closed without a reply' });
    });
  });
}

/** Checks that the X display named by `env.DISPLAY` is live, without loading any native code. Never throws. */
export async function probeDisplay(env: NodeJS.ProcessEnv = process.env, timeoutMs = 2000): Promise<DisplayStatus> {
  const display = env.DISPLAY;
  if (!display) return { ok: false, reason: 'DISPLAY is not set' };
  const parsed = parseDisplay(display);
  if (!parsed) return { ok: false, reason: `DISPLAY=${JSON.stringify(display)} is not of the form [host]:N[.S]` };
  const { host, number } = parsed;
  try {
    const home = env.HOME || homedir();
    const cookie = await readCookie(env.XAUTHORITY || join(home, '.Xauthority'), number);
    const request = setupRequest(cookie);
    const attempt = async (): Promise<Outcome> => {
      if (host !== '' && host !== 'unix') return handshake({ host, port: 6000 + number }, request, timeoutMs);
      const path = `/tmp/.X11-unix/X${number}`;
      const outcome = await handshake({ path }, request, timeoutMs);
      // No socket file: the server may still listen on the Linux abstract socket of the same name.
      if ('error' in outcome && process.platform === 'linux' && !existsSync(path)) {
        const abstract = await handshake({ path: `\0${path}` }, request, timeoutMs);
        if (!('error' in abstract)) return abstract;
      }
      return outcome;
    };
    let outcome = await attempt();
    // An X server resets when its last client leaves (Xvfb without -noreset: this probe's
    // own connection can be that client) and drops connections for the moment it takes.
    for (let retry = 0; retry < RESET_RETRIES && 'error' in outcome && RESET_ERRORS.test(outcome.error); retry++) {
      await sleep(RESET_PAUSE_MS);
      outcome = await attempt();
    }
    if ('error' in outcome) return { ok: false, reason: `no X server at ${display} (${outcome.error})` };
    switch (outcome.status) {
      case 1:
        return { ok: true, display };
      case 0:
        return { ok: false, reason: `X server at ${display} refused the connection: ${outcome.reason || 'no reason given'}` };
      case 2:
        return { ok: false, reason: `X server at ${display} asks for authentication` };
      default:
        return { ok: false, reason: `X server at ${display} sent an unknown setup reply (status ${outcome.status})` };
    }
  } catch (err) {
    return { ok: false, reason: `cannot probe X display ${display}: ${(err as Error).message}` };
  }
}
