import { createRequire } from 'node:module';
import Docker from 'dockerode';

/** The HTTP wrapper of docker-modem, which follows redirects up to `maxRedirects`. */
interface ModemHttp {
  maxRedirects: number;
}

/**
 * docker-modem sends every Engine API request through its own copy of follow-redirects, which
 * follows a 3xx to wherever its Location points, over TCP, with no error listener on the new
 * request. The engine answers some malformed paths with a redirect (`/images/../HOST:PORT/x/json`
 * becomes `Location: /HOST:PORT/x/json`), so a followed redirect is a request from the host to a
 * place a client chose, and a refused connection there is an uncaught error. With a maximum of
 * 0, a redirect fails the original request instead (handled by the modem like any other error)
 * and nothing is sent to the Location.
 */
function refuseRedirects(): void {
  const fromDockerode = createRequire(createRequire(import.meta.url).resolve('dockerode'));
  const modemHttp = fromDockerode('docker-modem/lib/http.js') as ModemHttp;
  modemHttp.maxRedirects = 0;
}

refuseRedirects();

/** A Docker Engine client on `socketPath` (the default socket when omitted) that never follows a redirect. */
export function createDockerClient(socketPath?: string): Docker {
  return new Docker(socketPath ? { socketPath } : undefined);
}
