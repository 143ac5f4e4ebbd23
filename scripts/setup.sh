#!/usr/bin/env bash
# Prepares this machine for sandboxd: Debian packages, Docker with the gVisor runtime,
# node_modules, the TypeScript build, the dashboard and the sandbox images. Idempotent; on a machine that
# already has everything it only checks (a few seconds), so `npm test` runs it every time.
# Before any work it prints one line saying what it will do and about how long. npm ci, the
# builds and better-sqlite3's compile run in the background beside apt (a failed one's log is
# printed); the images build at once when the packages and the TypeScript build are there.
#
# Usage: bash scripts/setup.sh [--serve] [--quiet] [--images "base python node"]
#   --serve     only what serving needs (`npm start`): no test-only packages (chromium,
#               prometheus, zsh, haproxy; `npm test` runs plain setup, which adds them)
#   --quiet     print only what is being changed, not what is already in place
#   --images    catalog images to build when absent or stale, at once (default: base python node,
#               the images that /run picks from a command; browser is built on demand);
#               the environment variable SANDBOXD_SETUP_IMAGES does the same
#   --dry-run   print that first line (what would be done, about how long) and change nothing
#   --print-packages  print the Debian packages of the mode (with --serve: serving's) and exit
#   SANDBOXD_SETUP_SKIP_IMAGES=1 skips the image phase (e.g. a machine without a mirror)
set -euo pipefail

QUIET=0
MODE=full
RUN=all
IMAGES="${SANDBOXD_SETUP_IMAGES:-base python node}"
while [ $# -gt 0 ]; do
  case "$1" in
    --serve) MODE=serve ;;
    --quiet | -q) QUIET=1 ;;
    --images) IMAGES="${2:?--images needs a list, e.g. --images \"base python\"}"; shift ;;
    --images=*) IMAGES="${1#--images=}" ;;
    --dry-run) RUN=estimate ;;
    --print-packages) RUN=packages ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "setup: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/setup-plan.sh
. scripts/setup-plan.sh
read -r -a PACKAGES <<<"$(setup_packages "$MODE")"
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
# apt-get install, quiet, with dpkg's progress lines and without an fsync per unpacked file
# (--force-unsafe-io, as Debian's container images set it): fsyncs cost dpkg much of its time on
# these VMs. An install cut short by a power loss may need reinstalling; setup reruns do that.
APT_INSTALL=(apt-get install -y -q -o Dpkg::Progress-Fancy=0 -o Dpkg::Options::=--force-unsafe-io)
# apt's index, refreshed at most once a run: the storage, package and runsc steps all need it.
APT_FRESH=0
apt_update() {
  [ "$APT_FRESH" = 1 ] || DEBIAN_FRONTEND=noninteractive apt-get update -qq
  APT_FRESH=1
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
    APT_FRESH=0
  fi
  apt_update
}

