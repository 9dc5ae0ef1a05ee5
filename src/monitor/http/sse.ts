/**
 * Server-sent events on a node:http response: framing, keep-alive comments, back-pressure,
 * and telling a client that went away from a stream the server ended.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface SseMessage {
  /** The SSE id: a `task_events` cursor, so a reconnect's `Last-Event-ID` resumes after it. */
  id?: number;
  /** The event name; omitted means `message`. */
  event?: string;
  data: unknown;
}

export interface SseStream {
  /** Aborted when the stream ends, by either side. */
  readonly signal: AbortSignal;
  /** True once the client went away (as opposed to the server ending the stream). */
  readonly clientGone: boolean;
  /** Writes one message; resolves when the socket can take more (back-pressure). */
  send(message: SseMessage): Promise<void>;
  /** Ends the stream from the server's side. */
  end(): void;
  /** Called once, when the client goes away (not when the server ends the stream). */
  onClientGone(listener: () => void): void;
}

export interface SseOptions {
  /** Comment lines that keep proxies and idle timeouts from closing the stream. @defaultValue 15000 */
  keepaliveMs?: number;
  /** The reconnection delay suggested to EventSource clients. @defaultValue 1000 */
  retryMs?: number;
}

/** Starts an event stream on `res` (status 200) and returns its writer. */
export function openSse(req: IncomingMessage, res: ServerResponse, opts: SseOptions = {}): SseStream {
  const ac = new AbortController();
  let gone = false;
  let ended = false;
  const goneListeners: Array<() => void> = [];

  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache, no-transform',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.write(`retry: ${opts.retryMs ?? 1000}\n\n`);
  // A stream lives as long as its run: no socket timeout applies.
  req.socket.setTimeout(0);
  req.socket.setNoDelay(true);

  const keepalive = setInterval(() => {
    if (!ended) res.write(': keepalive\n\n');
  }, opts.keepaliveMs ?? 15_000);
  keepalive.unref();

  const finish = () => {
    clearInterval(keepalive);
    if (!ac.signal.aborted) ac.abort();
  };
  const leave = () => {
    if (!ended) {
      gone = true;
      ended = true;
      for (const l of goneListeners.splice(0)) {
        try {
          l();
        } catch {
          // A listener's failure must not keep the others from running.
        }
      }
    }
    finish();
  };
  res.on('close', leave);
  // The client may have left while the handler was still deciding (its 'close' already fired).
  if (req.socket.destroyed) leave();

  return {
    signal: ac.signal,
    get clientGone() {
      return gone;
    },
    send(message) {
      if (ended) return Promise.resolve();
      let frame = '';
      if (message.id !== undefined) frame += `id: ${message.id}\n`;
      if (message.event !== undefined) frame += `event: ${message.event}\n`;
      // JSON has no raw newlines, so the data is always one line.
      frame += `data: ${JSON.stringify(message.data)}\n\n`;
      if (res.write(frame)) return Promise.resolve();
      return new Promise((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    },
    end() {
      if (ended) return;
      ended = true;
      res.end();
      finish();
    },
    onClientGone(listener) {
      if (gone) listener();
      else goneListeners.push(listener);
    },
  };
}

/** The cursor a client resumes from: `Last-Event-ID`, else `?after=`. Undefined when neither is given. */
export function resumeCursor(req: IncomingMessage, query: URLSearchParams): string | undefined {
  const header = req.headers['last-event-id'];
  const value = Array.isArray(header) ? header[0] : header;
  if (value !== undefined && value.trim() !== '') return value.trim();
  return query.get('after') ?? undefined;
}
