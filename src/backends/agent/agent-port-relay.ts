import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { ServiceError, badRequest } from '../../errors.js';
import { AgentUnreachable, type AgentTransport } from './agent-transport.js';

/** Connection errors that mean there is no agent listening (yet, or any more). */
const NO_AGENT = new Set(['ENOENT', 'ECONNREFUSED', 'ENOTSOCK']);

/**
 * A connection to `port` on the sandbox's loopback, through its agent: a fresh connection to
 * the agent asks `GET /v1/ports/{port}` with `Upgrade: tcp` (agent/relay.go), and after the
 * 101 it carries the port's TCP stream as it is. BAD_GATEWAY when nothing listens on the port;
 * AgentUnreachable when no agent answers (the caller may connect another way).
 */
export async function openPortRelay(transport: AgentTransport, port: number): Promise<Socket> {
  const connection = await connectOnce(transport);
  return new Promise((resolve, reject) => {
    const request = httpRequest({
      createConnection: () => connection,
      method: 'GET',
      path: `/v1/ports/${port}`,
      headers: { ...transport.headers, host: 'agent', connection: 'Upgrade', upgrade: 'tcp' },
    });
    request.once('upgrade', (_response, socket: Socket, head: Buffer) => {
      if (head.length) socket.unshift(head);
      resolve(socket);
    });
    request.once('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () => {
        connection.destroy();
        let message = `HTTP ${response.statusCode}`;
        try {
          message = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: string }).error ?? message;
        } catch {
          // The status says enough.
        }
        if (response.statusCode === 502) reject(new ServiceError('BAD_GATEWAY', message));
        else if (response.statusCode === 400) reject(badRequest(message));
        // An agent that predates the relay answers 404: there is no way in but the network.
        else if (response.statusCode === 404) reject(new AgentUnreachable('the sandbox agent has no port relay (it predates it)'));
        else reject(new ServiceError('INTERNAL', `the sandbox agent failed to relay port ${port}: ${message}`));
      });
    });
    request.once('error', (err) => {
      connection.destroy();
      reject(err);
    });
    request.end();
  });
}

/** A new connection to the agent, tried once more after a reset when nothing answered. */
async function connectOnce(transport: AgentTransport): Promise<Socket> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await transport.connect();
    } catch (err) {
      if (!(err instanceof AgentUnreachable) && !NO_AGENT.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
      transport.reset?.();
      if (attempt > 0) throw err instanceof AgentUnreachable ? err : new AgentUnreachable((err as Error).message);
    }
  }
}
