import { useState } from 'preact/hooks';
import { api, enc } from '../api';
import type { Schema } from '../api-types';
import { Alert, Page, Status, Table, Time, useAction, useLoad } from '../ui';

export function ObjectsPage() {
  const objects = useLoad(() => api('listObjects', 'GET', '/objects'), []);
  const classes = useLoad(() => api('listObjectClasses', 'GET', '/objects/classes'), []);
  return (
    <Page title="Durable objects">
      <Alert error={objects.error ?? classes.error} />
      <h2>Classes</h2>
      <Table
        head={['Class', 'Runtime', 'Methods']}
        empty={classes.data ? 'No classes defined.' : 'Loading…'}
        rows={(classes.data ?? []).map((c) => [c.name, c.runtime ?? '', (c.methods ?? []).join(', ')])}
      />
      <h2>Objects</h2>
      <Table
        head={['Class', 'Object id', 'Status', 'Sandbox', 'Storage', 'Calls', 'Last call']}
        empty={objects.data ? 'No objects.' : 'Loading…'}
        rows={(objects.data ?? []).map((o) => [o.class, o.object_id, <Status value={o.status} />, o.sandbox, `${o.storage_bytes} B`, o.call_count, <Time value={o.last_call_at} />])}
      />
    </Page>
  );
}

function Runs({ schedule }: { schedule: Schema<'Schedule'> }) {
  const runs = useLoad(() => api('listScheduleRuns', 'GET', `/schedules/${enc(schedule.id)}/runs`), [schedule.id]);
  return (
    <div class="card">
      <h2>Runs of {schedule.name}</h2>
      <Alert error={runs.error} />
      <Table
        head={['Scheduled for', 'Status', 'Duration', 'Error']}
        empty={runs.data ? 'No runs yet.' : 'Loading…'}
        rows={(runs.data ?? []).map((r) => [<Time value={r.scheduled_for} />, <Status value={r.status} />, r.duration_ms === null ? '—' : `${r.duration_ms} ms`, r.error ?? ''])}
      />
    </div>
  );
}

export function SchedulesPage() {
  const list = useLoad(() => api('listSchedules', 'GET', '/schedules'), []);
  const [open, setOpen] = useState<Schema<'Schedule'>>();
  const [error, run, busy] = useAction();
  const trigger = (s: Schema<'Schedule'>) => void run(async () => (await api('triggerSchedule', 'POST', `/schedules/${enc(s.id)}/trigger`), list.reload(), setOpen({ ...s })));
  return (
    <Page title="Schedules">
      <Alert error={list.error ?? error} />
      <Table
        head={['Name', 'When', 'Status', 'Next', 'Last run', 'Fired', 'Triggered', '']}
        empty={list.data ? 'No schedules.' : 'Loading…'}
        rows={(list.data ?? []).map((s) => [
          s.name,
          s.cron ? `${s.cron} (${s.timezone})` : <Time value={s.fire_at} />,
          <Status value={s.status} />,
          <Time value={s.next_fire_at} />,
          s.last_run_status ?? '—',
          s.fire_count,
          s.trigger_count,
          <span class="actions">
            <button onClick={() => setOpen(s)}>Runs</button>
            <button disabled={busy} onClick={() => trigger(s)}>
              Trigger
            </button>
          </span>,
        ])}
      />
      {open && <Runs schedule={open} key={`${open.id}-${Date.now()}`} />}
    </Page>
  );
}

/** What the SQL box shows: a query's rows, or the rows an execute returned. */
type Rows = Pick<Schema<'StoreQueryResult'>, 'columns' | 'rows' | 'row_count' | 'truncated' | 'duration_ms'>;

const SQL_KINDS = new Set(['sqlite', 'postgres', 'mysql']);

/** A SQL box: a read-only query (POST /query) or a write (POST /execute), the rows in a grid. */
function SqlBox({ store }: { store: Schema<'Store'> }) {
  const [result, setResult] = useState<Rows>();
  const [note, setNote] = useState<string>();
  const [error, run, busy] = useAction();
  const submit = (e: SubmitEvent) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const sql = String(new FormData(form).get('sql'));
    const write = (e.submitter as HTMLButtonElement | null)?.value === 'execute';
    void run(async () => {
      setResult(undefined);
      setNote(undefined);
      if (!write) return setResult(await api('queryStore', 'POST', `/stores/${enc(store.id)}/query`, { sql }));
      const done = await api('executeStore', 'POST', `/stores/${enc(store.id)}/execute`, { sql });
      setNote(`${done.rows_affected} row(s) affected`);
      // One statement was sent, so the reply is one statement's result (a batch's has `results`).
      if (!('results' in done) && done.columns && done.rows) {
        setResult({ columns: done.columns, rows: done.rows, row_count: done.rows.length, truncated: false, duration_ms: 0 });
      }
    });
  };
  return (
    <form class="card" onSubmit={submit} aria-label={`SQL on ${store.name}`}>
      <h2>SQL on {store.name}</h2>
      <textarea name="sql" rows={4} aria-label="SQL" placeholder="SELECT 1 AS answer" required />
      <div class="form-row">
        <button type="submit" value="query" disabled={busy}>
          Query (read-only)
        </button>
        <button type="submit" value="execute" disabled={busy}>
          Execute
        </button>
      </div>
      <Alert error={error} />
      {note && <p>{note}</p>}
      {result && (
        <>
          <p class="muted">
            {result.row_count} row(s){result.truncated ? ', truncated' : ''} in {result.duration_ms} ms
          </p>
          <Table head={result.columns} empty="No rows." stack={false} rows={result.rows.map((r) => r.map((v) => (v === null ? 'NULL' : typeof v === 'object' ? JSON.stringify(v) : String(v))))} />
        </>
      )}
    </form>
  );
}

export function StoresPage() {
  const list = useLoad(() => api('listStores', 'GET', '/stores'), []);
  const [open, setOpen] = useState<Schema<'Store'>>();
  return (
    <Page title="Stores">
      <Alert error={list.error} />
      <Table
        head={['Name', 'Kind', 'Sandbox', 'Size', 'Status', '']}
        empty={list.data ? 'No stores.' : 'Loading…'}
        rows={(list.data ?? []).map((s) => [
          s.name,
          s.kind,
          s.sandbox ?? '—',
          s.size_bytes === undefined ? '—' : `${s.size_bytes} B`,
          s.status ?? '',
          SQL_KINDS.has(s.kind) ? <button onClick={() => setOpen(s)}>Open SQL</button> : '',
        ])}
      />
      {open && <SqlBox store={open} key={open.id} />}
    </Page>
  );
}
