/**
 * What a claim on PostgreSQL reads: the parts of the claimable tasks, each from its partial
 * index, as SQL text (claim.ts runs it). A look, a locking pick (fast and slow), and beside
 * every pick whether its queue has tasks due that no claim has released yet.
 */
import type { ClaimNeeds } from '../claim-needs.js';

export type Needs = ClaimNeeds['shape'];

/** Where a pick's values come from: a parameter ($n) or an expression (the transaction's clock). */
export type PickValues = { queue: string; now: string; agent: string; caps: string };
export const PARAMS: PickValues = { queue: '$1', now: '$2', agent: '$3', caps: '$4' };

/**
 * A part of the claimable tasks: its terms, and for the parts read by requirement set
 * (`sets`, a JSON array of the set texts to look up) the lookup of each: one LATERAL over the
 * sets, so that the statement (and its planning) is the same however many sets a claimer
 * covers. As one part per set it was 32 for a claimer offering four capabilities, planned in
 * 3.9 ms (against 0.5 without), which behind a pooler (no named statements) was every claim.
 */
type Part = { where: string; sets?: string };

/**
 * The parts of the claimable tasks this claimer may take from, each with its own partial
 * index in claim order (schema versions 6 to 9, as SQLite's 10 to 13): those anyone may claim
 * (tasks_ready_open), those reserved for this agent that require nothing
 * (tasks_ready_for), and for a claimer with capabilities those that require some: looked
 * up by each requirement set its capabilities cover, not reserved and reserved for it
 * (tasks_ready_needs_set and _for; claim-needs.ts), or past MAX_LOOKED_UP walked in claim
 * order (tasks_ready_needs_walk). In one index a claim stepped over every task reserved
 * for another agent or requiring what it lacked, so an agent could make every claim slow by
 * creating such tasks. The capabilities' parameter is JSON text: the sets to look up, or (a
 * walk) the capabilities a task's requirements must be contained in. A task not yet due is in
 * no part (version 9, the parts named tasks_ready_* since): see dueSql.
 */
function pickParts(v: PickValues, withCard: boolean, needs: Needs): Part[] {
  // run_after too, though a task in a part is due: one written before version 9 by a build still
  // running (`delayed` false), or on a clock ahead of this one, is still not handed out early.
  const base = `state = 'pending' AND unmet_deps = 0 AND NOT delayed AND queue = ${v.queue} AND run_after <= ${v.now}${withCard ? " AND card <> '{}'" : ''}`;
  // As a CASE: the planner guesses `<@` matches one row in a thousand, and then reads a whole
  // part (every task requiring capabilities) through a bitmap and sorts it, on every claim,
  // where walking the part in claim order stops at its first match. A CASE it guesses at half.
  const meets = `CASE WHEN requires::jsonb <@ ${v.caps}::jsonb THEN true ELSE false END`;
  const parts: Part[] = [{ where: `${base} AND for_agent IS NULL AND requires IS NULL` }, { where: `${base} AND for_agent = ${v.agent} AND requires IS NULL` }];
  // length(requires) > 0: tasks_ready_needs_walk's WHERE (migrations.ts, versions 8 and 9).
  if (needs === 'walk') parts.push({ where: `${base} AND requires IS NOT NULL AND length(requires) > 0 AND (for_agent IS NULL OR for_agent = ${v.agent}) AND ${meets}` });
  else if (needs > 0) parts.push({ where: `${base} AND for_agent IS NULL`, sets: `${v.caps}::jsonb` }, { where: `${base} AND for_agent = ${v.agent}`, sets: `${v.caps}::jsonb` });
  // Without those parts the capabilities' parameter goes unread, and an unread parameter has no
  // type the server can tell: it is read here, always true ('[]' at least), to give it one.
  else parts[0]!.where += ` AND ${v.caps}::text IS NOT NULL`;
  return parts;
}
const ORDER = 'ORDER BY priority DESC, id';
/** How many of each part's first entries a locking pick tries before it falls back to locking each part's first unlocked one. */
const CANDIDATES = 4;

/** The first `limit` entries of `part` in claim order, as `cols` (with id and priority, or *), each with `lock`. */
function firsts(part: Part, cols: string, limit: number, lock = ''): string {
  if (part.sets === undefined) return `SELECT ${cols} FROM tasks WHERE ${part.where} ${ORDER} LIMIT ${limit}${lock}`;
  return `SELECT x.* FROM jsonb_array_elements_text(${part.sets}) s(r)
       CROSS JOIN LATERAL (SELECT ${cols} FROM tasks WHERE ${part.where} AND requires = s.r ${ORDER} LIMIT ${limit}${lock}) x
       ORDER BY x.priority DESC, x.id LIMIT ${limit}`;
}

