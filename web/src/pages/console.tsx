import { useEffect, useState } from 'preact/hooks';
import { api, enc, events } from '../api';
import type { Schema } from '../api-types';
import { Alert, Status, Table, Time, useAction, useLoad, usePoll } from '../ui';

type Stream = 'input' | 'stdout' | 'stderr';

/** Output kept per sandbox, at most: the oldest lines go first. */
const MAX_KEPT_CHARS = 1024 * 1024;

interface ConsoleState {
  /** The last command typed. */
  command: string;
  lines: { stream: Stream; data: string }[];
  /** How the last command ended: "completed, exit code 0". */
  exit?: string;
  /** The running command's detached id, once it started. */
  id?: string;
  running: boolean;
  /** Whether output was dropped to keep at most MAX_KEPT_CHARS. */
  dropped: boolean;
  error?: string;
}

/**
 * The console of one sandbox: its last command and what it printed. It lives as long as the
 * page (a module-level map, not a component), so switching tabs or sandboxes and coming back
 * shows the output, and output printed meanwhile is followed and kept.
 */
class ConsoleSession {
  state: ConsoleState = { command: '', lines: [], running: false, dropped: false };
  private readonly listeners = new Set<() => void>();
  private kept = 0;

  constructor(private readonly name: string) {}

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Runs `command` with `sh -c`, detached, and follows both streams until it ends. */
  async run(command: string): Promise<void> {
    this.kept = 0;
    this.set({ command, lines: [], exit: undefined, id: undefined, running: true, dropped: false, error: undefined });
    this.append('input', `$ ${command}\n`);
    const base = `/sandboxes/${enc(this.name)}/exec`;
    try {
      const { id } = await api('startDetachedCommand', 'POST', `${base}/detach`, { command: ['sh', '-c', command] });
      this.set({ id });
      const abort = new AbortController();
      const follow = async (stream: 'stdout' | 'stderr') => {
        for await (const event of events(`${base}/detached/${enc(id)}/logs?stream=${stream}&follow=true`, abort.signal)) {
          const data = event.data as { data?: string; exit_code?: number | null; status?: string; message?: string };
          if (event.event === 'output') this.append(stream, data.data ?? '');
          else if (event.event === 'done' && stream === 'stdout') this.set({ exit: `${data.status}, exit code ${data.exit_code ?? '—'}` });
          else if (event.event === 'error') throw new Error(data.message);
        }
      };
      // One stream failing ends the other's follow too.
      await Promise.all([follow('stdout'), follow('stderr')]).catch((err: unknown) => (abort.abort(), Promise.reject(err)));
    } catch (err) {
      this.set({ error: (err as Error).message });
    } finally {
      this.set({ running: false });
    }
  }

  /** Kills the running command's process tree: its follow then ends with status `killed`. */
  async stop(): Promise<void> {
    const { id } = this.state;
    if (!id) return;
    try {
      await api('killDetachedCommand', 'DELETE', `/sandboxes/${enc(this.name)}/exec/detached/${enc(id)}`);
    } catch (err) {
      this.set({ error: (err as Error).message });
    }
  }

  private append(stream: Stream, data: string): void {
    const lines = [...this.state.lines, { stream, data }];
    this.kept += data.length;
    let dropped = this.state.dropped;
    // The command line (first) stays; the oldest output after it goes.
    while (this.kept > MAX_KEPT_CHARS && lines.length > 2) {
      this.kept -= lines.splice(1, 1)[0]?.data.length ?? 0;
      dropped = true;
    }
    this.set({ lines, dropped });
  }

  private set(patch: Partial<ConsoleState>): void {
    this.state = { ...this.state, ...patch };
    for (const listener of this.listeners) listener();
  }
}

const sessions = new Map<string, ConsoleSession>();

/** The console session of sandbox `name`, rendered again whenever it changes. */
function useSession(name: string): ConsoleSession {
  let session = sessions.get(name);
  if (!session) sessions.set(name, (session = new ConsoleSession(name)));
  const [, changed] = useState(0);
  useEffect(() => session.subscribe(() => changed((n) => n + 1)), [session]);
  return session;
}

/** The command as it was typed: the console runs it as `sh -c COMMAND`, which the list shows as COMMAND. */
const typed = (command: string[]) => (command.length === 3 && command[0] === 'sh' && command[1] === '-c' ? command[2] : command.join(' '));

/**
 * A command run detached, its stdout and stderr followed as Server-Sent Events: output shows
 * as the command prints it, Stop kills it, and the command outlives a closed tab. Below, the
 * sandbox's detached commands, the running ones with Kill.
 */
export function Console({ name }: { name: string }) {
  const session = useSession(name);
  const { command, lines, exit, id, running, dropped, error } = session.state;
  const detached = useLoad(() => api('listDetachedCommands', 'GET', `/sandboxes/${enc(name)}/exec/detached`), [name]);
  const anyRunning = (detached.data ?? []).some((d) => d.status === 'running');
  // Commands end by themselves: the list follows while one runs, and as the console's starts and ends.
  usePoll(detached.reload, 5000, anyRunning);
  useEffect(() => detached.reload(), [id, running, detached.reload]);
  const [actionError, act] = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const typedCommand = String(new FormData(e.currentTarget as HTMLFormElement).get('command') ?? '').trim();
    if (typedCommand && !running) void session.run(typedCommand);
  };
  const kill = (d: Schema<'DetachedCommand'>) =>
    void act(async () => {
      if (d.id === id) await session.stop();
      else await api('killDetachedCommand', 'DELETE', `/sandboxes/${enc(name)}/exec/detached/${enc(d.id)}`);
      detached.reload();
    });
  return (
    <div class="card">
      <form class="form-row" onSubmit={submit} aria-label="Run a command">
        <label class="grow">
          Command <input name="command" autocomplete="off" placeholder="ls -la /workspace" defaultValue={command} />
        </label>
        <span class="actions">
          <button type="submit" disabled={running}>
            Run
          </button>
          <button type="button" class="danger" disabled={!running || !id} onClick={() => void session.stop()}>
            Stop
          </button>
        </span>
      </form>
      <pre class="console" aria-live="polite" aria-label="Command output" data-testid="console-output">
        {dropped && <span class="muted">… earlier output dropped (the console keeps the last 1 MiB){'\n'}</span>}
        {lines.map((l) => (
          <span class={`out-${l.stream}`}>{l.data}</span>
        ))}
      </pre>
      {running && id && <p class="muted">running…</p>}
      {exit && <p data-testid="console-exit">{exit}</p>}
      <Alert error={error ?? actionError ?? detached.error} />
      <h2>Detached commands</h2>
      <Table
        head={['Command', 'Status', 'Exit code', 'Started', '']}
        empty={detached.data ? 'None yet.' : 'Loading…'}
        rows={[...(detached.data ?? [])].reverse().map((d) => [
          <code title={d.command.join(' ')}>{typed(d.command)}</code>,
          <Status value={d.status} />,
          d.exit_code ?? '—',
          <Time value={d.started_at} />,
          d.status === 'running' ? (
            <button class="danger" onClick={() => kill(d)} aria-label={`Kill ${typed(d.command)}`}>
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
