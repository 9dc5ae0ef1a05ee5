/**
 * Approvals (human in the loop, DESIGN §6, seed 003/004). A high-risk call is frozen as an
 * approval bound to a fingerprint of (task, tool, canonical arguments); the run parks as
 * `waiting_approval` and the task as `waiting`, its lease released. A decision re-queues
 * the task, and the resumed run executes exactly the approved call — or ends rejected.
 */
import type { Actor, ActorRole } from './types.js';

export type ApprovalState = 'pending' | 'approved' | 'rejected' | 'expired' | 'used' | 'revoked';

export interface Approval {
  id: number;
  taskId: number;
  runId: number;
  stepId: number;
  tool: string;
  args: Record<string, unknown>;
  fingerprint: string;
  state: ApprovalState;
  reason: string | null;
  createdAt: number;
  expiresAt: number | null;
  decidedAt: number | null;
  decidedBy: string | null;
  /** The role of whoever decided (an agent named like a reviewer is not one). */
  decidedByRole: ActorRole | null;
}

export interface ParkInput {
  runId: number;
  stepId: number;
  tool: string;
  args: Record<string, unknown>;
  fingerprint: string;
  expiresAt: number | null;
}

export interface DecideInput {
  approvalId: number;
  approve: boolean;
  actor: Actor;
  reason?: string;
}
