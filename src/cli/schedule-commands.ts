/** `taskloop schedule add | list | remove`. */
import type { Command } from 'commander';
import type { Schedule } from '../engine/index.js';
import { checkCron } from '../workers/cron.js';
import { UsageError } from './context.js';
import type { Run } from './task-commands.js';
import { oneLine, printable } from '../engine/text.js';
import { integer, jsonObjectFrom } from './parse.js';

export function registerScheduleCommands(program: Command, run: Run): void {
  const schedule = program.command('schedule').description('create tasks on a cron schedule (every daemon runs the scheduler)');

  schedule
    .command('add')
    .description('add a schedule: each fire time creates one task from the card')
    .requiredOption('--cron <expr>', 'cron expression, 5 fields or 6 with seconds, in UTC')
    .requiredOption('--card <file>', 'the card of each task, as a JSON file or - for standard input')
    .option('--title <text>', 'title of each task (default: the card goal)')
    .option('--queue <q>', 'queue of each task (default: default)')
    .option('--catch-up <mode>', 'fires missed while no daemon ran: skip (default), one or all')
    .option('--no-overlap', 'skip a fire while the previous task of this schedule is unfinished')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        checkCron(o.cron);
        const catchUp = o.catchUp ?? 'skip';
        if (!['skip', 'one', 'all'].includes(catchUp)) throw new UsageError(`--catch-up must be skip, one or all, not '${catchUp}'`);
        const card = jsonObjectFrom(o.card, 'card');
        // The default title is the goal on one line, escaped (a title holds no control characters).
        const title = (o.title as string | undefined) ?? (typeof card.goal === 'string' && card.goal.trim() !== '' ? printable(oneLine(card.goal.slice(0, 200))) : `every ${o.cron}`);
        const store = ctx.schedules();
        const s = await store.addSchedule({ cron: o.cron, title, card, queue: o.queue, catchUp, overlap: o.overlap !== false }, ctx.actor);
        ctx.out(wire(s), () => `added schedule ${s.id}: ${s.cron} (catch-up ${s.catchUp}${s.overlap ? '' : ', no overlap'})`);
      }),
    );

  schedule
    .command('list')
    .description('list schedules')
    .action(async (_o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const all = await ctx.schedules().listSchedules();
        ctx.out(all.map(wire), () =>
          all.length === 0 ? 'no schedules' : all.map((s) => `#${s.id}  ${s.cron.padEnd(18)} ${s.catchUp.padEnd(5)} ${s.overlap ? 'overlap' : 'no-overlap'}  last task ${s.lastTaskId ?? '-'}  ${printable(s.title)}`).join('\n'),
        );
      }),
    );

  schedule
    .command('remove <id>')
    .description('remove a schedule (tasks it created stay)')
    .action(async (id: string, _o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const n = integer(id, 'schedule id');
        await ctx.schedules().removeSchedule(n, ctx.actor);
        ctx.out({ removed: n }, () => `removed schedule ${n}`);
      }),
    );
}

function wire(s: Schedule) {
  return {
    id: s.id,
    cron: s.cron,
    title: s.title,
    queue: s.queue,
    catch_up: s.catchUp,
    overlap: s.overlap,
    creator: s.creator,
    last_fire_at: new Date(s.lastFireAt).toISOString(),
    last_task_id: s.lastTaskId,
    card: s.card,
  };
}
