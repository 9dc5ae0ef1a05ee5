/**
 * Refusing, before a daemon or server starts, a `--tools` / `--plugin` configuration that
 * cannot load: a missing module, a plugin that registers no hook, a tool named twice, a
 * module that fails in a worker thread, or one whose loading never ends. Without the check
 * every thread failed and was retried for ever.
 *
 * The modules are loaded in a throwaway worker thread (module-check-worker.ts), not in the
 * caller's: a module's top-level timer or a plugin's register() side effects would otherwise
 * stay in the main thread, keep the process from exiting, and run once more than configured.
 */
import { Worker } from 'node:worker_threads';
import type { PluginSpec } from '../plugins/load.js';

// As pool.ts: threads run the compiled entry, also when this module runs from src/ (tests).
const ENTRY = new URL('./module-check-worker.js', import.meta.url).href.replace(/\/src\/workers\/module-check-worker\.js$/, '/dist/workers/module-check-worker.js');

/** A configured module that cannot be loaded: the command line's to mend (the CLI exits 2). */
export class ModuleLoadError extends Error {
  override name = 'ModuleLoadError';
}

/** The check was given up because the caller was asked to stop (a signal while a daemon starts). */
export class StartAborted extends Error {
  override name = 'StartAborted';
}

/** How long loading may take before it is taken for hung. */
export const MODULE_CHECK_TIMEOUT_MS = 60_000;

/**
 * Resolves when every module loads; rejects with the one-line Error of the first that fails,
 * or with StartAborted at once when `signal` aborts (the loading thread is ended).
 */
export function checkModules(toolModules: string[], plugins: PluginSpec[], timeoutMs = MODULE_CHECK_TIMEOUT_MS, signal?: AbortSignal): Promise<void> {
  const names = [...toolModules, ...plugins.map((p) => p.module)].join(', ');
  if (signal?.aborted === true) return Promise.reject(new StartAborted('asked to stop before the modules were loaded'));
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(ENTRY), { workerData: { toolModules, plugins }, stdout: false, stderr: false });
    let settled = false;
    const settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
      void worker.terminate();
      if (err === undefined) resolve();
      else reject(err);
    };
    const abort = () => settle(new StartAborted(`asked to stop while the modules (${names}) were loading`));
    signal?.addEventListener('abort', abort, { once: true });
    const timer = setTimeout(() => settle(new ModuleLoadError(`the modules (${names}) did not finish loading within ${timeoutMs / 1000} s`)), timeoutMs);
    worker.once('message', (answer: { ok: boolean; message?: string }) => settle(answer.ok ? undefined : new ModuleLoadError(answer.message)));
    worker.once('error', (err) => settle(new ModuleLoadError(err.message)));
    // Ended without an answer: a top-level await that never settles leaves the thread nothing to do.
    worker.once('exit', () => settle(new ModuleLoadError(`the modules (${names}) never finished loading (a top-level await that never settles?)`)));
  });
}
