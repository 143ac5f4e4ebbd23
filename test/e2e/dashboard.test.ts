import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { dashboardRun, enterKey, fitsWidth, openPage as open } from '../helpers/dashboard-browser.js';

/**
 * The dashboard in Debian's Chromium against a spawned server on Docker: the key dialog, live
 * updates through /events, the exec console, upload and download, delete; at 1280x720 and at
 * 420 px wide, with no console error. Screenshots of every page go to a temporary folder, and
 * into docs/screenshots when UPDATE_SCREENSHOTS=1.
 */

const KEY = 'dashboard-e2e-key-0123456789';
const suffix = Math.random().toString(36).slice(2, 8);
const run = dashboardRun(KEY);
const { api, shots } = run;

const row = (page: Page, name: string) => page.getByRole('row').filter({ has: page.getByRole('link', { name, exact: true }) });

async function runInConsole(page: Page, command: string, expected: string) {
  await page.getByRole('tab', { name: 'Console' }).click();
  const input = page.getByRole('textbox', { name: 'Command' });
  await input.fill(command);
  await input.press('Enter');
  await expect.poll(() => page.getByTestId('console-output').textContent(), { timeout: 30_000 }).toContain(expected);
  await expect.poll(() => page.getByTestId('console-exit').textContent(), { timeout: 30_000 }).toBe('completed, exit code 0');
}

