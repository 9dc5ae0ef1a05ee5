/**
 * The desktop client: runs desktop calls in a host child process (host.ts), one at a time.
 * Before every call it checks that the X display is live (DESKTOP_UNAVAILABLE otherwise):
 * nut.js segfaults on its first call without one. A host that crashes fails the call in
 * flight, and the next call starts a new one. A call aborted (a stop, a timeout) kills the
 * host at once, so typing stops mid-word rather than running on.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { EngineError } from '../../engine/index.js';
import { childEnv } from '../child-env.js';
import { probeDisplay } from './display.js';
import type { HostOp, HostReply } from './protocol.js';

export interface DesktopClient {
  /** Runs one host operation; rejects with DESKTOP_UNAVAILABLE, the host's error, or the abort reason. */
  call(op: HostOp, signal: AbortSignal): Promise<unknown>;
  /** Throws DESKTOP_UNAVAILABLE unless the display is live. */
  requireDisplay(): Promise<void>;
  /** The host's pid while one runs. */
  hostPid(): number | null;
  close(): void;
}

export interface DesktopClientOptions {
  /** The host module. @defaultValue the compiled host.js next to this file */
  hostPath?: string;
  /** Environment of the host (DISPLAY, XAUTHORITY), less the server's tokens (child-env.ts). @defaultValue process.env */
  env?: NodeJS.ProcessEnv;
  /** An idle host exits after this long. @defaultValue 30000 */
  idleMs?: number;
}

// Under vitest this file runs from src/; the host always runs compiled, from dist/.
const HOST = fileURLToPath(new URL('./host.js', import.meta.url)).replace(/\/src\/tools\/desktop\/host\.js$/, '/dist/tools/desktop/host.js');
const STDERR_KEPT = 2048;

export function createDesktopClient(opts: DesktopClientOptions = {}): DesktopClient {
  // Read at each use: process.env is live (DISPLAY may be set after the client is made).
  const env = (): NodeJS.ProcessEnv => childEnv(opts.env ?? process.env);
  const idleMs = opts.idleMs ?? 30_000;
  let child: ChildProcess | null = null;
  let stderr = '';
  let nextId = 1;
  let queue: Promise<unknown> = Promise.resolve();
  let idle: NodeJS.Timeout | undefined;

  const requireDisplay = async () => {
    const status = await probeDisplay(env());
    if (!status.ok) throw new EngineError('DESKTOP_UNAVAILABLE', `no live X display: ${status.reason}`);
  };

  const host = (): ChildProcess => {
    if (child !== null && child.exitCode === null && child.signalCode === null) return child;
    stderr = '';
    // detached: the host leads its own process group, so `kill` reaches an xdotool it runs.
    const started = fork(opts.hostPath ?? HOST, [], { env: env(), stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'advanced', detached: true });
    started.stderr?.setEncoding('utf8');
    started.stderr?.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_KEPT);
    });
    started.on('exit', () => {
      if (child === started) child = null;
    });
    // A failed spawn or send also ends in 'exit' or a send callback; without a listener an
    // 'error' event would throw in the daemon thread.
    started.on('error', () => undefined);
    child = started;
    return started;
  };

  const kill = () => {
    const c = child;
    child = null;
    if (c === null || c.pid === undefined) return;
    try {
      process.kill(-c.pid, 'SIGKILL');
    } catch {
      c.kill('SIGKILL'); // the group is gone already
    }
  };

  /** Lets an idle host keep no process alive, and ends it after `idleMs`. */
  const rest = (c: ChildProcess) => {
    c.unref();
    c.channel?.unref();
    (c.stderr as { unref?: () => void } | null)?.unref?.();
    clearTimeout(idle);
    idle = setTimeout(() => {
      if (child === c) kill();
    }, idleMs);
    idle.unref();
  };

  const send = (op: HostOp, signal: AbortSignal): Promise<unknown> => {
    signal.throwIfAborted();
    clearTimeout(idle);
    const c = host();
    c.ref();
    c.channel?.ref();
    const id = nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const done = (settle: () => void) => {
        c.off('message', onMessage);
        c.off('close', onExit);
        signal.removeEventListener('abort', onAbort);
        if (child === c) rest(c);
        settle();
      };
      const onMessage = (reply: HostReply) => {
        if (reply.id !== id) return;
        if (reply.ok) done(() => resolve(reply.result));
        else if (reply.unavailable === true) done(() => reject(new EngineError('DESKTOP_UNAVAILABLE', reply.error)));
        else done(() => reject(new Error(reply.error)));
      };
      const onExit = (code: number | null, sig: NodeJS.Signals | null) => {
        const how = sig !== null ? `crashed (${sig})` : `exited with code ${code}`;
        const last = lastWords(stderr);
        // What it did before it died (keys typed, a click) is not known: a write's outcome is unknown.
        done(() => reject(new EngineError('TOOL_OUTCOME_UNKNOWN', `the desktop host ${how} during ${op.op}${last ? `: ${last}` : ''}; the next call starts a new one`)));
      };
      const onAbort = () => {
        kill();
        done(() => reject(signal.reason));
      };
      c.on('message', onMessage);
      // 'close', not 'exit': by then its stderr is read to the end, last words included.
      c.on('close', onExit);
      signal.addEventListener('abort', onAbort, { once: true });
      c.send({ id, ...op }, (err) => {
        if (err) done(() => reject(new Error(`the desktop host cannot take ${op.op}: ${err.message}`)));
      });
    });
  };

  return {
    requireDisplay,
    call(op, signal) {
      // One call at a time: the keyboard and the pointer are one per display.
      const result = queue.then(async () => {
        await requireDisplay();
        return send(op, signal);
      });
      queue = result.catch(() => undefined);
      return result;
    },
    hostPid: () => child?.pid ?? null,
    close() {
      clearTimeout(idle);
      kill();
    },
  };
}

/** The line of a dead host's stderr that says why: its last `…Error: …` line, else its last line. */
function lastWords(stderr: string): string | undefined {
  const lines = stderr.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !/^Node\.js v\d/.test(l));
  return lines.findLast((l) => /^[A-Za-z]*Error\b/.test(l)) ?? lines.at(-1);
}

let shared: DesktopClient | undefined;
/** The client of this thread (each daemon thread has its own host). */
export function desktopClient(): DesktopClient {
  shared ??= createDesktopClient();
  return shared;
}
