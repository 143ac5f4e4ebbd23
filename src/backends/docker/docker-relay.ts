import { conflict, notFound, ServiceError, UnsupportedError } from '../../errors.js';
import type { ExecRequest, ExecResult, InstanceState } from '../backend.js';

/**
 * The Docker backend's relay to a port a program binds to the sandbox's loopback (Chromium's
 * debugging port): socat in the sandbox listens on the sandbox's bridge address and forwards
 * to the loopback port, and it takes connections from the bridge gateway (the host) only, so
 * other sandboxes on the same bridge cannot reach it.
 */

/** The relay listens this many ports above the port it relays (9223 for Chromium's 9222). */
export const RELAY_PORT_OFFSET = 1;

/** Exit status of the relay script when the image has no socat. */
const NO_SOCAT_EXIT = 3;
const RELAY_TIMEOUT_MS = 10_000;

/**
 * Starts the relay when it is not running (detached, like the program it relays) and waits
 * until it listens. `$1` is the sandbox's bridge address, `$2` the loopback port, `$3` the
 * relay's port. The pid file is per relayed port and counts only while its pid runs socat.
 */
const RELAY_SCRIPT = `set -u
command -v socat >/dev/null 2>&1 || exit ${NO_SOCAT_EXIT}
pidfile=/tmp/sandboxd-relay-$2.pid
if [ "$(readlink "/proc/$(cat "$pidfile" 2>/dev/null)/exe" 2>/dev/null)" != /usr/bin/socat ]; then
  h=$(awk '$2 == "00000000" { print $3; exit }' /proc/net/route)
  gateway=$(printf '%d.%d.%d.%d' 0x\${h:6:2} 0x\${h:4:2} 0x\${h:2:2} 0x\${h:0:2})
  setsid socat TCP-LISTEN:"$3",bind="$1",fork,reuseaddr,range="$gateway"/32 TCP:127.0.0.1:"$2" </dev/null >/tmp/sandboxd-relay-$2.log 2>&1 &
  echo $! >"$pidfile"
fi
listening=$(printf ':%04X' "$3")
for _ in $(seq 100); do
  awk -v port="$listening" '$2 ~ port"$" && $4 == "0A" { found = 1 } END { exit !found }' /proc/net/tcp && exit 0
  sleep 0.05
done
echo "the relay did not start listening:"
tail -n 5 "/tmp/sandboxd-relay-$2.log"
exit 1
`;

/**
 * Starts (or finds) the relay of loopback `port` in container `id`, whose state is `state`, by
 * running the relay script through `exec`; the URL the server connects to.
 */
export async function startRelay(
  id: string,
  state: InstanceState | null,
  port: number,
  exec: (request: ExecRequest) => Promise<ExecResult>,
): Promise<string> {
  if (!state) throw notFound(`container '${id}' not found`);
  if (!state.ip) throw conflict(`container '${id}' has no network address: is it running, with a network?`);
  const relayPort = port + RELAY_PORT_OFFSET;
  const result = await exec({ command: ['bash', '-c', RELAY_SCRIPT, 'relay', state.ip, String(port), String(relayPort)], timeout_ms: RELAY_TIMEOUT_MS, keep_background: true });
  if (result.exit_code === NO_SOCAT_EXIT) throw new UnsupportedError('docker', 'relaying a port of a sandbox whose image has no socat');
  if (result.exit_code !== 0) throw new ServiceError('INTERNAL', `the relay of port ${port} did not start: ${result.output.trim()}`);
  return `http://${state.ip}:${relayPort}`;
}
