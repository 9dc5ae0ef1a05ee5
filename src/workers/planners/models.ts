/**
 * What the configured models can do. Today one capability matters: vision (image input).
 * A desktop card observes by screenshot, so an llm card whose tools return screenshots
 * needs a model that can see them (seed 000: checked before the run starts).
 *
 * Configuration: `TASKLOOP_VISION_MODELS`, a comma-separated list of model names; a name
 * ending in `*` matches by prefix. When unset, the families below, which accept image
 * parts on the chat-completions API, count as vision models. Set it to an empty string to
 * treat no model as vision-capable.
 */

export const DEFAULT_VISION_MODELS = [
  'gpt-4o*',
  'gpt-4-turbo*',
  'gpt-4.1*',
  'gpt-5*',
  // The o-series by name: o1-mini and o3-mini take no images.
  'o1',
  'o3',
  'o3-pro*',
  'o4-mini*',
  'qwen2.5vl*',
  'qwen2.5-vl*',
  'qwen-vl*',
  'llava*',
  'llama3.2-vision*',
  'gemma3*',
  'claude-*',
  'gemini-*',
] as const;

/** The default model of the llm planner when neither the card nor `TASKLOOP_MODEL` names one. */
export const DEFAULT_MODEL = 'gpt-4o-mini';

/** The model an llm card runs with: the card's own, else `TASKLOOP_MODEL`, else the default. */
export function modelFor(card: { model?: string | undefined }, env: NodeJS.ProcessEnv = process.env): string {
  return card.model ?? (env.TASKLOOP_MODEL || DEFAULT_MODEL);
}

/** The configured vision model patterns. */
export function visionModels(env: NodeJS.ProcessEnv = process.env): string[] {
  const configured = env.TASKLOOP_VISION_MODELS;
  if (configured === undefined) return [...DEFAULT_VISION_MODELS];
  return configured
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** Whether `model` is listed as vision-capable (case-insensitive; `name*` matches a prefix). */
export function hasVision(model: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const name = model.toLowerCase();
  return visionModels(env).some((pattern) => {
    const p = pattern.toLowerCase();
    return p.endsWith('*') ? name.startsWith(p.slice(0, -1)) : name === p;
  });
}
