import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { VIEWPORT } from './browser-launch.js';

/** A named page and the refs of its latest snapshot (refs from older snapshots are refused). */
export interface NamedPage {
  page: Page;
  refs: ReadonlySet<string>;
}

/** One Playwright connection to the Chromium of one sandbox, and its named pages. */
export interface BrowserSession {
  browser: Browser;
  context: BrowserContext;
  pages: Map<string, NamedPage>;
}

/** How long connecting to a started Chromium may take. */
const CONNECT_TIMEOUT_MS = 15_000;

/**
 * Keeps one Playwright connection (connectOverCDP) per sandbox, keyed by sandbox uuid, and
 * makes a new one when it has dropped (the browser crashed, the sandbox restarted, the service
 * restarted). Page names live with the connection: a new connection starts without pages.
 */
export class BrowserSessions {
  private readonly sessions = new Map<string, Promise<BrowserSession>>();

  /**
   * The live session of a sandbox; otherwise `endpoint()` (which makes sure Chromium runs and
   * says where its relay listens) and a new connection.
   */
  async get(uuid: string, endpoint: () => Promise<string>): Promise<BrowserSession> {
    const existing = this.sessions.get(uuid);
    if (existing) {
      const session = await existing.catch(() => undefined);
      if (session?.browser.isConnected()) return session;
      if (this.sessions.get(uuid) === existing) this.sessions.delete(uuid);
    }
    const pending = endpoint().then(connect);
    this.sessions.set(uuid, pending);
    pending.catch(() => {
      if (this.sessions.get(uuid) === pending) this.sessions.delete(uuid);
    });
    return pending;
  }

  /** Opens a page under `name` in the session, sized to the viewport screenshots use. */
  async openPage(session: BrowserSession, name: string): Promise<NamedPage> {
    const page = await session.context.newPage();
    await page.setViewportSize(VIEWPORT);
    const named: NamedPage = { page, refs: new Set() };
    session.pages.set(name, named);
    // A page that closes by itself (window.close(), a crash) leaves the list.
    page.once('close', () => {
      if (session.pages.get(name) === named) session.pages.delete(name);
    });
    return named;
  }

  /** Disconnects from a sandbox's browser (it keeps running); the next `get` connects again. */
  async drop(uuid: string): Promise<void> {
    const existing = this.sessions.get(uuid);
    this.sessions.delete(uuid);
    const session = await existing?.catch(() => undefined);
    await session?.browser.close().catch(() => undefined);
  }

  /** Disconnects from every browser, at shutdown. */
  async close(): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((uuid) => this.drop(uuid)));
  }
}

async function connect(endpoint: string): Promise<BrowserSession> {
  const browser = await chromium.connectOverCDP(endpoint, { timeout: CONNECT_TIMEOUT_MS });
  // Chromium always has its default context over CDP; pages share it as tabs of one browser.
  const context = browser.contexts()[0] ?? (await browser.newContext());
  return { browser, context, pages: new Map() };
}
