import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { ServiceError, badRequest } from '../../errors.js';
import type { TerminalSession } from '../types.js';
import { AgentUnreachable, type AgentTransport } from './agent-transport.js';

/** The Upgrade token of the agent's POST /v1/pty (agent/pty.go). */
const PTY_PROTOCOL = 'sandboxd-pty';

/** Frame types on an upgraded terminal connection (agent/README.md, "Terminals"). */
const FRAME = { output: 1, exit: 3, error: 4, input: 5, resize: 6 } as const;
const FRAME_HEADER = 5;

/** Connect errors that mean the request never reached an agent. */
const NOT_DELIVERED = new Set(['ENOENT', 'ECONNREFUSED', 'ENOTSOCK']);

/** What the agent's POST /v1/pty takes. */
export interface AgentTerminalRequest {
  cols: number;
  rows: number;
  env?: string[];
  argv?: string[];
  cwd?: string;
  user?: string;
}

/**
 * Opens a terminal on the agent: POST /v1/pty upgraded to a connection of its own (never a
 * pooled one), on which input and resize frames go out and output frames, then the exit frame,
 * come back. A connection that could not be made is tried once more after the transport is
 * reset, then AgentUnreachable; the agent's refusal (bad size, a shell that cannot start) is a
 * ServiceError.
 */
export async function openAgentTerminal(transport: AgentTransport, request: AgentTerminalRequest, onOutput: (data: Buffer) => void): Promise<TerminalSession> {
  const body = Buffer.from(JSON.stringify(request));
  for (let attempt = 0; ; attempt++) {
    try {
      const socket = await upgrade(transport, body);
      return new AgentTerminal(socket.socket, socket.head, onOutput);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (!(err instanceof AgentUnreachable) && !NOT_DELIVERED.has(code)) throw err;
      transport.reset?.();
      if (attempt > 0) throw err instanceof AgentUnreachable ? err : new AgentUnreachable((err as Error).message);
    }
  }
}

function upgrade(transport: AgentTransport, body: Buffer): Promise<{ socket: Socket; head: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      method: 'POST',
      path: '/v1/pty',
      headers: { ...transport.headers, connection: 'Upgrade', upgrade: PTY_PROTOCOL, 'content-length': body.length },
      createConnection: (_options, done) => {
        transport.connect().then(
          (socket) => done(null, socket),
          // A failed connect fails the upgrade at once; the request, which never got a socket
          // (`done` wants one even with an error), is let go without one.
          (err: Error) => {
            reject(err);
            req.destroy();
          },
        );
        return undefined;
      },
    });
    req.once('upgrade', (_response, socket, head) => resolve({ socket: socket as Socket, head }));
    req.once('response', (response) => void refusal(response).then(reject, reject));
    req.once('error', reject);
    req.end(body);
  });
}

/** The agent's answer other than 101, as a service error. */
async function refusal(response: IncomingMessage): Promise<never> {
  const chunks: Buffer[] = [];
  for await (const chunk of response as AsyncIterable<Buffer>) chunks.push(chunk);
  let message = `HTTP ${response.statusCode}`;
  try {
    message = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: string }).error ?? message;
  } catch {
    // The status alone says enough.
  }
  if (response.statusCode === 400) throw badRequest(message);
  if (response.statusCode === 404) throw new ServiceError('UNSUPPORTED', "terminals in a sandbox whose agent predates them (made by an older sandboxd): recreate the sandbox");
  throw new ServiceError('INTERNAL', `the sandbox agent could not start a shell: ${message}`);
}

/** One terminal on an upgraded agent connection. */
class AgentTerminal implements TerminalSession {
  readonly exited: Promise<number | null>;
  private pending: Buffer = Buffer.alloc(0);

  constructor(
    private readonly socket: Socket,
    head: Buffer,
    private readonly onOutput: (data: Buffer) => void,
  ) {
    socket.setNoDelay(true);
    this.exited = new Promise((resolve) => {
      let code: number | null = null;
      // A frame that does not parse cuts the session: an error thrown in a `data` listener would escape every handler.
      const read = (chunk: Buffer) => {
        try {
          const exit = this.readFrames(chunk);
          if (exit !== undefined) code = exit;
        } catch {
          socket.destroy();
        }
      };
      if (head.length > 0) read(head);
      socket.on('data', read);
      socket.once('close', () => resolve(code));
      socket.on('error', () => socket.destroy());
    });
  }

  write(data: Buffer): void {
    this.send(FRAME.input, data);
  }

  resize(cols: number, rows: number): void {
    this.send(FRAME.resize, Buffer.from(JSON.stringify({ cols, rows })));
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  close(): void {
    this.socket.destroy();
  }

  private send(type: number, payload: Buffer): void {
    if (this.socket.destroyed) return;
    const header = Buffer.alloc(FRAME_HEADER);
    header[0] = type;
    header.writeUInt32BE(payload.length, 1);
    this.socket.write(Buffer.concat([header, payload]));
  }

  /** Hands complete output frames on; returns the exit code when the exit frame came. */
  private readFrames(chunk: Buffer): number | undefined {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let exit: number | undefined;
    while (this.pending.length >= FRAME_HEADER) {
      const size = this.pending.readUInt32BE(1);
      if (this.pending.length < FRAME_HEADER + size) break;
      const type = this.pending[0];
      const payload = this.pending.subarray(FRAME_HEADER, FRAME_HEADER + size);
      this.pending = this.pending.subarray(FRAME_HEADER + size);
      if (type === FRAME.output) this.onOutput(payload);
      else if (type === FRAME.exit) exit = (JSON.parse(payload.toString('utf8')) as { exit_code: number }).exit_code;
    }
    return exit;
  }
}
