/**
 * When a daemon thread's notes reach the main thread (worker-serve.ts): a run that failed or
 * lost its claim is told at once, not with the turn's batch of endings. The main thread lets
 * go of a failed run's lease on that note; batched, the note waited for whatever the thread
 * ran next, and a tool that blocks the thread (a long synchronous call) held it back for as
 * long as it blocked. Serve runs here on the test's thread with a real SQLite store and real
 * claims; only the runs are stand-ins, so that one fails and another "blocks" right after it
 * in the same turn of the event loop.
 */
import { join } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { describe, expect, it, onTestFinished } from 'vitest';
import { EngineError, type ClaimedTask, createStores, createTaskManager, createWriteLock } from '../../src/engine/index.js';
import type { ThreadNote, WorkerConfig } from '../../src/workers/protocol.js';
import type { RunResult } from '../../src/workers/loop.js';
import type { Runner } from '../../src/workers/runner.js';
import { createSeats } from '../../src/workers/seats.js';
import { serve } from '../../src/workers/worker-serve.js';
import { operator, tempDir } from '../helpers.js';
import { daemonCard } from './daemon-helpers.js';

type Ending = 'failed' | 'lost';

/** Serves two claimed tasks on this thread: the first run ends `how`, the second looks at what was posted right after. */
async function postedBeforeTheNextRun(how: Ending): Promise<{ before: ThreadNote[]; all: ThreadNote[] }> {
  const path = join(tempDir(), 'notes.db');
  const stores = createStores({ database: path, groupCommit: true });
  onTestFinished(() => stores.store.close());
  const tm = createTaskManager({ store: stores.store });
  await tm.createTasks([{ title: 'first', card: daemonCard(), priority: 2 }, { title: 'second', card: daemonCard(), priority: 1 }], operator);

  const posted: ThreadNote[] = [];
  const { port1, port2 } = new MessageChannel();
  onTestFinished(() => port1.close());
  // Posting is what the main thread hears; when it hears it is the thread's event loop's business.
  const post = port2.postMessage.bind(port2);
  port2.postMessage = (batch: ThreadNote[]) => {
    posted.push(...batch);
    post(batch);
  };

  let firstEnded!: () => void;
  const firstEnding = new Promise<void>((r) => (firstEnded = r));
  let secondStarted!: () => void;
  const secondStarting = new Promise<void>((r) => (secondStarted = r));
  let before: ThreadNote[] | undefined;
  const drainFns: Array<() => void> = [];
  let draining = false;
  const drain = () => {
    draining = true;
    for (const fn of drainFns) fn();
  };
  const runner: Runner = {
    start: () => Promise.reject(new Error('not used')),
    preflight: () => null,
    async drive(task: ClaimedTask): Promise<RunResult> {
      if (task.title === 'first') {
        // Both runs in flight on the thread when the first one ends.
        await secondStarting;
        firstEnded();
        if (how === 'lost') throw new EngineError('STALE_CLAIM', `task ${task.id}: the claim was taken over`);
        throw new TypeError('a bug in a tool broke the run');
      }
      secondStarted();
      await firstEnding;
      // The first run's ending is handled a few microtasks on; the thread then goes on to
      // this run's next synchronous stretch (a tool that blocks) in the same turn.
      for (let i = 0; i < 20; i++) await Promise.resolve();
      before = [...posted];
      setImmediate(drain);
      return { taskId: task.id, runId: 0, phase: 'completed', stopReason: 'accepted' } as RunResult;
    },
  };

  const config: WorkerConfig = {
    dbPath: path,
    poolSize: 1,
    durability: 'normal',
    daemonId: 'notes-test',
    toolModules: [],
    breaker: { threshold: 3, cooldownMs: 1000, probeTimeoutMs: 1000 },
    writeLock: createWriteLock(),
    plugins: [],
    claim: { agent: 'notes-daemon', capabilities: [], queue: 'default', leaseMs: 30_000 },
    perThread: 4,
    concurrency: 4,
    seats: createSeats(1),
  };
  await serve({
    config,
    thread: 0,
    generation: 0,
    port: port2,
    store: stores.store,
    runs: stores.runs,
    runner,
    draining: () => draining,
    onDrain: (fn) => void drainFns.push(fn),
  });
  expect(before, 'the second run looked at what was posted').toBeDefined();
  return { before: before!, all: posted };
}

const endingOf = (notes: ThreadNote[], type: string) => notes.find((n) => n.type === 'ended' && n.ending.type === type);

describe("a daemon thread's notes to its main thread", () => {
  for (const how of ['failed', 'lost'] as const) {
    it(`a ${how} run's ending is posted before the thread runs anything else`, async () => {
      const { before, all } = await postedBeforeTheNextRun(how);
      // Both runs were held, and the main thread heard so before either could block.
      expect(before.filter((n) => n.type === 'held')).toHaveLength(2);
      expect(endingOf(before, how), `the ${how} ending was posted at once`).toBeDefined();
      // The run that ended normally is told too (with its turn's batch), and the last note says the thread is done.
      expect(endingOf(all, 'ran')).toBeDefined();
      expect(all.at(-1)?.type).toBe('served');
    });
  }
});
