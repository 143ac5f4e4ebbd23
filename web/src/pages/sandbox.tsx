import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { api, enc, hasCapability } from '../api';
import { Alert, Fields, Page, Status, Table, Time, useAction, useLoad, Value } from '../ui';
import { BrowserView } from './browser-view';
import { Console } from './console';
import { Files } from './files';
import { SandboxActions } from './sandboxes';
import { SnapshotTable } from './snapshots';
import { Terminal } from './terminal';

function AuditLog({ name }: { name: string }) {
  const log = useLoad(() => api('getSandboxLogs', 'GET', `/sandboxes/${enc(name)}/logs`), [name]);
  return (
    <div class="card">
      <Alert error={log.error} />
      <Table
        head={['Time', 'Event', 'Details']}
        empty={log.data ? 'Nothing logged yet.' : 'Loading…'}
        rows={(log.data ?? []).map(({ timestamp, event, sandbox: _s, ...rest }) => [<Time value={String(timestamp)} />, String(event), <Value value={rest} />])}
      />
    </div>
  );
}

function Snapshots({ name }: { name: string }) {
  const list = useLoad(async () => (await api('listSnapshots', 'GET', '/snapshots')).filter((s) => s.sandbox === name), [name]);
  const [error, run, busy] = useAction();
  const take = (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const snapshot = String(new FormData(form).get('snapshot'));
    void run(async () => {
      await api('createSnapshot', 'POST', '/snapshots', { sandbox: name, name: snapshot });
      form.reset();
      list.reload();
    });
  };
  return (
    <div class="card">
      <form class="form-row" onSubmit={take} aria-label="Take a snapshot">
        <label class="grow">
          Snapshot name <input name="snapshot" required />
        </label>
        <button type="submit" disabled={busy}>
          {busy ? 'Taking…' : 'Take snapshot'}
        </button>
      </form>
      <Alert error={error ?? list.error} />
      <SnapshotTable snapshots={list.data} onChange={list.reload} />
    </div>
  );
}

/** A tab whose feature the backend may lack (GET /status lists its capabilities): it says so instead of calling routes that answer 422. */
function IfCapable({ capability, what, children }: { capability: Parameters<typeof hasCapability>[0]; what: string; children: ComponentChildren }) {
  const able = useLoad(() => hasCapability(capability), [capability]);
  if (able.data === undefined) return null;
  return able.data ? (
    <>{children}</>
  ) : (
    <p class="card muted">
      This server's backend has no {what} (the <code>{capability}</code> capability).
    </p>
  );
}

const TABS = ['Overview', 'Console', 'Terminal', 'Files', 'Audit log', 'Snapshots', 'Browser'] as const;

export function SandboxPage({ name }: { name: string }) {
  const sandbox = useLoad(() => api('getSandbox', 'GET', `/sandboxes/${enc(name)}`), [name]);
  const [tab, setTab] = useState<(typeof TABS)[number]>('Overview');
  const gone = () => (location.hash = '#/sandboxes');
  return (
    <Page title={name} actions={sandbox.data && <SandboxActions sandbox={sandbox.data} onDone={sandbox.reload} onDeleted={gone} />}>
      <Alert error={sandbox.error} />
      <p>
        <a href="#/sandboxes">← All sandboxes</a> {sandbox.data && <Status value={sandbox.data.status} />}
      </p>
      <div role="tablist" class="tabs">
        {TABS.map((t) => (
          <button role="tab" aria-selected={t === tab} onClick={() => setTab(t)}>
            {t}
          </button>
        ))}
      </div>
      {tab === 'Overview' && sandbox.data && (
        <div class="card">
          <Fields value={sandbox.data} />
        </div>
      )}
      {tab === 'Console' && (
        <IfCapable capability="detached" what="detached commands">
          <Console name={name} />
        </IfCapable>
      )}
      {tab === 'Terminal' && (
        <IfCapable capability="terminal" what="terminals">
          <Terminal name={name} />
        </IfCapable>
      )}
      {tab === 'Files' && (
        <IfCapable capability="file_views" what="directory views">
          <Files name={name} />
        </IfCapable>
      )}
      {tab === 'Audit log' && <AuditLog name={name} />}
      {tab === 'Snapshots' && <Snapshots name={name} />}
      {tab === 'Browser' && sandbox.data && (
        <IfCapable capability="browser_relay" what="browser">
          <BrowserView name={name} running={sandbox.data.status === 'running'} />
        </IfCapable>
      )}
    </Page>
  );
}
