import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';

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

/**
 * A table. On a narrow window (CSS, under 600 px) each row becomes a card whose cells are
 * stacked under their column's name, so no action sits out of reach; `stack={false}` keeps a
 * data grid (SQL results) a table that scrolls sideways. The roles are given explicitly: a table
 * laid out as blocks keeps its rows and cells for assistive technology.
 */
export function Table({ head, rows, empty, stack = true }: { head: string[]; rows: ComponentChildren[][]; empty: string; stack?: boolean }) {
  return (
    <div class={stack ? 'table-wrap stack' : 'table-wrap'}>
      <table role="table">
        <thead role="rowgroup">
          <tr role="row">
            {head.map((h) => (
              <th scope="col" role="columnheader">
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody role="rowgroup">
          {rows.length === 0 ? (
            <tr role="row">
              <td colSpan={head.length} class="muted" role="cell">
                {empty}
              </td>
            </tr>
          ) : (
            rows.map((cells) => (
              <tr role="row">
                {cells.map((c, i) => (
                  <td role="cell" data-label={head[i] || undefined}>
                    {c}
                  </td>
                ))}
              </tr>
            ))
          )}
        </tbody>
      </table>
    </div>
  );
}

/** Key/value pairs of a resource, each value as `Value` shows it. */
export function Fields({ value }: { value: Record<string, unknown> }) {
  return (
    <dl class="fields">
      {Object.entries(value).map(([k, v]) => (
        <>
          <dt>{k}</dt>
          <dd>
            <Value value={v} />
          </dd>
        </>
      ))}
    </dl>
  );
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/;
const isPlain = (v: unknown) => v === null || typeof v !== 'object';

/**
 * A value of the API as people read it: a time as `Time`; a list of words (capabilities, allow
 * lists) and a map of words (labels, secret mappings) as chips; a list of records (volumes) as
 * a small table; any other record as nested fields. Never raw JSON.
 */
export function Value({ value }: { value: unknown }): JSX.Element {
  if (value === null || value === undefined || value === '') return <>—</>;
  if (typeof value === 'string') return ISO_TIME.test(value) ? <Time value={value} /> : <>{value}</>;
  if (typeof value !== 'object') return <>{String(value)}</>;
  if (Array.isArray(value)) {
    if (value.length === 0) return <span class="muted">none</span>;
    if (value.every(isPlain)) return <Chips items={value.map(String)} />;
    const records = value as Record<string, unknown>[];
    const head = [...new Set(records.flatMap((r) => Object.keys(r)))];
    return <Table head={head} empty="" rows={records.map((r) => head.map((k) => <Value value={r[k]} />))} />;
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return <span class="muted">none</span>;
  if (entries.every(([, v]) => typeof v === 'string' && !ISO_TIME.test(v))) return <Chips items={entries.map(([k, v]) => `${k}=${String(v)}`)} />;
  return <Fields value={value as Record<string, unknown>} />;
}

/** Words as chips: labels (`k=v`), capabilities, hosts. */
export function Chips({ items }: { items: string[] }) {
  return (
    <ul class="chips">
      {items.map((item) => (
        <li class="chip">{item}</li>
      ))}
    </ul>
  );
}

const pad = (n: number) => String(n).padStart(2, '0');

/** `YYYY-MM-DD HH:MM:SS` of a date, in local time or in UTC. */
function formatTime(date: Date, utc = false): string {
  const [y, mo, d, h, mi, s] = utc
    ? [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate(), date.getUTCHours(), date.getUTCMinutes(), date.getUTCSeconds()]
    : [date.getFullYear(), date.getMonth() + 1, date.getDate(), date.getHours(), date.getMinutes(), date.getSeconds()];
  return `${y}-${pad(mo)}-${pad(d)} ${pad(h)}:${pad(mi)}:${pad(s)}`;
}

/** Every time the dashboard shows: local time, the same instant in UTC on hover. */
export function Time({ value }: { value: string | null | undefined }) {
  if (!value) return <>—</>;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return <>{value}</>;
  return (
    <time class="time" dateTime={date.toISOString()} title={`${formatTime(date, true)} UTC`}>
      {formatTime(date)}
    </time>
  );
}

export function Status({ value }: { value: string }) {
  return <span class={`status status-${value}`}>{value}</span>;
}

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

/** A question asked in the page (never the browser's prompt): its title, the field's label and default, the submit button's name. */
export interface Question {
  title: string;
  label: string;
  value?: string;
  submit: string;
  /** Whether an empty answer is refused. */
  required?: boolean;
}

/**
 * An in-page dialog that asks one question: `ask` resolves with the answer, or null when the
 * person cancels (Escape or Cancel). Render `dialog` once in the component that asks.
 */
export function useAsk(): { dialog: JSX.Element; ask: (question: Question) => Promise<string | null> } {
  const [asked, setAsked] = useState<Question & { resolve: (answer: string | null) => void }>();
  const ref = useRef<HTMLDialogElement>(null);
  const id = useId();
  useEffect(() => {
    if (asked && !ref.current?.open) ref.current?.showModal();
  }, [asked]);
  const close = (answer: string | null) => {
    ref.current?.close();
    asked?.resolve(answer);
    setAsked(undefined);
  };
  const submit = (e: Event) => {
    e.preventDefault();
    close(String(new FormData(e.currentTarget as HTMLFormElement).get('answer') ?? ''));
  };
  const dialog = (
    <dialog ref={ref} aria-labelledby={id} onCancel={(e) => (e.preventDefault(), close(null))}>
      {asked && (
        <form onSubmit={submit}>
          <h2 id={id}>{asked.title}</h2>
          <label>
            {asked.label} <input name="answer" defaultValue={asked.value ?? ''} required={asked.required} autocomplete="off" autofocus />
          </label>
          <div class="form-row">
            <button type="submit">{asked.submit}</button>
            <button type="button" class="secondary" onClick={() => close(null)}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </dialog>
  );
  const ask = useCallback((question: Question) => new Promise<string | null>((resolve) => setAsked({ ...question, resolve })), []);
  return { dialog, ask };
}