/**
 * Whether the queue holds tasks due that no claim has released yet: read beside every pick
 * (from tasks_delayed, by queue and due time: one entry when none is due). A pick that sees
 * some takes nothing; its claimer releases them (releaseDue) and picks again, so a task that
 * falls due takes its place in claim order. In the parts, every claim stepped over each task
 * not yet due: 7 ms a claim behind an operator's 25,000 reminders due in 2100.
 */
export const dueSql = (v: PickValues): string =>
  `EXISTS (SELECT 1 FROM tasks WHERE state = 'pending' AND delayed AND queue = ${v.queue} AND run_after <= ${v.now})`;

/** Whether a row is in `part`: its terms, as a condition on the row. */
const holds = (part: Part): string => (part.sets === undefined ? part.where : `${part.where} AND requires IN (SELECT jsonb_array_elements_text(${part.sets}))`);

/** A look (no lock): the best of each part's first entry (claimable adds the due ones not yet released). */
export const lookSql = (withCard: boolean, needs: Needs, columns: string, v: PickValues = PARAMS): string =>
  `SELECT ${columns} FROM tasks WHERE id = (SELECT id FROM (${pickParts(v, withCard, needs)
    .map((part) => `(${firsts(part, 'id, priority', 1)})`)
    .join(' UNION ALL ')}) f ${ORDER} LIMIT 1)`;

/**
 * A pick that locks the task it returns (FOR UPDATE SKIP LOCKED), as CTEs (`with`, names
 * starting pick_) and the SELECT that reads them (`select`, one row or none).
 * - `fast`: it takes the first CANDIDATES entries of each part without a lock and locks the
 *   best of them still claimable (SKIP LOCKED passes those other claimers hold). It locks no
 *   other row. A part with CANDIDATES entries may hold more past them: none ranked after its
 *   last entry is taken (pick_edge), since a better one may wait there. So none found with
 *   some there (pick_cand) means other claimers hold what it could take, and the caller picks
 *   again `slow`ly.
 * - `slow`: it locks each part's first free entry and takes the best, leaving the others
 *   locked until its transaction ends (a claimer that meets one passes it, as it passes a task
 *   being claimed, and may find nothing: a transaction that picked slowly wakes every claimer
 *   at its commit, pickedSlowly). The rows it returns are the locked ones, as they are now: a
 *   task claimed and given back while the statement ran has its new attempt count.
 */
export function pickSql(withCard: boolean, needs: Needs, columns: string, v: PickValues = PARAMS, slow = false): { with: string; select: string } {
  const parts = pickParts(v, withCard, needs);
  if (slow) {
    const taken = columns === '*' ? '*' : `${columns}, priority`;
    const locked = parts.map((part, i) => `pick_first${i} AS (${firsts(part, taken, 1, ' FOR UPDATE SKIP LOCKED')})`);
    return {
      with: locked.join(',\n     '),
      select: `SELECT ${columns} FROM (${locked.map((_, i) => `SELECT * FROM pick_first${i}`).join(' UNION ALL ')}) f ${ORDER} LIMIT 1`,
    };
  }
  const candidates = parts.map((part, i) => `(SELECT ${i} AS part, c.id, c.priority FROM (${firsts(part, 'id, priority', CANDIDATES)}) c)`).join(' UNION ALL ');
  // Still claimable (re-checked on the row's newest version once locked), as a CASE: as plain
  // terms they matched the parts' indexes, and the planner read every claimable task through
  // them (27,000 rows, 45 ms) to keep the few ids pick_cand holds.
  const still = `CASE WHEN ${parts.map((part) => `(${holds(part)})`).join(' OR ')} THEN true ELSE false END`;
  const after = (x: string, e: string) => `(${x}.priority < ${e}.priority OR (${x}.priority = ${e}.priority AND ${x}.id > ${e}.id))`;
  return {
    with: [
      `pick_cand AS MATERIALIZED (${candidates})`,
      // The last entry of each part that had CANDIDATES of them; the best ranked of those.
      `pick_edge AS (SELECT c.priority, c.id FROM pick_cand c
         WHERE (SELECT count(*) FROM pick_cand d WHERE d.part = c.part) = ${CANDIDATES}
           AND NOT EXISTS (SELECT 1 FROM pick_cand d WHERE d.part = c.part AND ${after('d', 'c')})
         ${ORDER} LIMIT 1)`,
    ].join(',\n     '),
    select: `SELECT ${columns} FROM tasks WHERE id IN (SELECT id FROM pick_cand) AND ${still}
       AND NOT EXISTS (SELECT 1 FROM pick_edge e WHERE ${after('tasks', 'e')}) ${ORDER} LIMIT 1 FOR UPDATE SKIP LOCKED`,
  };
}
/** An SQL expression: whether a fast pick had entries to choose from (read beside its result). */
export const PICK_HAD_CANDIDATES = 'EXISTS (SELECT 1 FROM pick_cand)';

