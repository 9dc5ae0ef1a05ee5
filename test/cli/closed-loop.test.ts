import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers.js';
import { cli, cliJson } from './helpers.js';

describe('closed-loop commands', () => {
  it('card check accepts DESIGN §9’s card and lists every problem of a bad one', async () => {
    const dir = tempDir();
    const db = join(dir, 't.db');
    const good = join(dir, 'good.json');
    writeFileSync(good, JSON.stringify({
      goal: 'Raise T-1024 to urgent and notify on-call',
      planner: 'scripted',
      allowed_tools: ['get_ticket', 'update_ticket_priority', 'notify_oncall'],
      observe: { tool: 'get_ticket', args: { ticket_id: 'T-1024' } },
      scope: { write_ticket_ids: ['T-1024'] },
      budget: { max_steps: 12, max_write_calls: 5, max_pending: 2, deadline: '10m' },
      approval: { tools: ['notify_oncall'], expires_in: '30m', on_expiry: 'degraded' },
      final_state: { ticket: { tool: 'get_ticket', args: { ticket_id: 'T-1024' } } },
      acceptance: { checks: [{ id: 'priority_ok', path: 'ticket.priority', equals: 'urgent' }, { id: 'tools_ok', tools_subset: true }], manual: [] },
      script: [{ action: 'done' }],
    }));
    expect((await cli(db, 'card', 'check', good)).code).toBe(0);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ goal: ' ', allowed_tools: ['close_ticket', 'nope'], budget: {}, script: [] }));
    const refused = await cli(db, '--json', 'card', 'check', bad);
    expect(refused.code).toBe(1);
    const { error } = JSON.parse(refused.stderr);
    expect(error.code).toBe('VALIDATION_FAILED');
    for (const problem of ['goal: must not be empty', 'acceptance:', 'budget: must bound', 'script:', 'nope is not a registered tool', 'scope.write_ticket_ids: required']) {
      expect(error.message).toContain(problem);
    }
    const unknownField = join(dir, 'typo.json');
    writeFileSync(unknownField, JSON.stringify({ goal: 'g', alowed_tools: [] }));
    expect((await cli(db, 'card', 'check', unknownField)).stderr).toMatch(/Unrecognized key|alowed_tools/);

    // Judged for its author, as the run will: an agent's card may not use the desktop or run commands.
    const desk = join(dir, 'desk.json');
    writeFileSync(desk, JSON.stringify({ goal: 'g', allowed_tools: ['click'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 't', tools_subset: true }] }, script: [{ action: 'done' }] }));
    expect((await cli(db, 'card', 'check', desk)).code).toBe(0);
    expect((await cli(db, '--as', 'mallory', 'card', 'check', desk)).stderr).toMatch(/^taskloop: FORBIDDEN: the card allows click, which only a card an operator wrote may allow \(this one is by agent mallory\)$/);
    const cmd = join(dir, 'cmd.json');
    writeFileSync(cmd, JSON.stringify({ goal: 'g', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 't', command: ['true'] }] }, script: [{ action: 'done' }] }));
    expect((await cli(db, '--as', 'mallory', 'card', 'check', cmd)).stderr).toMatch(/^taskloop: FORBIDDEN: the card uses acceptance\.checks\[\]\.command/);
  });

  it('tools lists every tool with kind and risk, and exports OpenAI function definitions', async () => {
    const db = join(tempDir(), 't.db');
    const table = await cli(db, 'tools');
    expect(table.stdout).toMatch(/^notify_oncall\s+write high /m);
    expect(table.stdout).toMatch(/^screen_snapshot\s+read  low /m);
    expect(table.stdout).toMatch(/^launch_app\s+write low /m);
    expect(table.stdout).toMatch(/^click\s+write low .*\[operator only\]$/m);
    const listed = JSON.parse((await cli(db, 'tools', '--format', 'json')).stdout) as Array<{ name: string; operator_only: boolean }>;
    expect(listed.filter((t) => t.operator_only).map((t) => t.name).sort()).toEqual(['click', 'launch_app', 'press_keys', 'screen_snapshot', 'type_text', 'wait_for_window']);
    const functions = JSON.parse((await cli(db, 'tools', '--format', 'openai')).stdout) as Array<{ type: string; function: { name: string; parameters: { properties: Record<string, unknown> } } }>;
    const names = functions.map((f) => f.function.name);
    for (const n of ['task_create', 'task_list', 'task_claim', 'task_transition', 'task_cancel', 'task_get', 'task_heartbeat', 'get_ticket', 'update_ticket_priority', 'notify_oncall', 'close_ticket', 'screen_snapshot', 'type_text', 'press_keys', 'click', 'launch_app']) expect(names).toContain(n);
    expect(functions.find((f) => f.function.name === 'update_ticket_priority')!.function.parameters.properties).toHaveProperty('priority');
    expect((await cli(db, 'tools', '--format', 'xml')).code).toBe(2);
  });

  it('tickets seed is idempotent; list and show; approvals list/approve/reject refuse bad ids', async () => {
    const db = join(tempDir(), 't.db');
    expect((await cliJson(db, 'tickets', 'seed')).added).toBe(100);
    expect((await cliJson(db, 'tickets', 'seed')).added).toBe(0);
    expect(await cliJson<unknown[]>(db, 'tickets', 'list')).toHaveLength(100);
    expect(await cliJson(db, 'tickets', 'show', 'T-1042')).toMatchObject({ ticket_id: 'T-1042', status: 'open', priority: 'normal' });
    expect((await cli(db, 'tickets', 'show', 'T-9999')).stderr).toMatch(/^taskloop: VALIDATION_FAILED: ticket T-9999 does not exist/);
    expect((await cli(db, 'tickets', 'show', "'; DROP TABLE tickets")).code).toBe(1);
    expect(await cliJson<unknown[]>(db, 'approvals', 'list')).toEqual([]);
    expect((await cli(db, 'approve', '7')).stderr).toBe('taskloop: APPROVAL_NOT_FOUND: approval 7 does not exist');
    expect((await cli(db, 'reject', 'x')).code).toBe(1);
    expect((await cli(db, 'approvals', 'list', '--state', 'maybe')).code).toBe(2);
  });
});
