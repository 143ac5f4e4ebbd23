import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { enterKey, fakeDashboardRun, openPage, outOfReach } from '../helpers/dashboard-browser.js';

/**
 * The dashboard in Debian's Chromium against the service over the fake backend, started
 * without events (issue 26, items 9 and 10): Stop beside Run, console output kept per sandbox
 * across tabs and sandboxes, the detached list naming the command as typed; the files tab on
 * the directory views (never exec); at 420 px every action within the window, chips and fields
 * instead of JSON, one time format, in-page dialogs instead of prompt(), and no console error
 * although /events is off.
 */

const KEY = 'dashboard-usability-key-0123456789';
/** The fake runs a command holding `sleep` as one that prints two lines and never ends (until killed). */
const LOOP = 'while true; do echo tick; sleep 1; done';
const run = fakeDashboardRun(KEY, (harness) => {
  harness.backend.declare('detached');
  harness.backend.onExec = (request) =>
    request.command.join(' ').includes('sleep')
      ? { chunks: [{ stream: 'stdout', text: 'tick 1\ntick 2\n' }], hang: true }
      : { chunks: [{ stream: 'stdout', text: `ran: ${request.command.at(-1)}\n` }] };
});
const { api } = run;

/** Signs in at `width` x `height` with window.prompt replaced by a recorder; every request's URL is kept. */
async function signIn(width: number, height: number, hash = '') {
  const context = await run.browser.newContext({ viewport: { width, height }, acceptDownloads: true });
  const { page, errors } = await openPage(context);
  const requests: string[] = [];
  const nativePrompts: string[] = [];
  page.on('request', (request) => requests.push(`${request.method()} ${request.url()}`));
  page.on('dialog', (dialog) => void (dialog.type() === 'prompt' && nativePrompts.push(dialog.message())));
  await page.addInitScript('window.promptCalls = []; window.prompt = (...args) => (window.promptCalls.push(args), null);');
  await page.goto(`${run.url}/ui/${hash}`);
  await enterKey(page, KEY, /needs an API key/);
  return { page, errors, requests, nativePrompts, promptCalls: () => page.evaluate('window.promptCalls') };
}

const output = (page: Page) => page.getByTestId('console-output').textContent();
const detachedTable = (page: Page) => page.getByRole('table').last();
const tab = (page: Page, name: string) => page.getByRole('tab', { name }).click();

async function openSandbox(page: Page, name: string) {
  await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Sandboxes' }).click();
  await page.getByRole('link', { name, exact: true }).click();
  await expect.poll(() => page.getByRole('heading', { name, level: 1 }).isVisible()).toBe(true);
}

