/**
 * The approval row as both adapters store it, and its mapping to Approval. Arguments are
 * JSON text in both stores and ids and times come back as numbers, so one mapping serves both.
 */
import type { Approval } from './approvals.js';

export interface ApprovalRow {
  id: number;
  task_id: number;
  run_id: number;
  step_id: number;
  tool: string;
  args: string;
  fingerprint: string;
  state: Approval['state'];
  reason: string | null;
  created_at: number;
  expires_at: number | null;
  decided_at: number | null;
  decided_by: string | null;
  decided_by_role: Approval['decidedByRole'];
}

export const toApproval = (r: ApprovalRow): Approval => ({
  id: r.id,
  taskId: r.task_id,
  runId: r.run_id,
  stepId: r.step_id,
  tool: r.tool,
  args: JSON.parse(r.args) as Record<string, unknown>,
  fingerprint: r.fingerprint,
  state: r.state,
  reason: r.reason,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  decidedAt: r.decided_at,
  decidedBy: r.decided_by,
  decidedByRole: r.decided_by_role,
});
