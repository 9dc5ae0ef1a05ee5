/** The SQLite adapter of the RunStore port, sharing the task store's connection and thread. */
import { assertBindableName } from '../actors.js';
import type { RunStore } from '../run-store.js';
import { parseClaimInput } from '../schemas.js';
import { checkedRunStore } from '../run-input.js';
import { prepareClaim, prepareClaimable } from './claim.js';
import { prepareApprovals } from './approvals.js';
import { prepareBreakers } from './breakers.js';
import { prepareControls } from './controls.js';
import { prepareDaemons } from './daemons.js';
import { prepareMoves } from './moves.js';
import { createEventWriter } from './rows.js';
import { prepareRetention, prepareRetentionLook } from './retention.js';
import { prepareRunReads } from './run-reads.js';
import { prepareRunStats } from './run-stats.js';
import { prepareRunWrites } from './runs.js';
import type { SqliteTaskStore } from './task-store.js';

export function createSqliteRunStore(store: SqliteTaskStore): RunStore {
  const { db, write, read } = store;
  const writer = createEventWriter(db);
  const apply = prepareMoves(db, writer);
  const runs = prepareRunWrites(db, writer, apply);
  const runReads = prepareRunReads(db);
  const controls = prepareControls(db, writer, apply);
  const breakers = prepareBreakers(db, writer);
  const daemons = prepareDaemons(db, apply);
  const compact = prepareRetention(db, writer);
  const retentionLook = prepareRetentionLook(db);
  const approvals = prepareApprovals(db, writer, apply);
  const runStats = prepareRunStats(db);
  const claim = prepareClaim(db, writer);
  const claimable = prepareClaimable(db);
  const value = async <T>(p: Promise<{ value: T }>): Promise<T> => (await p).value;

  // Inputs are checked once for both adapters (run-input.ts).
  return checkedRunStore({
    claimRun: async (input, budgetOf, opts) => {
      const parsed = { ...parseClaimInput(input), start: true };
      assertBindableName(parsed.agent, 'claim');
      // A read first: an idle daemon woken by every commit must not take the write lock each
      // time only to find nothing (a task taken meanwhile just makes the claim below null).
      if (parsed.taskId === undefined && opts?.look !== false && !read('claim', () => claimable(parsed, store.now()))) return null;
      return value(write('claim run', (ev, now) => {
        const task = claim(parsed, now, ev);
        if (task === null) return null;
        const fence = { taskId: task.id, claimToken: task.claimToken, agent: parsed.agent };
        return { task, opened: runs.openRun(fence, budgetOf(task, now), now, ev) };
      }));
    },
    openRun: (f, budget) => value(write('open run', (ev, now) => runs.openRun(f, budget, now, ev))),
    beginStep: (f, input) => value(write('begin step', (ev, now) => runs.beginStep(f, input, now, ev))),
    writeSteps: (f, writes) => value(write('write steps', (ev, now) => runs.writeSteps(f, writes, now, ev))),
    finishStep: (f, input) => value(write('finish step', (ev, now) => runs.finishStep(f, input, now, ev))),
    setPaused: (f, runId, paused, reason) => value(write('pause run', (ev, now) => runs.setPaused(f, runId, paused, reason, now, ev))),
    finishRun: (f, input) => value(write('finish run', (ev, now) => runs.finishRun(f, input, now, ev))),
    recordRestart: (f, runId, reason) => value(write('restart run', (ev, now) => runs.recordRestart(f, runId, reason, now, ev))),
    parkRun: (f, input) => value(write('park run', (ev, now) => runs.parkRun(f, input, now, ev))),
    resumeRun: async (input) => {
      return value(write('resume run', (ev, now) => runs.resumeRun(input, now, ev)));
    },
    releaseRun: (f, runId, reason) => value(write('release run', (ev, now) => runs.releaseRun(f, runId, reason, now, ev))),
    getControl: async (taskId) => read('read control', () => controls.get(taskId)),
    listControls: async () => read('list controls', () => controls.list()),
    setControl: async (request) => {
      return value(write('control', (ev, now) => {
        const affected = controls.set(request, now, ev);
        // A stop also revokes approvals granted but not yet used (DESIGN §5: stop-all revokes grants).
        if (request.state === 'stopped') approvals.revokeUnused(request.target === 'all' ? 'all' : affected, now, ev);
        return affected;
      }));
    },
    watchControls: (onChange) => store.watchControls(onChange),
    getRun: async (runId) => read('read run', () => runReads.getRun(runId)),
    getScreen: async (runId) => read('read screen', () => runReads.getScreen(runId)),
    runsOf: async (taskId) => read('list runs', () => runReads.runsOf(taskId)),
    // The common case — a closed breaker, a success — needs no write transaction at all.
    breakerAcquire: async (tool, policy) =>
      breakers.clean(tool) ? { allowed: true, state: 'closed', probe: false } : value(write('breaker', (ev, now) => breakers.acquire(tool, policy, now, ev))),
    breakerRecord: async (tool, ok, policy, taskId) =>
      ok && breakers.clean(tool) ? 'closed' : value(write('breaker', (ev, now) => breakers.record(tool, ok, policy, taskId ?? null, now, ev))),
    breakers: async () => read('list breakers', () => breakers.list()),
    registerDaemon: (row) => value(write('register daemon', (_ev, now) => daemons.register(row, now))),
    heartbeatDaemon: (id, slots) => value(write('daemon heartbeat', (_ev, now) => daemons.heartbeat(id, slots, now))),
    unregisterDaemon: (id) => value(write('unregister daemon', () => daemons.unregister(id))),
    // Read first: a write transaction only when a daemon on this host is actually gone.
    reclaimDeadDaemons: async (host, selfId, isAlive) =>
      daemons.list().some((d) => d.host === host && d.id !== selfId && !isAlive(d.pid))
        ? value(write('reclaim', (ev, now) => daemons.reclaimDead(host, selfId, isAlive, now, ev)))
        : [],
    // Read first, as above: a write transaction only when some daemon has gone silent.
    reclaimSilentDaemons: async (selfId, silentMs) =>
      daemons.list().some((d) => d.id !== selfId && d.heartbeatAt < store.now() - silentMs)
        ? value(write('reclaim', (ev, now) => daemons.reclaimSilent(selfId, silentMs, now, ev)))
        : [],
    expireSlot: (slotId) => value(write('expire slot', (_ev, now) => daemons.expireSlot(slotId, now))),
    daemons: async () => read('list daemons', () => daemons.list()),
    parkForApproval: (f, input, usage) => value(write('park', (ev, now) => approvals.park(runs.fence, f, input, usage, now, ev))),
    approvalForStep: async (stepId) => read('read approval', () => approvals.forStep(stepId)),
    reparkForApproval: (f, approval) => value(write('repark', (ev, now) => approvals.repark(runs.fence, f, approval, now, ev))),
    useApproval: (f, id) => value(write('use approval', (ev, now) => approvals.use(runs.fence, f, id, now, ev))),
    decideApproval: async (input) => {
      return value(write('decide approval', (ev, now) => approvals.decide(input, now, ev)));
    },
    expireApprovals: () => value(write('expire approvals', (ev, now) => approvals.expire(now, ev))),
    listApprovals: async (state, limit = 100) => read('list approvals', () => approvals.list(state, limit)),
    countApprovals: async (state) => read('count approvals', () => approvals.count(state)),
    getApproval: async (id) => read('read approval', () => approvals.get(id)),
    runStats: async (since) => read('run stats', () => runStats(since, store.now())),
    compact: async (before) => {
      const ids = await read('compact', () => retentionLook(before));
      return ids.length === 0 ? 0 : value(write('compact', (ev, now) => compact(ids, before, now, ev)));
    },
  });
}
