/**
 * `taskloop demo`: the README's main job. On the default database it starts a daemon,
 * enqueues seed 003's ticket cards (one to approve, one left waiting for approval, one whose
 * approval expires and degrades) and a small dependency graph, shows progress live, asks the
 * operator to approve the pending call (or approves it itself with --yes or without a
 * terminal), prints each run's phase and acceptance result, and exits 0.
 */
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { type RunStore, type Task, type TaskEvent, redactUrl } from '../engine/index.js';
import { ticketCard } from '../tools/ticket-card.js';
import { ticketStoreFor } from '../tools/tickets.js';
import { startDaemon } from '../workers/daemon.js';
import { printable } from '../engine/text.js';
import type { CliContext } from './context.js';
import type { Run } from './task-commands.js';
import type { HttpServer } from '../monitor/http/server.js';
import { portArg, startHttp } from './serve-command.js';

type Planner = 'scripted' | 'llm';


function stepCard(text: string) {
  return {
    goal: text,
    planner: 'scripted',
    allowed_tools: ['echo'],
    budget: { max_steps: 5 },
    acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] },
    script: [{ action: 'tool', tool: 'echo', args: { text } }, { action: 'done' }],
  };
}

/** An event as one line of the demo's board; what a planner chose (a tool's name) is escaped. */
function describe(e: TaskEvent): string | null {
  const line = describeRaw(e);
  return line === null ? null : printable(line);
}

function describeRaw(e: TaskEvent): string | null {
  const d = e.data;
  switch (e.type) {
    case 'run.started':
      return `task ${e.taskId}: run ${String(d.run_id)} started`;
    case 'run.step_finished':
      return d.kind === 'action' ? `task ${e.taskId}: ${String(d.tool)} ${String(d.status)}` : null;
    case 'approval.requested':
      return `task ${e.taskId}: approval ${String(d.approval_id)} requested for ${String(d.tool)}`;
    case 'approval.decided':
      return `task ${e.taskId}: approval ${String(d.approval_id)} ${String(d.decision)}`;
    case 'run.finished':
      return `task ${e.taskId}: run ${String(d.run_id)} finished ${String(d.phase)} (${String(d.stop_reason)})`;
    default:
      return null;
  }
}

async function askToApprove(ctx: CliContext, runs: RunStore, approvalId: number, auto: boolean): Promise<void> {
  const approval = await runs.getApproval(approvalId);
  const what = printable(`${approval.tool} ${JSON.stringify(approval.args)}`);
  let yes = true;
  if (!auto) {
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    const answer = await rl.question(`approve ${what}? [Y/n] `);
    rl.close();
    yes = !/^n/i.test(answer.trim());
  } else {
    ctx.log(`approving ${what} (--yes, or no terminal attached)`);
  }
  await runs.decideApproval({ approvalId, approve: yes, actor: ctx.actor, reason: auto ? 'approved by the demo' : 'decided at the terminal' });
}

