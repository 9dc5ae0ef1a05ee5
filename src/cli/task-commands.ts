/** `taskloop task …`: create, list, show, claim, heartbeat, transition, cancel. */
import type { Command } from 'commander';
import { DEFAULT_LEASE_MS, toWireEvent, toWireRun, toWireTask } from '../engine/index.js';
import { type CliContext, UsageError } from './context.js';
import { taskDetail, taskLine, taskTable } from './format.js';
import { duration, integer, jsonObjectFrom, list, taskIdArg, time } from './parse.js';

export type Run = (cmd: Command, action: (ctx: CliContext) => Promise<number | void>) => Promise<void>;

/** Exit code for "nothing to claim". */
export const EXIT_NOTHING = 3;

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function registerTaskCommands(program: Command, run: Run): void {
  const task = program.command('task').description('create, inspect and move tasks');

  task
    .command('create')
    .description('create a task (pending)')
    .requiredOption('--title <text>', 'what the task is')
    .option('--card <file>', 'the task card as a JSON file, or - for standard input')
    .option('--priority <n>', 'higher runs first (default 0)')
    .option('--depends-on <id>', 'a task that must complete first (repeatable)', collect)
    .option('--idempotency-key <key>', 'the same key returns the same task')
    .option('--run-after <time>', 'not before this ISO time or +DURATION')
    .option('--queue <q>', 'queue name (default: default)')
    .option('--for <agent>', 'only this agent may claim it')
    .option('--requires <cap>', 'a capability the claimer must have (repeatable)', collect)
    .option('--max-attempts <n>', 'claims before a lost lease fails the task (default 3)')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const input = {
          title: o.title as string,
          card: o.card === undefined ? undefined : jsonObjectFrom(o.card, 'card'),
          priority: o.priority === undefined ? undefined : integer(o.priority, '--priority'),
          dependsOn: (o.dependsOn as string[] | undefined)?.map(taskIdArg),
          idempotencyKey: o.idempotencyKey as string | undefined,
          runAfter: o.runAfter === undefined ? undefined : time(o.runAfter, '--run-after'),
          queue: o.queue as string | undefined,
          forAgent: o.for as string | undefined,
          requires: o.requires as string[] | undefined,
          maxAttempts: o.maxAttempts === undefined ? undefined : integer(o.maxAttempts, '--max-attempts'),
        };
        const { task: t, created } = await ctx.manager().createTask(input, ctx.actor);
        ctx.out({ ...toWireTask(t), created }, () =>
          created ? `created task ${t.id} (${t.state})` : `task ${t.id} already exists for idempotency key ${t.idempotencyKey}`,
        );
      }),
    );

  task
    .command('list')
    .description('list tasks, oldest first')
    .option('--state <state>', 'only this state (repeatable)', collect)
    .option('--assignee <agent>', 'only tasks of this assignee')
    .option('--queue <q>', 'only this queue')
    .option('--limit <n>', 'at most this many (default 100)')
    .option('--after <id>', 'only tasks with a greater id (paging)')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const tasks = await ctx.manager().findTasks({
          states: o.state,
          assignee: o.assignee,
          queue: o.queue,
          limit: o.limit === undefined ? undefined : integer(o.limit, '--limit'),
          afterId: o.after === undefined ? undefined : integer(o.after, '--after'),
        });
        ctx.out(tasks.map(toWireTask), () => taskTable(tasks));
      }),
    );

  task
    .command('show <id>')
    .description('one task with its events')
    .action(async (id: string, _o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const tm = ctx.manager();
        const t = await tm.getTask(taskIdArg(id));
        const runs = await ctx.runs().runsOf(t.id);
        ctx.out({ ...toWireTask(t), runs: runs.map(toWireRun), events: t.events.map(toWireEvent) }, () => taskDetail(t, runs));
      }),
    );

  task
    .command('claim')
    .description('claim the best task for an agent (exit 3 when there is none)')
    .option('--queue <q>', 'queue to claim from (default: default)')
    .option('--capabilities <list>', 'comma-separated capabilities of the agent')
    .option('--lease <duration>', `lease length (default ${DEFAULT_LEASE_MS / 1000}s)`)
    .option('--task <id>', 'claim this task only')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const agent = requireAgent(ctx, 'claim');
        const claimed = await ctx.manager().claimTask({
          agent,
          queue: o.queue,
          capabilities: o.capabilities === undefined ? undefined : list(o.capabilities),
          leaseMs: o.lease === undefined ? undefined : duration(o.lease, '--lease'),
          taskId: o.task === undefined ? undefined : taskIdArg(o.task),
        });
        if (claimed === null) {
          ctx.out(null, () => 'nothing to claim');
          return EXIT_NOTHING;
        }
        ctx.out(toWireTask(claimed), () => `${taskLine(claimed)}\nclaim token ${claimed.claimToken}, lease until ${new Date(claimed.leaseExpiresAt!).toISOString()}`);
      }),
    );

  task
    .command('heartbeat <id>')
    .description('extend the lease of a claim')
    .requiredOption('--token <token>', 'the claim token')
    .option('--lease <duration>', 'new lease length from now (default: the claim’s)')
    .action(async (id: string, o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const agent = requireAgent(ctx, 'heartbeat');
        const taskId = taskIdArg(id);
        const { leaseExpiresAt } = await ctx.manager().heartbeat({
          taskId,
          agent,
          claimToken: o.token,
          leaseMs: o.lease === undefined ? undefined : duration(o.lease, '--lease'),
        });
        const until = new Date(leaseExpiresAt).toISOString();
        ctx.out({ id: taskId, lease_expires_at: until }, () => `task ${taskId}: lease extended to ${until}`);
      }),
    );

  task
    .command('transition <id> <state>')
    .description('move a task to another state (the assignee presents --token)')
    .option('--token <token>', 'the claim token (required of the assignee of a claimed or in-progress task)')
    .option('--reason <text>', 'why, recorded on the event')
    .action(async (id: string, state: string, o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const taskId = taskIdArg(id);
        const before = await ctx.manager().getTask(taskId);
        const t = await ctx.manager().transitionTask({
          taskId,
          to: state as never,
          actor: ctx.actor,
          claimToken: o.token,
          reason: o.reason,
        });
        ctx.out(toWireTask(t), () => `task ${t.id}: ${before.state} -> ${t.state}`);
      }),
    );

  task
    .command('resume <id>')
    .description('resume a run that waits for input: the same run goes on, with its steps and budgets (an operator)')
    .option('--side-effect <outcome>', 'for a write whose outcome was lost: happened (count it done) or not-happened (carry it out again)')
    .option('--reason <text>', 'why, recorded on the event')
    .action(async (id: string, o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const sideEffect = o.sideEffect === undefined ? undefined : o.sideEffect === 'happened' ? 'happened' : o.sideEffect === 'not-happened' ? 'not_happened' : undefined;
        if (o.sideEffect !== undefined && sideEffect === undefined) throw new UsageError(`--side-effect: '${String(o.sideEffect)}' is not happened or not-happened`);
        const runs = ctx.runs();
        const t = await runs.resumeRun({ taskId: taskIdArg(id), actor: ctx.actor, sideEffect, reason: o.reason });
        ctx.out(toWireTask(t), () => `task ${t.id}: waiting -> ${t.state}; its run resumes when a worker claims it`);
      }),
    );

  task
    .command('cancel <id>')
    .description('cancel a task (its creator or an operator)')
    .option('--reason <text>', 'why, recorded on the event')
    .action(async (id: string, o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const t = await ctx.manager().cancelTask({ taskId: taskIdArg(id), actor: ctx.actor, reason: o.reason });
        ctx.out(toWireTask(t), () => `task ${t.id} cancelled`);
      }),
    );
}

function requireAgent(ctx: CliContext, what: string): string {
  if (ctx.actor.role !== 'agent') throw new UsageError(`${what} needs --as AGENT: operators do not hold claims`);
  return ctx.actor.id;
}
