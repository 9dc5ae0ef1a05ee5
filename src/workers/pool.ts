/** The worker-thread pool (the one module that imports piscina). */
import { Piscina } from 'piscina';
import { fromThread } from '../engine/index.js';
import type { WorkerConfig, WorkerReply, WorkerRequest } from './protocol.js';

export interface Pool {
  /** Rejects with the thread's error rebuilt: an EngineError with its code, or an Error with a readable message. */
  run(request: WorkerRequest): Promise<WorkerReply>;
  destroy(): Promise<void>;
}

export interface PoolOptions {
  threads: number;
  /** Runs a thread holds at once. @defaultValue 1 */
  perThread?: number;
  config: WorkerConfig;
  /** Errors not tied to a request (a thread that fails to load); the pool replaces the thread. */
  onError(err: unknown): void;
}

// Threads always run the compiled entry; when this module itself runs from src/ (the test
// runner), point at its build in dist/.
const WORKER = new URL('./worker.js', import.meta.url).href.replace(/\/src\/workers\/worker\.js$/, '/dist/workers/worker.js');

export function createPool(opts: PoolOptions): Pool {
  const piscina = new Piscina<WorkerRequest, WorkerReply>({
    filename: WORKER,
    minThreads: opts.threads,
    maxThreads: opts.threads,
    idleTimeout: Number.MAX_SAFE_INTEGER,
    // Runs wait on models and tools: a thread holds many at once (piscina's least-busy
    // balancer spreads them over the threads).
    concurrentTasksPerWorker: opts.perThread ?? 1,
    // Keep each thread's event loop running between tasks (its database watch, its timers).
    atomics: 'async',
    workerData: opts.config,
  });
  // Without a listener, a thread that fails to load takes the whole process down.
  piscina.on('error', (err: unknown) => opts.onError(fromThread(err)));
  return {
    run: (request) =>
      piscina.run(request).catch((err: unknown) => {
        throw fromThread(err);
      }),
    destroy: () => piscina.destroy(),
  };
}
