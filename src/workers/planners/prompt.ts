/**
 * The LLM planner's prompt: a system message with the role and the output contract, and a
 * user message with everything the loop gave the planner for this decision. Plain strings
 * only: the wire format (and the openai types) belong to llm.ts.
 */
import type { DecideInput, StepSummary } from '../planner.js';
import { clip, oneLine } from '../../engine/text.js';

/**
 * How much of the run the prompt carries. Every field that comes from a card, a tool or a
 * planner is capped (characters, UTF-16 units) and a cut one ends in `… (N chars, cut)`, so
 * the prompt's size is bounded whatever the run holds. The model sees the tail of long runs.
 */
export const PROMPT_LIMITS = {
  /** Characters of the goal. */
  goal: 4000,
  /** Earlier steps listed, newest last. */
  steps: 30,
  /** Characters of one step's result or error. */
  stepText: 300,
  /** Characters of one step's arguments (JSON). */
  stepArgs: 200,
  /** Characters of the observation (JSON, error included). */
  observation: 4096,
  /** Characters of a name: a tool, a step's tool, a plan item's id or status. */
  name: 100,
  /** Characters of a tool's description. */
  toolDescription: 500,
  /** Plan items listed, in order (the first not done is the current one). */
  planItems: 50,
  /** Characters of one plan item's goal. */
  planItemGoal: 300,
  /** Characters of one plan item's allowed_actions or success_evidence list, joined. */
  planItemTools: 300,
  /** Refusals listed, newest last. */
  rejections: 20,
  /** Characters of one refusal's reason. */
  rejectionReason: 300,
} as const;

export interface PlannerPrompt {
  system: string;
  user: string;
  /** The screenshot (base64 PNG) to attach as an image part; set only when vision is on. */
  imagePng?: string;
}

export const SYSTEM_PROMPT = `You are the planner of taskloop, a task engine for AI agents.
Each turn you choose the single next step toward the goal: call one allowed tool, declare the goal done, or declare it failed.
You never execute anything yourself: a tool call runs only after the gate approves it, and completion is verified independently, so answer "done" only when the observation shows the goal is met.

Reply with one JSON object and nothing else:
{"action": "tool" | "done" | "fail", "tool": string | null, "args": string | null, "reason": string}
- action "tool": "tool" is the name of one allowed tool; "args" is its arguments as a JSON-encoded object matching the tool's parameters schema, e.g. "{\\"path\\":\\"notes.txt\\"}" ("{}" when it takes none).
- action "done" or "fail": "tool" and "args" are null.
- "reason": one or two sentences on why this step.

Rules:
- Use only the allowed tools, with arguments valid for their schema.
- Do not repeat a step that already succeeded; do not retry a refused call unchanged: change course.
- Answer "fail" when the goal cannot be reached with the allowed tools.`;

/** Added to the system message when the card has a plan: the plan's rules and the replan action. */
export const PLAN_RULES = `
This task has a plan (listed under "## Plan"): the current item is the first one not done; while it is current only its allowed_actions may run, and a successful call of one of its success_evidence tools completes it.
When the plan no longer fits what you observe, replace it: {"action": "replan", "tool": null, "args": "<the JSON-encoded object {\\"plan\\": [items]}>", "reason": "..."}, each item {"id": string, "goal": string, "allowed_actions": [tool names], "success_evidence": [tool names]}.
A replan keeps every item already done (same id) and changes nothing else of the task: not the tools, the scope, the budget or the acceptance checks.`;

/** Builds the two messages of one decision. `vision` says whether the model accepts images. */
export function buildPrompt(input: DecideInput, opts: { vision: boolean }): PlannerPrompt {
  const { goal, steps, observation, allowedTools, rejections } = input;
  const L = PROMPT_LIMITS;
  const sections: string[] = [`## Goal\n${clip(goal, L.goal)}`];

  const shown = steps.slice(-L.steps);
  const omitted = steps.length - shown.length;
  const stepsHeading = omitted > 0 ? `## Earlier steps (last ${shown.length} of ${steps.length})` : '## Earlier steps';
  sections.push(`${stepsHeading}\n${shown.length === 0 ? '(none yet)' : shown.map(formatStep).join('\n')}`);

  const { imagePng, ...seen } = observation;
  let obs = clip(toJson(seen), L.observation);
  if (imagePng !== undefined) {
    obs += opts.vision
      ? '\nA screenshot of the current screen is attached.'
      : '\nA screenshot was taken but this model cannot see images: rely on the data above.';
  }
  sections.push(`## Observation\n${obs}`);

  const tools = allowedTools.map(
    (t) => `- ${line(t.name, L.name)} (${t.kind}): ${line(t.description, L.toolDescription)}\n  parameters: ${toJson(t.parameters)}`,
  );
  sections.push(`## Allowed tools\n${tools.length === 0 ? '(none: answer "done" or "fail")' : tools.join('\n')}`);

  if (input.plan !== undefined) {
    const items = input.plan.slice(0, L.planItems).map((i) => {
      const allowed = line(i.allowed_actions.join(', '), L.planItemTools) || 'any allowed tool';
      const evidence = line(i.success_evidence.join(', '), L.planItemTools) || 'none';
      return `- ${line(i.id, L.name)} [${line(i.status, L.name)}]: ${line(i.goal, L.planItemGoal)} (allowed: ${allowed}; evidence: ${evidence})`;
    });
    const more = input.plan.length - items.length;
    if (more > 0) items.push(`- … and ${more} more items`);
    sections.push(`## Plan\n${items.join('\n')}`);
  }

  if (rejections.length > 0) {
    const lines = rejections.slice(-L.rejections).map((r) => `- ${line(r.tool, L.name)}: ${line(r.reason, L.rejectionReason)}`);
    const earlier = rejections.length - lines.length;
    const heading = earlier > 0 ? `## Refused by the gate since your last decision (last ${lines.length} of ${rejections.length})` : '## Refused by the gate since your last decision';
    sections.push(`${heading}\n${lines.join('\n')}`);
  }

  const system = input.plan === undefined ? SYSTEM_PROMPT : `${SYSTEM_PROMPT}\n${PLAN_RULES}`;
  const prompt: PlannerPrompt = { system, user: sections.join('\n\n') };
  if (imagePng !== undefined && opts.vision) prompt.imagePng = imagePng;
  return prompt;
}

/** `#4 action write_file ok {"path":"a.txt"} → wrote 12 bytes` */
function formatStep(step: StepSummary): string {
  const L = PROMPT_LIMITS;
  const head = [`#${step.seq}`, step.kind, step.tool === null ? null : line(step.tool, L.name), line(step.status, L.name)].filter((p) => p !== null).join(' ');
  const args = step.args === null || step.args === undefined ? '' : ` ${line(toJson(step.args), L.stepArgs)}`;
  const outcome =
    step.error !== null
      ? ` → error: ${line(step.error, L.stepText)}`
      : step.result !== null
        ? ` → ${line(step.result, L.stepText)}`
        : '';
  return `${head}${args}${outcome}`;
}

/** JSON of a value from a tool; never throws (a cycle or a BigInt degrades to String()). */
function toJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Capped, then on one line: the cap bounds the work of what follows it. */
function line(text: string, max: number): string {
  return oneLine(clip(text, max));
}
