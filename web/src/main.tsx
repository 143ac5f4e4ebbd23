import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { forgetKey, onKeyNeeded, storedKey } from './api';
import { DocsPage } from './pages/docs';
import { ObjectsPage, SchedulesPage, StoresPage } from './pages/durable';
import { OrchestrationPage } from './pages/orchestration';
import { OrchestrationsPage } from './pages/orchestrations';
import { SandboxPage } from './pages/sandbox';
import { SandboxesPage } from './pages/sandboxes';
import { ServerPage } from './pages/server';
import { SnapshotsPage } from './pages/snapshots';
import './style.css';

const NAV = [
  ['#/sandboxes', 'Sandboxes'],
  ['#/snapshots', 'Snapshots'],
  ['#/objects', 'Objects'],
  ['#/schedules', 'Schedules'],
  ['#/stores', 'Stores'],
  ['#/orchestrations', 'Orchestrations'],
  ['#/server', 'Server'],
] as const;

/** The dashboard routes by the hash (`#/sandboxes/NAME`), so the server serves one file; /docs is the API reference. */
function useRoute(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return location.pathname.replace(/\/+$/, '') === '/docs' ? '#/docs' : hash || '#/sandboxes';
}

function Route({ route }: { route: string }) {
  const sandbox = /^#\/sandboxes\/([^/]+)$/.exec(route);
  if (sandbox) return <SandboxPage name={decodeURIComponent(sandbox[1]!)} />;
  const orchestration = /^#\/orchestrations\/([^/]+)$/.exec(route);
  if (orchestration) return <OrchestrationPage id={decodeURIComponent(orchestration[1]!)} />;
  switch (route) {
    case '#/docs':
      return <DocsPage />;
    case '#/snapshots':
      return <SnapshotsPage />;
    case '#/objects':
      return <ObjectsPage />;
    case '#/schedules':
      return <SchedulesPage />;
    case '#/stores':
      return <StoresPage />;
    case '#/orchestrations':
      return <OrchestrationsPage />;
    case '#/server':
      return <ServerPage />;
    default:
      return <SandboxesPage />;
  }
}

/** Asks for the API key in a modal dialog; the API layer waits on it (api.ts onKeyNeeded). */
function KeyDialog({ onKey }: { onKey: () => void }) {
  const [request, setRequest] = useState<{ reason: string; resolve: (key: string) => void }>();
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => onKeyNeeded((reason) => new Promise((resolve) => setRequest({ reason, resolve }))), []);
  useEffect(() => {
    if (request && !dialog.current?.open) dialog.current?.showModal();
  }, [request]);
  const submit = (e: Event) => {
    e.preventDefault();
    const key = String(new FormData(e.currentTarget as HTMLFormElement).get('key') ?? '');
    if (!key || !request) return;
    dialog.current?.close();
    setRequest(undefined);
    request.resolve(key);
    onKey();
  };
  return (
    // Escape would leave every waiting call hanging: the key is required to go on.
    <dialog ref={dialog} aria-labelledby="key-title" onCancel={(e) => e.preventDefault()}>
      <form onSubmit={submit}>
        <h2 id="key-title">API key</h2>
        <p>{request?.reason}</p>
        <label>
          Key <input name="key" type="password" autocomplete="current-password" required autofocus />
        </label>
        <p class="muted">Kept in this tab's session storage until the tab closes.</p>
        <button type="submit">Continue</button>
      </form>
    </dialog>
  );
}

function App() {
  const route = useRoute();
  // The header shows "Forget key" once a key is kept: render again when one is entered.
  const [, keyEntered] = useState(0);
  const onDocs = route === '#/docs';
  const link = (hash: string) => (onDocs ? `/ui/${hash}` : hash);
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={link('#/sandboxes')}>
          sandboxd
        </a>
        <nav aria-label="Pages">
          {NAV.map(([hash, label]) => (
            <a href={link(hash)} aria-current={route.startsWith(hash) ? 'page' : undefined}>
              {label}
            </a>
          ))}
          <a href="/docs" aria-current={onDocs ? 'page' : undefined}>
            API
          </a>
          {storedKey() && (
            <button class="link" onClick={() => (forgetKey(), location.reload())}>
              Forget key
            </button>
          )}
        </nav>
      </header>
      <main id="main" tabIndex={-1}>
        <Route route={route} key={route} />
      </main>
      <KeyDialog onKey={() => setTimeout(() => keyEntered((n) => n + 1))} />
    </>
  );
}

render(<App />, document.getElementById('app')!);
