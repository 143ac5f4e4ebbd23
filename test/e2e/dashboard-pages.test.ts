import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { BROWSER_IMAGE, ensureBrowserImage, SERVE, SITE, SITE_FILES, WAIT_COMMAND } from '../helpers/browser-site.js';
import { dashboardRun, enterKey, fitsWidth, openPage } from '../helpers/dashboard-browser.js';

/**
 * The orchestrations page and a sandbox's browser screenshot, in Debian's Chromium against a
 * spawned server on Docker: definitions, the instance list and its status filter, an instance's
 * steps, buffered events and history, an event raised and a terminate from the page; a sandbox
 * whose browser nobody used, then the screenshot of the page an agent opened. No console error.
 */

const KEY = 'dashboard-pages-key-0123456789';
const suffix = Math.random().toString(36).slice(2, 8);
const run = dashboardRun(KEY);
const { api, shots } = run;

async function signIn(width: number, height: number): Promise<{ page: Page; errors: string[] }> {
  const context = await run.browser.newContext({ viewport: { width, height } });
  const opened = await openPage(context);
  await opened.page.goto(run.server.url + '/ui/');
  await enterKey(opened.page, KEY, /needs an API key/);
  return opened;
}

const field = (page: Page, name: string) => page.locator('.fields dt').filter({ hasText: new RegExp(`^${name}$`) }).locator('xpath=following-sibling::dd[1]');

/** Waits until the instance page shows `status` (it polls the instance every 2 s). */
const statusIs = (page: Page, status: string) => expect.poll(() => field(page, 'status').textContent(), { timeout: 60_000 }).toBe(status);

/** Clean up the definition's instances before it: instances are deleted when finished. */
async function removeInstances(name: string) {
  for (const { id, status } of (await api('GET', `/orchestrations?name=${name}`)).body.data as { id: string; status: string }[]) {
    if (!['completed', 'failed', 'terminated'].includes(status)) await api('POST', `/orchestrations/${id}/terminate`);
    await api('DELETE', `/orchestrations/${id}`);
  }
  await api('DELETE', `/orchestrations/definitions/${name}`);
}

