import { errors as playwrightErrors, type Locator } from 'playwright-core';
import type { Backend } from '../../backends/backend.js';
import { badRequest, notFound, ServiceError } from '../../errors.js';
import type { PageSnapshot, PageSummary, Target } from '../../schemas/browser-schemas.js';
import type { BrowserEvent, BrowserEventRepository } from '../../state/browser-event-repository.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';
import { DEBUG_PORT, LAUNCH_SCRIPT, NO_CHROMIUM_EXIT, VIEWPORT } from './browser-launch.js';
import { BrowserSessions, type BrowserSession, type NamedPage } from './browser-sessions.js';
import { isoNow, type Clock } from '../support/clock.js';
import { requireCapability } from '../support/capabilities.js';
import { KeyedMutex } from '../support/keyed-mutex.js';
import type { SandboxesApi } from '../sandboxes/api.js';
import type { ServiceContext } from '../context.js';

/** The catalog image with Chromium, named in the error for images without it. */
export const BROWSER_IMAGE = 'sandboxd/browser:bookworm';

const LAUNCH_TIMEOUT_MS = 30_000;
const NAVIGATION_TIMEOUT_MS = 30_000;
/** Clicks and fills wait this long for their element to be actionable. */
const ACTION_TIMEOUT_MS = 5_000;

type EventType = 'page.created' | 'page.navigated' | 'page.clicked' | 'page.filled' | 'page.closed';
type Running = SandboxRecord & { backend_id: string };

/** What the page gives for GET .../content (kept as a string: the service has no DOM types). */
const CONTENT_EXPRESSION = `({
  title: document.title,
  text: document.body ? document.body.innerText : '',
  links: [...document.links].map((a) => ({ text: a.innerText.trim(), href: a.href })),
})`;

/**
 * Browser automation in running sandboxes: Chromium in the sandbox, driven over one
 * Playwright connection per sandbox. Calls on one sandbox run one at a time, so a page's refs
 * always belong to the snapshot the client saw last.
 */
export class BrowserService {
  private readonly sessions = new BrowserSessions();
  private readonly mutex = new KeyedMutex();

  private readonly sandboxes: SandboxesApi;
  private readonly backend: Backend;
  private readonly events: BrowserEventRepository;
  private readonly clock: Clock;

  constructor(ctx: Pick<ServiceContext, 'sandboxes' | 'backend' | 'repos' | 'clock' | 'bus'>) {
    this.sandboxes = ctx.sandboxes;
    this.backend = ctx.backend;
    this.events = ctx.repos.browserEvents;
    this.clock = ctx.clock;
    const bus = ctx.bus;
    // A sandbox that stops or goes away takes its browser with it: let go of the connection,
    // and of the event log once nothing can read it (the bus sees every path that removes one).
    bus.subscribe(({ event }) => {
      if (!event.sandbox_uuid) return;
      if (event.type === 'sandbox.stopped' || event.type === 'sandbox.archived') void this.sessions.drop(event.sandbox_uuid);
      if (event.type === 'sandbox.deleted') {
        void this.sessions.drop(event.sandbox_uuid);
        void this.events.deleteFor(event.sandbox_uuid).catch(() => undefined);
      }
    });
  }

  /** POST .../browser/start: starts Chromium if needed; its version and open pages. */
  async start(name: string): Promise<{ version: string; pages: PageSummary[] }> {
    return this.withSession(name, async (session) => ({ version: session.browser.version(), pages: await listPages(session) }));
  }

  /** GET .../browser/pages. */
  async pages(name: string): Promise<PageSummary[]> {
    return this.withSession(name, (session) => listPages(session));
  }

  /** Opens the page (a new one under this name if needed), navigates and snapshots it. */
  async goto(name: string, pageName: string, url: string): Promise<PageSnapshot> {
    return this.withSession(name, async (session, sandbox) => {
      let named = session.pages.get(pageName);
      if (!named) {
        named = await this.sessions.openPage(session, pageName);
        await this.record(sandbox, 'page.created', pageName);
      }
      try {
        await named.page.goto(url, { timeout: NAVIGATION_TIMEOUT_MS, waitUntil: 'load' });
      } catch (err) {
        throw navigationError(url, err);
      }
      await this.record(sandbox, 'page.navigated', pageName);
      return snapshotOf(named);
    });
  }

  /** The current snapshot of an open page, without navigating. */
  async snapshot(name: string, pageName: string): Promise<PageSnapshot> {
    return this.withSession(name, (session) => snapshotOf(requirePage(session, name, pageName)));
  }

