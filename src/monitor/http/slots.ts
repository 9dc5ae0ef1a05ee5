/**
 * What one identity may hold open at once on a server: its event streams and its MCP
 * sessions share one count, at most MAX_STREAMS_PER_ACTOR (429 TOO_MANY_STREAMS past it).
 * Each stream re-reads the log on every commit, and each MCP session keeps a server in this
 * process's memory, so a token cannot slow everyone else's writes to a crawl or fill the
 * server's memory; another identity's count is its own.
 */
import type { Actor } from '../../engine/index.js';
import { HttpError } from './errors.js';

/** Event streams and MCP sessions one identity may hold open at once. */
export const MAX_STREAMS_PER_ACTOR = 32;

export interface ActorSlots {
  /** How many slots `actor` holds. */
  held(actor: Actor): number;
  /** Throws 429 TOO_MANY_STREAMS when `actor` holds every slot it may. */
  admit(actor: Actor): void;
  /** Takes a slot (admit first); the returned function gives it back, once however often it is called. */
  take(actor: Actor): () => void;
}

export function createActorSlots(max = MAX_STREAMS_PER_ACTOR): ActorSlots {
  const perActor = new Map<string, number>();
  const keyOf = (actor: Actor) => `${actor.role}:${actor.id}`;
  const held = (actor: Actor) => perActor.get(keyOf(actor)) ?? 0;
  const admit = (actor: Actor): void => {
    if (held(actor) >= max) {
      throw new HttpError(429, 'TOO_MANY_STREAMS', `${actor.role} ${actor.id} already holds ${max} event streams and MCP sessions; close one first`);
    }
  };
  return {
    held,
    admit,
    take(actor) {
      admit(actor);
      perActor.set(keyOf(actor), held(actor) + 1);
      let given = false;
      return () => {
        if (given) return;
        given = true;
        const left = held(actor) - 1;
        if (left > 0) perActor.set(keyOf(actor), left);
        else perActor.delete(keyOf(actor));
      };
    },
  };
}