describe('the dashboard console', () => {
  it('stops a running command with Stop, keeps its output across tabs and sandboxes, and lists the command as typed', async () => {
    for (const name of ['con-a', 'con-b']) expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
    const { page, errors, promptCalls } = await signIn(1280, 720, '#/sandboxes/con-a');
    await tab(page, 'Console');
    const stop = page.getByRole('button', { name: 'Stop', exact: true });
    expect(await stop.isDisabled()).toBe(true);
    await page.getByRole('textbox', { name: 'Command' }).fill(LOOP);
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expect.poll(() => output(page)).toContain('tick 2');
    await expect.poll(() => stop.isEnabled()).toBe(true);
    expect(await page.getByRole('button', { name: 'Run', exact: true }).isDisabled()).toBe(true);

    // The list has the running command, as typed (not the console's `sh -c` wrapper), and never "None yet." meanwhile.
    await expect.poll(() => detachedTable(page).textContent()).toContain(`${LOOP}running`);
    expect(await detachedTable(page).textContent()).not.toMatch(/None yet|sh -c/);

    // Another tab and back: the output is still there, the command still running.
    await tab(page, 'Files');
    await expect.poll(() => page.getByTestId('console-output').count()).toBe(0);
    await tab(page, 'Console');
    expect(await output(page)).toBe(`$ ${LOOP}\ntick 1\ntick 2\n`);
    expect(await stop.isEnabled()).toBe(true);

    // Another sandbox has its own console; coming back shows this one's.
    await openSandbox(page, 'con-b');
    await tab(page, 'Console');
    expect(await output(page)).toBe('');
    await page.getByRole('textbox', { name: 'Command' }).fill('echo from b');
    await page.getByRole('textbox', { name: 'Command' }).press('Enter');
    await expect.poll(() => page.getByTestId('console-exit').textContent()).toBe('completed, exit code 0');
    expect(await output(page)).toBe('$ echo from b\nran: echo from b\n');
    await openSandbox(page, 'con-a');
    await tab(page, 'Console');
    expect(await output(page)).toContain('tick 2');
    expect(await page.getByRole('textbox', { name: 'Command' }).inputValue()).toBe(LOOP);

    // Stop kills it: the console says how it ended, the list and the API agree.
    await stop.click();
    await expect.poll(() => page.getByTestId('console-exit').textContent()).toBe('killed, exit code 137');
    await expect.poll(() => stop.isDisabled()).toBe(true);
    await expect.poll(() => detachedTable(page).textContent()).toContain(`${LOOP}killed137`);
    const listed = (await api('GET', '/sandboxes/con-a/exec/detached')).body.data as { command: string[]; status: string }[];
    expect(listed.map((d) => [d.command, d.status])).toEqual([[['sh', '-c', LOOP], 'killed']]);
    expect(await output(page)).toBe(`$ ${LOOP}\ntick 1\ntick 2\n`);
    expect(errors).toEqual([]);
    expect(await promptCalls()).toEqual([]);
    await page.context().close();
  });

  it('the files tab lists, looks up and follows a directory through /fs, never through exec', async () => {
    expect((await api('POST', '/sandboxes', { name: 'files-a' })).status).toBe(201);
    const { page, errors, requests } = await signIn(1280, 720, '#/sandboxes/files-a');
    await tab(page, 'Files');
    const listing = page.getByRole('table');
    await expect.poll(() => listing.textContent()).toContain('Empty directory.');

    // An upload from the page, then a file written elsewhere: the watch brings it without a reload.
    await page.getByLabel('Upload files').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('from the page\n') });
    await expect.poll(() => page.getByRole('button', { name: 'Download notes.txt' }).isVisible()).toBe(true);
    expect((await api('PUT', '/sandboxes/files-a/files/workspace/later/deep.txt', { content: 'written by an agent' })).status).toBe(200);
    await expect.poll(() => listing.textContent(), { timeout: 10_000 }).toContain('later/');
    expect(await listing.textContent()).toMatch(/notes\.txt.*14 B.*0644/);

    // A typed path is looked up: a file opens its directory with the file shown, ready to download.
    await page.getByRole('textbox', { name: 'Path', exact: true }).fill('/workspace/later/deep.txt');
    await page.getByRole('textbox', { name: 'Path', exact: true }).press('Enter');
    await expect.poll(() => page.getByTestId('file-shown').textContent()).toContain('/workspace/later/deep.txt');
    expect(await page.getByRole('textbox', { name: 'Path', exact: true }).inputValue()).toBe('/workspace/later');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('file-shown').getByRole('button', { name: 'Download deep.txt' }).click()]);
    expect(download.suggestedFilename()).toBe('deep.txt');
    await page.getByRole('button', { name: 'Up', exact: true }).click();
    await expect.poll(() => page.getByRole('textbox', { name: 'Path', exact: true }).inputValue()).toBe('/workspace');

    // A path that is not there: the API's message, no crash.
    await page.getByRole('textbox', { name: 'Path', exact: true }).fill('/workspace/nope');
    await page.getByRole('textbox', { name: 'Path', exact: true }).press('Enter');
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('not found');

    const calls = requests.map((r) => r.replace(run.url, ''));
    expect(calls.filter((c) => c.includes('/exec'))).toEqual([]);
    expect(calls).toContain('GET /sandboxes/files-a/fs?path=%2Fworkspace');
    expect(calls).toContain('GET /sandboxes/files-a/fs/stat?path=%2Fworkspace%2Flater%2Fdeep.txt');
    expect(calls.some((c) => c.startsWith('GET /sandboxes/files-a/fs/watch?path=%2Fworkspace&'))).toBe(true);
    // The lookup of the missing path was refused with a 404, which Chromium logs by itself.
    expect(errors.filter((e) => !/status of 404/.test(e))).toEqual([]);
    await page.context().close();
  });
});

