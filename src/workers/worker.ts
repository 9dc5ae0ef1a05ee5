/**
 * A daemon worker thread (piscina entry). Each serve request (one for the thread's life,
 * unless it fails and the main thread asks again) loads the tools and plugins, opens the
 * thread's own connection, and claims for itself and runs many tasks at once
 * (worker-serve.ts), a run waiting on a model, a tool or a timer being a pending promise,
 * not a busy thread.
 */
import { BroadcastChannel, workerData } from 'node:worker_threads';
import { createStores, createTaskManager, storeError, toThread } from '../engine/index.js';
import { type DaemonBroadcast, type ServeReply, type ServeRequest, type WorkerConfig, channelName } from './protocol.js';
import { seatsDraining } from './seats.js';
import { createRunner } from './runner.js';
import { serve } from './worker-serve.js';
import { loadTools } from './tool-modules.js';
import { loadPlugins } from '../plugins/load.js';
import { ticketStoreFor } from '../tools/tickets.js';

const config = workerData as WorkerConfig;
// The broadcast wakes a thread that is running; the shared flag tells one that started after it.
let draining = seatsDraining(config.seats);
const onDrain = new Set<() => void>();
const channel = new BroadcastChannel(channelName(config.daemonId));
channel.onmessage = (message) => {
  if ((message as { data: DaemonBroadcast }).data.type !== 'drain') return;
  draining = true;
  for (const fn of onDrain) fn();
};
channel.unref();

export default async function work(request: ServeRequest): Promise<ServeReply> {
  // A set-up that fails (a tool module or plugin that does not load, a file briefly
  // unreadable) fails this request before anything is claimed; the main thread asks again.
  let stores: ReturnType<typeof createStores> | undefined;
  try {
    const tools = await loadTools(config.toolModules);
    await loadPlugins(config.plugins);
    // The daemon's main thread runs the process's one checkpointer; this thread's commits are
    // counted for it through the shared lock. The thread's many runs share their commits.
    // `existing`: the main thread made the schema; a thread starting after it was dropped must
    // not make it anew (the daemon would go on in an empty one), nor join one made since under
    // its name (`schemaOid`), but stop the daemon.
    stores = createStores({ database: config.dbPath, durability: config.durability, writeLock: config.writeLock, checkpoints: 'inline', poolSize: config.poolSize, groupCommit: true, existing: true, ...(config.schemaOid === undefined ? {} : { schemaOid: config.schemaOid }) });
    const tm = createTaskManager({ store: stores.store });
    // The ticket demo's tools write their tables in the store's database.
    const runner = createRunner({ tm, runs: stores.runs, tools, plugins: config.plugins, breaker: config.breaker, services: { tickets: ticketStoreFor(stores.store) } });
    return await serve({
      config,
      thread: request.thread,
      generation: request.generation,
      port: request.port,
      store: stores.store,
      runs: stores.runs,
      runner,
      draining: () => draining || (draining = seatsDraining(config.seats)),
      onDrain: (fn) => void onDrain.add(fn),
    });
  } catch (err) {
    // An error crosses to the main thread as {code, message, data} or a plain Error with a
    // readable message: a structured clone of better-sqlite3's SqliteError is an empty object.
    throw toThread(storeError(err, config.dbPath, 'worker'));
  } finally {
    onDrain.clear();
    request.port.close();
    await stores?.store.close().catch(() => undefined);
  }
}