export function registerDemoCommand(program: Command, run: Run): void {
  program
    .command('demo')
    .description('run the ticket demo end to end on the database (a daemon, approvals, acceptance), then exit')
    .option('--yes', 'approve the pending approval without asking')
    .option('--workers <n>', 'worker threads (default 2)')
    .option('--port <p>', 'port of the board (default 7070; 0 picks a free one)')
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const planner: Planner = process.env.OPENAI_API_KEY ? 'llm' : 'scripted';
        ctx.log(planner === 'llm' ? `planner: llm (${process.env.TASKLOOP_MODEL ?? 'gpt-4o-mini'} at ${process.env.OPENAI_BASE_URL ?? 'api.openai.com'})` : 'planner: scripted (set OPENAI_API_KEY to use an LLM)');
        const tm = ctx.manager();
        const runs = ctx.runs();
        const seeded = await ticketStoreFor(tm.store).seed();
        ctx.log(`database ${redactUrl(ctx.dbPath)}; tickets T-1000 … T-1099 ${seeded > 0 ? 'seeded' : 'already there'}`);
        const cursor = await tm.store.lastEventId();
        const quiet = process.stderr.isTTY === true && !ctx.json;
        const daemon = await startDaemon({
          dbPath: ctx.dbPath,
          workers: o.workers === undefined ? 2 : Number(o.workers),
          sweepCron: '* * * * * *',
          log: quiet ? undefined : (l) => ctx.log(`daemon: ${l}`),
        });

        // The board, served while the demo runs (a taken port is no reason to fail the demo);
        // startHttp prints its one-time sign-in link, so the board opens signed in.
        let board: HttpServer | undefined;
        try {
          board = await startHttp(ctx, { tm, runs, port: o.port === undefined ? 7070 : portArg(o.port, '--port'), log: () => undefined });
          ctx.log('the board: open the sign-in link above while the demo runs (`taskloop serve` keeps a board up afterwards)');
        } catch (err) {
          ctx.log(`board not started: ${err instanceof Error ? err.message : String(err)}`);
        }
        const operator = ctx.actor;
        const made = await tm.createTasks(
          [
            { title: 'Ticket T-1024: approve the page (path: done)', card: ticketCard('T-1024', { planner, expiresIn: '10m', onExpiry: 'failed' }) },
            { title: 'Ticket T-1025: page left waiting (path: waiting)', card: ticketCard('T-1025', { planner, expiresIn: '1h', onExpiry: 'failed' }) },
            { title: 'Ticket T-1026: approval expires (path: degraded)', card: ticketCard('T-1026', { planner, expiresIn: '2s', onExpiry: 'degraded' }) },
            { ref: 'fetch', title: 'Fetch the release notes', card: stepCard('fetched release notes') },
            { ref: 'summarise', title: 'Summarise them', card: stepCard('summary written'), dependsOnRefs: ['fetch'] },
            { ref: 'publish', title: 'Publish the summary', card: stepCard('summary published'), dependsOnRefs: ['summarise'] },
          ],
          operator,
        );
        const [approveMe, waitMe, expireMe, ...graph] = made.map((m) => m.task);
        const ids = made.map((m) => m.task.id);
        ctx.log(`enqueued tasks ${ids.join(', ')}`);

        const auto = o.yes === true || !process.stdin.isTTY;
        const ac = new AbortController();
        const asked = new Set<number>();
        const done = async () => {
          const tasks = await Promise.all(ids.map((id) => tm.getTask(id)));
          const settled = (t: Task) => t.state === 'completed' || t.state === 'failed' || t.state === 'cancelled';
          return settled(tasks[0]!) && settled(tasks[2]!) && tasks.slice(3).every(settled) && tasks[1]!.state === 'waiting';
        };
        // On a terminal, a live board that redraws in place; piped, one plain line per event.
        const live = process.stderr.isTTY === true && !ctx.json;
        const status = new Map<number, string>(made.map((m) => [m.task.id, `${m.task.title}: pending`]));
        let drawn = 0;
        const draw = () => {
          if (drawn > 0) process.stderr.write(`\x1b[${drawn}A`);
          const lines = [...status.entries()].map(([id, s]) => `\x1b[2K  #${id} ${s}`);
          process.stderr.write(`${lines.join('\n')}\n`);
          drawn = lines.length;
        };
        if (live) draw();
        for await (const e of tm.follow({ afterId: cursor, signal: ac.signal })) {
          if (e.taskId !== null && ids.includes(e.taskId)) {
            const line = describe(e);
            if (line !== null && live) {
              status.set(e.taskId, `${made.find((m) => m.task.id === e.taskId)!.task.title}: ${line.replace(/^task \d+: /, '')}`);
              draw();
            } else if (line !== null) ctx.log(line);
          }
          if (e.type === 'approval.requested' && e.taskId === approveMe!.id && !asked.has(e.taskId)) {
            asked.add(e.taskId);
            await askToApprove(ctx, runs, e.data.approval_id as number, auto);
            drawn = 0; // the prompt moved the cursor: draw the board afresh below it
          }
          if (e.type === 'run.finished' || e.type === 'approval.requested') {
            if (await done()) ac.abort();
          }
        }
        await daemon.stop(5000);
        await board?.close(1000);

        const summary: Array<{ id: number; title: string; state: string; phase: string | null; acceptance: string | null; failed_checks: string[] }> = [];
        for (const t of [approveMe!, waitMe!, expireMe!, ...graph]) {
          const task = await tm.getTask(t.id);
          const last = (await runs.runsOf(t.id)).at(-1);
          const acceptance = (last?.envelope?.acceptance ?? null) as { verdict?: string; failed?: string[] } | null;
          summary.push({ id: t.id, title: t.title, state: task.state, phase: last?.phase ?? null, acceptance: acceptance?.verdict ?? null, failed_checks: acceptance?.failed ?? [] });
        }
        const pending = await runs.listApprovals('pending');
        ctx.out({ planner, tasks: summary, pending_approvals: pending.map((a) => a.id) }, () =>
          [
            'results:',
            ...summary.map((s) => `  task ${s.id} ${s.state.padEnd(10)} run ${String(s.phase).padEnd(17)} acceptance ${s.acceptance ?? '-'}${s.failed_checks.length > 0 ? ` (failed: ${s.failed_checks.join(', ')})` : ''}  ${s.title}`),
            ...pending.filter((a) => a.taskId === waitMe!.id).map((a) => `approval ${a.id} still waits: taskloop approve ${a.id} (then taskloop daemon) finishes task ${a.taskId}`),
          ].join('\n'),
        );
      }),
    );
}
