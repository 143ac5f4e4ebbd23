import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';
import { call } from './docker-runtime.js';
import { startServer, type ServerProcess } from './server-process.js';

/** Debian's Chromium, driven by playwright-core, for the dashboard e2e tests. */
const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const SCREENSHOTS = resolve(import.meta.dirname, '../../docs/screenshots');

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

/** A page whose console errors and uncaught exceptions are collected; dialogs are accepted (a prompt with its default answer). */
export async function openPage(context: BrowserContext): Promise<{ page: Page; errors: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('dialog', (dialog) => void dialog.accept(dialog.type() === 'prompt' ? dialog.defaultValue() : undefined));
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
