/** Drives runTaskLoop in-process on a real database (a SQLite file, or a PostgreSQL schema in the postgres project) with the test tools. */
import {
  type BreakerPolicy,
  type ClaimedTask,
  type RunStore,
  type TaskManager,
  createTaskManager,
} from '../../src/engine/index.js';
import { builtInTools } from '../../src/tools/builtin.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { type Tool, type ToolRegistry, createToolRegistry } from '../../src/tools/registry.js';
import { type LoopContext, type RunResult, type TaskLoopEvent, runTaskLoop } from '../../src/workers/loop.js';
import { createScriptedPlanner } from '../../src/workers/planners/scripted.js';
import type { Planner } from '../../src/workers/planner.js';
import { onTestFinished } from 'vitest';
import { tempDir } from '../helpers.js';
import { newDatabase, openStores } from '../stores.js';
// @ts-expect-error a plain JavaScript fixture module
import { tools as testTools } from '../fixtures/test-tools.mjs';

export const POLICY: BreakerPolicy = { threshold: 3, cooldownMs: 300_000, probeTimeoutMs: 60_000 };

export interface Harness {
  dir: string;
  path: string;
  tm: TaskManager;
  runs: RunStore;
  tools: ToolRegistry;
  /** A second connection, as another process would have. */
  other(): { tm: TaskManager; runs: RunStore };
}

/** A loop harness on a fresh database of the test project's store (test/stores.ts). */
export function harness(): Harness {
  const dir = tempDir();
  const path = newDatabase(dir);
  const { store, runs } = openStores(path);
  const tm = createTaskManager({ store });
  onTestFinished(() => tm.close());
  return {
    dir,
    path,
    tm,
    runs,
    tools: createToolRegistry([...builtInTools(), ...(testTools as Tool[])]),
    other() {
      const o = openStores(path);
      const m = createTaskManager({ store: o.store });
      onTestFinished(() => m.close());
      return { tm: m, runs: o.runs };
    },
  };
}

/** A card with every required field; override what the test is about. */
export function card(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    goal: 'test goal',
    planner: 'scripted',
    allowed_tools: ['noop'],
    budget: { max_steps: 20 },
    acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] },
    script: [{ action: 'done' }],
    ...over,
  };
}

export async function claimWith(h: Harness, c: Record<string, unknown>, agent = 'worker'): Promise<ClaimedTask> {
  await h.tm.createTask({ title: 'loop test', card: c }, { id: 'operator', role: 'operator' });
  return (await h.tm.claimTask({ agent, start: true }))!;
}

export function loopContext(h: Harness, claim: ClaimedTask, over: Partial<LoopContext> = {}): LoopContext {
  return {
    task: claim,
    fence: { taskId: claim.id, claimToken: claim.claimToken, agent: claim.assignee! },
    runs: h.runs,
    tools: h.tools,
    planner: (c, made): Planner => createScriptedPlanner(c.script ?? [], made),
    services: { manager: h.tm, tickets: ticketStoreFor(h.tm.store) },
    breakerPolicy: POLICY,
    watch: (fn) => h.tm.store.watch(fn),
    now: Date.now,
    ...over,
  };
}

export interface Drive {
  events: TaskLoopEvent[];
  result: RunResult;
}

/** Runs the loop to its end; `onEvent` may act on the run from outside (stop, pause …). */
export async function drive(ctx: LoopContext, onEvent?: (e: TaskLoopEvent, events: TaskLoopEvent[]) => Promise<void> | void): Promise<Drive> {
  const events: TaskLoopEvent[] = [];
  const gen = runTaskLoop(ctx);
  for (;;) {
    const next = await gen.next();
    if (next.done === true) return { events, result: next.value };
    events.push(next.value);
    await onEvent?.(next.value, events);
  }
}

export async function runCard(h: Harness, c: Record<string, unknown>, over: Partial<LoopContext> = {}): Promise<Drive & { claim: ClaimedTask }> {
  const claim = await claimWith(h, c);
  return { ...(await drive(loopContext(h, claim, over))), claim };
}
