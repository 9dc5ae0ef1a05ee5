/**
 * The throwaway thread that `checkModules` (module-check.ts) loads the configured tool modules
 * and plugins in: what they leave behind (a timer, a connection, a changed global) goes with
 * the thread, and a module that cannot load in a worker thread fails here as it would in the
 * daemon's own threads. Answers `{ ok: true }` or `{ ok: false, message }`, once.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { PluginSpec } from '../plugins/load.js';
import { loadPlugins } from '../plugins/load.js';
import { loadTools } from './tool-modules.js';

const { toolModules, plugins } = workerData as { toolModules: string[]; plugins: PluginSpec[] };
try {
  await loadTools(toolModules);
  await loadPlugins(plugins);
  parentPort!.postMessage({ ok: true });
} catch (err) {
  parentPort!.postMessage({ ok: false, message: err instanceof Error ? err.message : String(err) });
}
