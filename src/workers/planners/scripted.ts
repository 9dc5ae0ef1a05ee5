/** The scripted planner: the card's decisions, in order. For tests and offline runs. */
import type { CardDecision } from '../../engine/index.js';
import { type Decision, type Planner, PlannerError } from '../planner.js';

/** @param start how many decisions earlier attempts of this run already made (resume). */
export function createScriptedPlanner(script: CardDecision[], start = 0): Planner {
  let next = start;
  return {
    name: 'scripted',
    async decide() {
      const entry = script[next];
      if (entry === undefined) throw new PlannerError('exhausted', `the script has no decision ${next + 1} (it has ${script.length})`);
      next++;
      const reason = entry.reason ?? `scripted decision ${next}`;
      const decision: Decision =
        entry.action === 'tool'
          ? { action: 'tool', tool: entry.tool, args: entry.args, reason }
          : entry.action === 'replan'
            ? { action: 'replan', card: entry.card, reason }
            : { action: entry.action, reason };
      return { decision };
    },
  };
}
