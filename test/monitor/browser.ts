/** A real headless Chromium for the board tests (Debian's /usr/bin/chromium via playwright-core; no browser is downloaded). */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type BrowserContext, type Page, chromium } from 'playwright-core';
import { expect, onTestFinished } from 'vitest';
import { ROOT, tempDir } from '../helpers.js';

export const CHROMIUM = process.env.TASKLOOP_CHROMIUM ?? '/usr/bin/chromium';
export const ARTIFACTS = join(ROOT, 'test-artifacts');

/** A fresh headless Chromium with its own profile; closed when the test finishes. */
export async function openBrowser(): Promise<{ context: BrowserContext; page: Page; dialogs: string[]; errors: string[] }> {
  expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (or set TASKLOOP_CHROMIUM)`).toBe(true);
  const context = await chromium.launchPersistentContext(tempDir(), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1600, height: 900 },
  });
  onTestFinished(() => context.close());
  const page = context.pages()[0] ?? (await context.newPage());
  const dialogs: string[] = [];
  const errors: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(`${d.type()}: ${d.message()}`);
    void d.dismiss();
  });
  page.on('pageerror', (err) => errors.push(err.message));
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(`${msg.text()} (${msg.location().url})`);
  });
  return { context, page, dialogs, errors };
}
