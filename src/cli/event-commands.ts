/** `taskloop events` (the log, optionally followed live) and `taskloop stats`. */
import type { Command } from 'commander';
import { toWireEvent } from '../engine/index.js';
import { type MonitorSnapshot, createMonitor } from '../monitor/monitor.js';
import { printable } from '../engine/text.js';
import { eventLine } from './format.js';
import type { Run } from './task-commands.js';
import { duration, integer, taskIdArg } from './parse.js';

function statsText(s: MonitorSnapshot): string {
  const steps = Object.entries(s.step_duration_ms).map(([k, d]) => `${k} p50 ${d.p50} ms p99 ${d.p99} ms (${d.count})`);
  return [
    ...Object.entries(s.tasks_by_state).map(([state, n]) => `${state.padEnd(12)} ${n}`),
    `${'events'.padEnd(12)} ${s.last_event_id}`,
    `throughput   ${s.throughput_per_second.toFixed(2)} tasks/s over ${s.window_seconds}s`,
    `runs         ${Object.entries(s.runs_by_phase).map(([p, n]) => `${p} ${n}`).join(', ') || '-'} (failure rate ${(s.failure_rate * 100).toFixed(0)}%)`,
    `steps        ${steps.join('; ') || '-'}`,
    `breakers     ${s.breakers.map((b) => `${printable(b.tool)} ${b.state}`).join(', ') || 'all closed'}`,
    `reclaims     ${s.stale_reclaims}`,
    `approvals    ${s.pending_approvals} pending`,
  ].join('\n');
}

export function registerEventCommands(program: Command, run: Run): void {
  program
    .command('events')
    .description('print the event log (one line, or one JSON object, per event)')
    .option('--task <id>', 'only this task’s events')
    .option('--since <n>', 'only events after this cursor (event id)')
    .option('--follow', 'keep printing new events as any process commits them, until interrupted')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const tm = ctx.manager();
        const taskId = o.task === undefined ? undefined : taskIdArg(o.task);
        const afterId = o.since === undefined ? 0 : integer(o.since, '--since');
        const print = (e: Parameters<typeof eventLine>[0]) => ctx.out(toWireEvent(e), () => eventLine(e));
        if (o.follow !== true) {
          let cursor = afterId;
          for (;;) {
            const batch = await tm.store.readEvents({ afterId: cursor, taskId, limit: 1000 });
            batch.forEach(print);
            if (batch.length < 1000) break;
            cursor = batch.at(-1)!.id;
          }
          return;
        }
        const ac = new AbortController();
        const stop = () => ac.abort();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        // The store's watch and its fallback timer do not keep a process alive (a daemon or a
        // server must be able to exit): a follower holds the process open itself until stopped.
        const alive = setInterval(() => undefined, 1 << 30);
        try {
          for await (const e of tm.follow({ afterId, taskId, signal: ac.signal })) print(e);
        } finally {
          clearInterval(alive);
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
        }
      }),
    );

  program
    .command('stats')
    .description('tasks per state, throughput, step durations, failure rate, breakers, reclaims, approvals')
    .option('--window <duration>', 'the window of rates (default 1m)')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const tm = ctx.manager();
        const monitor = await createMonitor({
          tm,
          runs: ctx.runs(),
          follow: false,
          windowMs: o.window === undefined ? undefined : duration(o.window, '--window'),
        });
        const s = await monitor.snapshot();
        monitor.close();
        ctx.out(s, () => statsText(s));
      }),
    );
}
