/**
 * The verdict on one line an MCP client sent, before the SDK sees it. The SDK's own stdio
 * transport drops what it cannot parse without a word (malformed JSON, a batch, an object id)
 * and answers wrong-typed params with a multi-line zod dump; here every line gets one of:
 *
 * - `message`: a well-formed JSON-RPC 2.0 message, handed to the SDK;
 * - `reply`: the error the JSON-RPC specification names, with a one-line message — -32700
 *   parse error, -32600 invalid request, -32602 invalid params (the SDK itself answers
 *   -32601 for an unknown method);
 * - `drop`: a well-formed notification or response whose content is unusable. JSON-RPC
 *   forbids answering those, so the reason goes to the server's log.
 *
 * The id of a refusal is the request's own when it is a valid id, else null.
 */
import { oneLine as onOneLine, printable } from '../engine/text.js';
import {
  ErrorCode,
  type JSONRPCMessage,
  JSONRPCErrorResponseSchema,
  JSONRPCNotificationSchema,
  JSONRPCRequestSchema,
  JSONRPCResultResponseSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { LIMITS, depthMessage, nestsDeeper } from '../engine/index.js';

export type RequestIdOrNull = string | number | null;

/** An error response as JSON-RPC writes it (the SDK's type has no `id: null`). */
export interface ErrorReply {
  jsonrpc: '2.0';
  id: RequestIdOrNull;
  error: { code: number; message: string };
}

export type Verdict = { type: 'message'; message: JSONRPCMessage } | { type: 'reply'; reply: ErrorReply } | { type: 'drop'; why: string };

/** What is needed of a zod schema (the SDK's request schemas, e.g. CallToolRequestSchema). */
export interface MessageSchema {
  safeParse(value: unknown): { success: boolean; data?: unknown; error?: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> } };
}

/** Request schemas by method: the requests a server serves, whose params are checked here. */
export type RequestSchemas = Readonly<Record<string, MessageSchema>>;

const REQUEST_MEMBERS = new Set(['jsonrpc', 'id', 'method', 'params']);
const RESPONSE_MEMBERS = new Set(['jsonrpc', 'id', 'result', 'error']);

/**
 * A message text on one line, at most 300 characters before escaping: line breaks become
 * spaces, and the other controls, bidi overrides and lone surrogates are escaped (`\u001b`),
 * since a client shows the message to a person and it may quote what an agent sent.
 */
export function oneLine(text: string): string {
  const flat = onOneLine(text.length > 1200 ? text.slice(0, 1200) : text).trim();
  return printable(flat.length > 300 ? `${flat.slice(0, 299)}…` : flat);
}

export function errorReply(id: RequestIdOrNull, code: number, message: string): ErrorReply {
  return { jsonrpc: '2.0', id, error: { code, message: oneLine(message) } };
}

const reply = (id: RequestIdOrNull, code: number, message: string): Verdict => ({ type: 'reply', reply: errorReply(id, code, message) });
const invalid = (id: RequestIdOrNull, why: string) => reply(id, ErrorCode.InvalidRequest, `Invalid Request: ${why}`);
const own = (o: object, key: string) => Object.prototype.hasOwnProperty.call(o, key);
const isId = (v: unknown): v is string | number => typeof v === 'string' || Number.isSafeInteger(v);
const isPlain = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const where = (path: ReadonlyArray<PropertyKey>) => path.map(String).join('.');

/** The parsed value, or the first problem as `path: message` (the path starts at the value given). */
function check(schema: MessageSchema, value: unknown): { data: unknown } | { problem: string; path: string } {
  const parsed = schema.safeParse(value);
  if (parsed.success) return { data: parsed.data };
  const issue = parsed.error?.issues[0];
  const path = issue === undefined ? '' : where(issue.path);
  return { problem: `${path === '' ? '' : `${path}: `}${issue?.message ?? 'invalid'}`, path };
}

/** The first of `keys` in `container` nested deeper than the limit, as `prefix + key`; null when none is. */
function tooDeep(container: Record<string, unknown>, keys: readonly string[], prefix = ''): string | null {
  for (const key of keys) if (nestsDeeper(container[key], LIMITS.jsonDepth)) return `${prefix}${key}`;
  return null;
}
const deepParam = (params: Record<string, unknown>) => tooDeep(params, Object.keys(params), 'params.');

