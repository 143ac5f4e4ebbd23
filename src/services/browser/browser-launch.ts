/**
 * How Chromium is started inside a sandbox and reached from the service. Chromium binds its
 * debugging port to 127.0.0.1 inside the sandbox whatever its flags say, so socat relays it
 * onto the sandbox's bridge address; the relay takes connections from the bridge gateway (the
 * host) only, so other sandboxes on the same bridge cannot drive this one's browser.
 */

/** Chromium's debugging port inside the sandbox. */
export const DEBUG_PORT = 9222;
/** The relay's port on the sandbox's bridge address. */
export const RELAY_PORT = 9223;
/** The size screenshots and layouts use. */
export const VIEWPORT = { width: 1280, height: 720 } as const;

/** Exit status of the launch script when the image has no Chromium. */
export const NO_CHROMIUM_EXIT = 3;

/**
 * Flags for a closed network: no background traffic, no updates, no QUIC; the sandbox is the
 * isolation, hence --no-sandbox (Chromium's own sandbox needs namespaces the container lacks).
 */
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
  `--window-size=${VIEWPORT.width},${VIEWPORT.height}`,
  `--remote-debugging-port=${DEBUG_PORT}`,
];

/**
 * Starts Chromium and the relay when they are not running, detached (setsid, every stream
 * redirected) so the exec returns at once, then waits until the debugging endpoint answers.
 * `$1` is the sandbox's bridge address. Idempotent, so a crashed browser is started again by
 * the next call. A pid file counts only while its pid runs the expected executable: /tmp
 * outlives a restart of the sandbox, where old pids come back as other processes.
 */
export const LAUNCH_SCRIPT = `set -u
command -v chromium >/dev/null 2>&1 || exit ${NO_CHROMIUM_EXIT}
alive() { [ "$(readlink "/proc/$(cat "$1" 2>/dev/null)/exe" 2>/dev/null)" = "$2" ]; }
if ! alive /tmp/sandboxd-chromium.pid /usr/lib/chromium/chromium; then
  profile=$(mktemp -d /tmp/sandboxd-chromium-XXXXXX)
  setsid chromium ${CHROMIUM_FLAGS.join(' ')} --user-data-dir="$profile" about:blank </dev/null >/tmp/sandboxd-chromium.log 2>&1 &
  echo $! >/tmp/sandboxd-chromium.pid
fi
if ! alive /tmp/sandboxd-relay.pid /usr/bin/socat; then
  h=$(awk '$2 == "00000000" { print $3; exit }' /proc/net/route)
  gateway=$(printf '%d.%d.%d.%d' 0x\${h:6:2} 0x\${h:4:2} 0x\${h:2:2} 0x\${h:0:2})
  setsid socat TCP-LISTEN:${RELAY_PORT},bind="$1",fork,reuseaddr,range="$gateway"/32 TCP:127.0.0.1:${DEBUG_PORT} </dev/null >/tmp/sandboxd-relay.log 2>&1 &
  echo $! >/tmp/sandboxd-relay.pid
fi
for _ in $(seq 150); do
  curl -sf -o /dev/null --max-time 1 http://127.0.0.1:${DEBUG_PORT}/json/version && exit 0
  sleep 0.1
done
echo "Chromium did not open its debugging port:"
tail -n 5 /tmp/sandboxd-chromium.log
exit 1
`;
