/**
 * task_enforcer (seed 002): an execution tool — a write tool other than the task tools —
 * is blocked unless the calling agent holds an active (claimed or in-progress) task. Read
 * tools always pass. Its configuration is read when a call is checked, not at import
 * (seed 002's second bug): `options.exempt` and `TASKLOOP_ENFORCER_EXEMPT` (comma-separated)
 * name more tools to let through.
 */
import type { TaskManager } from '../engine/index.js';
import type { Plugin } from './hooks.js';

const TASK_TOOLS = ['task_create', 'task_list', 'task_claim', 'task_transition', 'task_cancel', 'task_get', 'task_heartbeat'];

export const taskEnforcer: Plugin = {
  name: 'task_enforcer',
  register(api, options) {
    // Read tools always pass: the hook sees only write calls (a read call skips it at no cost).
    api.on('tool_before', async (call) => {
      if (call.kind === 'read') return;
      const fromEnv = (process.env.TASKLOOP_ENFORCER_EXEMPT ?? '').split(',').map((s) => s.trim()).filter(Boolean);
      const exempt = new Set([...TASK_TOOLS, ...((options.exempt as string[] | undefined) ?? []), ...fromEnv]);
      if (exempt.has(call.tool)) return;
      const tm = call.services.manager as TaskManager | undefined;
      if (tm === undefined) return { block: 'no task manager to check claims against; denied' };
      const active = await tm.findTasks({ assignee: call.agent, states: ['claimed', 'in_progress'], limit: 1 });
      if (active.length > 0) return;
      return { block: `agent ${call.agent} holds no active task: claim one with task_claim before calling ${call.tool}` };
    }, { kinds: ['write'] });
  },
};
