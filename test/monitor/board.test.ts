/**
 * The live board in a real headless Chromium (Debian's /usr/bin/chromium, driven by
 * playwright-core; no browser is ever downloaded), against a real `taskloop serve` process
 * and a real daemon over one SQLite file.
 */
import { ticketCard } from '../../src/tools/ticket-card.js';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { OPERATOR } from '../../src/engine/index.js';
import { boardRoutes } from '../../src/monitor/board/board.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { freshManager } from '../helpers.js';
import { startDaemonProcess } from '../workers/daemon-helpers.js';
import { card as workerCard, harness, runCard } from '../workers/harness.js';
import { fakeScreenTool } from '../fixtures/fake-screen.js';
import { api, card, startServer } from './http-helpers.js';
import { ARTIFACTS, openBrowser } from './browser.js';
import { spawnServe } from './serve-process.js';

describe('the live board', () => {
  it('shows a daemon task waiting for approval, approves it from the panel, and follows it to completed', async () => {
    const tm = freshManager();
    await ticketStoreFor(tm.store).seed();
    const served = await spawnServe(tm.path);
    const daemon = await startDaemonProcess(tm.path, ['--workers', '1']);
    onTestFinished(() => {
      if (daemon.child.exitCode === null && daemon.child.signalCode === null) daemon.child.kill('SIGTERM');
    });
    const { page, errors } = await openBrowser();

    // The link `taskloop serve` printed signs the browser in; the code leaves the address bar.
    expect(served.link).toMatch(/\/\?signin=[\w-]+$/);
    const response = await page.goto(served.link);
    expect(response!.status()).toBe(200);
    expect(response!.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await page.locator('#conn[data-conn="live"]').waitFor({ timeout: 15_000 });
    expect(page.url()).toBe(`${served.url}/`);
    expect(await page.evaluate('window.location.search')).toBe('');
    expect(await page.locator('#who').textContent()).toBe('operator (operator)');
    expect(await page.locator('#signin').isHidden()).toBe(true);
    await expect.poll(() => page.locator('[data-column]').count()).toBe(8);

    // Created after the page loaded: the card, the approval and every move arrive over /api/events.
    const created = await api(served.url, 'POST', '/api/tasks', { title: 'Raise T-1024 to urgent', card: ticketCard('T-1024'), attach: false }, served.auth);
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const id = created.json.id as number;

    const approval = page.locator(`#approvals [data-task-id="${id}"]`);
    await approval.waitFor({ timeout: 20_000 });
    await expect.poll(() => approval.locator('.tool').textContent()).toBe('notify_oncall');
    await page.locator(`[data-column="waiting"] [data-task-id="${id}"]`).waitFor({ timeout: 10_000 });

    // The detail of a waiting task: its run, budget and timeline so far, and a Stop button.
    await page.locator(`[data-column="waiting"] [data-task-id="${id}"]`).click();
    await page.locator(`#detail [data-detail-task="${id}"]`).waitFor();
    await page.locator('#detail [data-action="stop"]').waitFor();
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'board-approval.png') });

    await approval.locator('[data-action="approve"]').click();
    await page.locator(`[data-column="completed"] [data-task-id="${id}"]`).waitFor({ timeout: 20_000 });
    await expect.poll(() => page.locator('#approvals [data-approval-id]').count(), { timeout: 10_000 }).toBe(0);

    // The open detail follows too: completed, accepted, with notify_oncall in its timeline.
    await page.locator('#detail [data-detail-state="completed"]').waitFor({ timeout: 10_000 });
    await expect.poll(() => page.locator('#detail [data-run-phase]').textContent(), { timeout: 10_000 }).toBe('completed / accepted');
    expect(await page.locator('#detail ol.timeline li[data-step-tool="notify_oncall"]').count()).toBeGreaterThan(0);
    expect(await page.locator('#detail table.budget').textContent()).toMatch(/write calls\s*\d+ \/ 5/);
    expect(await page.locator('#detail [data-action="stop"]').count()).toBe(0);

    expect((await tm.getTask(id)).state).toBe('completed');
    expect(await ticketStoreFor(tm.store).get('T-1024')).toMatchObject({ priority: 'urgent', notified: true });
    expect(errors).toEqual([]);

    await page.screenshot({ path: join(ARTIFACTS, 'board.png'), fullPage: true });
  });

  it('renders task titles as text, and the page’s origin passes the server’s checks where a foreign one does not', async () => {
    const { url, op, server } = await startServer({ extraRoutes: boardRoutes() });
    const title = '<img src=x onerror=alert(1)>';
    const created = await api(op, 'POST', '/api/tasks', { title, card: card(), attach: false });
    expect(created.status).toBe(201);
    const { page, dialogs, errors } = await openBrowser();
    await page.goto(server.signInLink()!.replace('/?', '/board?'));
    const item = page.locator(`[data-column="pending"] [data-task-id="${created.json.id}"] .title`);
    await item.waitFor({ timeout: 15_000 });
    expect(await item.textContent()).toBe(title);
    await item.click();
    await expect.poll(() => page.locator('#detail .detail-title').textContent()).toBe(`#${created.json.id} ${title}`);
    expect(await page.locator('img').count()).toBe(0);

    expect(page.url()).toBe(`${url}/board`);
    // A same-origin POST from the page passes the origin check (stop-all answers 200).
    // With the session's key, which the board keeps in this origin's storage; the cookie alone,
    // which the browser would also send to another port of this host, is refused.
    const stopAll = await page.evaluate(async () => (await fetch('/api/tasks/stop-all', { method: 'POST', headers: { 'content-type': 'application/json', 'x-taskloop-session-key': (globalThis as unknown as { localStorage: { getItem(k: string): string | null } }).localStorage.getItem('taskloop_session_key') ?? '' }, body: '{}' })).status);
    expect(stopAll).toBe(200);
    const cookieOnly = await page.evaluate(async () => (await fetch('/api/tasks/stop-all', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status);
    expect(cookieOnly).toBe(401);
    // A foreign origin is still refused.
    const foreign = await api(op, 'POST', '/api/tasks/stop-all', {}, { origin: 'http://evil.example' });
    expect(foreign.status).toBe(403);
    expect(dialogs).toEqual([]);
    // This server has no GET /metrics (startHttp mounts it): the board hides the breaker state.
    // The cookie-only call above is the other 401 the console reports.
    expect(errors.filter((e) => !e.endsWith('/metrics)') && !e.endsWith('/api/tasks/stop-all)'))).toEqual([]);
  });
  it('a used sign-in link is refused; then it asks for a token, signs in, and stays live on the session cookie', async () => {
    const token = 'board-token-0123456789';
    const { url, server } = await startServer({ tokens: new Map([[token, OPERATOR]]), extraRoutes: boardRoutes() });
    const link = server.signInLink()!;
    expect((await api(url, 'POST', '/api/session', { code: new URL(link).searchParams.get('signin') })).status).toBe(200);
    const { page, errors } = await openBrowser();
    await page.goto(link);
    const form = page.locator('#signin');
    await form.waitFor({ state: 'visible', timeout: 15_000 });
    expect(await page.locator('#conn').getAttribute('data-conn')).toBe('closed');
    expect(await page.locator('#signin-error').textContent()).toBe('That sign-in link was used already or has expired. Paste a token instead.');
    expect(page.url()).toBe(`${url}/`);

    await page.fill('#signin-token', 'not-the-token-0123456789');
    await page.click('#signin-form button[type="submit"]');
    await expect.poll(() => page.locator('#signin-error').textContent()).toBe('That token is not valid.');
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'board-signin.png') });

    await page.fill('#signin-token', token);
    await page.click('#signin-form button[type="submit"]');
    await page.locator('#conn[data-conn="live"]').waitFor({ timeout: 15_000 });
    expect(await form.isHidden()).toBe(true);
    expect(await page.locator('#who').textContent()).toBe('operator (operator)');
    // The cookie is HttpOnly: the page's script cannot read it.
    expect(await page.evaluate('document.cookie')).toBe('');

    // A task created elsewhere arrives over the event stream, which the cookie authenticates.
    const created = await api(url, 'POST', '/api/tasks', { title: 'seen through the session', card: card(), attach: false }, { authorization: `Bearer ${token}` });
    await page.locator(`[data-column="pending"] [data-task-id="${created.json.id}"]`).waitFor({ timeout: 15_000 });

    await page.click('#sign-out');
    await form.waitFor({ state: 'visible', timeout: 10_000 });
    expect(await page.evaluate(async () => (await fetch('/api/tasks')).status)).toBe(401);
    expect(errors.filter((e) => !/401|\/metrics\)$/.test(e))).toEqual([]);
  });
  it('a run that observed a screen shows it in the detail pane', async () => {
    const h = harness();
    const screen = fakeScreenTool();
    h.tools.register(screen.tool);
    const { claim } = await runCard(h, workerCard({
      allowed_tools: ['fake_screen', 'noop'],
      observe: { tool: 'fake_screen', args: {} },
      script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }],
    }));
    const { server } = await startServer({ path: h.path, extraRoutes: boardRoutes() });
    const { page, errors } = await openBrowser();
    await page.goto(server.signInLink()!);
    await page.locator(`[data-task-id="${claim.id}"]`).first().click();
    const img = page.locator('#detail img.screen');
    await img.waitFor({ timeout: 15_000 });
    expect(await img.getAttribute('data-screen-seq')).toBe('4');
    await expect.poll(() => img.evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth)).toBe(4);
    expect(errors.filter((e) => !e.endsWith('/metrics)'))).toEqual([]);
  });
});
