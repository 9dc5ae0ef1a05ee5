/**
 * A daemon worker thread (piscina entry). Each thread opens its own connection and runs the
 * tasks the main thread claimed for it, many at once (piscina's concurrentTasksPerWorker):
 * a run waiting on a model, a tool or a timer is a pending promise, not a busy thread.
 * Everything a thread needs is set up once, on its first request.
 */
import { BroadcastChannel, workerData } from 'node:worker_threads';
import { createStores, createTaskManager, isEngineError, storeError, toThread } from '../engine/index.js';
import { type DaemonBroadcast, type WorkerConfig, type WorkerReply, type WorkerRequest, channelName } from './protocol.js';
import { type Runner, createRunner } from './runner.js';
import { loadTools } from './tool-modules.js';
import { loadPlugins } from '../plugins/load.js';
import { ticketStoreFor } from '../tools/tickets.js';

const config = workerData as WorkerConfig;
let draining = false;
let ready: Promise<Runner> | undefined;

function setup(): Promise<Runner> {
  ready ??= (async () => {
    const tools = await loadTools(config.toolModules);
    // Loaded once here so a plugin that fails to load fails the thread's first request, not a run.
    await loadPlugins(config.plugins);
    // The daemon's main thread runs the process's one checkpointer; this thread's commits are
    // counted for it through the shared lock.
    const stores = createStores({ database: config.dbPath, durability: config.durability, writeLock: config.writeLock, checkpoints: 'inline', poolSize: config.poolSize });
    const channel = new BroadcastChannel(channelName(config.daemonId));
    channel.onmessage = (message) => {
      if ((message as { data: DaemonBroadcast }).data.type === 'drain') draining = true;
    };
    channel.unref();
    const tm = createTaskManager({ store: stores.store });
    // The ticket demo's tools write their tables in the store's database.
    return createRunner({ tm, runs: stores.runs, tools, plugins: config.plugins, breaker: config.breaker, services: { tickets: ticketStoreFor(stores.store) } });
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
    return await runOne(request);
  } catch (err) {
    // An error crosses to the main thread as {code, message, data} or a plain Error with a
    // readable message: a structured clone of better-sqlite3's SqliteError is an empty object.
    throw toThread(storeError(err, config.dbPath, 'worker'));
  }
}

async function runOne(request: WorkerRequest): Promise<WorkerReply> {
  const runner = await setup();
  const { task, opened } = request;
  try {
    const r = await runner.drive(task, { opened, draining: () => draining });
    return { type: 'ran', taskId: r.taskId, runId: r.runId, phase: r.phase, stopReason: r.stopReason };
  } catch (err) {
    // A lost claim (STALE_CLAIM) ends this worker's part: the new owner carries on.
    if (isEngineError(err)) return { type: 'lost', taskId: task.id, error: err.toJSON() };
    throw err;
  }
}
