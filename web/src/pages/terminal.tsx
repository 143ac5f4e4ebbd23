import './terminal.css';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, enc } from '../api';
import { Alert } from '../ui';

/** A control message of the terminal WebSocket (text frames); output comes as binary frames. */
type Control = { type: 'exit'; exit_code: number } | { type: 'error'; message: string };

interface Report {
  state: (update: (now: string) => string) => void;
  error: (message: string | undefined) => void;
}

/**
 * The sandbox's shell in xterm.js: a one-use token from POST /pty/token opens the WebSocket
 * (a browser cannot send the key as a header); keys go out as binary frames, the size as resize
 * messages whenever the panel changes size. Leaving the tab closes the socket, which ends the
 * shell. xterm.js is loaded with the tab, not with every page.
 */
export function Terminal({ name }: { name: string }) {
  const box = useRef<HTMLDivElement>(null);
  const [state, setState] = useState('connecting…');
  const [error, setError] = useState<string>();
  const [session, setSession] = useState(0);
  useEffect(() => {
    let dispose = () => {};
    let disposed = false;
    setError(undefined);
    setState('connecting…');
    void import('./xterm').then((xterm) => {
      if (!disposed) dispose = connect(xterm, box.current!, name, { state: setState, error: setError });
    });
    return () => {
      disposed = true;
      dispose();
    };
  }, [name, session]);
  return (
    <div class="card">
      <Alert error={error} />
      <p class="terminal-state">
        <span data-testid="terminal-state">{state}</span>
        <button type="button" onClick={() => setSession((n) => n + 1)}>
          New session
        </button>
      </p>
      <div ref={box} class="terminal" data-testid="terminal" aria-label={`Terminal of ${name}`} />
    </div>
  );
}

/** Opens xterm.js in `box` and a terminal WebSocket to sandbox `name`; returns what closes both. */
function connect(xterm: typeof import('./xterm'), box: HTMLElement, name: string, report: Report): () => void {
  const term = new xterm.XTerm({ cursorBlink: true, fontFamily: 'ui-monospace, Menlo, Consolas, monospace', fontSize: 14 });
  const fit = new xterm.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  let ws: WebSocket | undefined;
  let closed = false;
  const send = (data: string | Uint8Array) => ws?.readyState === WebSocket.OPEN && ws.send(data);
  const input = term.onData((data) => send(new TextEncoder().encode(data)));
  const resize = term.onResize(({ cols, rows }) => send(JSON.stringify({ type: 'resize', cols, rows })));
  const observer = new ResizeObserver(() => fit.fit());
  observer.observe(box);
  void (async () => {
    try {
      const { token } = await api('mintTerminalToken', 'POST', `/sandboxes/${enc(name)}/pty/token`);
      if (closed) return;
      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const socket = (ws = new WebSocket(`${scheme}//${location.host}/sandboxes/${enc(name)}/pty?cols=${term.cols}&rows=${term.rows}&token=${encodeURIComponent(token)}`));
      socket.binaryType = 'arraybuffer';
      socket.onopen = () => {
        report.state(() => 'connected');
        term.focus();
      };
      socket.onmessage = (event: MessageEvent<ArrayBuffer | string>) => {
        if (typeof event.data !== 'string') return term.write(new Uint8Array(event.data));
        const control = JSON.parse(event.data) as Control;
        if (control.type === 'exit') report.state(() => `the shell exited with status ${control.exit_code}`);
        else report.error(control.message);
      };
      socket.onclose = (event) =>
        report.state((now) => (now.startsWith('the shell exited') ? now : `closed (${event.code}${event.reason ? `: ${event.reason}` : ''})`));
    } catch (err) {
      report.error((err as Error).message);
      report.state(() => 'not connected');
    }
  })();
  return () => {
    closed = true;
    observer.disconnect();
    input.dispose();
    resize.dispose();
    ws?.close();
    term.dispose();
  };
}
