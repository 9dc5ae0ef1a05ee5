/**
 * The desktop benchmark: what running nut.js in a host child process (the crash isolation
 * of src/tools/desktop/client.ts) costs against calling nut.js in the same process, on a
 * real Xvfb started here. Run with `npm run bench:desktop` (builds dist/ first; needs Xvfb
 * and the optional @nut-tree-fork/nut-js).
 *
 * Measured, alternating the two ways call by call so machine noise hits both alike:
 * screen_snapshot (grab + opaque PNG + window list), a click, and typing 20 characters;
 * plus the cold start of a host (fork, load nut.js, first call) and the display probe alone.
 * Knobs: BENCH_DESKTOP_CALLS (60 per operation and way), BENCH_DESKTOP_SIZE (1024x768).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { PNG } from 'pngjs';
import { createDesktopClient } from '../dist/tools/desktop/client.js';
import { probeDisplay } from '../dist/tools/desktop/display.js';
import { nutStrokes } from '../dist/tools/desktop/us-keys.js';
import { fmtNum, log, nowNs, percentile, table } from './lib/util.mjs';

const CALLS = Number(process.env.BENCH_DESKTOP_CALLS ?? 60);
const SIZE = process.env.BENCH_DESKTOP_SIZE ?? '1024x768';

let n = 180;
while (existsSync(`/tmp/.X11-unix/X${n}`) || existsSync(`/tmp/.X${n}-lock`)) n++;
// Xvfb is stopped after this process is gone: killed first, it would make libX11 in this
// process end it with an XIO error.
const watch = `Xvfb :${n} -screen 0 ${SIZE}x24 -nolisten tcp & x=$!; while kill -0 ${process.pid} 2>/dev/null; do sleep 0.2; done; kill $x`;
spawn('sh', ['-c', watch], { stdio: 'ignore', detached: true }).unref();
while (!existsSync(`/tmp/.X11-unix/X${n}`)) await sleep(20);
process.env.DISPLAY = `:${n}`;
// The socket file appears before the server takes clients: wait for a setup reply.
while (!(await probeDisplay()).ok) await sleep(50);
const signal = new AbortController().signal;

// In-process nut.js: the baseline (what the host itself does per call).
const nut = await import('@nut-tree-fork/nut-js');
nut.keyboard.config.autoDelayMs = 0;
nut.mouse.config.autoDelayMs = 0;
const direct = {
  async snapshot() {
    const img = await nut.screen.grab();
    const rgba = Buffer.alloc(img.width * img.height * 4);
    for (let i = 0; i < rgba.length; i += 4) {
      rgba[i] = img.data[i + 2];
      rgba[i + 1] = img.data[i + 1];
      rgba[i + 2] = img.data[i];
      rgba[i + 3] = 255;
    }
    PNG.sync.write({ width: img.width, height: img.height, data: rgba }, { colorType: 2 }).toString('base64');
    for (const w of await nut.getWindows()) await Promise.all([w.title, w.region]);
  },
  click: async () => {
    await nut.mouse.setPosition(new nut.Point(700, 500));
    await nut.mouse.click(nut.Button.LEFT);
  },
  // As the host types (us-keys.ts): key by key, modifiers first, released in the same order.
  async type() {
    for (const keys of nutStrokes('abcdefghijklmnopqrst')) {
      const codes = keys.map((k) => nut.Key[k]);
      await nut.keyboard.pressKey(...codes);
      await nut.keyboard.releaseKey(...codes);
    }
  },
};
const client = createDesktopClient();
const isolated = {
  snapshot: () => client.call({ op: 'snapshot', windows: true }, signal),
  click: () => client.call({ op: 'click', x: 700, y: 500, button: 'left', double: false }, signal),
  type: () => client.call({ op: 'type', text: 'abcdefghijklmnopqrst', delayMs: 0 }, signal),
};

const time = async (fn) => {
  const t0 = nowNs();
  await fn();
  return Number(nowNs() - t0) / 1e6;
};

log(`Xvfb :${n} ${SIZE}; ${CALLS} calls per operation and way`);
const cold = [];
for (let i = 0; i < 5; i++) {
  const c = createDesktopClient();
  cold.push(await time(() => c.call({ op: 'windows' }, signal)));
  c.close();
}
const probes = [];
for (let i = 0; i < CALLS; i++) probes.push(await time(() => probeDisplay()));

const rows = [];
for (const op of ['snapshot', 'click', 'type']) {
  await direct[op]();
  await isolated[op]();
  const a = [];
  const b = [];
  for (let i = 0; i < CALLS; i++) {
    a.push(await time(direct[op]));
    b.push(await time(isolated[op]));
  }
  a.sort((x, y) => x - y);
  b.sort((x, y) => x - y);
  const p50 = [percentile(a, 50), percentile(b, 50)];
  rows.push([op, fmtNum(p50[0]), fmtNum(p50[1]), fmtNum(percentile(a, 99)), fmtNum(percentile(b, 99)), `${fmtNum(p50[1] / p50[0])}x`]);
}
client.close();

console.log(`Node ${process.version}, ${availableParallelism()} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB; Xvfb ${SIZE}`);
console.log(table(['operation', 'in-process p50 ms', 'host p50 ms', 'in-process p99', 'host p99', 'host / in-process'], rows));
probes.sort((x, y) => x - y);
cold.sort((x, y) => x - y);
console.log(`display probe alone, back to back: p50 ${fmtNum(percentile(probes, 50))} ms, p99 ${fmtNum(percentile(probes, 99))} ms (included in every host call)`);
console.log(`host cold start (fork + load nut.js + first call): median ${fmtNum(cold[2])} ms of 5`);
process.exit(0);
