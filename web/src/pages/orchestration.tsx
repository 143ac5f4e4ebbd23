import { api, enc } from '../api';
import { Alert, Fields, Json, Page, Status, Table, Time, useAction, useAsk, useLoad, usePoll, Value } from '../ui';
import { finished, parseJson, type HistoryEntry, type Instance, type InstanceStep } from './orchestrations';

const OPEN = new Set(['scheduled', 'running', 'retrying', 'waiting']);

/** Events raised and not yet consumed by a wait_for_event: buffered until a wait of that name. */
function bufferedEvents(history: HistoryEntry[]): HistoryEntry[] {
  const consumed = new Set(history.filter((h) => h.type === 'EventConsumed').map((h) => h.data.raised_sequence));
  return history.filter((h) => h.type === 'EventRaised' && !consumed.has(h.sequence));
}

/** What a step waits on: its timer, its retry, or its event (and that event's deadline). */
function waitsOn(step: InstanceStep) {
  if (step.event)
    return (
      <>
        event {step.event}
        {step.deadline && (
          <>
            , times out at <Time value={step.deadline} />
          </>
        )}
      </>
    );
  if (step.retry_at)
    return (
      <>
        retry at <Time value={step.retry_at} />
      </>
    );
  if (step.fire_at)
    return (
      <>
        timer fires at <Time value={step.fire_at} />
      </>
    );
  return '';
}

function RaiseEvent({ instance, onDone }: { instance: Instance; onDone: () => void }) {
  const [error, run, busy] = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const fields = new FormData(form);
    void run(async () => {
      const data = parseJson(String(fields.get('data') ?? ''), 'Data');
      await api('eventsOrchestration', 'POST', `/orchestrations/${enc(instance.id)}/events`, { name: String(fields.get('event')), ...(data !== undefined && { data }) });
      form.reset();
      onDone();
    });
  };
  return (
    <form class="card" onSubmit={submit} aria-label="Raise an event">
      <h2>Raise an event</h2>
      <div class="form-row">
        <label>
          Event name <input name="event" required list="waiting-for" autocomplete="off" defaultValue={instance.waiting_for[0] ?? ''} />
          <datalist id="waiting-for">
            {instance.waiting_for.map((name) => (
              <option value={name} />
            ))}
          </datalist>
        </label>
        <label class="grow">
          Data (JSON) <input name="data" autocomplete="off" placeholder='{"ok": true}' />
        </label>
        <button type="submit" disabled={busy}>
          Raise
        </button>
      </div>
      <Alert error={error} />
    </form>
  );
}

function Pending({ instance }: { instance: Instance }) {
  const open = instance.steps.filter((s) => OPEN.has(s.status));
  const buffered = bufferedEvents(instance.history ?? []);
  return (
    <div class="card" data-testid="pending">
      <h2>Current steps</h2>
      <Table
        head={['Step', 'Type', 'Status', 'Waiting on']}
        empty={finished(instance.status) ? `Nothing open: the instance is ${instance.status}.` : 'No step is open.'}
        rows={open.map((s) => [s.id, s.type, <Status value={s.status} />, waitsOn(s)])}
      />
      {buffered.length > 0 && (
        <>
          <h2>Buffered events</h2>
          <Table
            head={['#', 'Event', 'Data', 'Raised']}
            empty=""
            rows={buffered.map((h) => [h.sequence, String(h.data.name), <code>{JSON.stringify(h.data.data ?? null)}</code>, <Time value={h.timestamp} />])}
          />
        </>
      )}
    </div>
  );
}

function Steps({ steps }: { steps: InstanceStep[] }) {
  return (
    <Table
      head={['Step', 'Type', 'Status', 'Attempts', 'Started', 'Completed', 'Output or error']}
      empty="No steps."
      rows={steps.map((s) => [
        s.id,
        s.type,
        <Status value={s.status} />,
        s.attempts ?? '—',
        <Time value={s.started_at} />,
        <Time value={s.completed_at} />,
        s.error ? <span class="alert-text">{s.error}</span> : s.output === undefined ? '' : <code>{JSON.stringify(s.output)}</code>,
      ])}
    />
  );
}

/** The event-sourced history, oldest first: what happened, to which step, when. */
function Timeline({ history }: { history: HistoryEntry[] }) {
  return (
    <ol class="timeline" aria-label="History">
      {history.map((h) => (
        <li>
          <span class="muted">
            #{h.sequence} · <Time value={h.timestamp} />
          </span>{' '}
          <strong>{h.type}</strong>
          {h.step && <> · {h.step}</>}
          {Object.keys(h.data).length > 0 && (
            <div class="entry-data">
              <Value value={h.data} />
            </div>
          )}
        </li>
      ))}
    </ol>
  );
}

export function OrchestrationPage({ id }: { id: string }) {
  const instance = useLoad(() => api('getOrchestration', 'GET', `/orchestrations/${enc(id)}`), [id]);
  const [error, run, busy] = useAction();
  const data = instance.data;
  const done = data ? finished(data.status) : false;
  usePoll(instance.reload, 2000, Boolean(data) && !done);
  const { dialog, ask } = useAsk();
  const terminate = async () => {
    const reason = await ask({ title: `Terminate ${id}?`, label: 'Reason', value: 'terminated from the dashboard', submit: 'Terminate' });
    if (reason !== null) void run(async () => (await api('terminateOrchestration', 'POST', `/orchestrations/${enc(id)}/terminate`, reason ? { reason } : {}), instance.reload()));
  };
  const remove = () => confirm(`Delete instance ${id} and its history?`) && void run(async () => (await api('deleteOrchestration', 'DELETE', `/orchestrations/${enc(id)}`), (location.hash = '#/orchestrations')));
  const actions = data && (
    <span class="actions">
      <button onClick={instance.reload}>Refresh</button>
      {done ? (
        <button class="danger" disabled={busy} onClick={remove}>
          Delete
        </button>
      ) : (
        <button class="danger" disabled={busy} onClick={() => void terminate()}>
          Terminate
        </button>
      )}
    </span>
  );
  return (
    <Page title={id} actions={actions}>
      <Alert error={instance.error ?? error} />
      {dialog}
      <p>
        <a href="#/orchestrations">← All orchestrations</a> {data && <Status value={data.status} />}
      </p>
      {data && (
        <>
          <div class="card">
            <Fields
              value={{
                definition: `${data.name} v${data.definition_version}`,
                status: data.status,
                error: data.error,
                failed_step: data.failed_step,
                created_at: data.created_at,
                start_at: data.start_at,
                started_at: data.started_at,
                completed_at: data.completed_at,
                waiting_for: data.waiting_for.join(', ') || null,
              }}
            />
          </div>
          <Pending instance={data} />
          {!done && <RaiseEvent instance={data} onDone={instance.reload} />}
          <div class="grid">
            <div class="card">
              <h2>Input</h2>
              <Json value={data.input} label="Input" />
            </div>
            <div class="card">
              <h2>Output</h2>
              <Json value={data.output} label="Output" />
            </div>
          </div>
          <h2>Steps</h2>
          <Steps steps={data.steps} />
          <h2>History</h2>
          <Timeline history={data.history ?? []} />
        </>
      )}
    </Page>
  );
}
