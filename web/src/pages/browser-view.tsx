import { useState } from 'preact/hooks';
import { bareApi, enc } from '../api';
import type { Schema } from '../api-types';
import { Alert, Time, useLoad } from '../ui';

/** The latest screenshot, the page it shows and every open page's name (for the choice of page). */
type Shot = Schema<'BrowserScreenshot'> & { page: Schema<'BrowserPage'>; pages: string[]; taken_at: string };

const EVENTS_PAGE = 1000;

/** The whole browser event log (it is read without starting the browser). */
async function eventLog(name: string): Promise<Schema<'BrowserEvent'>[]> {
  const all: Schema<'BrowserEvent'>[] = [];
  for (;;) {
    const offset = all.length ? all[all.length - 1]!.seq + 1 : 0;
    const batch = await bareApi('streamBrowserEvents', 'GET', `/sandboxes/${enc(name)}/browser/events?offset=${offset}&limit=${EVENTS_PAGE}`);
    all.push(...batch);
    if (batch.length < EVENTS_PAGE) return all;
  }
}

/** Pages the log says are open, the most recently used last. */
function openPages(log: Schema<'BrowserEvent'>[]): string[] {
  const open = new Map<string, number>();
  for (const event of log) {
    open.delete(event.page);
    if (event.type !== 'page.closed') open.set(event.page, event.seq);
  }
  return [...open.keys()];
}

/**
 * The latest screenshot of the sandbox's browser, when it has one: the log says whether the
 * browser was ever used and which pages are open, so a sandbox whose browser nobody used never
 * gets a Chromium started by this view. Refresh takes a new one.
 */
export function BrowserView({ name, running }: { name: string; running: boolean }) {
  const [chosen, setChosen] = useState<string>();
  const shot = useLoad(async (): Promise<Shot | string> => {
    const log = await eventLog(name);
    if (log.length === 0) return 'This sandbox has no browser session: nothing has used its browser yet (the browser API or the browser_* MCP tools).';
    if (!running) return 'The sandbox is not running: its browser stopped with it.';
    const named = openPages(log);
    if (named.length === 0) return 'The browser has no open page.';
    const pages = (await bareApi('listBrowserPages', 'GET', `/sandboxes/${enc(name)}/browser/pages`)).filter((p) => named.includes(p.name));
    const page = pages.find((p) => p.name === chosen) ?? pages.sort((a, b) => named.indexOf(b.name) - named.indexOf(a.name))[0];
    if (!page) return 'The browser has no open page.';
    const image = await bareApi('screenshotBrowserPage', 'GET', `/sandboxes/${enc(name)}/browser/pages/${enc(page.name)}/screenshot`);
    return { ...image, page, pages: pages.map((p) => p.name), taken_at: new Date().toISOString() };
  }, [name, running, chosen]);
  const data = shot.data;
  const pages = typeof data === 'object' ? data.pages : [];
  return (
    <div class="card" data-testid="browser-view">
      <div class="form-row">
        {pages.length > 1 && (
          <label>
            Page
            <select value={typeof data === 'object' ? data.page.name : ''} onChange={(e) => setChosen(e.currentTarget.value)}>
              {pages.map((p) => (
                <option value={p}>{p}</option>
              ))}
            </select>
          </label>
        )}
        <button onClick={shot.reload}>Refresh screenshot</button>
      </div>
      <Alert error={shot.error} />
      {data === undefined && !shot.error && <p class="muted">Loading…</p>}
      {typeof data === 'string' && <p class="muted">{data}</p>}
      {typeof data === 'object' && (
        <figure>
          <figcaption>
            <strong>{data.page.title || data.page.name}</strong> · <code>{data.page.url}</code> · taken <Time value={data.taken_at} />
          </figcaption>
          <img class="screenshot" src={`data:${data.mime_type};base64,${data.data}`} width={data.width} height={data.height} alt={`Screenshot of page ${data.page.name}: ${data.page.title || data.page.url}`} />
        </figure>
      )}
    </div>
  );
}
