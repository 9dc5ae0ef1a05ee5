/**
 * How a claim reads the claimable tasks that require capabilities (the `needs` part), on both
 * stores: tasks_claimable_needs_set (anyone's, by queue and set) and tasks_claimable_needs_for
 * (reserved, by agent, queue and set), SQLite's migration 12 and PostgreSQL's schema version 8.
 *
 * A task's requirements are kept as one canonical text (requirementSet: sorted, each once), and
 * the part is keyed by it. An index cannot answer "is this set contained in mine", but a
 * claimer that offers few capabilities has few sets to ask about: each non-empty subset of what
 * it offers, looked up exactly (2^n - 1 of them, each twice: not reserved, reserved for it). In
 * one index in claim order, a claimer that offered any capability stepped over every task
 * requiring one it lacked, and an agent could make every such claim slow (a daemon offering
 * `desktop`: 9.9 ms a claim, inside SQLite's write lock, behind 25,000 tasks requiring
 * `magic`; `npm run bench:claim`, kind `capable`).
 *
 * The sets are one parameter, a JSON array, looked up by one statement whatever their number
 * (a LATERAL on PostgreSQL, a correlated lookup per set on SQLite): 30 lookups for a claimer
 * offering four capabilities, 510 for eight, which cost its claim ~0.22 ms on SQLite, inside
 * the write lock, and ~2 ms on PostgreSQL (`npm run bench:claim`, kinds `capable8`, `eight`);
 * walking a flood of 25,000 instead cost 11 ms and 21 ms a claim. SQLite, where every writer
 * waits on that lock, looks at the part's first entries before it looks up more than fifteen
 * sets, and needs the lookups only behind a flood (sqlite/claim.ts WINDOW).
 *
 * A claimer offering more than MAX_LOOKED_UP capabilities walks the part in claim order
 * instead, checking each task's set against its own (`walk`): the lookups double with each
 * capability, paid on every claim, flood or not (sixteen would be 65,535 sets, ~60 ms), where
 * a walk without a flood stops at its first entries. Only an operator's daemon or CLI can offer
 * that many; an agent's task_claim offers at most AGENT_MAX_CAPABILITIES, since the lookups
 * its claim asks for are a cost it chooses and everyone's writes wait on.
 */
export const MAX_LOOKED_UP = 8;
/** The most capabilities an agent's task_claim may offer: 15 sets to look up, each twice. */
export const AGENT_MAX_CAPABILITIES = 4;

/** The canonical text of a requirement list (null for none), as every store writes it. */
export const requirementSet = (requires: readonly string[] | undefined): string | null =>
  requires === undefined || requires.length === 0 ? null : JSON.stringify([...new Set(requires)].sort());

/**
 * What a claimer's capabilities make of its pick of the needs part: `shape` is 0 (it offers
 * none: the part is not read), the number of sets it looks up, or 'walk'; `param` is the
 * statement's one parameter for it: a JSON array of those sets, or of the capabilities to walk.
 */
export type ClaimNeeds = { readonly shape: number | 'walk'; readonly param: string };

const NONE: ClaimNeeds = { shape: 0, param: '[]' };
// A daemon claims with the same list every time. Kept by content (a caller may change its list
// in place between claims), a few at a time: an agent names its own.
const made = new Map<string, ClaimNeeds>();
const KEPT = 64;

export function claimNeeds(capabilities: readonly string[] | undefined): ClaimNeeds {
  if (capabilities === undefined || capabilities.length === 0) return NONE;
  const key = capabilities.join(' ');
  let needs = made.get(key);
  if (needs !== undefined) return needs;
  const offered = [...new Set(capabilities)].sort();
  if (offered.length > MAX_LOOKED_UP) {
    needs = { shape: 'walk', param: JSON.stringify(offered) };
  } else {
    const sets: string[] = [];
    for (let mask = 1; mask < 1 << offered.length; mask++) sets.push(requirementSet(offered.filter((_, i) => (mask & (1 << i)) !== 0))!);
    needs = { shape: sets.length, param: JSON.stringify(sets) };
  }
  if (made.size >= KEPT) made.clear();
  made.set(key, needs);
  return needs;
}

/** Whether a claimer offering `capabilities` walks the part instead of looking up its sets (for a daemon's warning at start). */
export const claimWalks = (capabilities: readonly string[] | undefined): boolean => claimNeeds(capabilities).shape === 'walk';
