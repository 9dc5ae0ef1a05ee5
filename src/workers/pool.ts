/** The worker-thread pool (the one module that imports piscina). */
import { Piscina } from 'piscina';
import { fromThread } from '../engine/index.js';
import type { ServeReply, ServeRequest, WorkerConfig } from './protocol.js';

export interface Pool {
  /**
   * Has a thread serve until the daemon drains. Rejects with the thread's error rebuilt (an
   * EngineError with its code, or an Error with a readable message), also when the thread dies.
   */
  serve(request: ServeRequest): Promise<ServeReply>;
  destroy(): Promise<void>;
}

export interface PoolOptions {
  threads: number;
  config: WorkerConfig;
  /** Errors not tied to a request (a thread that fails to load); the pool replaces the thread. */
  onError(err: unknown): void;
}

// Threads always run the compiled entry; when this module itself runs from src/ (the test
// runner), point at its build in dist/.
const WORKER = new URL('./worker.js', import.meta.url).href.replace(/\/src\/workers\/worker\.js$/, '/dist/workers/worker.js');

export function createPool(opts: PoolOptions): Pool {
  const piscina = new Piscina<ServeRequest, ServeReply>({
    filename: WORKER,
    minThreads: opts.threads,
    maxThreads: opts.threads,
    idleTimeout: Number.MAX_SAFE_INTEGER,
    // One serve request per thread, for the daemon's life: the thread claims and runs many
    // tasks at once itself (worker-serve.ts).
    concurrentTasksPerWorker: 1,
    // Keep each thread's event loop running between requests (its database watch, its timers).
    atomics: 'async',
    workerData: opts.config,
  });
  // Without a listener, a thread that fails to load takes the whole process down.
  piscina.on('error', (err: unknown) => opts.onError(fromThread(err)));
  return {
    serve: (request) =>
      piscina.run(request, { transferList: [request.port] }).catch((err: unknown) => {
        throw fromThread(err);
      }),
    destroy: () => piscina.destroy(),
  };
}