/** Judges one line (without its newline); `requests` are the methods whose params are checked here. */
export function judgeLine(line: string, requests: RequestSchemas = {}): Verdict {
  let value: unknown;
  try {
    value = JSON.parse(line); // iterative in V8: no depth overflows it
  } catch (err) {
    return reply(null, ErrorCode.ParseError, `Parse error: not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  if (Array.isArray(value)) return invalid(null, 'a batch (a JSON array) is not accepted, since MCP removed JSON-RPC batching; send one message per line');
  if (!isPlain(value)) return invalid(null, 'a message must be a JSON object');
  const m = value;
  const hasId = own(m, 'id');
  // JSON-RPC lets an error response carry id null (the peer could not read our id).
  const nullIdError = m.id === null && own(m, 'error') && !own(m, 'method');
  if (hasId && !isId(m.id) && !nullIdError) return invalid(null, 'id must be a string or an integer');
  const id = hasId && !nullIdError ? (m.id as string | number) : null;
  if (m.jsonrpc !== '2.0') return invalid(id, 'jsonrpc must be "2.0"');
  const isCall = own(m, 'method');
  const isResponse = own(m, 'result') || own(m, 'error');
  if (isCall && isResponse) return invalid(id, 'a message has a method or a result or error, not both');
  if (!isCall && !isResponse) return invalid(id, 'no method (and no result or error: not a response either)');
  const members = isCall ? REQUEST_MEMBERS : RESPONSE_MEMBERS;
  const stranger = Object.keys(m).find((k) => !members.has(k));
  if (stranger !== undefined) return invalid(id, `unknown member '${oneLine(stranger).slice(0, 64)}'`);
  if (isCall) {
    if (typeof m.method !== 'string') return invalid(id, 'method must be a string');
    if (own(m, 'params') && (typeof m.params !== 'object' || m.params === null)) return invalid(id, 'params must be an object');
    return hasId ? judgeRequest(m, id!, requests) : judgeNotification(m);
  }
  if (!hasId && own(m, 'result')) return invalid(null, 'a result needs the id of its request');
  return judgeResponse(m);
}

function judgeRequest(m: Record<string, unknown>, id: string | number, requests: RequestSchemas): Verdict {
  const method = m.method as string;
  const bad = (why: string) => reply(id, ErrorCode.InvalidParams, `Invalid params: ${method}: ${why}`);
  if (m.params !== undefined) {
    if (Array.isArray(m.params)) return bad('params must be an object (MCP has no positional params)');
    const deep = deepParam(m.params as Record<string, unknown>);
    if (deep !== null) return bad(`${deep} ${depthMessage(LIMITS.jsonDepth)}`);
  }
  const schema = own(requests, method) ? requests[method] : undefined;
  if (schema !== undefined) {
    const served = check(schema, own(m, 'params') ? { method, params: m.params } : { method });
    if ('problem' in served) return bad(served.problem);
  }
  const envelope = check(JSONRPCRequestSchema, m); // what the SDK would otherwise drop in silence (a bad _meta)
  if ('problem' in envelope) return envelope.path.startsWith('params') ? bad(envelope.problem) : invalid(id, envelope.problem);
  return { type: 'message', message: envelope.data as JSONRPCMessage };
}

function judgeNotification(m: Record<string, unknown>): Verdict {
  const what = `notification ${oneLine(m.method as string).slice(0, 100)}`;
  if (Array.isArray(m.params)) return { type: 'drop', why: `${what}: params must be an object` };
  const deep = m.params === undefined ? null : deepParam(m.params as Record<string, unknown>);
  if (deep !== null) return { type: 'drop', why: `${what}: ${deep} ${depthMessage(LIMITS.jsonDepth)}` };
  const checked = check(JSONRPCNotificationSchema, m);
  if ('problem' in checked) return { type: 'drop', why: `${what}: ${checked.problem}` };
  return { type: 'message', message: checked.data as JSONRPCMessage };
}

function judgeResponse(m: Record<string, unknown>): Verdict {
  if (m.id === null) return { type: 'drop', why: 'an error response with id null: the client could not read one of our messages' };
  const what = `response to ${JSON.stringify(m.id ?? null)}`;
  const deep = tooDeep(m, ['result', 'error']);
  if (deep !== null) return { type: 'drop', why: `${what}: ${deep} ${depthMessage(LIMITS.jsonDepth)}` };
  const checked = check(own(m, 'result') ? JSONRPCResultResponseSchema : JSONRPCErrorResponseSchema, m);
  if ('problem' in checked) return { type: 'drop', why: `${what}: ${checked.problem}` };
  return { type: 'message', message: checked.data as JSONRPCMessage };
}