  /** Clicks the element of a ref (or CSS selector) and snapshots the page after it. */
  async click(name: string, pageName: string, target: Target): Promise<PageSnapshot> {
    return this.act(name, pageName, target, 'page.clicked', (locator) => locator.click({ timeout: ACTION_TIMEOUT_MS }));
  }

  /** Fills the input of a ref (or CSS selector) and snapshots the page after it. */
  async fill(name: string, pageName: string, value: string, target: Target): Promise<PageSnapshot> {
    return this.act(name, pageName, target, 'page.filled', (locator) => locator.fill(value, { timeout: ACTION_TIMEOUT_MS }));
  }

  /** The viewport as a PNG, base64. A page behind another is brought to the front: Chromium paints no frame for it otherwise. */
  async screenshot(name: string, pageName: string) {
    return this.withSession(name, async (session) => {
      const { page } = requirePage(session, name, pageName);
      await page.bringToFront();
      const png = await page.screenshot({ type: 'png' });
      return { data: png.toString('base64'), mime_type: 'image/png' as const, ...VIEWPORT };
    });
  }

  /** Evaluates a JavaScript expression in the page; a thrown error is the client's (400). */
  async evaluate(name: string, pageName: string, expression: string): Promise<{ result: unknown }> {
    return this.withSession(name, async (session) => {
      try {
        return { result: (await requirePage(session, name, pageName).page.evaluate(expression)) ?? null };
      } catch (err) {
        if (isDisconnect(err)) throw err;
        throw badRequest(`expression failed: ${firstLine(err)}`);
      }
    });
  }

  /** The page's title, visible text and links. */
  async content(name: string, pageName: string) {
    return this.withSession(name, async (session) => {
      const { page } = requirePage(session, name, pageName);
      const content = (await page.evaluate(CONTENT_EXPRESSION)) as { title: string; text: string; links: { text: string; href: string }[] };
      return { url: page.url(), ...content };
    });
  }

  /** Closes a page; its name is free again. */
  async closePage(name: string, pageName: string): Promise<{ page: string; closed: true }> {
    return this.withSession(name, async (session, sandbox) => {
      const named = requirePage(session, name, pageName);
      session.pages.delete(pageName);
      await named.page.close();
      await this.record(sandbox, 'page.closed', pageName);
      return { page: pageName, closed: true as const };
    });
  }

  /** The browser event log from sequence number `offset`; readable whatever state the sandbox is in. */
  async eventLog(name: string, offset: number, limit: number): Promise<BrowserEvent[]> {
    const sandbox = await this.sandboxes.require(name);
    return this.events.list(sandbox.uuid, offset, limit);
  }

  /** Disconnects from every sandbox's browser (they keep running). */
  async close(): Promise<void> {
    await this.sessions.close();
  }

  private async act(name: string, pageName: string, target: Target, type: EventType, action: (locator: Locator) => Promise<void>) {
    return this.withSession(name, async (session, sandbox) => {
      const named = requirePage(session, name, pageName);
      try {
        await action(locate(named, name, pageName, target));
      } catch (err) {
        throw targetError(err, name, pageName, target);
      }
      // A click may start a navigation: snapshot the page it leads to, not the one it leaves.
      await named.page.waitForLoadState('load', { timeout: NAVIGATION_TIMEOUT_MS }).catch(() => undefined);
      await this.record(sandbox, type, pageName);
      return snapshotOf(named);
    });
  }

  /**
   * Runs `work` on the sandbox's browser session, one call per sandbox at a time. A connection
   * lost during the call is dropped, so the next call starts Chromium again where it crashed.
   */
  private async withSession<T>(name: string, work: (session: BrowserSession, sandbox: Running) => Promise<T>): Promise<T> {
    const sandbox = this.sandboxes.assertRunning(await this.sandboxes.require(name));
    this.checkSupported(sandbox);
    return this.mutex.run(sandbox.uuid, async () => {
      const session = await this.sessions.get(sandbox.uuid, () => this.launch(sandbox));
      try {
        const result = await work(session, sandbox);
        await this.sandboxes.touch(sandbox);
        return result;
      } catch (err) {
        if (!isDisconnect(err)) throw err;
        await this.sessions.drop(sandbox.uuid);
        throw new ServiceError('INTERNAL', `the browser of sandbox '${name}' went away during the call; the next browser call starts it again`);
      }
    });
  }

  private checkSupported(sandbox: Running): void {
    requireCapability(this.backend, 'browserRelay');
    if (sandbox.profile === 'restrictive') {
      throw new ServiceError(
        'UNSUPPORTED',
        `sandbox '${sandbox.name}' uses the restrictive profile, which has no network for the service to reach its browser: use a moderate or permissive sandbox`,
      );
    }
  }

