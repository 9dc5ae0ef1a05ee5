/** Human-readable text for tasks and events (the JSON forms come from engine/wire.ts). */
import type { Run, Task, TaskEvent, TaskWithEvents } from '../engine/index.js';
import { printable as p } from '../engine/text.js';

const iso = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

/** Column widths: at least these, wider when a value in the table is (an agent's long name). */
interface Widths {
  id: number;
  prio: number;
  assignee: number;
}
const MIN_WIDTHS: Widths = { id: 7, prio: 5, assignee: 14 };

export function taskLine(t: Task, w: Widths = MIN_WIDTHS): string {
  return `${pad(`#${t.id}`, w.id)} ${pad(t.state, 11)} ${pad(String(t.priority), w.prio)} ${pad(p(t.assignee ?? '-'), w.assignee)} ${p(t.title)}`;
}

export function taskTable(tasks: Task[]): string {
  if (tasks.length === 0) return 'no tasks';
  const widest = (min: number, of: (t: Task) => string) => Math.max(min, ...tasks.map((t) => of(t).length + 1));
  const w: Widths = {
    id: widest(MIN_WIDTHS.id, (t) => `#${t.id}`),
    prio: widest(MIN_WIDTHS.prio, (t) => String(t.priority)),
    assignee: widest(MIN_WIDTHS.assignee, (t) => p(t.assignee ?? '-')),
  };
  return [`${pad('ID', w.id)} ${pad('STATE', 11)} ${pad('PRIO', w.prio)} ${pad('ASSIGNEE', w.assignee)} TITLE`, ...tasks.map((t) => taskLine(t, w))].join('\n');
}

export function eventLine(e: TaskEvent): string {
  const move = typeof e.data.to === 'string' ? ` ${typeof e.data.from === 'string' ? `${e.data.from} -> ` : ''}${e.data.to}` : '';
  // An agent's words: escaped, so a line break or an escape sequence in them cannot forge a line.
  const reason = typeof e.data.reason === 'string' ? ` (${p(e.data.reason)})` : '';
  return `${iso(e.createdAt)} #${e.id} task ${e.taskId ?? '-'} ${p(e.type)}${move} by ${e.actorRole} ${p(e.actor)}${reason}`;
}

export function runLines(r: Run): string[] {
  const u = r.usage;
  const lines = [
    `  run ${r.id}: ${r.phase}${r.stopReason === null ? '' : ` (${p(r.stopReason)})`}, ${u.steps} of ${r.budget.maxSteps} steps, ${u.writeCalls} writes, ${u.tokens} tokens, checkpoint ${r.checkpointVersion}`,
  ];
  if (r.envelope !== null) lines.push(`    envelope ${p(JSON.stringify(r.envelope))}`);
  return lines;
}

export function taskDetail(t: TaskWithEvents, runs: Run[] = []): string {
  const lines = [
    `task ${t.id}: ${p(t.title)}`,
    `  state        ${t.state}`,
    `  priority     ${t.priority}`,
    `  queue        ${t.queue}`,
    `  creator      ${p(t.creator)}`,
    `  assignee     ${p(t.assignee ?? '-')}`,
    `  attempts     ${t.attempts} of ${t.maxAttempts}`,
    `  depends on   ${t.dependsOn.length > 0 ? t.dependsOn.join(', ') : '-'}`,
    `  for agent    ${p(t.forAgent ?? '-')}`,
    `  requires     ${t.requires.length > 0 ? t.requires.join(', ') : '-'}`,
    `  run after    ${iso(t.runAfter)}`,
    `  lease until  ${iso(t.leaseExpiresAt)}`,
    `  created      ${iso(t.createdAt)}`,
    `  updated      ${iso(t.updatedAt)}`,
    // JSON escapes C0 controls, not C1, separators or bidi overrides; printable's escapes keep it JSON.
    `  card         ${p(JSON.stringify(t.card))}`,
    `  result       ${t.result === null ? '-' : p(JSON.stringify(t.result))}`,
    ...(runs.length > 0 ? ['runs:', ...runs.flatMap(runLines)] : []),
    'events:',
    ...t.events.map((e) => `  ${eventLine(e)}`),
  ];
  return lines.join('\n');
}
