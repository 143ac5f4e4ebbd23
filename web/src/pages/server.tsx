import { api, text } from '../api';
import { Alert, Fields, Page, useLoad } from '../ui';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (comments and histograms' buckets left out). */
export function parseMetrics(exposition: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of exposition.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!match || match[1]!.endsWith('_bucket')) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of (match[2] ?? '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[k!] = v!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

const sum = (samples: Sample[], name: string) => samples.filter((s) => s.name === name).reduce((total, s) => total + s.value, 0);

/** A horizontal bar per item: the share of the largest. */
function Bars({ title, items }: { title: string; items: [string, number][] }) {
  const max = Math.max(1, ...items.map(([, v]) => v));
  return (
    <figure class="card bars">
      <figcaption>{title}</figcaption>
      {items.length === 0 && <p class="muted">Nothing yet.</p>}
      {items.map(([label, value]) => (
        <div class="bar-row">
          <span class="bar-label">{label}</span>
          <span class="bar" style={{ width: `${(value / max) * 100}%` }} />
          <span class="bar-value">{Number.isInteger(value) ? value : value.toFixed(2)}</span>
        </div>
      ))}
    </figure>
  );
}

export function ServerPage() {
  const status = useLoad(() => api('getStatus', 'GET', '/status'), []);
  const stats = useLoad(() => api('getStats', 'GET', '/stats'), []);
  const metrics = useLoad(async () => parseMetrics(await text('/metrics')), []);
  const samples = metrics.data ?? [];
  const byStatus = new Map<string, number>();
  for (const s of samples.filter((s) => s.name === 'sandboxd_http_requests_total')) {
    const key = `${s.labels.status_code ?? s.labels.code ?? s.labels.status ?? '?'}`;
    byStatus.set(key, (byStatus.get(key) ?? 0) + s.value);
  }
  const commands = samples.filter((s) => s.name === 'sandboxd_commands_total').map((s): [string, number] => [Object.values(s.labels).join(' ') || 'all', s.value]);
  return (
    <Page title="Server">
      <Alert error={status.error ?? stats.error ?? metrics.error} />
      <div class="grid">
        <div class="card">
          <h2>Status</h2>
          {status.data && <Fields value={status.data} />}
        </div>
        <div class="card">
          <h2>Stats</h2>
          {stats.data && <Fields value={stats.data} />}
        </div>
      </div>
      <div class="grid">
        <Bars
          title="Gauges"
          items={[
            ['sandboxes active', sum(samples, 'sandboxd_sandboxes_active')],
            ['warm pool', sum(samples, 'sandboxd_warm_pool_size')],
            ['objects active', sum(samples, 'sandboxd_objects_active')],
            ['event stream clients', sum(samples, 'sandboxd_event_stream_clients')],
          ]}
        />
        <Bars title="HTTP requests by status" items={[...byStatus.entries()].sort()} />
        <Bars title="Commands" items={commands} />
      </div>
    </Page>
  );
}
