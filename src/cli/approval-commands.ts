/** `taskloop approvals list`, `taskloop approve ID`, `taskloop reject ID` — from any process. */
import type { Command } from 'commander';
import { type Approval, toWireApproval } from '../engine/index.js';
import type { CliContext } from './context.js';
import { UsageError } from './context.js';
import type { Run } from './task-commands.js';
import { printable } from '../engine/text.js';
import { integer } from './parse.js';

const STATES = ['pending', 'approved', 'rejected', 'expired', 'used', 'revoked'] as const;


const runStore = (ctx: CliContext) => ctx.runs();

export function registerApprovalCommands(program: Command, run: Run): void {
  program
    .command('approvals')
    .description('approvals of high-risk calls')
    .command('list')
    .description('list approvals, newest first (default: pending)')
    .option('--state <state>', `one of ${STATES.join(', ')}, or all`)
    .action(async (o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const state = (o.state as string | undefined) ?? 'pending';
        if (state !== 'all' && !(STATES as readonly string[]).includes(state)) throw new UsageError(`--state must be one of ${STATES.join(', ')} or all`);
        const list = await runStore(ctx).listApprovals(state === 'all' ? undefined : (state as Approval['state']));
        ctx.out(list.map(toWireApproval), () =>
          list.length === 0 ? `no ${state === 'all' ? '' : `${state} `}approvals` : list.map((a) => `#${a.id}  task ${a.taskId}  ${a.state.padEnd(8)} ${printable(a.tool)} ${printable(JSON.stringify(a.args))}${a.expiresAt === null ? '' : `  expires ${new Date(a.expiresAt).toISOString()}`}`).join('\n'),
        );
      }),
    );

  for (const [name, approve] of [['approve', true], ['reject', false]] as const) {
    program
      .command(`${name} <id>`)
      .description(`${name} a pending approval; the task is re-queued and its run ${approve ? 'executes exactly the approved call' : 'ends rejected'}`)
      .option('--reason <text>', 'why, recorded on the approval and its event')
      .action(async (id: string, o, cmd: Command) =>
        run(cmd, async (ctx) => {
          const decided = await runStore(ctx).decideApproval({ approvalId: integer(id, 'approval id'), approve, actor: ctx.actor, reason: o.reason });
          ctx.out(toWireApproval(decided), () => `approval ${decided.id} ${decided.state}: task ${decided.taskId} is queued to resume`);
        }),
      );
  }
}
