/**
 * The PostgreSQL adapter of the RunStore ports, one module per noun (runs.ts, controls.ts,
 * breakers.ts, daemons.ts, approvals.ts, run-stats.ts, retention.ts), each write one
 * transaction of the task store's pool with its events, as on SQLite (sqlite/run-store.ts).
 */
import { assertBindableName } from '../actors.js';
import { EngineError } from '../errors.js';
import type { RunStore } from '../run-store.js';
import { parseClaimInput } from '../schemas.js';
import { checkedRunStore } from '../run-input.js';
import { pgApprovals } from './approvals.js';
import { pgBreakers } from './breakers.js';
import { claimable } from './claim.js';
import { pgControls } from './controls.js';
import { pgDaemons } from './daemons.js';
import { pgRetention } from './retention.js';
import { createPgRunStats } from './run-stats.js';
import { claimRun, pgRuns } from './runs.js';
import { type PgTaskStore, type TaskLock, claimLock, wholeRow } from './task-store.js';
import type { Fence } from '../runs.js';

// Every fenced write locks its task's row first: with BEGIN, in the transaction's first round trip.
const whole = (f: Fence): TaskLock => ({ taskId: f.taskId, whole: true });
const light = (f: Fence): TaskLock => ({ taskId: f.taskId, whole: false });

