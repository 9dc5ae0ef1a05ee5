/**
 * Actors: who makes a change, as (id, role). Every rule compares both, and every event
 * stores both, so an agent that calls itself `operator` is still an agent and the log can
 * tell them apart.
 *
 * - `agent`     an AI agent, by the name its surface bound (MCP `--agent`, a token, `--as`).
 * - `operator`  a person who runs this installation: trusted with every move.
 * - `reviewer`  a person who decides approvals and reviews, and nothing else of an operator's.
 * - `system`    the engine itself; its components are the one typed list below.
 *
 * Operator and system names are reserved: no agent (and no reviewer) may bear one.
 */
import { EngineError } from './errors.js';
import type { Actor } from './types.js';

/** The engine's own components, each a `system` actor. */
export const SYSTEM_ACTOR_NAMES = [
  'system',
  'sweeper',
  'acceptance',
  'approval',
  'control',
  'daemon',
  'loop',
  'scheduler',
  'retention',
  'breaker',
] as const;
export type SystemActorName = (typeof SYSTEM_ACTOR_NAMES)[number];

export const OPERATOR: Actor = Object.freeze({ id: 'operator', role: 'operator' });

const systemActors = Object.fromEntries(
  SYSTEM_ACTOR_NAMES.map((name) => [name, Object.freeze({ id: name, role: 'system' }) as Actor]),
) as Record<SystemActorName, Actor>;

/** The system actor of one engine component. */
export function systemActor(name: SystemActorName): Actor {
  return systemActors[name];
}

export const SWEEPER: Actor = systemActor('sweeper');

/** Names no agent or reviewer may bear: the operator's, the system's, and words that read as them. */
export const RESERVED_NAMES: ReadonlySet<string> = new Set<string>([
  'operator',
  'reviewer',
  'root',
  'admin',
  'anonymous',
  ...SYSTEM_ACTOR_NAMES,
]);

const PLAIN_ASCII = /^[\x21-\x7e]*$/;

/** The form a name is compared in: case, width and surrounding spaces do not make a new name. */
function normalized(name: string): string {
  return PLAIN_ASCII.test(name) ? name.toLowerCase() : name.normalize('NFKC').trim().toLowerCase();
}

export function isReservedName(name: string): boolean {
  return RESERVED_NAMES.has(normalized(name));
}

/** A system component's name (compared as reserved names are): no operator may bear one either. */
export function isSystemName(name: string): boolean {
  return (SYSTEM_ACTOR_NAMES as readonly string[]).includes(normalized(name));
}

/**
 * What an agent or reviewer may be called: plain ASCII letters, digits and `. _ @ + -`,
 * starting with a letter or digit. No spaces, no invisible, combining, bidirectional or
 * look-alike characters, so a name that reads as `operator` in a log is `operator`.
 */
export const BINDABLE_NAME = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$/;

/**
 * Checks a name about to be bound to an agent or reviewer identity; throws `RESERVED_NAME`
 * (or `VALIDATION_FAILED` for a name outside BINDABLE_NAME) with a one-line message naming
 * where it was given.
 */
export function assertBindableName(name: string, where: string): string {
  if (isReservedName(name)) {
    throw new EngineError(
      'RESERVED_NAME',
      `${where}: '${name}' is reserved for the operator or the system; pick another name for an agent`,
      { name },
    );
  }
  if (!BINDABLE_NAME.test(name)) {
    throw new EngineError(
      'VALIDATION_FAILED',
      `${where}: ${JSON.stringify(name)} is not a plain name: agent and reviewer names are ASCII letters, digits and . _ @ + - (at most 100)`,
      { name },
    );
  }
  return name;
}

/**
 * Refuses an agent or reviewer that bears a reserved name, wherever an actor enters the
 * engine (TaskManager checks every actor it is given; surfaces check where they bind one).
 */
export function assertActorName(actor: Actor, where: string): Actor {
  if (actor.role === 'agent' || actor.role === 'reviewer') assertBindableName(actor.id, where);
  return actor;
}

/** The same actor: same id and same role. */
export function sameActor(a: Actor, b: Actor): boolean {
  return a.id === b.id && a.role === b.role;
}

/** The agent of a claim (already bound and checked where it entered). */
export function asAgent(id: string): Actor {
  return { id, role: 'agent' };
}

/** An agent identity, checked against the reserved names. */
export function agentActor(name: string, where: string): Actor {
  return { id: assertBindableName(name, where), role: 'agent' };
}

/** `role:id`, the form an actor takes in messages and in scoped keys. */
export function actorLabel(actor: Actor): string {
  return `${actor.role} ${actor.id}`;
}
