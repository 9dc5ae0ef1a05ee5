/**
 * The rules of task creation that hold on every store: defaults, the scope of idempotency
 * keys, and the checks and order of a batch whose tasks depend on each other by ref.
 */
import { EngineError } from './errors.js';
import type { Actor, BatchTaskInput } from './types.js';

export const DEFAULT_QUEUE = 'default';
export const DEFAULT_MAX_ATTEMPTS = 3;

/**
 * The scope of a creator's idempotency keys: its own (`role:id`), so one creator's key never
 * matches another's task. The scheduler creates in `system:scheduler`, which no caller of
 * the API can name (createTasks takes no scope; only the schedule store passes one).
 */
export const scopeOf = (creator: Actor): string => `${creator.role}:${creator.id}`;
export const SCHEDULER_SCOPE = 'system:scheduler';

/** A claim's lease unless the claimer asks for another. */
export const DEFAULT_LEASE_MS = 30_000;

/** Refuses a batch whose refs form a cycle, naming the refs on it. */
export function checkAcyclic(inputs: BatchTaskInput[]): void {
  const byRef = new Map<string, BatchTaskInput>();
  for (const input of inputs) {
    if (input.ref === undefined) continue;
    if (byRef.has(input.ref)) throw new EngineError('VALIDATION_FAILED', `ref ${input.ref} is used by two tasks of the batch`);
    byRef.set(input.ref, input);
  }
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (ref: string, path: string[]): void => {
    const mark = state.get(ref);
    if (mark === 'done') return;
    if (mark === 'visiting') {
      const cycle = [...path.slice(path.indexOf(ref)), ref];
      throw new EngineError('DEPENDENCY_CYCLE', `dependencies form a cycle: ${cycle.join(' -> ')}`, { cycle });
    }
    state.set(ref, 'visiting');
    for (const dep of byRef.get(ref)?.dependsOnRefs ?? []) {
      if (!byRef.has(dep)) throw new EngineError('VALIDATION_FAILED', `ref ${ref} depends on unknown ref ${dep}`);
      visit(dep, [...path, ref]);
    }
    state.set(ref, 'done');
  };
  for (const input of inputs) {
    if ((input.dependsOnRefs?.length ?? 0) > 0 && input.ref === undefined) {
      throw new EngineError('VALIDATION_FAILED', 'a task with depends_on_refs needs a ref of its own');
    }
    if (input.ref !== undefined) visit(input.ref, []);
  }
}

/** Batch inputs ordered so that every ref comes after the refs it depends on (already acyclic). */
export function topoOrder(inputs: BatchTaskInput[]): BatchTaskInput[] {
  if (!inputs.some((i) => (i.dependsOnRefs?.length ?? 0) > 0)) return inputs;
  const byRef = new Map(inputs.filter((i) => i.ref !== undefined).map((i) => [i.ref!, i]));
  const out: BatchTaskInput[] = [];
  const seen = new Set<BatchTaskInput>();
  const visit = (input: BatchTaskInput): void => {
    if (seen.has(input)) return;
    seen.add(input);
    for (const ref of input.dependsOnRefs ?? []) visit(byRef.get(ref)!);
    out.push(input);
  };
  inputs.forEach(visit);
  return out;
}
