/** The engine's public surface. Other layers import from here. */
export * from './types.js';
export * from './actors.js';
export * from './authority.js';
export * from './reader-view.js';
export * from './errors.js';
export * from './states.js';
export * from './bus.js';
export * from './tail.js';
export * from './durations.js';
export { SWEEP_BATCH, describeSweep } from './sweeps.js';
export { LIMITS } from './schemas.js';
export { AGENT_MAX_CAPABILITIES, MAX_LOOKED_UP, claimWalks } from './claim-needs.js';
export * from './json-depth.js';
export type { TaskStore, StoreInfo, WriteOutcome, ReadEventsQuery, EventWindow, SweepOptions } from './store.js';
export { createTaskManager, type TaskManager, type TaskManagerOptions } from './task-manager.js';
/** @internal The SQLite adapter: its declarations carry better-sqlite3's types (see openStore for the public way in). */
export { createSqliteStore, type SqliteStoreOptions, type SqliteTaskStore } from './sqlite/task-store.js';
/** @internal */
export { DEFAULT_LEASE_MS } from './sqlite/claim.js';
/** @internal */
export { DEFAULT_QUEUE, DEFAULT_MAX_ATTEMPTS } from './sqlite/create.js';
/** @internal */
export type { Durability } from './sqlite/connection.js';
export { toWireTask, toWireEvent, toWireRun, toWireApproval, toWireStep, toWireStoreInfo, type WireTask, type WireEvent } from './wire.js';
export * from './runs.js';
export type * from './run-store.js';
/** @internal */
export { createSqliteRunStore } from './sqlite/run-store.js';
export * from './cards.js';
export type * from './schedules.js';
/** @internal */
export { createSqliteScheduleStore } from './sqlite/schedules.js';
export type * from './approvals.js';
/** @internal */
export { createWriteLock } from './sqlite/write-lock.js';
/** @internal Whether another local user could change a file or plant one beside it (module loading, the store's folder check). */
export { otherWriters, othersReach, type OthersReach } from './local-files.js';
/** @internal A database's or backup's folder that other local users may write or own (the backup command). */
export { unsafeFolder } from './sqlite/folder-check.js';
/** @internal Waiting for SQLite's write lock without its busy handler (the ticket demo's writes, tools/tickets-sqlite.ts). */
export { spinOnBusy } from './sqlite/busy.js';
export { FATAL_FAULTS, storeError, sqliteCode, faultReporter, type FaultReporter } from './sqlite/faults.js';
export { openStore, isDatabaseUrl, redactUrl, type OpenStoreOptions, type TaskloopStore } from './open-store.js';
/** @internal One way in to every store for the surfaces (CLI, daemon, server). */
export { createStores, type Stores, type StoresOptions, type StoreKind } from './stores.js';
/** @internal */
export { poolSizeFor } from './postgres/pool-size.js';
/** @internal The PostgreSQL adapter's store: its `write` transaction and `conn` (the ticket demo's tables). */
export type { PgTaskStore } from './postgres/task-store.js';
/** @internal */
export type { Query as PgQuery } from './postgres/connection.js';
