/**
 * The LLM planner's prompt: a system message with the role and the output contract, and a
 * user message with everything the loop gave the planner for this decision. Plain strings
 * only: the wire format (and the openai types) belong to llm.ts.
 */
import type { DecideInput, StepSummary } from '../planner.js';

/** How much of the run the prompt carries. The model sees the tail of long runs only. */
export const PROMPT_LIMITS = {
  /** Earlier steps listed, newest last. */
  steps: 30,
  /** Characters of one step's result or error. */
  stepText: 300,
  /** Characters of one step's arguments (JSON). */
  stepArgs: 200,
  /** Characters of the observation (JSON). */
  observation: 4096,
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
  const sections: string[] = [`## Goal\n${goal}`];

  const shown = steps.slice(-PROMPT_LIMITS.steps);
  const omitted = steps.length - shown.length;
  const stepsHeading = omitted > 0 ? `## Earlier steps (last ${shown.length} of ${steps.length})` : '## Earlier steps';
  sections.push(`${stepsHeading}\n${shown.length === 0 ? '(none yet)' : shown.map(formatStep).join('\n')}`);

  const { imagePng, ...seen } = observation;
  let obs = cap(toJson(seen), PROMPT_LIMITS.observation);
  if (imagePng !== undefined) {
    obs += opts.vision
      ? '\nA screenshot of the current screen is attached.'
      : '\nA screenshot was taken but this model cannot see images: rely on the data above.';
  }
  sections.push(`## Observation\n${obs}`);

  const tools = allowedTools.map(
    (t) => `- ${t.name} (${t.kind}): ${oneLine(t.description)}\n  parameters: ${toJson(t.parameters)}`,
  );
  sections.push(`## Allowed tools\n${tools.length === 0 ? '(none: answer "done" or "fail")' : tools.join('\n')}`);

  if (input.plan !== undefined) {
    const items = input.plan.map(
      (i) => `- ${i.id} [${i.status}]: ${oneLine(i.goal)} (allowed: ${i.allowed_actions.join(', ') || 'any allowed tool'}; evidence: ${i.success_evidence.join(', ') || 'none'})`,
    );
    sections.push(`## Plan\n${items.join('\n')}`);
  }

  if (rejections.length > 0) {
    const lines = rejections.map((r) => `- ${r.tool}: ${oneLine(cap(r.reason, PROMPT_LIMITS.stepText))}`);
    sections.push(`## Refused by the gate since your last decision\n${lines.join('\n')}`);
  }

  const system = input.plan === undefined ? SYSTEM_PROMPT : `${SYSTEM_PROMPT}\n${PLAN_RULES}`;
  const prompt: PlannerPrompt = { system, user: sections.join('\n\n') };
  if (imagePng !== undefined && opts.vision) prompt.imagePng = imagePng;
  return prompt;
}

/** `#4 action write_file ok {"path":"a.txt"} → wrote 12 bytes` */
function formatStep(step: StepSummary): string {
  const head = [`#${step.seq}`, step.kind, step.tool, step.status].filter((p) => p !== null).join(' ');
  const args = step.args === null || step.args === undefined ? '' : ` ${oneLine(cap(toJson(step.args), PROMPT_LIMITS.stepArgs))}`;
  const outcome =
    step.error !== null
      ? ` → error: ${oneLine(cap(step.error, PROMPT_LIMITS.stepText))}`
      : step.result !== null
        ? ` → ${oneLine(cap(step.result, PROMPT_LIMITS.stepText))}`
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

function cap(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} chars, cut)`;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ');
}
