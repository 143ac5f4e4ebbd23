import type { WebSocket } from 'ws';
import { badRequest } from '../../errors.js';
import { envelope } from '../../schemas/common.js';
import { sandboxNameParams } from '../../schemas/sandbox-schemas.js';
import { terminalQuery, terminalResize, terminalToken } from '../../schemas/terminal-schemas.js';
import type { Terminal } from '../../services/terminals/index.js';
import { errors, ok, type App, type RouteContext } from '../route-types.js';
import { acceptWebSocket, isUpgrade } from '../websocket-upgrade.js';
import { onSandbox, type RouteAction } from '../route-actions.js';

/** Close code and reason of a terminal whose shell did not exit (the sandbox stopped, the agent went away). */
const GOING_AWAY = 1001;

/** Interactive terminals: a WebSocket to the sandbox's shell, and one-use tokens for browsers. */
export async function terminalRoutes(app: App, { services }: RouteContext): Promise<void> {
  app.get(
    '/sandboxes/:name/pty',
    {
      schema: {
        tags: ['terminal'],
        operationId: 'openTerminal',
        summary: "A terminal: the sandbox's shell over a WebSocket",
        description:
          'Upgrade to a WebSocket (`Connection: Upgrade`, `Upgrade: websocket`), with the API key in the `Authorization` ' +
          'header, or `?token=` from POST /sandboxes/{name}/pty/token. The shell (bash, else sh) runs as the sandbox\'s default ' +
          'user in its working directory, on a terminal of `cols` x `rows`. Frames: what the terminal prints comes as binary ' +
          'frames; the client sends keystrokes as binary or text frames; a text frame that is JSON ' +
          '`{"type":"resize","cols":N,"rows":N}` resizes the terminal. When the shell exits the server sends the text frame ' +
          '`{"type":"exit","exit_code":N}` and closes with 1000; stopping or deleting the sandbox closes its terminals (1001). ' +
          'A stopped sandbox answers 409 before any upgrade.',
        params: sandboxNameParams,
        querystring: terminalQuery,
        response: {
          101: { description: 'Switching Protocols: the WebSocket carrying the terminal' },
          ...errors(400, 403, 404, 409, 422),
        },
      },
    },
    async (request, reply) => {
      if (!isUpgrade(request)) {
        throw badRequest('GET /sandboxes/{name}/pty is a WebSocket: send Connection: Upgrade and Upgrade: websocket');
      }
      const { cols, rows } = request.query;
      // Refusals (missing, stopped, no agent) are HTTP answers: the shell starts before the upgrade.
      const terminal = await services.terminals.open(request.params.name, { cols, rows });
      let ws: WebSocket;
      try {
        ws = await acceptWebSocket(app, request, reply);
      } catch {
        terminal.close();
        return;
      }
      bridge(ws, terminal);
    },
  );

  app.post(
    '/sandboxes/:name/pty/token',
    {
      schema: {
        tags: ['terminal'],
        operationId: 'mintTerminalToken',
        summary: 'A one-use token that opens one terminal on the sandbox within 60 s (for browsers)',
        params: sandboxNameParams,
        response: { 200: envelope(terminalToken), ...errors(403, 404, 409) },
      },
    },
    async (request) => ok(await services.terminals.mintToken(request.params.name, request.principal)),
  );
}

/** Output queued for a slow client past which the terminal is paused (the shell then blocks), and where it resumes. */
const HIGH_WATER = 1 << 20;
const LOW_WATER = 64 << 10;

/** Carries a terminal over a WebSocket until either side ends. */
function bridge(ws: WebSocket, terminal: Terminal): void {
  let paused = false;
  const sent = () => {
    if (paused && ws.bufferedAmount < LOW_WATER) {
      paused = false;
      terminal.resume();
    }
  };
  terminal.attach((data) => {
    ws.send(data, { binary: true }, sent);
    if (!paused && ws.bufferedAmount > HIGH_WATER) {
      paused = true;
      terminal.pause();
    }
  });
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (!isBinary && data[0] === 0x7b /* { */) {
      const resize = parseResize(data);
      if (resize) {
        try {
          terminal.resize(resize.cols, resize.rows);
        } catch (err) {
          ws.send(JSON.stringify({ type: 'error', message: (err as Error).message }));
        }
        return;
      }
    }
    terminal.write(data);
  });
  ws.once('close', () => terminal.close());
  void terminal.exited.then((exitCode) => {
    if (exitCode === null) return ws.close(GOING_AWAY, 'the terminal ended: the sandbox stopped or its shell was cut');
    ws.send(JSON.stringify({ type: 'exit', exit_code: exitCode }));
    ws.close(1000);
  });
}

function parseResize(data: Buffer): { cols: number; rows: number } | undefined {
  try {
    const parsed = terminalResize.safeParse(JSON.parse(data.toString('utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** How policy sees each route of this file (see src/http/policy-actions.ts). */
export const terminalRouteActions: Record<string, RouteAction | 'open'> = {
  // A terminal runs whatever is typed at it: an exec, decided as one (and so is its token).
  'GET /sandboxes/:name/pty': onSandbox('sandbox.exec', { context: () => ({ sudo: false }) }),
  'POST /sandboxes/:name/pty/token': onSandbox('sandbox.exec', { context: () => ({ sudo: false }) }),
};
