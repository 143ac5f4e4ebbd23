#!/usr/bin/env bash
# Prepares this machine for sandboxd: Debian packages, Docker with the gVisor runtime,
# node_modules, the TypeScript build, the dashboard and the sandbox images. Idempotent; on a machine that
# already has everything it only checks (a few seconds), so `npm test` runs it every time.
#
# Usage: bash scripts/setup.sh [--quiet] [--images "base python node"]
#   --quiet     print only what is being changed, not what is already in place
#   --images    catalog images to build when absent or stale (default: base python node,
#               the images that /run picks from a command; browser is built on demand);
#               the environment variable SANDBOXD_SETUP_IMAGES does the same
#   SANDBOXD_SETUP_SKIP_IMAGES=1 skips the image phase (e.g. a machine without a mirror)
set -euo pipefail

QUIET=0
IMAGES="${SANDBOXD_SETUP_IMAGES:-base python node}"
while [ $# -gt 0 ]; do
  case "$1" in
    --quiet | -q) QUIET=1 ;;
    --images) IMAGES="${2:?--images needs a list, e.g. --images \"base python\"}"; shift ;;
    --images=*) IMAGES="${1#--images=}" ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "setup: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# g++, make and python3: npm compiles native addons (better-sqlite3) from source when their
# prebuilt binaries cannot be downloaded, as on hosts that reach only the npm registry.
# prometheus: its promtool checks the /metrics exposition in the tests. Only the tool is
# wanted: it is installed without its recommends (node exporter and friends), and the
# prometheus daemon that Debian enables on systemd hosts is disabled right after.
# chromium: the dashboard's end-to-end test drives Debian's Chromium through playwright-core.
# zsh: the CLI's zsh completion script is tested in a real zsh.
# iptables: sandboxd's own packet-filter chains (README, 'Security model'); docker.io pulls it
# in today, named here because sandboxd runs it itself.
PACKAGES=(docker.io iptables runsc mmdebstrap git golang-go ca-certificates g++ make python3 prometheus chromium zsh)
TOOL_ONLY_PACKAGES=(prometheus chromium zsh)
# --network=none: gVisor's own netstack does not work on this kind of host.
# --host-uds=create: the agent's socket, created inside the sandbox, must be visible to the host.
RUNSC_ARGS='["--network=none","--host-uds=create"]'
DAEMON_JSON=/etc/docker/daemon.json
DOCKERD_LOG=/var/log/dockerd.log

