import { useState } from 'preact/hooks';
import { api, enc } from '../api';
import type { Schema } from '../api-types';
import { Alert, Page, Status, Table, Time, useAction, useLoad, usePoll } from '../ui';

/** An instance as GET /orchestrations/{id} answers it, its steps and its history entries. */
export type Instance = Schema<'OrchestrationInstance'>;
export type InstanceStep = Instance['steps'][number];
export type HistoryEntry = NonNullable<Instance['history']>[number];

export const STATUSES = ['pending', 'running', 'waiting', 'completed', 'failed', 'terminated'] as const;
export const finished = (status: string) => status === 'completed' || status === 'failed' || status === 'terminated';

/** A JSON text box's value: empty is "no value", anything else must parse. */
export function parseJson(text: string, field: string): unknown {
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error(`${field} is not valid JSON`);
  }
}

/** Starts an instance of a stored definition with a JSON input; opens it. */
function StartForm({ definitions }: { definitions: Schema<'OrchestrationDefinition'>[] }) {
  const [error, run, busy] = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    void run(async () => {
      const input = parseJson(String(form.get('input') ?? ''), 'Input');
      const body = { name: String(form.get('definition')), ...(input !== undefined && { input }) };
      const started = await api('createOrchestration', 'POST', '/orchestrations', body);
      location.hash = `#/orchestrations/${enc(started.id)}`;
    });
  };
  return (
    <form class="card" onSubmit={submit} aria-label="Start an instance">
      <div class="form-row">
        <label>
          Definition
          <select name="definition" required>
            {definitions.map((d) => (
              <option value={d.name}>{d.name}</option>
            ))}
          </select>
        </label>
        <label class="grow">
          Input (JSON) <input name="input" autocomplete="off" placeholder='{"sandbox": "demo"}' />
        </label>
        <button type="submit" disabled={busy || definitions.length === 0}>
          Start
        </button>
      </div>
      <Alert error={error} />
    </form>
  );
}

export function OrchestrationsPage() {
  const [status, setStatus] = useState('');
  const definitions = useLoad(() => api('listOrchestrationsDefinitions', 'GET', '/orchestrations/definitions'), []);
  const instances = useLoad(() => api('listOrchestrations', 'GET', `/orchestrations${status ? `?status=${status}` : ''}`), [status]);
  // Instances move on by themselves (activities finish, timers fire): the list follows.
  usePoll(instances.reload, 5000);
  return (
    <Page title="Orchestrations">
      <Alert error={definitions.error ?? instances.error} />
      <h2>Definitions</h2>
      <Table
        head={['Name', 'Version', 'Steps', 'Description', 'Updated']}
        empty={definitions.data ? 'No definitions.' : 'Loading…'}
        rows={(definitions.data ?? []).map((d) => [d.name, d.version, d.steps.map((s) => `${s.id} (${s.type})`).join(', '), d.description ?? '', <Time value={d.updated_at} />])}
      />
      {definitions.data && definitions.data.length > 0 && <StartForm definitions={definitions.data} />}
      <div class="page-head">
        <h2>Instances</h2>
        <label>
          Status filter
          <select value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
            <option value="">all</option>
            {STATUSES.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
      </div>
      <Table
        head={['Id', 'Definition', 'Status', 'Waiting for', 'Created', 'Finished']}
        empty={instances.data ? (status ? `No ${status} instances.` : 'No instances.') : 'Loading…'}
        rows={(instances.data ?? []).map((i) => [
          <a href={`#/orchestrations/${enc(i.id)}`}>{i.id}</a>,
          `${i.name} v${i.definition_version}`,
          <Status value={i.status} />,
          i.waiting_for.join(', '),
          <Time value={i.created_at} />,
          <Time value={i.completed_at} />,
        ])}
      />
    </Page>
  );
}
