/**
 * Pickup through daemons alone (bench:loop's scenario 2 with its own knobs): N tasks (500)
 * GAP ms apart (5) after WARM (300) warm-up, SPARSE (100) 50 ms apart, W threads per daemon (2),
 * PEERS other daemon processes (1). Prints p50/p90/p99 from CLOCK_MONOTONIC and the measured
 * daemon's CPU per task. `npm run build` first.
 */
import { benchPickup } from './lib/loop-scenarios.mjs';
import { createScratch } from './lib/util.mjs';
import { killAll } from './lib/loop-daemon.mjs';
const scratch = createScratch();
try {
  const r = await benchPickup(scratch.file('p'), { tasks: Number(process.env.N ?? 500), gapMs: Number(process.env.GAP ?? 5), warmup: Number(process.env.WARM ?? 300), sparse: Number(process.env.SPARSE ?? 100), sparseGapMs: 50, peers: Number(process.env.PEERS ?? 1), workers: Number(process.env.W ?? 2) });
  const f = (d) => `p50 ${d.p50.toFixed(2)} p90 ${d.p90?.toFixed(2)} p99 ${d.p99.toFixed(2)}`;
  console.log(`loaded: ${f(r.mono)} | sparse: ${f(r.sparse)} | cpu/task ${r.daemonCpuMsPerTask.toFixed(2)} | oneRunEach ${r.oneRunEach} trouble ${r.trouble.length}`);
} finally { killAll(); scratch.remove(); }
