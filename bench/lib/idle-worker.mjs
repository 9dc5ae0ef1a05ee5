/** An idle createWorker on queue 'jobs' of the file argv[2] (bench/worker.mjs): says 'ready', stops on any message. */
import { openStore } from '../../dist/index.js';
import { createWorker } from '../../dist/workers/index.js';
const store = await openStore({ path: process.argv[2] });
const w = await createWorker({ store, queue: 'jobs', agent: `idle-${process.pid}`, concurrency: 4, handler: async () => ({}) });
process.send?.('ready');
process.on('message', async () => { await w.close(100); await store.close(); process.exit(0); });
