/**
 * Reserved names "in any case or width" (README, Authority). actors.ts compares a name in
 * NFKC, trimmed and lower-cased, which leaves characters that render as nothing or as a
 * Latin letter: zero-width characters (U+200B, U+200D, U+2060), a soft hyphen, a
 * right-to-left override, a Cyrillic 'о'. An agent bound as `operator\u200b` is accepted,
 * and the log prints its changes as `by operator` (cli/format.ts prints the id only), the
 * very confusion reserved names exist to prevent.
 *
 * Correct behaviour: every such spelling is refused wherever an identity is bound (the
 * TaskManager, `taskloop mcp --agent`, `--as`, TASKLOOP_TOKENS) with a stable code, and
 * nothing is written.
 */
import { describe, expect, it } from 'vitest';
import { tokensFromEnv } from '../../src/monitor/http/auth.js';
import { spawnCli } from '../cli/helpers.js';
import { agent, freshManager, operator } from '../helpers.js';
import { card, drive, harness, loopContext } from '../workers/harness.js';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';

/** Names that read as a reserved one. */
const LOOKALIKES = [
  'operator\u200b', // zero-width space
  'Operator\u200b',
  '\u200boperator',
  'op\u00aderator', // soft hyphen
  'root\u2060', // word joiner
  'sweeper\u200d', // zero-width joiner
  'reviewer\u034f', // combining grapheme joiner
  '\u043eperator', // Cyrillic small o
  '\u202erotarepo', // right-to-left override: shows as "operator"
];
const REFUSED = ['RESERVED_NAME', 'VALIDATION_FAILED'];

describe('reserved names in other spellings', () => {
  it('the TaskManager refuses an agent or reviewer whose name reads as a reserved one, and writes nothing', async () => {
    const tm = freshManager();
    for (const name of LOOKALIKES) {
      for (const role of ['agent', 'reviewer'] as const) {
        const err = await tm.createTask({ title: 'hello' }, { id: name, role }).then(() => null, (e: { code?: string }) => e);
        expect(err?.code, `${role} ${JSON.stringify(name)}`).toBeOneOf(REFUSED);
      }
      const claim = await tm.claimTask({ agent: name }).then(() => null, (e: { code?: string }) => e);
      expect(claim?.code, `claim as ${JSON.stringify(name)}`).toBeOneOf(REFUSED);
    }
    expect((await tm.stats()).lastEventId).toBe(0);
  });

  it('taskloop mcp --agent and --as refuse them at start', async () => {
    const tm = freshManager();
    for (const name of ['operator\u200b', '\u043eperator']) {
      const mcp = await spawnCli(['--db', tm.path, 'mcp', '--agent', name]);
      expect(mcp.code, `mcp --agent ${JSON.stringify(name)}`).toBe(1);
      expect(mcp.stderr).toMatch(/^taskloop: (RESERVED_NAME|VALIDATION_FAILED): /);
      const as = await spawnCli(['--db', tm.path, '--as', name, 'task', 'create', '--title', 'hello']);
      expect(as.code, `--as ${JSON.stringify(name)}`).not.toBe(0);
    }
    expect((await tm.stats()).lastEventId).toBe(0);
  });

  it('TASKLOOP_TOKENS refuses them', () => {
    for (const name of LOOKALIKES) {
      for (const role of ['agent', 'reviewer'] as const) {
        const env = { TASKLOOP_TOKENS: JSON.stringify({ 'a-token-of-16-chars-or-more': { id: name, role } }) };
        expect(() => tokensFromEnv(env), `${role} ${JSON.stringify(name)}`).toThrow();
      }
    }
  });
});

describe('one name, two roles', () => {
  /**
   * authority.ts mayDecideApproval compares (id, role): the reviewer `rita` is not the agent
   * `rita`, so a person who holds both a reviewer token and an agent identity of the same
   * name approves the high-risk calls her own agent asked for (and approvals.decided_by
   * keeps only the id, so the log cannot tell). DESIGN §10: never by the assignee or the
   * agent that created the task.
   */
  for (const who of ['creator', 'assignee'] as const) {
    it(`a reviewer named like the task’s ${who} agent may not decide its approval`, async () => {
      const h = harness();
      await ticketStoreFor(h.tm.store).seed();
      await h.tm.createTask({ title: 'page on-call', card: ticketCard('T-1024') }, who === 'creator' ? agent('rita') : operator);
      const claim = (await h.tm.claimTask({ agent: who === 'assignee' ? 'rita' : 'worker', start: true }))!;
      await drive(loopContext(h, claim));
      const [approval] = await h.runs.listApprovals('pending');
      expect(approval).toBeDefined();
      await expect(h.runs.decideApproval({ approvalId: approval!.id, approve: true, actor: { id: 'rita', role: 'reviewer' } })).rejects.toMatchObject({ code: 'FORBIDDEN' });
      expect(await h.runs.getApproval(approval!.id)).toMatchObject({ state: 'pending' });
    });
  }
});
