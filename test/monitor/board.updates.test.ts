/**
 * The board in a real headless Chromium: how it shows finished runs (degraded apart from
 * clean, no deadline countdown), and that it fetches only what changed while a run goes on.
 */
import { describe, expect, it } from 'vitest';
import type { SqliteTaskStore } from '../../src/engine/index.js';
import { boardRoutes } from '../../src/monitor/board/board.js';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { operator } from '../helpers.js';
import { type Harness, card, drive, harness, loopContext, runCard } from '../workers/harness.js';
import { openBrowser } from './browser.js';
import { api, startServer } from './http-helpers.js';

async function runNext(h: Harness) {
  const claim = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
  return drive(loopContext(h, claim));
}

describe('the board on finished and running work', () => {
  it('marks a degraded completion apart from a clean one, and counts down a deadline only while the run is live', async () => {
    const h = harness();
    await ticketStoreFor(h.tm.store).seed();
    const clean = (await runCard(h, card({ allowed_tools: ['noop'], budget: { max_steps: 20, deadline: '10m' }, script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }] }))).claim.id;
    // Seed 003 path 3: the approval expires, the page is skipped, the run ends degraded.
    const { task: degradedTask } = await h.tm.createTask({ title: 'degrades', card: ticketCard('T-1024', { onExpiry: 'degraded' }) }, operator);
    await runNext(h);
    (h.tm.store as SqliteTaskStore).db.prepare('UPDATE approvals SET expires_at = ?').run(Date.now() - 1);
    await h.runs.expireApprovals();
    expect((await runNext(h)).result.phase).toBe('degraded');
    // A run parked for approval is not finished: its ten-minute deadline still counts down.
    const { task: waiting } = await h.tm.createTask({ title: 'waits', card: ticketCard('T-1025') }, operator);
    expect((await runNext(h)).result.phase).toBe('waiting_approval');

    const { server } = await startServer({ path: h.path, extraRoutes: boardRoutes() });
    const { page, errors } = await openBrowser();
    await page.goto(server.signInLink()!);
    const degradedCard = page.locator(`[data-column="completed"] [data-task-id="${degradedTask.id}"]`);
    await degradedCard.waitFor({ timeout: 15_000 });
    expect(await degradedCard.getAttribute('data-outcome')).toBe('degraded');
    expect(await degradedCard.locator('.outcome[data-outcome="degraded"]').textContent()).toBe('degraded');
    const cleanCard = page.locator(`[data-column="completed"] [data-task-id="${clean}"]`);
    expect(await cleanCard.getAttribute('data-outcome')).toBe('completed');
    expect(await cleanCard.locator('.outcome').count()).toBe(0);
    // Styled apart, not only labelled: the left border differs.
        const border = (sel: typeof cleanCard) => sel.evaluate((el) => {
      const s = (globalThis as unknown as { getComputedStyle(e: unknown): { borderLeftStyle: string; borderLeftColor: string } }).getComputedStyle(el);
      return `${s.borderLeftStyle} ${s.borderLeftColor}`;
    });
    expect(await border(degradedCard)).not.toBe(await border(cleanCard));

    await degradedCard.click();
    await page.locator(`#detail [data-detail-task="${degradedTask.id}"]`).waitFor();
    await page.locator('#detail [data-detail-outcome="degraded"]').waitFor();
    expect(await page.locator('#detail [data-run-phase]').textContent()).toBe('degraded / approval_expired');
    const finishedDeadline = page.locator('#detail [data-deadline]');
    expect(await finishedDeadline.getAttribute('data-deadline')).toBe('finished');
    expect(await finishedDeadline.textContent()).toMatch(/\(run finished\)$/);
    expect(await finishedDeadline.textContent()).not.toMatch(/^in |ago/);

    await page.locator(`[data-task-id="${clean}"]`).click();
    await page.locator(`#detail [data-detail-task="${clean}"]`).waitFor();
    expect(await page.locator('#detail [data-detail-outcome]').count()).toBe(0);
    expect(await page.locator('#detail [data-deadline]').getAttribute('data-deadline')).toBe('finished');

    await page.locator(`[data-column="waiting"] [data-task-id="${waiting.id}"]`).click();
    await page.locator(`#detail [data-detail-task="${waiting.id}"]`).waitFor();
    const live = page.locator('#detail [data-deadline]');
    expect(await live.getAttribute('data-deadline')).toBe('live');
    expect(await live.textContent()).toMatch(/^in \d+m$/);
    expect(errors.filter((e) => !e.endsWith('/metrics)'))).toEqual([]);
  });

  it('while a run goes on, fetches only what changed: the task without its old events, the run’s new steps', async () => {
    const h = harness();
    const calls = 6;
    const { task } = await h.tm.createTask({ title: 'steps', card: card({ allowed_tools: ['noop'], loop: { repeat_limit: 20, idle_rounds: 50 }, script: [...Array.from({ length: calls }, (_, n) => ({ action: 'tool', tool: 'noop', args: { n } })), { action: 'done' }] }) }, operator);
    const { op, server } = await startServer({ path: h.path, extraRoutes: boardRoutes() });
    const { page, errors } = await openBrowser();
    const taskCalls: Array<{ url: URL; body: Promise<{ events: unknown[] }> }> = [];
    const runCalls: Array<{ url: URL; body: Promise<{ steps: Array<{ seq: number }> }> }> = [];
    page.on('response', (res) => {
      const u = new URL(res.url());
      if (u.pathname === `/api/tasks/${task.id}`) taskCalls.push({ url: u, body: res.json() });
      if (u.pathname.startsWith('/api/runs/') && !u.pathname.endsWith('/screen')) runCalls.push({ url: u, body: res.json() });
    });
    await page.goto(server.signInLink()!);
    await page.locator('#conn[data-conn="live"]').waitFor({ timeout: 15_000 });
    await page.locator(`[data-task-id="${task.id}"]`).click();
    await page.locator(`#detail [data-detail-task="${task.id}"]`).waitFor();

    // The run, in this process; after each step, the board must have shown it before the next.
    const claim = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
    const { result } = await drive(loopContext(h, claim), async (e) => {
      if (e.type === 'step_finished') await page.locator(`#detail li[data-step-seq="${e.step.seq}"][data-status="${e.step.status}"]`).waitFor({ timeout: 10_000 });
    });
    expect(result.phase).toBe('completed');
    await page.locator('#detail [data-detail-state="completed"]').waitFor({ timeout: 10_000 });
    await expect.poll(() => page.locator('#detail [data-run-phase]').textContent()).toBe('completed / accepted');

    const steps = (await h.runs.getRun(result.runId)).steps.length;
    const events = (await api(op, 'GET', `/api/tasks/${task.id}`)).json.events.length;
    expect(steps).toBeGreaterThanOrEqual(calls * 2);
    expect(await page.locator('#detail ol.timeline li').count()).toBe(steps);

    // Every read of the task asked only for the events past the board's cursor.
    expect(taskCalls.length).toBeGreaterThan(3);
    for (const c of taskCalls) expect(c.url.searchParams.get('events_after'), c.url.href).toMatch(/^\d+$/);
    const eventsSent = (await Promise.all(taskCalls.map((c) => c.body))).reduce((n, b) => n + b.events.length, 0);
    expect(eventsSent).toBeLessThan(events);
    // One task read per update, not two (the detail pane reuses the columns' read).
    expect(taskCalls.length).toBeLessThanOrEqual(runCalls.length + 1);
    // The run was read many times, each time only past its last finished step.
    expect(runCalls.length).toBeGreaterThan(3);
    expect(runCalls.slice(1).every((c) => Number(c.url.searchParams.get('steps_after')) > 0)).toBe(true);
    const stepsSent = (await Promise.all(runCalls.map((c) => c.body))).reduce((n, b) => n + b.steps.length, 0);
    // Each read may send again the one step still running; re-reading the whole run each time would send ~steps²/2.
    expect(stepsSent).toBeLessThanOrEqual(steps + runCalls.length);
    expect(errors.filter((e) => !e.endsWith('/metrics)'))).toEqual([]);
  });
});