# --- What is missing, for the first line and for the steps below. ---------------------------
missing_packages() {
  local pkg
  for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$' || echo "$pkg"
  done
}
# A node_modules that is a symbolic link (a git worktree sharing another checkout's) belongs to
# that checkout: npm ci would empty it through the link.
needs_npm_ci() {
  [ -f package-lock.json ] && [ ! -L node_modules ] &&
    { [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; }
}
BUILD_STAMP=dist/.setup-build-stamp
needs_build() { [ ! -f "$BUILD_STAMP" ] || [ -n "$(find src bench tsconfig.json package.json -newer "$BUILD_STAMP" -print -quit 2>/dev/null)" ]; }
WEB_STAMP=dist/web/.setup-build-stamp
needs_web_ci() { [ ! -f web/node_modules/.package-lock.json ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; }
needs_web_build() { [ ! -f "$WEB_STAMP" ] || [ -n "$(find web/src web/index.html web/vite.config.ts web/package.json web/package-lock.json -newer "$WEB_STAMP" -print -quit)" ]; }
AGENT_BIN=dist/agent/sandboxd-agent
needs_agent() { [ ! -f "$AGENT_BIN" ] || [ -n "$(find agent -newer "$AGENT_BIN" -print -quit)" ]; }
# Images absent from Docker (all when Docker does not answer); a stale one is found later, by the CLI.
absent_images() {
  local name count=0
  for name in $IMAGES; do
    # Catalog tags are sandboxd/NAME:bookworm (src/images/catalog.ts).
    docker image inspect "sandboxd/$name:bookworm" >/dev/null 2>&1 || count=$((count + 1))
  done
  [ "${SANDBOXD_SETUP_SKIP_IMAGES:-0}" = 1 ] && count=0
  echo "$count"
}
flag() { if "$@"; then echo 1; else echo 0; fi; }

# shellcheck source=scripts/setup-storage.sh
. scripts/setup-storage.sh

if [ "$RUN" = packages ]; then echo "${PACKAGES[*]}"; exit 0; fi
web_needed=0
if needs_web_ci || needs_web_build; then web_needed=1; fi
npm_ci_needed="$(flag needs_npm_ci)"
estimate="$(setup_estimate "$(missing_packages | tr '\n' ' ')" "$npm_ci_needed" "$(flag needs_build)" "$web_needed" "$(flag needs_agent)" "$(absent_images)")"
if [ -n "$estimate" ]; then act "$estimate"; else say "nothing is missing: checking what is in place (a few seconds)"; fi
[ "$RUN" = all ] || exit 0

if [ "$(id -u)" != 0 ]; then
  die "run as root (it installs Debian packages and configures dockerd): sudo bash scripts/setup.sh"
fi
command -v node >/dev/null || die "Node.js >= 20.19 is required and not on PATH (Debian's nodejs is too old; install Node 20 or 22)"
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' ||
  die "Node.js >= 20.19 is required, found $(node --version)"

# --- Steps that need no dpkg run in the background, beside apt and Docker's steps, which wait
# on dpkg and the network more than on the CPU: npm ci with the TypeScript build, better-sqlite3's
# compile (once a compiler is there), the dashboard and the agent. The images wait for
# the TypeScript build only; setup waits for all before it ends.
BG_DIR="$(mktemp -d /tmp/sandboxd-setup-XXXXXX)"
# A step still running when setup stops (a failure elsewhere, Ctrl-C) is stopped with it.
kill_tree() {
  local child
  for child in $(pgrep -P "$1" || true); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
stop_background() {
  local file
  for file in "$BG_DIR"/*.pid; do
    if [ -f "$file" ]; then kill_tree "$(cat "$file")"; fi
  done
  rm -rf "$BG_DIR"
}
trap stop_background EXIT
# background NAME FUNCTION: runs FUNCTION with its output in NAME's log; its exit status and the
# seconds (setup's clock) it started and ended at land in a file, so that a step started by
# another background step can be waited for too.
background() {
  (
    started=$SECONDS
    set +e
    (
      set -e
      "$2"
    ) >"$BG_DIR/$1.log" 2>&1 </dev/null
    echo "$? $started $SECONDS" >"$BG_DIR/$1.status"
  ) &
  echo $! >"$BG_DIR/$1.pid"
}
# wait_for NAME: waits for a background step; when it failed, prints its log and stops.
wait_for() {
  [ -f "$BG_DIR/$1.pid" ] || return 0
  until [ -f "$BG_DIR/$1.status" ]; do sleep 0.2; done
  rm -f "$BG_DIR/$1.pid"
  local status started ended
  read -r status started ended <"$BG_DIR/$1.status"
  if [ "$status" != 0 ]; then
    sed 's/^/setup:   /' "$BG_DIR/$1.log" >&2
    die "$1 failed (its output is above)"
  fi
  act "$1 done ($((ended - started)) s, from ${started} s to ${ended} s)"
}
NPM_FLAGS=(--no-audit --no-fund --no-update-notifier --loglevel=error)
# node_modules when missing or older than the lockfile, without install scripts, then dist.
# better-sqlite3's install script (its compile, about a minute here) runs as a step of its own,
# `addons`, once the compiler is installed: the CLI that builds the images does not load it. The
# other install scripts are not run: ssh2's and cpu-features' optional addons (dockerode over
# ssh://, which sandboxd does not use, works without them) and protobufjs's version notice.
npm_step() {
  if needs_npm_ci; then
    npm ci --ignore-scripts "${NPM_FLAGS[@]}"
    background addons addons_step
  elif [ ! -d node_modules ]; then
    npm install "${NPM_FLAGS[@]}"
  fi
  if needs_build; then
    npm run --silent build
    chmod +x dist/src/cli/main.js
    touch "$BUILD_STAMP"
  fi
}
addons_step() {
  until [ -f "$BG_DIR/compiler.ready" ]; do sleep 0.2; done
  npm rebuild better-sqlite3 "${NPM_FLAGS[@]}"
}
# The dashboard: web/ is its own package (own lockfile and node_modules), built by Vite into
# dist/web, which the server serves at /ui/ and /docs. Rebuilt only when its sources change.
web_step() {
  if needs_web_ci; then (cd web && npm ci "${NPM_FLAGS[@]}"); fi
  if needs_web_build; then
    (cd web && npm run --silent build >/dev/null)
    touch "$WEB_STAMP"
  fi
}
# The in-sandbox agent: a static Go binary (standard library only, built offline).
agent_step() {
  mkdir -p dist/agent
  cd agent && CGO_ENABLED=0 GOFLAGS=-mod=mod GOPROXY=off go build -trimpath -ldflags '-s -w' -o "../$AGENT_BIN" .
}
if [ "$web_needed" = 1 ]; then
  act "building the dashboard (web/ -> dist/web, in the background)"
  background dashboard web_step
else
  say "the dashboard is up to date"
fi

# --- node_modules and dist, in the background from here on. --------------------------------
if needs_npm_ci || needs_build || [ ! -d node_modules ]; then
  what="npm run build"
  if [ "$npm_ci_needed" = 1 ]; then what="npm ci, then npm run build and better-sqlite3's compile"; fi
  act "$what (in the background)"
  background build npm_step
else
  say "node_modules and dist are up to date"
fi

# --- Docker's storage before dockerd first runs: installing docker.io starts it on systemd hosts,
# and moving its data-root later needs a restart. ----------------------------------------------
storage_done=0
if ! command -v dockerd >/dev/null && [ "${SANDBOXD_SETUP_DISK_QUOTA:-}" != 0 ]; then
  ensure_btrfs_progs
  mkdir -p "$(dirname "$DAEMON_JSON")"
  setup_storage "$DAEMON_JSON"
  storage_done=1
fi

# --- npm's install scripts compile better-sqlite3 from source where its prebuilt binary cannot
# be downloaded: the compiler comes before the other packages. ------------------------------
mapfile -t compiler < <(missing_packages | grep -x -E 'g\+\+|make|python3' || true)
if [ ${#compiler[@]} -gt 0 ] && [ "$npm_ci_needed" = 1 ]; then
  act "installing ${compiler[*]} (npm compiles better-sqlite3)"
  apt_update
  DEBIAN_FRONTEND=noninteractive "${APT_INSTALL[@]}" "${compiler[@]}" | apt_progress
fi
touch "$BG_DIR/compiler.ready"

# --- Debian packages: install only what is missing, refreshing the index once. -------------
# On bookworm a missing runsc comes from bookworm-backports in the same transaction (see the
# runsc step below): installing bookworm's own and then replacing it costs a second unpack.
mapfile -t missing < <(missing_packages)
if [ ${#missing[@]} -gt 0 ]; then
  act "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  runsc_spec=runsc
  if [[ " ${missing[*]} " == *" runsc "* ]] && [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = bookworm ]; then
    ensure_backports
    runsc_spec=runsc/bookworm-backports
  fi
  apt_update
  full=() lean=()
  for pkg in "${missing[@]}"; do
    if [[ " ${TEST_PACKAGES[*]} " == *" $pkg "* ]]; then lean+=("$pkg"); elif [ "$pkg" = runsc ]; then full+=("$runsc_spec"); else full+=("$pkg"); fi
  done
  [ ${#full[@]} -eq 0 ] || "${APT_INSTALL[@]}" "${full[@]}" | apt_progress
  if [ ${#lean[@]} -gt 0 ]; then
    "${APT_INSTALL[@]}" --no-install-recommends "${lean[@]}" | apt_progress
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
  DEBIAN_FRONTEND=noninteractive "${APT_INSTALL[@]}" -t bookworm-backports runsc | apt_progress
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

# --- The in-sandbox agent: a static Go binary (standard library only, built offline). --------
if needs_agent; then
  act "building the sandbox agent ($AGENT_BIN, in the background)"
  background agent agent_step
else
  say "the sandbox agent is up to date"
fi

# --- Images: build the ones that are absent or stale (the CLI skips fresh ones), at once. ----
wait_for build
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

wait_for addons
wait_for agent
wait_for dashboard

# --- `sandboxd` on the PATH: a link to this checkout's CLI, as `npm link` makes. -------------
# shellcheck source=scripts/setup-link.sh
. scripts/setup-link.sh
link_cli /usr/local/bin/sandboxd "$PWD"
