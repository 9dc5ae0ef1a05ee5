/**
 * The MCP stdio transport: newline-delimited JSON-RPC on a readable and a writable stream
 * (stdin and stdout by default), in place of the SDK's StdioServerTransport so that the
 * server answers every line and never goes silent.
 *
 * Contracts:
 * - A line is one message, at most `maxMessageBytes` (4 MiB) before its newline. A longer
 *   line is never buffered whole: once over the cap it is answered -32600 (id null, since its
 *   id was never read) and the rest of it is skipped up to its newline; the next line is read
 *   as usual. A trailing `\r` is dropped; a blank line is no message and gets no answer.
 * - Every other line is judged by mcp-message.ts: handed to the SDK, answered with the
 *   JSON-RPC error the specification names, or (a broken notification or response, which
 *   may not be answered) noted in the log.
 * - What the SDK sends goes out unchanged, except that an error's message is kept to one
 *   line: a multi-line one (a zod dump, a stack) goes to the log and the client gets a
 *   one-line stand-in.
 * - The end of the input stream closes the transport once every request read has been
 *   answered (or cancelled by the client), so `echo REQUEST | taskloop mcp` gets its answer;
 *   a broken output stream closes it at once.
 */
import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { type ErrorReply, type RequestSchemas, errorReply, judgeLine, oneLine } from './mcp-message.js';

/** The longest line (one message) the transport reads, in bytes. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export interface StdioTransportOptions {
  /** @defaultValue process.stdin */
  input?: Readable;
  /** @defaultValue process.stdout */
  output?: Writable;
  /** @defaultValue MAX_MESSAGE_BYTES */
  maxMessageBytes?: number;
  /** The requests the server serves, by method: their params are checked before the SDK's own parse. @defaultValue none */
  requests?: RequestSchemas;
  /** Where refused and dropped lines are reported. @defaultValue standard error */
  log?: (line: string) => void;
}

const NEWLINE = 0x0a;

export function createStdioTransport(opts: StdioTransportOptions = {}): Transport {
  const input = opts.input ?? process.stdin;
  const output = opts.output ?? process.stdout;
  const max = opts.maxMessageBytes ?? MAX_MESSAGE_BYTES;
  const requests = opts.requests ?? {};
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));

  let parts: Buffer[] = [];
  let size = 0;
  let skipping = false; // inside a line that went over the cap
  let started = false;
  let ended = false;
  let closed = false;
  // Requests handed to the SDK and not yet answered, by `typeof id:id` ("1" and 1 are two ids).
  const open = new Set<string>();
  const key = (id: unknown) => `${typeof id}:${String(id)}`;
  const closeWhenDone = () => {
    if (ended && open.size === 0) void transport.close();
  };

  const write = (message: JSONRPCMessage | ErrorReply): Promise<void> =>
    new Promise((resolve, reject) => {
      if (closed) return resolve();
      output.write(`${JSON.stringify(message)}\n`, (err) => (err ? reject(err) : resolve()));
    });
  const refuse = (reply: ErrorReply) => {
    log(`taskloop mcp: answered ${reply.error.code}: ${reply.error.message}`);
    write(reply).catch(() => {}); // a broken output closes the transport (onOutputError)
  };

  const handleLine = (bytes: Buffer) => {
    const line = bytes.toString('utf8').replace(/\r$/, '');
    if (line.trim() === '') return;
    const verdict = judgeLine(line, requests);
    switch (verdict.type) {
      case 'message':
        track(verdict.message);
        try {
          transport.onmessage?.(verdict.message);
        } catch (err) {
          log(`taskloop mcp: a message handler threw: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
        }
        return;
      case 'reply':
        return refuse(verdict.reply);
      case 'drop':
        return log(`taskloop mcp: ignored ${verdict.why}`);
    }
  };

  const onData = (chunk: Buffer | string) => {
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    let start = 0;
    while (start < data.length) {
      const nl = data.indexOf(NEWLINE, start);
      const end = nl < 0 ? data.length : nl;
      if (!skipping) {
        if (size + (end - start) > max) {
          skipping = true;
          parts = [];
          size = 0;
          refuse(errorReply(null, ErrorCode.InvalidRequest, `Invalid Request: a message may be at most ${max} bytes (one line); this line was longer and is skipped`));
        } else {
          parts.push(data.subarray(start, end));
          size += end - start;
        }
      }
      if (nl < 0) return;
      if (!skipping) handleLine(parts.length === 1 ? parts[0]! : Buffer.concat(parts, size));
      parts = [];
      size = 0;
      skipping = false;
      start = nl + 1;
    }
  };
  const track = (message: JSONRPCMessage) => {
    if ('method' in message && 'id' in message) open.add(key(message.id));
    else if ('method' in message && message.method === 'notifications/cancelled') {
      open.delete(key((message.params as { requestId?: unknown } | undefined)?.requestId));
      closeWhenDone();
    }
  };
  const onEnd = () => {
    ended = true;
    closeWhenDone();
  };
  const onInputError = (err: Error) => transport.onerror?.(err);
  // Stays attached after close: a write still in flight may fail later (EPIPE), and an
  // 'error' event without a listener would crash the process.
  const onOutputError = (err: Error) => {
    if (closed) return;
    transport.onerror?.(err);
    void transport.close();
  };

  const transport: Transport = {
    async start() {
      if (started) throw new Error('the stdio transport is already started');
      started = true;
      input.on('data', onData);
      input.on('end', onEnd);
      input.on('error', onInputError);
      output.on('error', onOutputError);
    },
    async send(message) {
      await write(oneLineErrors(message, log));
      if (!('method' in message) && 'id' in message && open.delete(key(message.id))) closeWhenDone();
    },
    async close() {
      if (closed) return;
      closed = true;
      input.off('data', onData);
      input.off('end', onEnd);
      input.off('error', onInputError);
      if (input.listenerCount('data') === 0) input.pause();
      parts = [];
      transport.onclose?.();
    },
  };
  return transport;
}

/** The message, with an error's multi-line message (a dump, a stack) logged and replaced by one line. */
function oneLineErrors(message: JSONRPCMessage, log: (line: string) => void): JSONRPCMessage {
  if (!('error' in message) || typeof message.error?.message !== 'string') return message;
  const text = message.error.message;
  if (!/[\r\n]/.test(text) && text.length <= 300) return message;
  log(`taskloop mcp: error ${message.error.code} sent on one line; its full text: ${text}`);
  const short = /[\r\n]/.test(text) ? `error ${message.error.code}; the server's log has the details` : oneLine(text);
  return { ...message, error: { ...message.error, message: short } };
}
