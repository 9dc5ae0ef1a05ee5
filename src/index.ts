/**
 * The public API of taskloop (`import … from 'taskloop'`). Every name here is stable; anything
 * not exported here or from a subpath (`taskloop/tools`, `taskloop/plugins`,
 * `taskloop/workers`) is internal. README "Use it from code" says where each name lives.
 */

// The store: open a file, then tasks through the TaskManager, runs through the RunStore.
export { openStore, type OpenStoreOptions, type TaskloopStore } from './engine/open-store.js';
export { createTaskManager, type TaskManager, type TaskManagerOptions } from './engine/task-manager.js';
export type { TaskStore, StoreInfo, WriteOutcome, ReadEventsQuery, EventWindow, SweepOptions } from './engine/store.js';
export type * from './engine/run-store.js';
export type * from './engine/schedules.js';
export type * from './engine/approvals.js';
export { RUN_PHASES } from './engine/runs.js';
export type * from './engine/runs.js';
export * from './engine/types.js';

// Rules: states and who may move them, actors and reserved names, cards, limits.
export { TRANSITIONS, allowedTargets, checkMove, isTaskState, isTerminal, type Mover, type MoveVerdict } from './engine/states.js';
export {
  OPERATOR,
  SYSTEM_ACTOR_NAMES,
  RESERVED_NAMES,
  agentActor,
  assertBindableName,
  isReservedName,
  systemActor,
  type SystemActorName,
} from './engine/actors.js';
export { checkCard, type TaskCard, type CardCheck, type CardDecision, type AcceptanceCheck } from './engine/cards.js';
export { LIMITS } from './engine/schemas.js';
export { parseDuration } from './engine/durations.js';

// Errors and codes.
export { ERROR_CODES, EngineError, describeError, isEngineError, type ErrorCode, type SerializedError } from './engine/errors.js';

// Events: the in-process bus, the cross-process log, and their snake_case wire form.
export { EVENT_TYPES, createEventBus, type EngineEvents, type EventBus, type EventBusOptions, type EventName } from './engine/bus.js';
export { followEvents, type FollowOptions } from './engine/tail.js';
export { toWireTask, toWireEvent, type WireTask, type WireEvent } from './engine/wire.js';

// Tools, plugins, workers: the subpaths' names, also here.
export * from './tools/index.js';
export * from './plugins/index.js';
export * from './workers/index.js';

// The HTTP API (the MCP server is `taskloop/mcp`: its declarations carry the MCP SDK's).
export { createHttpServer, type HttpServer, type HttpServerOptions } from './monitor/http/server.js';
export type { Route, RouteContext, Reply, Handler } from './monitor/http/router.js';