describe('the dashboard at 420 px, on a server without events', () => {
  it('every action is within reach, values read as chips and fields, times in one format, no prompt(), no console error', async () => {
    const sandbox = await api('POST', '/sandboxes', { name: 'narrow-one', labels: { team: 'ml', env: 'dev' }, network: { egress: 'open', deny: ['203.0.113.0/24'] } });
    expect(sandbox.status, JSON.stringify(sandbox.body)).toBe(201);
    expect((await api('POST', '/snapshots', { sandbox: 'narrow-one', name: 'narrow-snap' })).status).toBe(201);
    const schedule = { name: 'narrow-nightly', method: 'exec', target_sandbox: 'narrow-one', args: { command: ['echo', 'nightly'] }, cron: '0 3 * * *' };
    expect((await api('POST', '/schedules', schedule)).status).toBe(201);
    expect((await api('POST', '/stores', { name: 'narrow-notes', kind: 'sqlite' })).status).toBe(201);
    const definition = { name: 'narrow-approval', steps: [{ id: 'approval', type: 'wait_for_event', event: 'approved', timeout: '1h' }] };
    expect((await api('POST', '/orchestrations/definitions', definition)).status).toBe(201);
    const instance = (await api('POST', '/orchestrations', { name: 'narrow-approval' })).body.data as { id: string };

    const { page, errors, requests, nativePrompts, promptCalls } = await signIn(420, 860);
    const nav = (name: string) => page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name, exact: true }).click();
    const settled = async (heading: string) => {
      await expect.poll(() => page.getByRole('heading', { name: heading, level: 1 }).isVisible()).toBe(true);
      await expect.poll(() => page.getByText('Loading…').count()).toBe(0);
    };
    /** Every time is local `YYYY-MM-DD HH:MM:SS` with UTC on hover, and no RFC 3339 text is left on the page. */
    const timesInOneFormat = async () => {
      const times = (await page.evaluate("[...document.querySelectorAll('main time')].map((t) => [t.textContent, t.title])")) as [string, string][];
      for (const [text, title] of times) {
        expect(text).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
        expect(title).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
      }
      expect(await page.locator('main').innerText()).not.toMatch(/\d{4}-\d\d-\d\dT\d\d:\d\d/);
      return times.length;
    };

    // The list: labels as chips; Stop and Delete of each row inside the window; polled, /events never asked.
    await settled('Sandboxes');
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'narrow-one', exact: true }) });
    expect(await row.locator('.chip').allTextContents()).toEqual(['team=ml', 'env=dev']);
    expect(await row.getByRole('button', { name: 'Stop narrow-one' }).isVisible()).toBe(true);
    expect(await page.getByText('refreshing every 5 s').isVisible()).toBe(true);
    expect(await outOfReach(page)).toEqual([]);

    // A sandbox: its fields without JSON (labels and allow list as chips, the network as fields).
    await row.getByRole('link', { name: 'narrow-one' }).click();
    await settled('narrow-one');
    const fields = page.locator('.fields').first();
    await expect.poll(() => fields.locator('.chip').allTextContents()).toEqual(['team=ml', 'env=dev', '203.0.113.0/24']);
    expect(await fields.textContent()).not.toMatch(/[{}[\]"]/);
    expect(await fields.textContent()).toContain('egressopen');
    expect(await timesInOneFormat()).toBeGreaterThan(0);
    expect(await outOfReach(page)).toEqual([]);

    await tab(page, 'Console');
    await page.getByRole('textbox', { name: 'Command' }).fill('echo narrow');
    await page.getByRole('textbox', { name: 'Command' }).press('Enter');
    await expect.poll(() => page.getByTestId('console-exit').textContent()).toBe('completed, exit code 0');
    await expect.poll(() => detachedTable(page).textContent()).toContain('echo narrowcompleted');
    expect(await timesInOneFormat()).toBeGreaterThan(0);
    expect(await outOfReach(page)).toEqual([]);
    for (const name of ['Files', 'Audit log']) {
      await tab(page, name);
      await expect.poll(() => page.getByText('Loading…').count()).toBe(0);
      await timesInOneFormat();
      expect(await outOfReach(page), name).toEqual([]);
    }

    // Restore asks for the new name in the page.
    await tab(page, 'Snapshots');
    await page.getByRole('button', { name: 'Restore snapshot narrow-snap' }).click();
    const dialog = page.getByRole('dialog', { name: 'Restore narrow-snap' });
    await expect.poll(() => dialog.isVisible()).toBe(true);
    expect(await dialog.getByLabel('New sandbox name').inputValue()).toBe('narrow-one-restored');
    expect(await outOfReach(page)).toEqual([]);
    await dialog.getByLabel('New sandbox name').fill('narrow-two');
    await dialog.getByRole('button', { name: 'Restore' }).click();
    await expect.poll(() => new URL(page.url()).hash).toBe('#/sandboxes/narrow-two');
    expect((await api('GET', '/sandboxes/narrow-two')).body.data.restored_from).toBe('narrow-snap');

    // Schedules: Next, Runs and Trigger of the row within reach; the run shows.
    await nav('Schedules');
    await settled('Schedules');
    await timesInOneFormat();
    expect(await outOfReach(page)).toEqual([]);
    await page.getByRole('button', { name: 'Trigger' }).click();
    const runs = page.locator('.card').filter({ has: page.getByRole('heading', { name: 'Runs of narrow-nightly' }) });
    await expect.poll(async () => (await runs.textContent()) ?? '', { timeout: 30_000 }).toContain('succeeded');
    await timesInOneFormat();
    expect(await outOfReach(page)).toEqual([]);

    for (const [link, heading] of [
      ['Snapshots', 'Snapshots'],
      ['Stores', 'Stores'],
      ['Objects', 'Durable objects'],
      ['Orchestrations', 'Orchestrations'],
    ] as const) {
      await nav(link);
      await settled(heading);
      await timesInOneFormat();
      expect(await outOfReach(page), heading).toEqual([]);
    }

    // An orchestration: Terminate asks for the reason in the page.
    await page.getByRole('link', { name: instance.id }).click();
    await settled(instance.id);
    await timesInOneFormat();
    expect(await outOfReach(page)).toEqual([]);
    await page.getByRole('button', { name: 'Terminate' }).click();
    const terminate = page.getByRole('dialog', { name: `Terminate ${instance.id}?` });
    await terminate.getByLabel('Reason').fill('not needed');
    await terminate.getByRole('button', { name: 'Terminate' }).click();
    await expect.poll(async () => (await api('GET', `/orchestrations/${instance.id}`)).body.data.status).toBe('terminated');
    await expect.poll(() => page.getByRole('button', { name: 'Delete' }).isVisible(), { timeout: 10_000 }).toBe(true);

    // The server: capabilities as chips, and that events are off.
    await nav('Server');
    await settled('Server');
    const status = page.locator('.card').filter({ has: page.getByRole('heading', { name: 'Status' }) });
    await expect.poll(() => status.locator('.chip').allTextContents()).toContain('detached');
    expect(await status.textContent()).toContain('events_enabledfalse');
    expect(await outOfReach(page)).toEqual([]);

    expect(requests.filter((r) => r.startsWith(`GET ${run.url}/events`))).toEqual([]);
    expect(nativePrompts).toEqual([]);
    expect(await promptCalls()).toEqual([]);
    expect(errors).toEqual([]);
    await page.context().close();
  });
});