  /**
   * Starts Chromium in the sandbox (a no-op when it runs) and has the backend relay its
   * debugging port to the service; the relay's address.
   */
  private async launch(sandbox: Running): Promise<string> {
    const relay = requireCapability(this.backend, 'browserRelay');
    const result = await this.backend.exec(sandbox.backend_id, {
      command: ['bash', '-c', LAUNCH_SCRIPT, 'launch'],
      timeout_ms: LAUNCH_TIMEOUT_MS,
      keep_background: true,
    });
    if (result.exit_code === NO_CHROMIUM_EXIT) {
      throw new ServiceError(
        'UNSUPPORTED',
        `sandbox '${sandbox.name}' runs image '${sandbox.image}', which has no Chromium: create the sandbox with image ${BROWSER_IMAGE} (build it with \`sandboxd images build browser\`)`,
      );
    }
    if (result.exit_code !== 0) throw new ServiceError('INTERNAL', `Chromium did not start in sandbox '${sandbox.name}': ${result.output.trim()}`);
    return relay.relay(sandbox.backend_id, DEBUG_PORT);
  }

  private async record(sandbox: Running, type: EventType, page: string): Promise<void> {
    await this.events.append(sandbox.uuid, { type, page, ts: isoNow(this.clock) });
  }
}

async function listPages(session: BrowserSession): Promise<PageSummary[]> {
  return Promise.all([...session.pages].map(async ([name, { page }]) => ({ name, url: page.url(), title: await page.title() })));
}

function requirePage(session: BrowserSession, name: string, pageName: string): NamedPage {
  const named = session.pages.get(pageName);
  if (!named) {
    throw notFound(`page '${pageName}' is not open in sandbox '${name}'`, { hint: { action: 'browser_open', sandbox: name, page: pageName } });
  }
  return named;
}

/** Takes an AI-mode ARIA snapshot; its refs become the only ones click and fill accept. */
async function snapshotOf(named: NamedPage): Promise<PageSnapshot> {
  const snapshot = await named.page.ariaSnapshot({ mode: 'ai', timeout: ACTION_TIMEOUT_MS });
  const refs = [...snapshot.matchAll(/\[ref=([a-z]*\d+)\]/g)].flatMap((match) => match[1] ?? []);
  named.refs = new Set(refs);
  return { snapshot, url: named.page.url(), title: await named.page.title(), refs };
}

function locate(named: NamedPage, name: string, pageName: string, target: Target): Locator {
  if (target.ref === undefined) return named.page.locator(`css=${target.selector}`);
  if (!named.refs.has(target.ref)) throw staleRef(target.ref, name, pageName);
  return named.page.getByRef(target.ref);
}

function staleRef(ref: string, name: string, pageName: string): ServiceError {
  return badRequest(`ref '${ref}' is not in the latest snapshot of page '${pageName}'`, {
    hint: { action: 'browser_snapshot', sandbox: name, page: pageName, use_refs: true },
  });
}

/** A click or fill that found no usable element is the client's error (400). */
function targetError(err: unknown, name: string, pageName: string, target: Target): unknown {
  if (err instanceof ServiceError || isDisconnect(err)) return err;
  if (err instanceof playwrightErrors.TimeoutError) {
    const what = target.ref !== undefined ? `ref '${target.ref}'` : `selector '${target.selector}'`;
    return badRequest(`${what} matched no usable element within ${ACTION_TIMEOUT_MS / 1000}s (gone, hidden or disabled)`, {
      hint: { action: 'browser_snapshot', sandbox: name, page: pageName },
    });
  }
  return badRequest(firstLine(err));
}

/** Timeouts and network failures of a navigation as the client's error, with Chromium's reason. */
function navigationError(url: string, err: unknown): unknown {
  if (isDisconnect(err)) return err;
  if (err instanceof playwrightErrors.TimeoutError) return badRequest(`navigation to ${url} timed out after ${NAVIGATION_TIMEOUT_MS / 1000}s`);
  const reason = /net::ERR_[A-Z_]+/.exec(String(err))?.[0] ?? firstLine(err);
  return badRequest(`could not load ${url}: ${reason}`);
}

/** Whether Playwright lost the browser (crash, sandbox stopped) rather than the call failing. */
function isDisconnect(err: unknown): boolean {
  return /Target (page, context or browser )?(has been )?closed|Browser has been closed|browser has disconnected|Connection closed/i.test(String(err));
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/\n.*$/s, '').replace(/^\w+\.\w+: /, '');
}
