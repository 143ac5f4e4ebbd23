import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';
import { call } from './docker-runtime.js';
import { fakeHarness, type FakeHarness } from './fake-app.js';
import { startServer, type ServerProcess } from './server-process.js';

/** Debian's Chromium, driven by playwright-core, for the dashboard e2e tests. */
const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const SCREENSHOTS = resolve(import.meta.dirname, '../../docs/screenshots');
const WEB_ROOT = resolve(import.meta.dirname, '../../dist/web');

export interface DashboardRun {
  /** The spawned server (set in beforeAll). */
  server: ServerProcess;
  browser: Browser;
  /** Where the run's screenshots go (copied to docs/screenshots when UPDATE_SCREENSHOTS=1). */
  shots: string;
  /** An API call with the key. */
  api: (method: string, path: string, body?: unknown) => ReturnType<typeof call>;
}

/**
 * A server spawned with `key` and `--events`, and Chromium, for the file's tests: started in
 * beforeAll; afterAll deletes the sandboxes a failed test left, stops both and keeps the
 * screenshots when UPDATE_SCREENSHOTS=1.
 */
export function dashboardRun(key: string): DashboardRun {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-dashboard-'));
  const run = {
    shots: join(dir, 'screenshots'),
    api: (method: string, path: string, body?: unknown) => call(run.server.url, method, path, body, { authorization: `Bearer ${key}` }),
  } as DashboardRun;
  beforeAll(async () => {
    mkdirSync(run.shots);
    run.server = await startServer(join(dir, 'data'), ['--api-key', key, '--events']);
    run.browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  });
  afterAll(async () => {
    await run.browser?.close();
    const list = run.server ? ((await run.api('GET', '/sandboxes')).body.data as { name: string }[] | undefined) : [];
    for (const { name } of list ?? []) await run.api('DELETE', `/sandboxes/${name}`);
    await run.server?.stop();
    if (process.env.UPDATE_SCREENSHOTS === '1') {
      mkdirSync(SCREENSHOTS, { recursive: true });
      for (const file of readdirSync(run.shots)) copyFileSync(join(run.shots, file), join(SCREENSHOTS, file));
    }
    rmSync(dir, { recursive: true, force: true });
  });
  return run;
}

/** Chromium for a file's tests, launched in beforeAll and closed in afterAll. */
function launchChromium(): { browser: Browser } {
  const held = {} as { browser: Browser };
  beforeAll(async () => {
    held.browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  });
  afterAll(async () => {
    await held.browser?.close();
  });
  return held;
}

export interface FakeDashboardRun {
  /** The whole service over the fake backend, listening (set in beforeAll). */
  harness: FakeHarness;
  url: string;
  browser: Browser;
  api: (method: string, path: string, body?: unknown) => ReturnType<typeof call>;
}

/**
 * The dashboard (dist/web, built as setup builds it) served by the service over the fake
 * backend, in this process, with `key` and without events; and Chromium. For what the page
 * does with the API's answers: no container is made.
 */
export function fakeDashboardRun(key: string, prepare: (harness: FakeHarness) => void = () => {}): FakeDashboardRun {
  const chromiumHeld = launchChromium();
  const run = {
    api: (method: string, path: string, body?: unknown) => call(run.url, method, path, body, { authorization: `Bearer ${key}` }),
  } as FakeDashboardRun;
  Object.defineProperty(run, 'browser', { get: () => chromiumHeld.browser });
  beforeAll(async () => {
    if (!existsSync(join(WEB_ROOT, 'index.html'))) throw new Error(`the dashboard is not built in ${WEB_ROOT}: run \`cd web && npm run build\` (setup does)`);
    run.harness = await fakeHarness({ apiKeys: [key] }, undefined, undefined, { webRoot: WEB_ROOT });
    prepare(run.harness);
    await run.harness.app.listen({ port: 0, host: '127.0.0.1' });
    run.url = `http://127.0.0.1:${(run.harness.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await run.harness?.close();
  });
  return run;
}

/**
 * What a narrow window puts out of reach, as messages (none: all is well): sideways scrolling
 * of the page, a visible button (or upload label) not wholly inside the window, a time wider
 * than the card or row it sits in.
 */
export const outOfReach = (page: Page): Promise<string[]> =>
  page.evaluate(`(() => {
    const problems = [];
    const width = window.innerWidth;
    const scroller = document.scrollingElement;
    if (scroller.scrollWidth > width) problems.push('the page scrolls sideways: ' + scroller.scrollWidth + ' > ' + width);
    for (const button of document.querySelectorAll('button, label.button')) {
      const box = button.getBoundingClientRect();
      if (box.width === 0 || !button.checkVisibility()) continue;
      if (box.left < 0 || box.right > width) problems.push('button "' + button.textContent.trim() + '" at ' + Math.round(box.left) + '..' + Math.round(box.right));
    }
    for (const time of document.querySelectorAll('time')) {
      const box = time.getBoundingClientRect();
      const card = time.closest('tr, .card, dd, li');
      if (box.width === 0 || !card) continue;
      const outer = card.getBoundingClientRect();
      if (box.left < outer.left || box.right > outer.right) problems.push('time "' + time.textContent + '" leaves its card');
    }
    return problems;
  })()`);

/** A page whose console errors and uncaught exceptions are collected; confirm() dialogs are accepted (the dashboard asks nothing else natively). */
export async function openPage(context: BrowserContext): Promise<{ page: Page; errors: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('dialog', (dialog) => void dialog.accept());
  return { page, errors };
}

/** Answers the dashboard's key dialog, after checking it says `reason`. */
export async function enterKey(page: Page, key: string, reason: RegExp): Promise<void> {
  const dialog = page.getByRole('dialog', { name: 'API key' });
  await expect.poll(() => dialog.isVisible()).toBe(true);
  await expect.poll(() => dialog.textContent()).toMatch(reason);
  await dialog.getByLabel('Key').fill(key);
  await dialog.getByLabel('Key').press('Enter');
}

/** Whether the page fits the window's width (no sideways scrolling). */
export const fitsWidth = (page: Page): Promise<unknown> => page.evaluate('document.documentElement.scrollWidth <= window.innerWidth');
