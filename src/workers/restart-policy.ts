/**
 * The restart policy (seed 002's adversarial solver, generalised). Verifiers score each
 * planner answer: 0 blocks it, 1 marks it weak, neither is acted on. Two blocked or three
 * weak answers restart the run with cleared working memory; past MAX_RESTARTS the run asks
 * for input, with the reason, the requirements and the original goal.
 */
import { clip, printable } from '../engine/text.js';
import type { Fence, RunStore } from '../engine/index.js';
import type { HookRegistry } from '../plugins/hooks.js';
import type { Decision } from './planner.js';

/** Restarts the restart policy grants a run before it asks for input. */
export const MAX_RESTARTS = 3;

/** Answers blocked and weak since the last passing one (or restart). */
export interface AnswerCounts {
  blocked: number;
  weak: number;
}

type Rejection = { tool: string; reason: string };

export type PolicyOutcome =
  | { kind: 'act' }
  /** Not acted on; the planner hears why at its next decision. */
  | { kind: 'skip'; rejection: Rejection }
  /** Restarted: the caller clears its working memory and tells the planner this. */
  | { kind: 'restart'; restarts: number; cause: string; rejection: Rejection }
  | { kind: 'give_up'; message: string };

export interface PolicyInput {
  hooks: HookRegistry;
  runs: RunStore;
  fence: Fence;
  runId: number;
  goal: string;
  decision: Decision;
  answers: AnswerCounts;
  /** The run's signal: a stop fires the verifiers' signals and scores the answer 0. @defaultValue none */
  signal?: AbortSignal;
}

export async function applyRestartPolicy(input: PolicyInput): Promise<PolicyOutcome> {
  const { decision, answers } = input;
  const verdict = await input.hooks.verify({ goal: input.goal, decision, taskId: input.fence.taskId, runId: input.runId, signal: input.signal });
  if (verdict === null) return { kind: 'act' };
  if (verdict.score >= 2) {
    answers.blocked = 0;
    answers.weak = 0;
    return { kind: 'act' };
  }
  const weak = verdict.score >= 1;
  if (weak) answers.weak++;
  else answers.blocked++;
  const tool = decision.action === 'tool' ? decision.tool : decision.action;
  const rejection = { tool, reason: `${weak ? 'weak answer' : 'answer blocked'} (verifier ${verdict.plugin}: ${verdict.reason})` };
  if (answers.blocked < 2 && answers.weak < 3) return { kind: 'skip', rejection };

  const cause = answers.blocked >= 2 ? 'two answers were blocked' : 'three answers were weak';
  answers.blocked = 0;
  answers.weak = 0;
  // The verifier's words may quote the agent: the event's reason is one printable line.
  const restarts = await input.runs.recordRestart(input.fence, input.runId, printable(clip(`${cause}: ${verdict.reason}`, 300)));
  const detail = `Reason: ${cause} (${verdict.reason}). Requirements: every answer must pass verifier ${verdict.plugin} with a score of 2 or more. Original goal: ${input.goal}`;
  if (restarts > MAX_RESTARTS) return { kind: 'give_up', message: `stopped after ${MAX_RESTARTS} restarts. ${detail}` };
  return { kind: 'restart', restarts, cause, rejection: { tool: 'restart', reason: `restart ${restarts} of ${MAX_RESTARTS}. ${detail}` } };
}