export function createPgRunStore(store: PgTaskStore): RunStore {
  const { write, read } = store;
  const q = store.conn.query;
  const value = async <T>(p: Promise<{ value: T }>): Promise<T> => (await p).value;
  const runStats = createPgRunStats(q);
  const now = () => store.conn.now();

  // Inputs are checked once for both adapters (run-input.ts).
  return checkedRunStore({
    claimRun: async (input, budgetOf, opts) => {
      const parsed = { ...parseClaimInput(input), start: true };
      assertBindableName(parsed.agent, 'claim');
      // A read first: an idle daemon woken by every commit must not open a write transaction
      // each time only to find nothing (a task taken meanwhile makes the claim below null).
      if (parsed.taskId === undefined && opts?.look !== false && !(await read(async () => claimable(q, parsed, await now())))) return null;
      return value(write('claim run', (tx, at, ev) => claimRun(tx, parsed, budgetOf, at, ev), claimLock(parsed)));
    },
    openRun: (f, budget) => value(write('open run', (tx, at, ev) => pgRuns.openRun(tx, f, budget, at, ev), whole(f))),
    beginStep: (f, input) => value(write('begin step', (tx, at, ev) => pgRuns.beginStep(tx, f, input, at, ev), light(f))),
    writeSteps: (f, writes) => value(write('write steps', (tx, at, ev) => pgRuns.writeSteps(tx, f, writes, at, ev), light(f))),
    finishStep: (f, input) => value(write('finish step', (tx, at, ev) => pgRuns.finishStep(tx, f, input, at, ev), light(f))),
    setPaused: (f, runId, paused, reason) => value(write('pause run', (tx, at, ev) => pgRuns.setPaused(tx, f, runId, paused, reason, at, ev), light(f))),
    finishRun: (f, input) => value(write('finish run', (tx, at, ev) => pgRuns.finishRun(tx, f, input, at, ev), whole(f))),
    recordRestart: (f, runId, reason) => value(write('restart run', (tx, at, ev) => pgRuns.recordRestart(tx, f, runId, reason, at, ev), light(f))),
    parkRun: (f, input) => value(write('park run', (tx, at, ev) => pgRuns.parkRun(tx, f, input, at, ev), whole(f))),
    resumeRun: async (input) => {
      return value(write('resume run', (tx, at, ev) => pgRuns.resumeRun(tx, input, at, ev), wholeRow(input.taskId)));
    },
    releaseRun: (f, runId, reason) => value(write('release run', (tx, at, ev) => pgRuns.releaseRun(tx, f, runId, reason, at, ev), whole(f))),
    getRun: (runId) => read(() => pgRuns.getRun(q, runId)),
    runsOf: (taskId) => read(() => pgRuns.runsOf(q, taskId)),
    getScreen: (runId) => read(() => pgRuns.getScreen(q, runId)),

    getControl: (taskId) => read(() => pgControls.get(q, taskId)),
    watchControls: (onChange) => store.watchControls(onChange),
    listControls: () => read(() => pgControls.list(q)),
    setControl: async (request) => {
      return value(write('control', async (tx, at, ev) => {
        const affected = await pgControls.set(tx, request, at, ev);
        // A stop also revokes approvals granted but not yet used (DESIGN §5: stop-all revokes grants).
        if (request.state === 'stopped') await pgApprovals.revokeUnused(tx, request.target === 'all' ? 'all' : affected, at, ev);
        return affected;
      }));
    },

    // The common case — a closed breaker, a success — needs no write transaction at all.
    breakerAcquire: async (tool, policy) =>
      (await read(() => pgBreakers.clean(q, tool)))
        ? { allowed: true, state: 'closed', probe: false }
        : value(write('breaker', (tx, at, ev) => pgBreakers.acquire(tx, tool, policy, at, ev))),
    breakerRecord: async (tool, ok, policy, taskId) =>
      ok && (await read(() => pgBreakers.clean(q, tool)))
        ? 'closed'
        : value(write('breaker', (tx, at, ev) => pgBreakers.record(tx, tool, ok, policy, taskId ?? null, at, ev))),
    breakers: () => read(() => pgBreakers.list(q)),

    registerDaemon: (row) => value(write('register daemon', (tx, at) => pgDaemons.register(tx, row, at))),
    heartbeatDaemon: async (id, slots, opts) => {
      // Asked (sameStore): the schema dropped and made again under its name (by a CLI command
      // run after the drop, say) is another, empty database, where this process's writes would
      // land quietly, its row gone from the registry. As a SQLite file replaced under its path:
      // STORE_REPLACED, and the beat is rolled back.
      const opened = opts?.sameStore === true ? await store.schemaOid() : undefined;
      return value(
        write('daemon heartbeat', async (tx, at) => {
          const beat = await pgDaemons.heartbeat(tx, id, slots, at);
          if (opened === undefined || beat.schemaOid === opened) return beat.registered;
          const { display, schema } = store.conn.location;
          throw new EngineError('STORE_REPLACED', `daemon heartbeat on ${display}: schema ${schema} is not the one this process opened (dropped and made again?); nothing was written`, { location: display });
        }),
      );
    },
    unregisterDaemon: (id) => value(write('unregister daemon', (tx) => pgDaemons.unregister(tx, id))),
    // Read first: a write transaction only when a daemon on this host is actually gone.
    reclaimDeadDaemons: async (host, selfId, isAlive) =>
      (await read(() => pgDaemons.list(q))).some((d) => d.host === host && d.id !== selfId && !isAlive(d.pid))
        ? value(write('reclaim', (tx, at, ev) => pgDaemons.reclaimDead(tx, host, selfId, isAlive, at, ev)))
        : [],
    // Read first, as above: a write transaction only when some daemon has gone silent.
    reclaimSilentDaemons: async (selfId, silentMs) => {
      const [daemons, at] = await Promise.all([read(() => pgDaemons.list(q)), now()]);
      return daemons.some((d) => d.id !== selfId && d.heartbeatAt < at - silentMs)
        ? value(write('reclaim', (tx, t, ev) => pgDaemons.reclaimSilent(tx, selfId, silentMs, t, ev)))
        : [];
    },
    expireSlot: (slotId) => value(write('expire slot', (tx, at) => pgDaemons.expireSlot(tx, slotId, at))),
    daemons: () => read(() => pgDaemons.list(q)),

    parkForApproval: (f, input, usage) => value(write('park', (tx, at, ev) => pgApprovals.park(tx, f, input, usage, at, ev), whole(f))),
    approvalForStep: (stepId) => read(() => pgApprovals.forStep(q, stepId)),
    reparkForApproval: (f, approval) => value(write('repark', (tx, at, ev) => pgApprovals.repark(tx, f, approval, at, ev), whole(f))),
    useApproval: (f, id) => value(write('use approval', (tx, at, ev) => pgApprovals.use(tx, f, id, at, ev), whole(f))),
    decideApproval: async (input) => {
      return value(write('decide approval', (tx, at, ev) => pgApprovals.decide(tx, input, at, ev)));
    },
    expireApprovals: () => value(write('expire approvals', (tx, at, ev) => pgApprovals.expire(tx, at, ev))),
    listApprovals: (state, limit = 100) => read(() => pgApprovals.list(q, state, limit)),
    countApprovals: (state) => read(() => pgApprovals.count(q, state)),
    getApproval: (id) => read(() => pgApprovals.get(q, id)),

    runStats: (since) => read(async () => runStats(since, await now())),
    compact: (before) => value(write('compact', (tx, at, ev) => pgRetention.compact(tx, before, at, ev))),
  });
}
