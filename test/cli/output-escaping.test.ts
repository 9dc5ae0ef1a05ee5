/**
 * What someone else wrote reaches the operator's terminal escaped. Reasons are now refused
 * control characters on the way in (task-manager.input.test.ts); a store written before
 * that, or by another tool, may still hold them: an agent's reason with a line break printed
 * a forged "by operator" event line under its own, and an escape sequence repainted the
 * operator's terminal. The rows here are written past the engine, as such a store would be.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freshManager, operator, tempDir } from '../helpers.js';
import { execSql, querySql } from '../stores.js';
import { printable } from '../../src/engine/text.js';
import { cli } from './helpers.js';

const FORGED = 'done\n2026-01-01T00:00:00.000Z #99 task 1 task.transitioned review -> completed by operator operator';
const ESC = '\u001b[2J\u001b[31mred\u009b0m';
// No raw control, separator or bidirectional override in what was printed.
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('text from the store, printed for a person', () => {
  it('events and task show print a reason with a line break or an escape sequence escaped, one line per event', async () => {
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 'watched' }, operator);
    await tm.cancelTask({ taskId: task.id, actor: operator, reason: 'placeholder' });
    const [row] = await querySql<{ id: number; data: string }>(tm, "SELECT id, data FROM task_events WHERE type = 'task.cancelled'");
    await execSql(tm, 'UPDATE task_events SET data = $1 WHERE id = $2', [JSON.stringify({ ...JSON.parse(row!.data), reason: `${FORGED} ${ESC}` }), row!.id]);
    await execSql(tm, 'UPDATE tasks SET title = $1 WHERE id = $2', ['a\u202etitle\u0085', task.id]);
    // A card and a result are an agent's JSON: JSON.stringify leaves C1 and bidi overrides as they are.
    await execSql(tm, 'UPDATE tasks SET card = $1, result = $2 WHERE id = $3', [JSON.stringify({ goal: 'g\u009b2J' }), JSON.stringify({ note: '\u2066x\u2069' }), task.id]);

    const events = await cli(tm.path, 'events');
    expect(events.code, events.stderr).toBe(0);
    const lines = events.stdout.split('\n');
    expect(lines).toHaveLength(2);
    expect(lines.filter((l) => / by operator operator$/.test(l))).toHaveLength(1); // the create's, not a forged one
    expect(lines[1]).toContain('(done\\n2026-01-01T00:00:00.000Z #99');
    expect(lines[1]).toContain('\\u001b[2J\\u001b[31mred\\u009b0m)');
    expect(events.stdout).not.toMatch(RAW);

    const show = await cli(tm.path, 'task', 'show', String(task.id));
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain('task 1: a\\u202etitle\\u0085');
    expect(show.stdout).toContain('card         {"goal":"g\\u009b2J"}');
    expect(show.stdout).toContain('result       {"note":"\\u2066x\\u2069"}');
    expect(show.stdout).not.toMatch(RAW);
    const list = await cli(tm.path, 'task', 'list');
    expect(list.stdout).toContain('a\\u202etitle\\u0085');
    expect(list.stdout).not.toMatch(RAW);
    // As JSON: escaped too (JSON.stringify leaves C1 and bidi characters raw), and a program
    // reads the same title.
    const json = await cli(tm.path, '--json', 'task', 'show', String(task.id));
    expect(json.stdout).not.toMatch(RAW);
    expect((JSON.parse(json.stdout) as { title: string }).title).toBe('a\u202etitle\u0085');
  });

  it('printable escapes controls, separators, bidirectional overrides and lone surrogates, and keeps other text', () => {
    expect(printable('a\nb\r\tc')).toBe('a\\nb\\r\\tc');
    expect(printable('\u0000\u001b\u007f\u0085\u009b')).toBe('\\u0000\\u001b\\u007f\\u0085\\u009b');
    expect(printable('\u2028\u2029\u202a\u202e\u2066\u2069')).toBe('\\u2028\\u2029\\u202a\\u202e\\u2066\\u2069');
    expect(printable('x\ud800y\udc00')).toBe('x\\ud800y\\udc00');
    expect(printable('任务 🚀 ünïcödé \\n')).toBe('任务 🚀 ünïcödé \\n');
  });

  it('printable escapes the bidi marks, the zero-width space and the byte-order mark, and keeps the joiners emoji and scripts need', () => {
    expect(printable('a\u200eb\u200fc\u061cd\u200be\ufefff')).toBe('a\\u200eb\\u200fc\\u061cd\\u200be\\ufefff');
    expect(printable('👩\u200d💻 می\u200cخواهم')).toBe('👩\u200d💻 می\u200cخواهم');
  });

  it("an error line quoting what an agent wrote (a card's unknown key) is escaped, as text and as JSON", async () => {
    const dir = tempDir();
    const file = join(dir, 'card.json');
    writeFileSync(file, JSON.stringify({ goal: 'g', planner: 'scripted', script: [{ action: 'done' }], 'x\u001b[2J\u202e\u0085': 1 }));
    const plain = await cli(join(dir, 'tasks.db'), 'card', 'check', file);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/^taskloop: VALIDATION_FAILED: .*Unrecognized key: "x\\u001b\[2J\\u202e\\u0085"$/);
    expect(plain.stderr).not.toMatch(RAW);
    const json = await cli(join(dir, 'tasks.db'), '--json', 'card', 'check', file);
    expect(json.stderr).not.toMatch(RAW);
    // The same message once parsed: escaping in the JSON text changes nothing a program reads.
    expect((JSON.parse(json.stderr) as { error: { message: string } }).error.message).toContain('x\u001b[2J\u202e\u0085');
  });
});
