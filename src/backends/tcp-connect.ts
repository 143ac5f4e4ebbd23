import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { ServiceError } from '../errors.js';

/** How long a TCP connect to an instance may take before it is given up. */
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * A TCP connection to `host:port`, resolved once connected; BAD_GATEWAY (naming the port) when
 * it is refused, times out or fails otherwise: nothing there answers.
 */
export function connectTcp(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    socket.setTimeout(CONNECT_TIMEOUT_MS, () => socket.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    socket.once('connect', () => {
      socket.setTimeout(0);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      reject(new ServiceError('BAD_GATEWAY', `nothing listens on port ${port} in the sandbox (${err.code ?? err.message})`));
    });
  });
}
