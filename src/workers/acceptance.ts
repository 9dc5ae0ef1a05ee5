/**
 * Acceptance (seed 003 stage 5): the only road to `completed`. The final state is
 * collected with the card's read-only tools, never taken from the model's words; then the
 * checks run over it and over the trace. Command checks run only on cards an operator
 * created, never on cards that came through an agent's tool call.
 */
import { execFile } from 'node:child_process';
import { childEnv } from '../tools/child-env.js';
import { head } from '../engine/text.js';
import type { AcceptanceCheck, TaskCard } from '../engine/index.js';
import { LIMITS, parseDuration } from '../engine/index.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { ExecOutcome } from './execute.js';

export interface CheckResult {
  id: string;
  passed: boolean;
  detail: string;
}

export interface AcceptanceReport {
  /** passed: every check passed and no manual item; await_manual: checks passed, manual items remain. */
  verdict: 'passed' | 'await_manual' | 'failed';
  final_state: Record<string, unknown>;
  checks: CheckResult[];
  failed: string[];
  manual: string[];
  unreachable: string[];
}

export interface AcceptanceInput {
  card: TaskCard;
  tools: ToolRegistry;
  usedTools: string[];
  /** Whether command checks may run (the card was created by an operator). */
  allowCommands: boolean;
  /** Runs a read-only tool for the final state. */
  read(tool: string, args: Record<string, unknown>): Promise<ExecOutcome>;
  signal: AbortSignal;
}

/**
 * Reads `a.b.c` from a nested object (array items by index: `items.0`). Own properties
 * only: a path is untrusted, and `constructor`, `__proto__` or `toString` would otherwise
 * "exist" on every object and let `equals` reach prototype values.
 */
export function lookup(root: unknown, path: string): { found: boolean; value: unknown } {
  let node: unknown = root;
  for (const part of path.split('.')) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, part)) return { found: false, value: undefined };
    node = (node as Record<string, unknown>)[part];
  }
  return { found: true, value: node };
}

/** How much of a value a check's detail shows (the envelope repeats each check's detail). */
export const DETAIL_CHARS = 200;

/** The JSON text of the value at each path, written once however many checks read it. */
type Texts = Map<string, string>;
const json = (v: unknown): string => JSON.stringify(v) ?? 'undefined';

/** `path = <value>`, the value's JSON cut at DETAIL_CHARS (a check per path repeated a 256 KiB value into the envelope each time). */
function shown(path: string, text: string): string {
  return `${path} = ${text.length <= DETAIL_CHARS ? text : `${head(text, DETAIL_CHARS)}… (${text.length} characters)`}`;
}

function runCommand(argv: string[], timeoutMs: number, signal: AbortSignal): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    execFile(argv[0]!, argv.slice(1), { timeout: timeoutMs, signal, maxBuffer: 1 << 20, env: childEnv() }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : null;
      resolve({ code, output: `${stdout}${stderr}`.trim().slice(0, 500) });
    });
  });
}

async function evaluate(check: AcceptanceCheck, input: AcceptanceInput, finalState: Record<string, unknown>, texts: Texts): Promise<CheckResult> {
  if ('tools_subset' in check) {
    const outside = input.usedTools.filter((t) => !input.card.allowed_tools.includes(t));
    return { id: check.id, passed: outside.length === 0, detail: outside.length === 0 ? 'every tool used was allowed' : `used outside the allowlist: ${outside.join(', ')}` };
  }
  if ('command' in check) {
    if (!input.allowCommands) return { id: check.id, passed: false, detail: 'command checks run only on cards an operator created' };
    const { code, output } = await runCommand(check.command, check.timeout === undefined ? 30_000 : parseDuration(check.timeout), input.signal);
    return { id: check.id, passed: code === 0, detail: `exit ${code ?? 'killed'}${output === '' ? '' : `: ${output}`}` };
  }
  const { found, value } = lookup(finalState, check.path);
  if ('exists' in check) return { id: check.id, passed: found === check.exists, detail: `${check.path} ${found ? 'exists' : 'is missing'}` };
  if (!found) return { id: check.id, passed: false, detail: `${check.path} is missing from the final state` };
  let text = texts.get(check.path);
  if (text === undefined) texts.set(check.path, (text = json(value)));
  const passed = 'equals' in check ? json(check.equals) === text : check.in.some((v) => json(v) === text);
  return { id: check.id, passed, detail: shown(check.path, text) };
}

/** How long acceptance may hold its thread between turns of the event loop (as the loop's steps). */
const TURN_MS = 1;

/** A turn of the thread's event loop once `TURN_MS` has passed since the last (see runAcceptance). */
function turner(): () => Promise<void> {
  let last = performance.now();
  return async () => {
    if (performance.now() - last < TURN_MS) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    last = performance.now();
  };
}

/**
 * The most bytes (as JSON) of final state acceptance holds, all reads together: what a
 * worker's result may be. The final state is kept in memory for the checks and stored in the
 * run's envelope and the task's result; unbounded, one agent's card of 1,800 reads of a big
 * task made a 451 MB envelope (and 5,000 one too big to serialise, which failed every write
 * batched with it), held its thread's memory at ~3 GB, and ran a thread out of memory
 * (session 33's review, F2/F3). Past it, the read that crossed it and those after it are
 * unreachable, unread: the verdict is failed.
 */
export const FINAL_STATE_BYTES = LIMITS.resultBytes;

export async function runAcceptance(input: AcceptanceInput): Promise<AcceptanceReport> {
  const finalState: Record<string, unknown> = {};
  const unreachable: string[] = [];
  let held = 0;
  let full: string | undefined;
  const turn = turner();
  for (const [name, call] of Object.entries(input.card.final_state)) {
    if (full !== undefined) {
      unreachable.push(`${name}: not read: ${full}`);
      continue;
    }
    const tool = input.tools.get(call.tool);
    if (tool === undefined || tool.kind !== 'read') {
      unreachable.push(`${name}: ${call.tool} is not a registered read-only tool`);
      continue;
    }
    // The thread's other runs get their turn between reads: a read that answers without I/O
    // (SQLite) never yields, and a card's reads together held the thread for seconds.
    await turn();
    const out = await input.read(call.tool, call.args);
    if (!out.ok) {
      unreachable.push(`${name}: ${out.error}`);
      continue;
    }
    held += out.bytes ?? Buffer.byteLength(JSON.stringify(out.result ?? null), 'utf8');
    if (held > FINAL_STATE_BYTES) {
      full = `the final state's reads returned over ${FINAL_STATE_BYTES} bytes together (read less: narrower reads, or fewer)`;
      unreachable.push(`${name}: ${full}`);
      continue;
    }
    // Defined, not assigned: a final_state named `__proto__` stays an own entry, never the
    // prototype (zod drops such a key from a card today; this does not rest on that).
    Object.defineProperty(finalState, name, { value: out.result, enumerable: true, writable: true, configurable: true });
  }
  const checks: CheckResult[] = [];
  const texts: Texts = new Map();
  for (const check of input.card.acceptance?.checks ?? []) {
    await turn();
    checks.push(await evaluate(check, input, finalState, texts));
  }
  const failed = checks.filter((c) => !c.passed).map((c) => c.id);
  const manual = [...(input.card.acceptance?.manual ?? [])];
  // An unreachable final state is never a pass: the verdict cannot be made.
  const verdict = failed.length > 0 || unreachable.length > 0 ? 'failed' : manual.length > 0 ? 'await_manual' : 'passed';
  return { verdict, final_state: finalState, checks, failed, manual, unreachable };
}