describe('the sandbox list', () => {
  it("shows the server's own sandboxes (an object's) apart, and only when asked", async () => {
    expect((await api('POST', '/objects/classes', { name: 'counter', runtime: 'node', image: 'sandboxd/base:bookworm', source: 'export const x = 1;' })).status).toBe(201);
    // The fake runs no object runner: the call fails, after the object's sandbox was made.
    await api('POST', '/objects/counter/alice/call/get');
    const own = ((await api('GET', '/objects/counter/alice')).body.data as { sandbox: string }).sandbox;
    expect((await api('POST', '/sandboxes', { name: 'mine' })).status).toBe(201);
    const { page, errors } = await signIn(1280, 720, '#/sandboxes');
    const main = page.getByRole('table').first();
    await expect.poll(() => main.textContent()).toContain('mine');
    expect(await main.textContent()).not.toContain(own);
    await page.getByLabel("Show the server's own sandboxes (durable objects')").check();
    const apart = page.getByRole('region', { name: "The server's own sandboxes" });
    await expect.poll(() => apart.getByRole('table').textContent()).toContain(own);
    expect(await apart.getByRole('table').textContent()).not.toContain('mine');
    expect(await main.textContent()).not.toContain(own);
    expect(errors).toEqual([]);
    await page.context().close();
    await api('DELETE', '/objects/counter/alice');
    await api('DELETE', '/sandboxes/mine');
  });
});
