import { useRef, useState } from 'preact/hooks';
import { api, download, enc, encPath, events, upload } from '../api';
import { Alert, Fields, Page, Status, Table, useAction, useLoad } from '../ui';
import { BrowserView } from './browser-view';
import { SandboxActions } from './sandboxes';
import { SnapshotTable } from './snapshots';
import { Terminal } from './terminal';

/**
 * A command run detached, its stdout and stderr followed as Server-Sent Events: output shows
 * as the command prints it, and the command outlives a closed tab.
 */
function Console({ name }: { name: string }) {
  const [lines, setLines] = useState<{ stream: string; data: string }[]>([]);
  const [exit, setExit] = useState<string>();
  const [error, run, busy] = useAction();
  const abort = useRef<AbortController>();
  const submit = (e: Event) => {
    e.preventDefault();
    const command = String(new FormData(e.currentTarget as HTMLFormElement).get('command') ?? '').trim();
    if (!command) return;
    abort.current?.abort();
    const controller = (abort.current = new AbortController());
    setLines([{ stream: 'input', data: `$ ${command}\n` }]);
    setExit(undefined);
    void run(async () => {
      const base = `/sandboxes/${enc(name)}/exec`;
      const { id } = await api('startDetachedCommand', 'POST', `${base}/detach`, { command: ['sh', '-c', command] });
      const follow = async (stream: 'stdout' | 'stderr') => {
        for await (const event of events(`${base}/detached/${enc(id)}/logs?stream=${stream}&follow=true`, controller.signal)) {
          const data = event.data as { data?: string; exit_code?: number | null; status?: string; message?: string };
          if (event.event === 'output') setLines((l) => [...l, { stream, data: data.data ?? '' }]);
          else if (event.event === 'done' && stream === 'stdout') setExit(`${data.status}, exit code ${data.exit_code ?? '—'}`);
          else if (event.event === 'error') throw new Error(data.message);
        }
      };
      await Promise.all([follow('stdout'), follow('stderr')]);
      detached.reload();
    });
  };
  const detached = useLoad(() => api('listDetachedCommands', 'GET', `/sandboxes/${enc(name)}/exec/detached`), [name]);
  const kill = (id: string) => void run(async () => (await api('killDetachedCommand', 'DELETE', `/sandboxes/${enc(name)}/exec/detached/${enc(id)}`), detached.reload()));
  return (
    <div class="card">
      <form class="form-row" onSubmit={submit} aria-label="Run a command">
        <label class="grow">
          Command <input name="command" autocomplete="off" placeholder="ls -la /workspace" />
        </label>
        <button type="submit" disabled={busy}>
          Run
        </button>
      </form>
      <pre class="console" aria-live="polite" aria-label="Command output" data-testid="console-output">
        {lines.map((l) => (
          <span class={`out-${l.stream}`}>{l.data}</span>
        ))}
      </pre>
      {exit && <p data-testid="console-exit">{exit}</p>}
      <Alert error={error ?? detached.error} />
      <h2>Detached commands</h2>
      <Table
        head={['Command', 'Status', 'Exit code', 'Started', '']}
        empty={detached.data ? 'None yet.' : 'Loading…'}
        rows={[...(detached.data ?? [])].reverse().map((d) => [
          <code>{d.command.join(' ')}</code>,
          <Status value={d.status} />,
          d.exit_code ?? '—',
          d.started_at,
          d.status === 'running' ? (
            <button class="danger" onClick={() => kill(d.id)}>
              Kill
            </button>
          ) : (
            ''
          ),
        ])}
      />
    </div>
  );
}

/** One directory, listed through an exec (the API has no listing route), with upload and download. */
function Files({ name }: { name: string }) {
  const [dir, setDir] = useState('/workspace');
  const [error, run] = useAction();
  const listing = useLoad(async () => {
    const result = await api('execCommand', 'POST', `/sandboxes/${enc(name)}/exec`, {
      command: ['find', dir, '-mindepth', '1', '-maxdepth', '1', '-printf', '%y\t%s\t%f\n'],
    });
    if (result.exit_code !== 0) throw new Error(result.stderr.trim() || `find exited ${result.exit_code}`);
    return result.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [type, size, file] = line.split('\t') as [string, string, string];
        return { type, size: Number(size), file };
      })
      .sort((a, b) => (a.type === b.type ? a.file.localeCompare(b.file) : a.type === 'd' ? -1 : 1));
  }, [name, dir]);
  const join = (file: string) => `${dir.replace(/\/+$/, '')}/${file}`;
  const fileUrl = (path: string) => `/sandboxes/${enc(name)}/files/${encPath(path)}`;
  const save = (file: string) =>
    void run(async () => {
      const blob = await download(fileUrl(join(file)));
      const link = document.createElement('a');
      link.href = URL.createObjectURL(blob);
      link.download = file;
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 1000);
    });
  const send = (e: Event) => {
    const input = e.currentTarget as HTMLInputElement;
    const chosen = [...(input.files ?? [])];
    void run(async () => {
      for (const file of chosen) await upload(fileUrl(join(file.name)), file);
      input.value = '';
      listing.reload();
    });
  };
  const parent = dir.replace(/\/[^/]+\/?$/, '') || '/';
  return (
    <div class="card">
      <div class="form-row">
        <label class="grow">
          Directory <input value={dir} onChange={(e) => setDir(e.currentTarget.value || '/')} />
        </label>
        <button onClick={() => setDir(parent)} disabled={dir === '/'}>
          Up
        </button>
        <label class="button">
          Upload <input type="file" multiple onChange={send} class="visually-hidden" aria-label="Upload files" />
        </label>
      </div>
      <Alert error={error ?? listing.error} />
      <Table
        head={['Name', 'Size', '']}
        empty={listing.data ? 'Empty directory.' : 'Loading…'}
        rows={(listing.data ?? []).map((f) => [
          f.type === 'd' ? (
            <button class="link" onClick={() => setDir(join(f.file))}>
              {f.file}/
            </button>
          ) : (
            f.file
          ),
          f.type === 'd' ? '' : `${f.size} B`,
          f.type === 'f' ? (
            <button onClick={() => save(f.file)} aria-label={`Download ${f.file}`}>
              Download
            </button>
          ) : (
            ''
          ),
        ])}
      />
    </div>
  );
}

function AuditLog({ name }: { name: string }) {
  const log = useLoad(() => api('getSandboxLogs', 'GET', `/sandboxes/${enc(name)}/logs`), [name]);
  return (
    <div class="card">
      <Alert error={log.error} />
      <Table
        head={['Time', 'Event', 'Details']}
        empty={log.data ? 'Nothing logged yet.' : 'Loading…'}
        rows={(log.data ?? []).map(({ timestamp, event, sandbox: _s, ...rest }) => [String(timestamp), String(event), <code>{JSON.stringify(rest)}</code>])}
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
      {tab === 'Console' && <Console name={name} />}
      {tab === 'Terminal' && <Terminal name={name} />}
      {tab === 'Files' && <Files name={name} />}
      {tab === 'Audit log' && <AuditLog name={name} />}
      {tab === 'Snapshots' && <Snapshots name={name} />}
      {tab === 'Browser' && sandbox.data && <BrowserView name={name} running={sandbox.data.status === 'running'} />}
    </Page>
  );
}
