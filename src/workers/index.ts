/**
 * `taskloop/workers`: running tasks — the daemon (cards, worker threads), createWorker (a
 * handler of your own), and the task loop itself with its planners.
 */
export { startDaemon, type Daemon, type DaemonOptions } from './daemon.js';
export { createWorker, type Worker, type WorkerContext, type WorkerHandler, type WorkerOptions } from './create-worker.js';
export { runTaskLoop, type LoopContext, type RunResult, type TaskLoopEvent } from './loop.js';
export type { Decision, DecideInput as PlannerInput, DecideResult, Planner, PlannerUsage } from './planner.js';
export { createScriptedPlanner } from './planners/scripted.js';
export { createLlmPlanner, type LlmPlannerOptions } from './planners/llm.js';
export { plannerFor, type PlannerFactory } from './planners/choose.js';
export { TRACER_NAME, type TraceParent } from './tracing.js';
