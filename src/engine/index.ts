/** The engine's public surface. Other layers import from here. */
export * from './types.js';
export * from './errors.js';
export * from './states.js';
export * from './bus.js';
export * from './tail.js';
export * from './durations.js';
export { LIMITS } from './schemas.js';
export type { TaskStore, WriteOutcome, ReadEventsQuery, SweepOptions } from './store.js';
export { createTaskManager, type TaskManager, type TaskManagerOptions } from './task-manager.js';
export { createSqliteStore, type SqliteStoreOptions, type SqliteTaskStore } from './sqlite/task-store.js';
export { DEFAULT_LEASE_MS } from './sqlite/claim.js';
export { DEFAULT_QUEUE, DEFAULT_MAX_ATTEMPTS } from './sqlite/create.js';
export type { Durability } from './sqlite/connection.js';
export { toWireTask, toWireEvent, toWireStats, type WireTask, type WireEvent } from './wire.js';
export * from './runs.js';
export type * from './run-store.js';
export { createSqliteRunStore } from './sqlite/run-store.js';
export * from './cards.js';
