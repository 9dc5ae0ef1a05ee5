/**
 * Runs and approvals: a run with its steps, the approvals list, and the human decision on
 * a parked high-risk call. The decision's actor is the caller, and the engine decides
 * (authority.ts): an operator, or a reviewer who did not create the task — never an agent.
 * A run and its screens are shown to those who may see its task's runs (authority.ts
 * maySeeRuns: people and the task's creator, not an agent that may claim or holds the task).
 */
import { EngineError, type RunStore, type TaskManager, maySeeRuns, toWireApproval, toWireRun, toWireStep } from '../../engine/index.js';
import { HttpError } from './errors.js';
import { idParam, parseWith, readJson, readableTask, refuseAgents } from './request.js';
import type { Route } from './router.js';
import { listApprovalsQuery, queryObject, reasonBody, runDetailQuery } from './schemas.js';

export function runRoutes(runs: RunStore, tm: TaskManager): Route[] {
  const decide = (name: 'approve' | 'reject'): Route => ({
    method: 'POST',
    path: `/api/approvals/:id/${name}`,
    async handler({ req, params, actor }) {
      // No agent decides an approval (authority.ts): refused before the engine would say it is already decided.
      refuseAgents(actor, 'deciding an approval');
      const { reason } = await readJson(req, reasonBody, name);
      const approval = await runs.decideApproval({ approvalId: idParam(params.id, 'approval id'), approve: name === 'approve', actor, reason });
      return { json: toWireApproval(approval) };
    },
  });

  return [
    {
      method: 'GET',
      path: '/api/runs/:id',
      async handler({ params, query, actor }) {
        const id = idParam(params.id, 'run id');
        const after = parseWith(runDetailQuery, queryObject(query), 'run').steps_after ?? 0;
        const run = await runs.getRun(id);
        const task = await readableTask(tm, actor, run.taskId);
        if (!maySeeRuns(actor, task)) {
          throw new EngineError('FORBIDDEN', `run ${id} is the work of whoever held task ${task.id}: agent ${actor.id} may claim the task, not read its runs`, { task_id: task.id });
        }
        const screen = run.screen === null ? null : { seq: run.screen.seq, taken_at: new Date(run.screen.takenAt).toISOString(), bytes: run.screen.bytes, url: `/api/runs/${id}/screen` };
        return { json: { ...toWireRun(run), steps: run.steps.filter((s) => s.seq > after).map(toWireStep), screen } };
      },
    },
    {
      // The latest screen the run observed (desktop runs): what the agent last saw.
      method: 'GET',
      path: '/api/runs/:id/screen',
      async handler({ params, actor }) {
        const id = idParam(params.id, 'run id');
        const task = await readableTask(tm, actor, (await runs.getRun(id)).taskId);
        if (!maySeeRuns(actor, task)) {
          throw new EngineError('FORBIDDEN', `run ${id}'s screens are the operator's desktop: agent ${actor.id} sees them only on a task it created`);
        }
        const screen = await runs.getScreen(id);
        if (screen === null) {
          await runs.getRun(id); // RUN_NOT_FOUND for a run that does not exist
          throw new HttpError(404, 'NOT_FOUND', `run ${id} has observed no screen`);
        }
        return { body: screen.png, contentType: 'image/png', headers: { 'X-Screen-Seq': String(screen.seq) } };
      },
    },
    {
      method: 'GET',
      path: '/api/approvals',
      async handler({ query, actor }) {
        refuseAgents(actor, 'the approvals list');
        const q = parseWith(listApprovalsQuery, queryObject(query), 'approvals');
        const list = await runs.listApprovals(q.state === 'all' ? undefined : q.state, q.limit);
        return { json: { approvals: list.map(toWireApproval) } };
      },
    },
    decide('approve'),
    decide('reject'),
  ];
}