describe('the dashboard', () => {
  it('at 1280x720: key, create, live event, exec console, upload and download, every page, delete', async () => {
    const context = await run.browser.newContext({ viewport: { width: 1280, height: 720 }, acceptDownloads: true });
    const { page, errors } = await open(context);
    const name = `dash-${suffix}`;
    const other = `dash-api-${suffix}`;

    // GET / from a browser lands on /ui/, which asks for the key; a wrong one is asked again.
    await page.goto(run.server.url + '/');
    expect(new URL(page.url()).pathname).toBe('/ui/');
    await enterKey(page, 'not-the-key', /needs an API key/);
    await enterKey(page, KEY, /refused/);
    await expect.poll(() => page.getByRole('heading', { name: 'Sandboxes' }).isVisible()).toBe(true);

    // Create through the form, with the keyboard only.
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('Labels').fill('suite=dashboard');
    await page.getByLabel('Labels').press('Enter');
    await expect.poll(() => row(page, name).isVisible(), { timeout: 60_000 }).toBe(true);

    // A sandbox made elsewhere appears through /events, without a reload.
    // A reload or a navigation would lose this mark.
    await page.evaluate('window.sandboxdMark = 42');
    expect((await api('POST', '/sandboxes', { name: other, labels: { suite: 'api' } })).status).toBe(201);
    await expect.poll(() => row(page, other).isVisible(), { timeout: 30_000 }).toBe(true);
    expect(await page.evaluate('window.sandboxdMark')).toBe(42);
    await expect.poll(() => row(page, other).textContent()).toContain('running');

    // The label filter.
    await page.getByLabel('Label filter').fill('suite=dashboard');
    await page.getByLabel('Label filter').press('Enter');
    await expect.poll(() => row(page, other).count()).toBe(0);
    expect(await row(page, name).count()).toBe(1);
    await page.screenshot({ path: join(shots, 'sandboxes.png') });

    // The sandbox: metadata, the console, files.
    await row(page, name).getByRole('link', { name }).click();
    await expect.poll(() => page.getByRole('heading', { name }).isVisible()).toBe(true);
    await expect.poll(() => page.locator('.fields').first().textContent()).toContain('suite');
    await page.screenshot({ path: join(shots, 'sandbox.png') });
    await runInConsole(page, 'echo hello-from-dashboard; echo to-stderr >&2; uname -s', 'hello-from-dashboard');
    await expect.poll(() => page.locator('.out-stderr').allTextContents()).toContain('to-stderr\n');
    await page.screenshot({ path: join(shots, 'sandbox-console.png') });

    // Stop beside Run kills a running command's process tree in the container.
    await page.getByRole('textbox', { name: 'Command' }).fill('for i in $(seq 1 600); do echo "beat $i"; sleep 1; done');
    await page.getByRole('textbox', { name: 'Command' }).press('Enter');
    await expect.poll(() => page.getByTestId('console-output').textContent(), { timeout: 30_000 }).toContain('beat 2');
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    await expect.poll(() => page.getByTestId('console-exit').textContent(), { timeout: 30_000 }).toMatch(/^killed, exit code/);
    expect((await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', 'pgrep -c -f "seq 1 60[0]" || true'] })).body.data.stdout.trim()).toBe('0');

    await page.getByRole('tab', { name: 'Files' }).click();
    const bytes = Buffer.from(`uploaded by the dashboard test ${suffix}\n\u0000\u00ff binary tail`, 'latin1');
    await page.getByLabel('Upload files').setInputFiles({ name: 'notes.bin', mimeType: 'application/octet-stream', buffer: bytes });
    await expect.poll(() => page.getByRole('button', { name: 'Download notes.bin' }).isVisible(), { timeout: 30_000 }).toBe(true);
    expect((await api('POST', `/sandboxes/${name}/exec`, { command: ['sha256sum', '/workspace/notes.bin'] })).body.data.stdout).toContain(
      (await import('node:crypto')).createHash('sha256').update(bytes).digest('hex'),
    );
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download notes.bin' }).click()]);
    expect(download.suggestedFilename()).toBe('notes.bin');
    expect(readFileSync((await download.path())!)).toEqual(bytes);
    await page.screenshot({ path: join(shots, 'sandbox-files.png') });

    await page.getByRole('tab', { name: 'Audit log' }).click();
    await expect.poll(() => page.getByRole('table').textContent()).toContain('file_written');
    await page.screenshot({ path: join(shots, 'sandbox-audit-log.png') });

    // The other pages, with something to show.
    expect((await api('POST', '/stores', { name: `notes-${suffix}`, kind: 'sqlite' })).status).toBe(201);
    for (const [hash, heading, file] of [
      ['#/snapshots', 'Snapshots', 'snapshots.png'],
      ['#/objects', 'Durable objects', 'objects.png'],
      ['#/server', 'Server', 'server.png'],
    ] as const) {
      await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: heading.split(' ').pop()!, exact: false }).first().click();
      expect(new URL(page.url()).hash).toBe(hash);
      await expect.poll(() => page.getByRole('heading', { name: heading, level: 1 }).isVisible()).toBe(true);
      await expect.poll(() => page.getByText('Loading…').count()).toBe(0);
      if (hash === '#/server') await expect.poll(() => page.locator('.bars').nth(1).textContent()).toMatch(/by status200\d+/);
      await page.screenshot({ path: join(shots, file) });
    }
    expect(await page.locator('.bars').first().textContent()).toContain('sandboxes active');

    // A schedule, triggered from its page: the run shows in its history.
    const schedule = { name: `nightly-${suffix}`, method: 'exec', target_sandbox: name, args: { command: ['echo', 'nightly'] }, cron: '0 3 * * *' };
    expect((await api('POST', '/schedules', schedule)).status).toBe(201);
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Schedules' }).click();
    await page.getByRole('button', { name: 'Trigger' }).click();
    await expect.poll(() => page.getByRole('heading', { name: `Runs of ${schedule.name}` }).isVisible()).toBe(true);
    const runs = page.locator('.card').filter({ has: page.getByRole('heading', { name: `Runs of ${schedule.name}` }) });
    await expect.poll(async () => (await runs.textContent()) ?? '', { timeout: 30_000 }).toContain('succeeded');
    await page.screenshot({ path: join(shots, 'schedules.png') });

    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Stores' }).click();
    await page.getByRole('button', { name: 'Open SQL' }).click();
    await page.getByLabel('SQL', { exact: true }).fill('SELECT 6 * 7 AS answer, \'dash\' AS word');
    await page.getByRole('button', { name: 'Query (read-only)' }).click();
    await expect.poll(() => page.getByRole('form', { name: /SQL on/ }).getByRole('table').textContent()).toBe('answerword42dash');
    await page.screenshot({ path: join(shots, 'stores.png') });

    // The API reference from the same document, no CDN.
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'API' }).click();
    await expect.poll(() => page.getByRole('heading', { name: 'API reference' }).isVisible()).toBe(true);
    await expect.poll(() => page.locator('#op-createSandbox').textContent()).toContain('/sandboxes');
    await page.screenshot({ path: join(shots, 'docs.png') });

    // Delete both from the list; they go without a reload.
    await page.getByRole('link', { name: 'Sandboxes' }).click();
    for (const sandbox of [name, other]) {
      await row(page, sandbox).getByRole('button', { name: `Delete ${sandbox}` }).click();
      await expect.poll(() => row(page, sandbox).count(), { timeout: 60_000 }).toBe(0);
    }
    expect((await api('GET', `/sandboxes/${name}`)).status).toBe(404);

    // The only errors are those the browser logs by itself for the calls the wrong key made (401).
    expect(errors.filter((e) => !/Failed to load resource: the server responded with a status of 401/.test(e))).toEqual([]);
    await context.close();
  });

  it('at 420 px wide: the same flow fits the window', async () => {
    const context = await run.browser.newContext({ viewport: { width: 420, height: 860 }, acceptDownloads: true });
    const { page, errors } = await open(context);
    const name = `narrow-${suffix}`;
    await page.goto(run.server.url + '/ui/');
    await enterKey(page, KEY, /needs an API key/);
    await page.getByLabel('Name').fill(name);
    await page.getByRole('button', { name: 'Create' }).click();
    await expect.poll(() => row(page, name).isVisible(), { timeout: 60_000 }).toBe(true);
    const fits = () => fitsWidth(page);
    expect(await fits()).toBe(true);
    await page.screenshot({ path: join(shots, 'narrow-sandboxes.png'), fullPage: true });

    await row(page, name).getByRole('link', { name }).click();
    await runInConsole(page, 'printf "narrow %s\\n" ok', 'narrow ok');
    expect(await fits()).toBe(true);
    await page.screenshot({ path: join(shots, 'narrow-console.png'), fullPage: true });

    await page.getByRole('tab', { name: 'Files' }).click();
    await page.getByLabel('Upload files').setInputFiles({ name: 'n.txt', mimeType: 'text/plain', buffer: Buffer.from('narrow\n') });
    const [download] = await Promise.all([
      page.waitForEvent('download', { timeout: 30_000 }),
      (async () => {
        await expect.poll(() => page.getByRole('button', { name: 'Download n.txt' }).isVisible(), { timeout: 30_000 }).toBe(true);
        await page.getByRole('button', { name: 'Download n.txt' }).click();
      })(),
    ]);
    expect(readFileSync((await download.path())!, 'utf8')).toBe('narrow\n');

    // Deleted from its own page: back to the list, where it is gone.
    await page.getByRole('button', { name: `Delete ${name}` }).click();
    await expect.poll(() => page.getByRole('heading', { name: 'Sandboxes', level: 1 }).isVisible(), { timeout: 60_000 }).toBe(true);
    await expect.poll(() => row(page, name).count()).toBe(0);
    expect((await api('GET', `/sandboxes/${name}`)).status).toBe(404);
    expect(errors).toEqual([]);
    await context.close();
  });
});
