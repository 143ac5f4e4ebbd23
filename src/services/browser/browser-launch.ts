/**
 * How Chromium is started inside a sandbox. Chromium binds its debugging port to 127.0.0.1
 * inside the sandbox whatever its flags say; the backend's browser relay makes that port
 * reachable from the service (and from nothing else).
 */

/** Chromium's debugging port inside the sandbox. */
export const DEBUG_PORT = 9222;
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
 * Starts Chromium when it is not running, detached (setsid, every stream redirected) so the
 * exec returns at once, then waits until the debugging endpoint answers. Idempotent, so a
 * crashed browser is started again by the next call. A pid file counts only while its pid runs
 * the expected executable: /tmp outlives a restart of the sandbox, where old pids come back as
 * other processes.
 */
export const LAUNCH_SCRIPT = `set -u
command -v chromium >/dev/null 2>&1 || exit ${NO_CHROMIUM_EXIT}
alive() { [ "$(readlink "/proc/$(cat "$1" 2>/dev/null)/exe" 2>/dev/null)" = "$2" ]; }
if ! alive /tmp/sandboxd-chromium.pid /usr/lib/chromium/chromium; then
  profile=$(mktemp -d /tmp/sandboxd-chromium-XXXXXX)
  setsid chromium ${CHROMIUM_FLAGS.join(' ')} --user-data-dir="$profile" about:blank </dev/null >/tmp/sandboxd-chromium.log 2>&1 &
  echo $! >/tmp/sandboxd-chromium.pid
fi
for _ in $(seq 150); do
  curl -sf -o /dev/null --max-time 1 http://127.0.0.1:${DEBUG_PORT}/json/version && exit 0
  sleep 0.1
done
echo "Chromium did not open its debugging port:"
tail -n 5 /tmp/sandboxd-chromium.log
exit 1
`;