describe('the dashboard pages of orchestrations and the browser', () => {
  // On a new machine the first browser test builds the image (minutes): in a hook of its own,
  // with the allowance the other browser tests give it, not inside a test's 120 s.
  beforeAll(ensureBrowserImage, 600_000);

  it('orchestrations: start from the page, buffered event, raise the awaited one, history, filter, terminate', async () => {
    const { page, errors } = await signIn(1280, 720);
    const name = `approve-${suffix}`;
    const defined = await api('POST', '/orchestrations/definitions', {
      name,
      description: 'build, wait for approval, cool down, then shape the answer',
      steps: [
        { id: 'build', type: 'activity', run: { command: ['echo', 'built ticket ${input.ticket}'] } },
        { id: 'approval', type: 'wait_for_event', event: 'approved', timeout: '1h' },
        { id: 'cool_down', type: 'timer', duration: '1s' },
        { id: 'result', type: 'set', value: { build: '${steps.build.output}', approved_by: '${steps.approval.output.by}' } },
      ],
      output: '${steps.result.output}',
    });
    expect(defined.status, JSON.stringify(defined.body)).toBe(201);
    try {
      await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Orchestrations' }).click();
      await expect.poll(() => page.getByRole('heading', { name: 'Orchestrations', level: 1 }).isVisible()).toBe(true);
      await expect.poll(() => page.getByRole('table').first().textContent()).toContain(`${name}1build (activity), approval (wait_for_event)`);

      // Started from the form: the page opens the instance, which runs its activity and waits.
      const start = page.getByRole('form', { name: 'Start an instance' });
      await start.getByLabel('Definition').selectOption(name);
      await start.getByLabel('Input (JSON)').fill('{"ticket": 42}');
      await start.getByRole('button', { name: 'Start' }).click();
      await expect.poll(() => new URL(page.url()).hash, { timeout: 30_000 }).toMatch(/^#\/orchestrations\/.+/);
      const id = decodeURIComponent(new URL(page.url()).hash.slice('#/orchestrations/'.length));
      await statusIs(page, 'waiting');
      const pending = page.getByTestId('pending');
      await expect.poll(() => pending.textContent()).toContain('approvalwait_for_eventwaitingevent approved, times out at');

      // An event nobody waits for yet stays buffered, and shows so.
      expect((await api('POST', `/orchestrations/${id}/events`, { name: 'comment', data: { text: 'looks good' } })).status).toBe(202);
      await expect.poll(() => pending.textContent(), { timeout: 10_000 }).toContain('Buffered events');
      await expect.poll(() => pending.textContent()).toContain('{"text":"looks good"}');
      expect(await page.getByLabel('Input', { exact: true }).textContent()).toBe('{\n  "ticket": 42\n}');
      await page.screenshot({ path: join(shots, 'orchestration.png'), fullPage: true });

      // Narrow: the instance page fits 420 px.
      await page.setViewportSize({ width: 420, height: 860 });
      expect(await fitsWidth(page)).toBe(true);
      await page.setViewportSize({ width: 1280, height: 720 });

      // Raise the awaited event from the page: the timer runs, then the instance completes.
      const raise = page.getByRole('form', { name: 'Raise an event' });
      expect(await raise.getByLabel('Event name').inputValue()).toBe('approved');
      await raise.getByLabel('Data (JSON)').fill('{"by": "dashboard"}');
      await raise.getByRole('button', { name: 'Raise' }).click();
      await statusIs(page, 'completed');
      await expect.poll(() => page.getByLabel('Output', { exact: true }).textContent()).toBe('{\n  "build": "built ticket 42\\n",\n  "approved_by": "dashboard"\n}');
      const history = page.getByRole('list', { name: 'History' });
      for (const type of ['OrchestratorStarted', 'ActivityCompleted', 'EventRaised', 'EventConsumed', 'TimerCreated', 'TimerFired', 'OrchestratorCompleted'])
        expect(await history.textContent()).toContain(type);
      expect(await page.getByRole('form', { name: 'Raise an event' }).count()).toBe(0);

      // A second instance, found through the status filter and terminated from its page.
      const other = (await api('POST', '/orchestrations', { name, input: { ticket: 7 } })).body.data as { id: string };
      await page.getByRole('link', { name: '← All orchestrations' }).click();
      const instances = page.getByRole('table').nth(1);
      const filter = page.getByLabel('Status filter');
      await filter.selectOption('completed');
      await expect.poll(async () => ((await instances.textContent()) ?? '').includes(id) && !(await instances.textContent())?.includes(other.id)).toBe(true);
      await filter.selectOption('');
      await expect.poll(() => instances.textContent(), { timeout: 30_000 }).toContain(other.id);
      await page.screenshot({ path: join(shots, 'orchestrations.png'), fullPage: true });
      await filter.selectOption('terminated');
      await expect.poll(() => instances.textContent()).toContain('No terminated instances.');
      await filter.selectOption('');
      await page.getByRole('link', { name: other.id }).click();
      await expect.poll(() => page.getByRole('button', { name: 'Terminate' }).isVisible(), { timeout: 30_000 }).toBe(true);
      await page.getByRole('button', { name: 'Terminate' }).click();
      // The reason is asked in the page (no prompt()); its default is kept.
      await page.getByRole('dialog', { name: `Terminate ${other.id}?` }).getByRole('button', { name: 'Terminate' }).click();
      await statusIs(page, 'terminated');
      expect(await field(page, 'error').textContent()).toBe('terminated from the dashboard');
      expect((await api('GET', `/orchestrations/${other.id}`)).body.data.status).toBe('terminated');

      // A finished instance is deleted from its page.
      await page.getByRole('button', { name: 'Delete' }).click();
      await expect.poll(() => page.getByRole('heading', { name: 'Orchestrations', level: 1 }).isVisible()).toBe(true);
      expect((await api('GET', `/orchestrations/${other.id}`)).status).toBe(404);
      expect(errors).toEqual([]);
    } finally {
      await removeInstances(name);
      await page.context().close();
    }
  });

  it('a sandbox page shows the screenshot of its browser, and says when it has none', async () => {
    const { page, errors } = await signIn(1280, 720);
    const name = `browse-${suffix}`;
    expect((await api('POST', '/sandboxes', { name, image: BROWSER_IMAGE })).status).toBe(201);
    try {
      await page.goto(`${run.server.url}/ui/#/sandboxes/${name}`);
      await page.getByRole('tab', { name: 'Browser' }).click();
      const view = page.getByTestId('browser-view');
      await expect.poll(() => view.textContent(), { timeout: 30_000 }).toContain('has no browser session');
      // Looking did not start a Chromium in the sandbox.
      expect((await api('POST', `/sandboxes/${name}/exec`, { command: ['pgrep', '-c', 'chromium'] })).body.data.stdout.trim()).toBe('0');

      // An agent serves a site in the sandbox and opens it in the sandbox's browser.
      expect((await api('POST', `/sandboxes/${name}/files`, { files: SITE_FILES })).status).toBe(200);
      expect((await api('POST', `/sandboxes/${name}/exec/detach`, SERVE)).status).toBe(200);
      expect((await api('POST', `/sandboxes/${name}/exec`, { command: WAIT_COMMAND })).body.data.exit_code).toBe(0);
      const opened = await api('POST', `/sandboxes/${name}/browser/pages/main/goto`, { url: SITE });
      expect(opened.status, JSON.stringify(opened.body)).toBe(200);

      await view.getByRole('button', { name: 'Refresh screenshot' }).click();
      const image = view.getByRole('img', { name: 'Screenshot of page main: Greeter' });
      await expect.poll(() => image.isVisible(), { timeout: 60_000 }).toBe(true);
      expect(await page.evaluate("[...document.querySelectorAll('img.screenshot')].map((img) => [img.naturalWidth, img.naturalHeight])")).toEqual([[1280, 720]]);
      expect(await view.textContent()).toContain(SITE);

      // A second page: the latest used is shown, and the other (behind it) can be chosen.
      const filled = await api('POST', `/sandboxes/${name}/browser/pages/main/fill`, { selector: '#who', value: 'dashboard' });
      expect(filled.status).toBe(200);
      expect((await api('POST', `/sandboxes/${name}/browser/pages/main/click`, { selector: '#greet' })).status).toBe(200);
      expect((await api('POST', `/sandboxes/${name}/browser/pages/second/goto`, { url: `${SITE}/next.html` })).status).toBe(200);
      await view.getByRole('button', { name: 'Refresh screenshot' }).click();
      await expect.poll(() => view.getByRole('img', { name: 'Screenshot of page second: Next' }).isVisible(), { timeout: 30_000 }).toBe(true);
      await view.getByLabel('Page').selectOption('main');
      await expect.poll(() => image.isVisible(), { timeout: 30_000 }).toBe(true);
      await page.screenshot({ path: join(shots, 'sandbox-browser.png'), fullPage: true });
      expect(errors).toEqual([]);
    } finally {
      await api('DELETE', `/sandboxes/${name}`);
      await page.context().close();
    }
  });
});
