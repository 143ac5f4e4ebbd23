import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';

/** A value loaded from the API, with its error and a way to load it again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { data?: T; error?: string; reload: () => void } {
  const [state, setState] = useState<{ data?: T; error?: string }>({});
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (data) => live && setState({ data }),
      (err: Error) => live && setState((s) => ({ ...s, error: err.message })),
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  return { ...state, reload: useCallback(() => setTick((t) => t + 1), []) };
}

/** Runs an action and keeps its error (or clears it) for an Alert. */
export function useAction(): [string | undefined, (action: () => Promise<unknown>) => Promise<void>, boolean] {
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (action: () => Promise<unknown>) => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  }, []);
  return [error, run, busy];
}

export function Alert({ error }: { error?: string }) {
  return error ? (
    <p class="alert" role="alert">
      {error}
    </p>
  ) : null;
}

export function Page({ title, actions, children }: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · sandboxd`;
  }, [title]);
  return (
    <section class="page">
      <header class="page-head">
        <h1>{title}</h1>
        {actions}
      </header>
      {children}
    </section>
  );
}

/** A table that scrolls sideways on a narrow window instead of overflowing it. */
export function Table({ head, rows, empty }: { head: string[]; rows: ComponentChildren[][]; empty: string }) {
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            {head.map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 ? (
            <tr>
              <td colSpan={head.length} class="muted">
                {empty}
              </td>
            </tr>
          ) : (
            rows.map((cells) => (
              <tr>
                {cells.map((c) => (
                  <td>{c}</td>
                ))}
              </tr>
            ))
          )}
        </tbody>
      </table>
    </div>
  );
}

/** Key/value pairs of a resource. */
export function Fields({ value }: { value: Record<string, unknown> }) {
  return (
    <dl class="fields">
      {Object.entries(value).map(([k, v]) => (
        <>
          <dt>{k}</dt>
          <dd>{v === null || v === undefined ? '—' : typeof v === 'object' ? <code>{JSON.stringify(v)}</code> : String(v)}</dd>
        </>
      ))}
    </dl>
  );
}

export function Status({ value }: { value: string }) {
  return <span class={`status status-${value}`}>{value}</span>;
}

export const age = (iso: string | null | undefined): string => {
  if (!iso) return '—';
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
};

export const labelText = (labels: Record<string, string>) =>
  Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');

/** Calls `reload` every `ms` while `active` (a view of work that moves on by itself). */
export function usePoll(reload: () => void, ms: number, active = true): void {
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(reload, ms);
    return () => clearInterval(timer);
  }, [reload, ms, active]);
}

/** A JSON value, indented, in a scrolling block. */
export function Json({ value, label }: { value: unknown; label: string }) {
  return (
    <pre class="json" aria-label={label}>
      {value === undefined ? '—' : JSON.stringify(value, null, 2)}
    </pre>
  );
}
