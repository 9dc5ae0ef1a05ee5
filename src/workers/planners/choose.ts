/** Which planner runs a card: `llm` (the openai client, loaded only when a card needs it) or `scripted`. */
import type { TaskCard } from '../../engine/index.js';
import type { Planner } from '../planner.js';
import { createScriptedPlanner } from './scripted.js';

export type PlannerFactory = (card: TaskCard, decisionsMade: number) => Planner;

/** Resolves the factory for one card; imports the LLM planner only for an llm card (it is slow to load). */
export async function plannerFor(card: unknown): Promise<PlannerFactory> {
  const llm = (card as { planner?: unknown } | null)?.planner === 'llm' ? (await import('./llm.js')).createLlmPlanner : undefined;
  return (c, made) => (c.planner === 'llm' && llm !== undefined ? llm({ model: c.model }) : createScriptedPlanner(c.script ?? [], made));
}
