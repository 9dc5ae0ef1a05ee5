/** `taskloop events` (the log, optionally followed live) and `taskloop stats`. */
import type { Command } from 'commander';
import { toWireEvent, toWireStats } from '../engine/index.js';
import { eventLine } from './format.js';
import type { Run } from './task-commands.js';
import { integer, taskIdArg } from './parse.js';

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
        try {
          for await (const e of tm.follow({ afterId, taskId, signal: ac.signal })) print(e);
        } finally {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
        }
      }),
    );

  program
    .command('stats')
    .description('tasks per state and the event cursor')
    .action(async (_o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const stats = await ctx.manager().stats();
        ctx.out(toWireStats(stats), () =>
          [
            ...Object.entries(stats.byState).map(([state, n]) => `${state.padEnd(12)} ${n}`),
            `${'events'.padEnd(12)} ${stats.lastEventId}`,
          ].join('\n'),
        );
      }),
    );
}
