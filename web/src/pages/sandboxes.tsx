import { useEffect, useState } from 'preact/hooks';
import { api, enc, events, serverStatus } from '../api';
import type { RequestBody, Schema } from '../api-types';
import { Alert, Chips, Page, Status, Table, useAction, useLoad } from '../ui';

/** `k=v, k2=v2` (or `k:v`) as the API's `label=k:v` query. */
function labelQuery(filter: string): string {
  const pairs = filter
    .split(/[,\s]+/)
    .filter(Boolean)
    .map((pair) => pair.replace('=', ':'));
  return pairs.map((p) => `label=${enc(p)}`).join('&');
}

/**
 * Reloads whenever a sandbox event arrives on /events (created, started, stopped, removed, ...).
 * GET /status says first whether the server streams events: without (no --events), the list is
 * polled every 5 s instead, and /events is never asked (its 503 would be a console error).
 */
function useLiveReload(reload: () => void): 'live' | 'polling' | 'connecting' {
  const [mode, setMode] = useState<'live' | 'polling' | 'connecting'>('connecting');
  useEffect(() => {
    const abort = new AbortController();
    let poll: ReturnType<typeof setInterval> | undefined;
    const polling = () => {
      setMode('polling');
      poll = setInterval(reload, 5000);
    };
    void (async () => {
      if (!(await serverStatus()).events_enabled) {
        if (!abort.signal.aborted) polling();
        return;
      }
      try {
        const stream = events('/events', abort.signal);
        setMode('live');
        for await (const event of stream) {
          if (((event.data as Partial<Schema<'SandboxEvent'>>).event ?? '').startsWith('sandbox.')) reload();
        }
      } catch {
        if (!abort.signal.aborted) polling();
      }
    })();
    return () => {
      abort.abort();
      clearInterval(poll);
    };
  }, [reload]);
  return mode;
}

function CreateForm({ onCreated }: { onCreated: () => void }) {
  const [error, run, busy] = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const labels = Object.fromEntries(
      String(form.get('labels') ?? '')
        .split(/[,\s]+/)
        .filter(Boolean)
        .map((pair) => pair.split(/[=:]/, 2) as [string, string]),
    );
    const text = (field: string) => String(form.get(field) ?? '') || undefined;
    const body: RequestBody<'createSandbox'> = { name: String(form.get('name') ?? ''), labels };
    const image = text('image');
    // The select offers only the profiles the schema names.
    const profile = text('profile') as RequestBody<'createSandbox'>['profile'];
    const ttl = text('ttl');
    if (image) body.image = image;
    if (profile) body.profile = profile;
    if (ttl) body.ttl = ttl;
    void run(async () => {
      await api('createSandbox', 'POST', '/sandboxes', body);
      (e.target as HTMLFormElement).reset();
      onCreated();
    });
  };
  return (
    <form class="card form-row" onSubmit={submit} aria-label="Create a sandbox">
      <label>
        Name <input name="name" required pattern="[a-z0-9][a-z0-9_.\-]{0,62}" placeholder="my-sandbox" />
      </label>
      <label>
        Image <input name="image" placeholder="server default" />
      </label>
      <label>
        Profile
        <select name="profile">
          <option value="">default</option>
          <option>permissive</option>
          <option>moderate</option>
          <option>restrictive</option>
        </select>
      </label>
      <label>
        Labels <input name="labels" placeholder="team=ml, env=dev" />
      </label>
      <label>
        TTL <input name="ttl" placeholder="2h" size={5} />
      </label>
      <button type="submit" disabled={busy}>
        {busy ? 'Creating…' : 'Create'}
      </button>
      <Alert error={error} />
    </form>
  );
}

/** Start, stop and delete buttons of one sandbox. */
export function SandboxActions({
  sandbox,
  onDone,
  onDeleted = onDone,
}: {
  sandbox: { name: string; status: string };
  onDone: () => void;
  onDeleted?: () => void;
}) {
  const [error, run, busy] = useAction();
  const act = (call: () => Promise<unknown>, then = onDone) => () => void run(async () => (await call(), then()));
  const base = `/sandboxes/${enc(sandbox.name)}`;
  return (
    <span class="actions">
      {sandbox.status === 'running' ? (
        <button disabled={busy} onClick={act(() => api('stopSandbox', 'POST', `${base}/stop`))} aria-label={`Stop ${sandbox.name}`}>
          Stop
        </button>
      ) : (
        <button disabled={busy} onClick={act(() => api('startSandbox', 'POST', `${base}/start`))} aria-label={`Start ${sandbox.name}`}>
          Start
        </button>
      )}
      <button
        class="danger"
        disabled={busy}
        aria-label={`Delete ${sandbox.name}`}
        onClick={() => confirm(`Delete sandbox ${sandbox.name}? Its files are lost.`) && act(() => api('deleteSandbox', 'DELETE', base), onDeleted)()}
      >
        Delete
      </button>
      <Alert error={error} />
    </span>
  );
}

/** The rows of the sandbox tables: name, status, image, labels, description, actions. */
function sandboxRows(sandboxes: Schema<'SandboxSummary'>[], reload: () => void) {
  return sandboxes.map((s) => [
    <a href={`#/sandboxes/${enc(s.name)}`}>{s.name}</a>,
    <Status value={s.status} />,
    s.image,
    Object.keys(s.labels).length ? <Chips items={Object.entries(s.labels).map(([k, v]) => `${k}=${v}`)} /> : '',
    s.description ?? '',
    <SandboxActions sandbox={s} onDone={reload} />,
  ]);
}

const SANDBOX_HEAD = ['Name', 'Status', 'Image', 'Labels', 'Description', ''];

export function SandboxesPage() {
  const [filter, setFilter] = useState('');
  const [showOwn, setShowOwn] = useState(false);
  const list = useLoad(() => api('listSandboxes', 'GET', `/sandboxes?${labelQuery(filter)}`), [filter]);
  // The server's own sandboxes (durable objects'), apart and only when asked for.
  const own = useLoad(
    () => (showOwn ? api('listSandboxes', 'GET', `/sandboxes?internal=true&${labelQuery(filter)}`).then((all) => all.filter((s) => s.internal)) : Promise.resolve([])),
    [filter, showOwn],
  );
  const reload = () => {
    list.reload();
    if (showOwn) own.reload();
  };
  const mode = useLiveReload(list.reload);
  return (
    <Page
      title="Sandboxes"
      actions={
        <span class="muted" title={mode === 'polling' ? 'the server runs without --events: the list is refreshed every 5 s' : 'updated through /events'}>
          {mode === 'live' ? '● live' : mode === 'polling' ? 'refreshing every 5 s' : ''}
        </span>
      }
    >
      <CreateForm onCreated={reload} />
      <label class="filter">
        Label filter <input type="search" placeholder="team=ml" value={filter} onChange={(e) => setFilter(e.currentTarget.value)} />
      </label>
      <Alert error={list.error} />
      <Table head={SANDBOX_HEAD} empty={list.data ? 'No sandboxes.' : 'Loading…'} rows={sandboxRows(list.data ?? [], reload)} />
      <label class="filter">
        <input type="checkbox" checked={showOwn} onChange={(e) => setShowOwn(e.currentTarget.checked)} /> Show the server's own sandboxes (durable objects')
      </label>
      {showOwn && (
        <section aria-label="The server's own sandboxes">
          <h2>The server's own sandboxes</h2>
          <Alert error={own.error} />
          <Table head={SANDBOX_HEAD} empty={own.data ? 'None.' : 'Loading…'} rows={sandboxRows(own.data ?? [], reload)} />
        </section>
      )}
    </Page>
  );
}