say() { [ "$QUIET" = 1 ] || echo "setup: $*"; }  # state that needs no action
act() { echo "setup: $*"; }                        # a change, always shown
die() { echo "setup: error: $*" >&2; exit 1; }
# apt's download and unpack lines as progress (`setup:   Unpacking git ...`) instead of minutes of silence.
apt_progress() { grep --line-buffered -E '^(Get:|Unpacking|Setting up)' | sed -u 's/^/setup:   /' || true; }
has_systemd() { [ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ]; }
wait_for_docker() {
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
  die "dockerd did not answer within 30 s; see ${DOCKERD_LOG} or journalctl -u docker"
}
# Debian's bookworm-backports in apt's sources (from the mirror apt already uses), index fresh.
ensure_backports() {
  local backports=/etc/apt/sources.list.d/bookworm-backports.sources mirror
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    # The mirror this machine's apt already uses for bookworm (deb822 or one-line sources).
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$mirror" ] || die "no Debian mirror found in apt's sources for bookworm-backports; add bookworm-backports to them and rerun"
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$mirror" >"$backports"
    act "added Debian's bookworm-backports ($mirror) to apt's sources ($backports)"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/setup-storage.sh
. scripts/setup-storage.sh

if [ "$(id -u)" != 0 ]; then
  die "run as root (it installs Debian packages and configures dockerd): sudo bash scripts/setup.sh"
fi
command -v node >/dev/null || die "Node.js >= 20.19 is required and not on PATH (Debian's nodejs is too old; install Node 20 or 22)"
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' ||
  die "Node.js >= 20.19 is required, found $(node --version)"

# --- Docker's storage before dockerd first runs: installing docker.io starts it on systemd hosts,
# and moving its data-root later needs a restart. ----------------------------------------------
storage_done=0
if ! command -v dockerd >/dev/null && [ "${SANDBOXD_SETUP_DISK_QUOTA:-}" != 0 ]; then
  ensure_btrfs_progs
  mkdir -p "$(dirname "$DAEMON_JSON")"
  setup_storage "$DAEMON_JSON"
  storage_done=1
fi

# --- Debian packages: install only what is missing, refreshing the index once. -------------
missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  act "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  full=() lean=()
  for pkg in "${missing[@]}"; do
    if [[ " ${TOOL_ONLY_PACKAGES[*]} " == *" $pkg "* ]]; then lean+=("$pkg"); else full+=("$pkg"); fi
  done
  [ ${#full[@]} -eq 0 ] || apt-get install -y -q -o Dpkg::Progress-Fancy=0 "${full[@]}" | apt_progress
  if [ ${#lean[@]} -gt 0 ]; then
    apt-get install -y -q -o Dpkg::Progress-Fancy=0 --no-install-recommends "${lean[@]}" | apt_progress
    if has_systemd; then systemctl disable --now "${lean[@]}" >/dev/null 2>&1 || true; fi
  fi
else
  say "packages present: ${PACKAGES[*]}"
fi

# --- runsc: one that accepts coreutils' statx. ------------------------------------------------
# Debian bookworm's runsc (2022-12-19) answers statx and fstatat with AT_NO_AUTOMOUNT, which
# coreutils passes, with EINVAL: `ls -la` and `stat` fail in every restrictive sandbox. The
# runsc of bookworm-backports (2024-07-29) accepts it. Containers that an older runsc started
# keep running; stop them before this upgrade where a stop must not fail.
RUNSC_MIN_DATE=20240729
runsc_date() { runsc --version 2>/dev/null | grep -o '[0-9]\{8\}' | head -n 1; }
if [ "$(runsc_date || echo 0)" -lt "$RUNSC_MIN_DATE" ]; then
  . /etc/os-release
  [ "${VERSION_CODENAME:-}" = bookworm ] ||
    die "runsc $(runsc_date) rejects coreutils' statx; install a runsc of ${RUNSC_MIN_DATE} or later (gVisor) and rerun"
  ensure_backports
  act "installing runsc from bookworm-backports (found $(runsc_date), need ${RUNSC_MIN_DATE} or later)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Progress-Fancy=0 -t bookworm-backports runsc | apt_progress
else
  say "runsc $(runsc_date) accepts coreutils' statx"
fi

# --- daemon.json: merge the runsc runtime in, keeping everything else. ---------------------
runsc_path="$(command -v runsc)"
mkdir -p "$(dirname "$DAEMON_JSON")"
daemon_change="$(DAEMON_JSON="$DAEMON_JSON" RUNSC_PATH="$runsc_path" RUNSC_ARGS="$RUNSC_ARGS" node -e '
  const fs = require("node:fs");
  const file = process.env.DAEMON_JSON;
  let text = "";
  try { text = fs.readFileSync(file, "utf8"); } catch (e) { if (e.code !== "ENOENT") throw e; }
  let config;
  try { config = text.trim() ? JSON.parse(text) : {}; }
  catch (e) { console.error(`setup: error: ${file} is not valid JSON (${e.message}); fix it and rerun`); process.exit(1); }
  const wanted = JSON.parse(process.env.RUNSC_ARGS);
  const runtime = config.runtimes?.runsc ?? {};
  // Keep any other runsc flags the admin chose; replace only the ones we set.
  const ours = wanted.map((a) => a.split("=")[0]);
  const args = (runtime.runtimeArgs ?? []).filter((a) => !ours.includes(a.split("=")[0]));
  const next = { ...config, runtimes: { ...config.runtimes, runsc: { ...runtime, path: process.env.RUNSC_PATH, runtimeArgs: [...args, ...wanted] } } };
  if (JSON.stringify(next) !== JSON.stringify(config)) {
    fs.writeFileSync(file, JSON.stringify(next, null, 2) + "\n");
    console.log("changed");
  }
')"
if [ "$daemon_change" = changed ]; then act "registered the runsc runtime in $DAEMON_JSON"; else say "$DAEMON_JSON has runsc"; fi

# --- Docker's storage: btrfs with quotas, so that disk_mb is enforced (setup-storage.sh). -------
if [ "$storage_done" != 1 ]; then
  [ "${SANDBOXD_SETUP_DISK_QUOTA:-}" = 0 ] || ensure_btrfs_progs
  setup_storage "$DAEMON_JSON"
fi

# --- dockerd: running, and aware of runsc. -------------------------------------------------
# dockerd must list runsc with exactly the flags daemon.json gives it.
runsc_registered() {
  docker info --format '{{json .Runtimes.runsc}}' 2>/dev/null | node -e '
    const fs = require("node:fs");
    const live = JSON.parse(fs.readFileSync(0, "utf8").trim() || "null");
    const want = JSON.parse(fs.readFileSync(process.argv[1], "utf8")).runtimes.runsc;
    const same = live && live.path === want.path && JSON.stringify(live.runtimeArgs ?? []) === JSON.stringify(want.runtimeArgs);
    process.exit(same ? 0 : 1);
  ' "$DAEMON_JSON"
}

started=0
if ! docker info >/dev/null 2>&1; then
  if has_systemd; then
    act "starting docker (systemctl)"
    systemctl start docker
  else
    act "starting dockerd (log: ${DOCKERD_LOG})"
    # setsid: dockerd must outlive this script and whatever process group runs it.
    setsid nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
  fi
  wait_for_docker
  started=1
else
  say "dockerd is running"
fi
if ! runsc_registered; then
  [ "$started" = 0 ] || die "dockerd started without the runsc runtime of ${DAEMON_JSON}; see ${DOCKERD_LOG}"
  act "reloading dockerd to pick up the runsc runtime"
  if has_systemd; then
    systemctl reload docker
  else
    # SIGHUP makes dockerd re-read daemon.json; runtimes are among the reloadable options.
    pid="$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd || true)"
    [ -n "$pid" ] || die "dockerd answers but its pid is unknown; restart it to load ${DAEMON_JSON}"
    kill -HUP $pid
  fi
  for _ in $(seq 1 20); do runsc_registered && break; sleep 0.5; done
  runsc_registered || die "dockerd does not list the runsc runtime of ${DAEMON_JSON} after a reload; restart dockerd"
else
  say "dockerd lists the runsc runtime"
fi

# --- node_modules: reinstall when missing or older than the lockfile. ----------------------
# A node_modules that is a symbolic link (a git worktree sharing another checkout's) belongs to
# that checkout: npm ci would empty it through the link.
if [ -f package-lock.json ] && [ ! -L node_modules ]; then
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    act "npm ci"
    npm ci --no-audit --no-fund --no-update-notifier --loglevel=error
  else
    say "node_modules is up to date"
  fi
elif [ ! -d node_modules ]; then
  act "npm install (no package-lock.json)"
  npm install --no-audit --no-fund --no-update-notifier --loglevel=error
fi

# --- TypeScript build: when a source or config file is newer than the last build. ----------
stamp=dist/.setup-build-stamp
if [ ! -f "$stamp" ] || [ -n "$(find src bench tsconfig.json package.json -newer "$stamp" -print -quit 2>/dev/null)" ]; then
  act "npm run build"
  npm run --silent build
  chmod +x dist/src/cli/main.js
  touch "$stamp"
else
  say "dist is up to date"
fi

# --- The dashboard: web/ is its own package (own lockfile and node_modules), built by Vite into
# dist/web, which the server serves at /ui/ and /docs. Rebuilt only when its sources change. ----
web_stamp=dist/web/.setup-build-stamp
if [ ! -f web/node_modules/.package-lock.json ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
  act "npm ci in web/ (the dashboard)"
  (cd web && npm ci --no-audit --no-fund --no-update-notifier --loglevel=error)
fi
if [ ! -f "$web_stamp" ] || [ -n "$(find web/src web/index.html web/vite.config.ts web/package.json web/package-lock.json -newer "$web_stamp" -print -quit)" ]; then
  act "building the dashboard (web/ -> dist/web)"
  (cd web && npm run --silent build >/dev/null)
  touch "$web_stamp"
else
  say "the dashboard is up to date"
fi

# --- The in-sandbox agent: a static Go binary (standard library only, built offline). --------
agent_bin=dist/agent/sandboxd-agent
if [ ! -f "$agent_bin" ] || [ -n "$(find agent -newer "$agent_bin" -print -quit)" ]; then
  act "building the sandbox agent ($agent_bin)"
  mkdir -p dist/agent
  (cd agent && CGO_ENABLED=0 GOFLAGS=-mod=mod GOPROXY=off go build -trimpath -ldflags '-s -w' -o "../$agent_bin" .)
else
  say "the sandbox agent is up to date"
fi

# --- Images: build the ones that are absent or stale (the CLI skips fresh ones). ----------
if [ "${SANDBOXD_SETUP_SKIP_IMAGES:-0}" = 1 ]; then
  say "skipping images (SANDBOXD_SETUP_SKIP_IMAGES=1)"
elif [ ! -f dist/src/cli/main.js ]; then
  act "warning: dist/src/cli/main.js is missing, cannot build images ($IMAGES)"
else
  # Progress goes to stderr as it happens; stdout has one result line per image.
  # shellcheck disable=SC2086 # IMAGES is a space-separated list of names
  out="$(node dist/src/cli/main.js images build $IMAGES)" || die "building images ($IMAGES) failed, see above"
  while IFS= read -r line; do
    case "$line" in
      built\ *) act "$line" ;;
      *) say "$line" ;;
    esac
  done <<<"$out"
fi

# --- `sandboxd` on the PATH: a link to this checkout's CLI, as `npm link` makes. -------------
# shellcheck source=scripts/setup-link.sh
. scripts/setup-link.sh
link_cli /usr/local/bin/sandboxd "$PWD"
