import { connect as netConnect, type Socket } from 'node:net';

/**
 * How the server reaches one sandbox's agent. The agent client speaks HTTP/1.1 (the agent's
 * wire protocol, agent/README.md) over whatever socket `connect` yields, on kept-alive
 * connections, so a backend chooses only the transport: a Unix socket on the host (Docker), or
 * TLS over TCP with a per-sandbox token where the agent runs on another machine (a cluster
 * backend: `connect` returns `tls.connect(...)` and `headers` carries the token).
 */
export interface AgentTransport {
  /**
   * A new connection to the agent (a net.Socket, or a tls.TLSSocket, which is one). It rejects with AgentUnreachable when there is nothing to
   * connect to (no socket yet, no address), or with the connect error itself (ENOENT,
   * ECONNREFUSED...), which tells the client that the request was never delivered.
   */
  connect(): Promise<Socket>;
  /** Sent with every request (e.g. the sandbox's token); none on a host-local socket. */
  readonly headers?: Readonly<Record<string, string>>;
  /** A connection failed before delivery: look the address up again on the next `connect`. */
  reset?(): void;
}

/** There is no agent to connect to: the caller may use another way (the engine's exec). */
export class AgentUnreachable extends Error {}

/**
 * The agent's Unix socket on this host. `resolve` yields the path to connect to; it is asked
 * once and again after `reset` (an agent recreates its socket when its sandbox restarts).
 */
export class UnixSocketTransport implements AgentTransport {
  private path?: string;

  constructor(private readonly resolve: () => Promise<string>) {}

  async connect(): Promise<Socket> {
    this.path ??= await this.resolve();
    const socket = netConnect(this.path);
    return new Promise((resolve, reject) => {
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(socket);
      });
      socket.once('error', reject);
    });
  }

  reset(): void {
    this.path = undefined;
  }
}
