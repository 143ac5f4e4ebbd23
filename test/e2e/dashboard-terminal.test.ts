import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/docker-runtime.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

/**
 * The dashboard's terminal in Debian's Chromium against a spawned server on Docker: the tab mints
 * a one-use token, opens the WebSocket, and xterm.js shows what the shell prints; its screenshot
 * goes to docs/screenshots when UPDATE_SCREENSHOTS=1.
 */

const KEY = 'dashboard-pty-e2e-key-0123456789';
const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const SCREENSHOTS = resolve(import.meta.dirname, '../../docs/screenshots');
const name = `pty-ui-${Math.random().toString(36).slice(2, 8)}`;

const dir = mkdtempSync(join(tmpdir(), 'sandboxd-dashboard-pty-'));
let server: ServerProcess;
let browser: Browser;
const api = (method: string, path: string, body?: unknown) => call(server.url, method, path, body, { authorization: `Bearer ${KEY}` });

beforeAll(async () => {
  server = await startServer(join(dir, 'data'), ['--api-key', KEY]);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  if (server) await api('DELETE', `/sandboxes/${name}`);
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the dashboard terminal', () => {
  it('opens a shell through a one-use token, echoes what is typed, and reports the exit status', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
    page.on('pageerror', (error) => errors.push(error.message));
    await page.addInitScript(`sessionStorage.setItem('sandboxd.apiKey', ${JSON.stringify(KEY)})`);
    await page.goto(`${server.url}/ui/#/sandboxes/${name}`);
    await page.getByRole('tab', { name: 'Terminal' }).click();
    await expect.poll(() => page.getByTestId('terminal-state').textContent(), { timeout: 30_000 }).toBe('connected');
    await page.getByTestId('terminal').click();
    await page.keyboard.type("echo from-x''term; id -un\n");
    const screen = page.locator('.xterm-rows');
    await expect.poll(() => screen.textContent(), { timeout: 30_000 }).toContain('from-xtermsandbox');
    const shot = join(dir, 'sandbox-terminal.png');
    await page.screenshot({ path: shot });
    if (process.env.UPDATE_SCREENSHOTS === '1') {
      mkdirSync(SCREENSHOTS, { recursive: true });
      copyFileSync(shot, join(SCREENSHOTS, 'sandbox-terminal.png'));
    }
    await page.keyboard.type('exit 4\n');
    await expect.poll(() => page.getByTestId('terminal-state').textContent(), { timeout: 30_000 }).toBe('the shell exited with status 4');
    expect(errors).toEqual([]);
    await context.close();
  }, 120_000);
});
