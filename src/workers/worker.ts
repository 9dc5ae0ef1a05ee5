/**
 * A daemon worker thread (piscina entry). Each thread opens its own connection, claims a
 * task for its slot, and drives the task loop to the end of the run. Everything a thread
 * needs is set up once, on its first request.
 */
import { BroadcastChannel, workerData } from 'node:worker_threads';
import {
  type SqliteTaskStore,
  type RunStore,
  type TaskManager,
  createSqliteRunStore,
  createSqliteStore,
  createTaskManager,
  isEngineError,
  storeError,
  toThread,
} from '../engine/index.js';
import type { ToolRegistry } from '../tools/registry.js';
import { runTaskLoop } from './loop.js';
import { plannerFor } from './planners/choose.js';
import { type DaemonBroadcast, type WorkerConfig, type WorkerReply, type WorkerRequest, channelName } from './protocol.js';
import { loadTools } from './tool-modules.js';
import type { HookRegistry } from '../plugins/hooks.js';
import { loadPlugins } from '../plugins/load.js';

interface ThreadState {
  store: SqliteTaskStore;
  tm: TaskManager;
  runs: RunStore;
  tools: ToolRegistry;
  hooks: HookRegistry;
}

const config = workerData as WorkerConfig;
let draining = false;
let ready: Promise<ThreadState> | undefined;

function setup(): Promise<ThreadState> {
  ready ??= (async () => {
    const tools = await loadTools(config.toolModules);
    const hooks = await loadPlugins(config.plugins);
    const store = createSqliteStore({ path: config.dbPath, durability: config.durability, writeLock: config.writeLock });
    const channel = new BroadcastChannel(channelName(config.daemonId));
    channel.onmessage = (message) => {
      if ((message as { data: DaemonBroadcast }).data.type === 'drain') draining = true;
    };
    channel.unref();
    return { store, tm: createTaskManager({ store }), runs: createSqliteRunStore(store), tools, hooks };
  })();
  // A set-up that failed (the file was busy, full, briefly unreadable) is tried again at the
  // next request instead of failing every request of this thread for good.
  ready.catch(() => {
    ready = undefined;
  });
  return ready;
}

export default async function work(request: WorkerRequest): Promise<WorkerReply> {
  try {
    return await workOnce(request);
  } catch (err) {
    // An error crosses to the main thread as {code, message, data} or a plain Error with a
    // readable message: a structured clone of better-sqlite3's SqliteError is an empty object.
    throw toThread(storeError(err, config.dbPath, 'worker'));
  }
}

async function workOnce(request: WorkerRequest): Promise<WorkerReply> {
  const t = await setup();
  if (draining) return { type: 'idle' };
  const claim = await t.tm.claimTask({
    agent: config.agent,
    capabilities: config.capabilities,
    queue: config.queue,
    leaseMs: config.leaseMs,
    workerId: request.slotId,
    start: true,
    // A daemon runs cards: a task without one is left for an agent to claim.
    withCard: true,
  });
  if (claim === null) return { type: 'idle' };
  const planner = await plannerFor(claim.card);
  const loop = runTaskLoop({
    task: claim,
    fence: { taskId: claim.id, claimToken: claim.claimToken, agent: config.agent },
    runs: t.runs,
    tools: t.tools,
    planner,
    services: { manager: t.tm, db: t.store.db },
    breakerPolicy: config.breaker,
    watch: (fn) => t.store.watch(fn),
    now: Date.now,
    draining: () => draining,
    hooks: t.hooks,
  });
  try {
    for (;;) {
      const next = await loop.next();
      if (next.done === true) {
        const r = next.value;
        return { type: 'ran', taskId: r.taskId, runId: r.runId, phase: r.phase, stopReason: r.stopReason };
      }
    }
  } catch (err) {
    // A lost claim (STALE_CLAIM) ends this worker's part: the new owner carries on.
    if (isEngineError(err)) return { type: 'lost', taskId: claim.id, error: err.toJSON() };
    throw err;
  }
}
