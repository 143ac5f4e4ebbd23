import { api, enc } from '../api';
import type { Schema } from '../api-types';
import { Alert, Page, Table, Time, useAction, useAsk, useLoad } from '../ui';

export function SnapshotTable({ snapshots, onChange }: { snapshots?: Schema<'Snapshot'>[]; onChange: () => void }) {
  const [error, run, busy] = useAction();
  const { dialog, ask } = useAsk();
  const restore = async (s: Schema<'Snapshot'>) => {
    const as = await ask({ title: `Restore ${s.name}`, label: 'New sandbox name', value: `${s.sandbox}-restored`, submit: 'Restore', required: true });
    if (as) void run(async () => (await api('restoreSnapshot', 'POST', `/snapshots/${enc(s.name)}/restore`, { as_name: as }), (location.hash = `#/sandboxes/${enc(as)}`)));
  };
  const remove = (s: Schema<'Snapshot'>) => confirm(`Delete snapshot ${s.name}?`) && void run(async () => (await api('deleteSnapshot', 'DELETE', `/snapshots/${enc(s.name)}`), onChange()));
  return (
    <>
      <Alert error={error} />
      {dialog}
      <Table
        head={['Name', 'Sandbox', 'Base image', 'Taken', '']}
        empty={snapshots ? 'No snapshots.' : 'Loading…'}
        rows={(snapshots ?? []).map((s) => [
          s.name,
          <a href={`#/sandboxes/${enc(s.sandbox)}`}>{s.sandbox}</a>,
          s.base_image,
          <Time value={s.created_at} />,
          <span class="actions">
            <button disabled={busy} onClick={() => void restore(s)} aria-label={`Restore snapshot ${s.name}`}>
              Restore
            </button>
            <button class="danger" disabled={busy} onClick={() => remove(s)} aria-label={`Delete snapshot ${s.name}`}>
              Delete
            </button>
          </span>,
        ])}
      />
    </>
  );
}

export function SnapshotsPage() {
  const list = useLoad(() => api('listSnapshots', 'GET', '/snapshots'), []);
  return (
    <Page title="Snapshots">
      <Alert error={list.error} />
      <SnapshotTable snapshots={list.data} onChange={list.reload} />
    </Page>
  );
}
