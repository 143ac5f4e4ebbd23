# shellcheck shell=bash
# What setup installs in each mode, and the one line it prints before any work saying what it
# will do and about how long. Sourced by setup.sh; the functions depend only on their arguments,
# so test/unit/setup-plan.test.ts calls them directly.

# Debian packages that serving needs (`npm start`, `setup.sh --serve`):
#   docker.io        the engine sandboxes run on
#   iptables         sandboxd's own packet-filter chains (README, "Security model"); docker.io
#                    pulls it in today, named here because sandboxd runs it itself
#   runsc            gVisor, the restrictive profile's runtime (from bookworm-backports, see setup.sh)
#   mmdebstrap       builds the catalog images from Debian packages (src/images/)
#   git              a sandbox made from a git source is cloned on the host (src/backends/docker/git-source.ts)
#   golang-go        the in-sandbox agent is a static Go binary built here (agent/)
#   ca-certificates  apt, npm and mmdebstrap over https
#   g++ make python3 npm compiles better-sqlite3 from source when its prebuilt binary cannot be
#                    downloaded, as on hosts that reach only the npm registry
# btrfs-progs (Docker's storage, for disk_mb) comes from bookworm-backports in the storage step.
SERVE_PACKAGES=(docker.io iptables runsc mmdebstrap git golang-go ca-certificates g++ make python3)
# Only the tests need these (`npm test`, `.ci/run`: plain `setup.sh`). They are installed without
# their recommends, and prometheus's daemon, which Debian enables on systemd hosts, is disabled:
#   prometheus       its promtool checks the /metrics exposition
#   chromium         the dashboard's end-to-end tests drive it through playwright-core (a
#                    sandbox's browser runs in the browser image, not on the host)
#   zsh              the CLI's zsh completion script is tested in a real zsh
#   systemd          its systemd-analyze verifies deploy/sandboxd.service (nothing is started)
#   haproxy          runs deploy/haproxy.cfg in front of replicas (its own service is not started
#                    where there is no systemd, and disabled where there is)
TEST_PACKAGES=(prometheus chromium zsh systemd haproxy)

# setup_packages MODE: the Debian packages of MODE (serve or full), on one line.
setup_packages() {
  if [ "$1" = serve ]; then echo "${SERVE_PACKAGES[*]}"; else echo "${SERVE_PACKAGES[*]} ${TEST_PACKAGES[*]}"; fi
}

# Seconds each step took on a fresh 2-core machine (bench/fresh-machine.sh, at a load of 6-10),
# for the estimate.
# Setup runs two tracks at once: apt and Docker's steps in the foreground, npm's and the other
# builds in the background; the images start when both the packages and the build are there.
EST_DOCKER=95        # Debian packages for serving, Docker and gVisor among them, from nothing
EST_TEST_PACKAGES=42 # chromium, prometheus, zsh, systemd and haproxy on top
EST_PACKAGE=5        # any other missing package
EST_NPM_CI=40        # root node_modules, without better-sqlite3's compile
EST_ADDONS=100       # better-sqlite3's compile, beside the rest
EST_BUILD=20         # tsc
EST_WEB=15           # the dashboard: npm ci and vite
EST_AGENT=30         # go build with a cold cache, beside the images
EST_IMAGES=40        # the base image (a bootstrap of Debian), or the first image
EST_IMAGE=10         # each further image: a layer on base, beside the others

# setup_estimate MISSING NPM_CI BUILD WEB AGENT IMAGES: the line setup prints first.
#   MISSING  the missing Debian packages, space-separated ('' when none)
#   NPM_CI, BUILD, WEB, AGENT  1 when node_modules, dist, the dashboard or the agent is to be made
#   IMAGES   how many images are absent
# Prints nothing when there is nothing to do.
setup_estimate() {
  local missing="$1" npm_ci="$2" build="$3" web="$4" agent="$5" images="$6"
  local -a what=() builds=()
  local packages=0 background=0 seconds pkg count=0 tests=0 fresh=0 i
  for pkg in $missing; do
    count=$((count + 1))
    [ "$pkg" != docker.io ] || fresh=1
    [[ " ${TEST_PACKAGES[*]} " != *" $pkg "* ]] || tests=1
  done
  if [ "$fresh" = 1 ]; then
    what+=("installing Docker and gVisor ($count Debian packages)")
    packages=$((EST_DOCKER + tests * EST_TEST_PACKAGES))
  elif [ "$count" -gt 0 ]; then
    what+=("installing $missing")
    packages=$((tests == 1 ? EST_TEST_PACKAGES : count * EST_PACKAGE))
  fi
  if [ "$npm_ci" = 1 ]; then what+=("npm ci"); background=$EST_NPM_CI; fi
  if [ "$build" = 1 ]; then builds+=("sandboxd"); background=$((background + EST_BUILD)); fi
  if [ "$web" = 1 ]; then builds+=("the dashboard"); fi
  if [ "$agent" = 1 ]; then builds+=("the agent"); fi
  # The images wait for the packages and the build, whichever comes last; the rest ends beside them.
  seconds=$((packages > background ? packages : background))
  if [ "$images" -gt 0 ]; then
    if [ "$images" = 1 ]; then builds+=("1 image"); else builds+=("$images images"); fi
    seconds=$((seconds + EST_IMAGES + (images - 1) * EST_IMAGE))
  fi
  [ "$npm_ci" = 0 ] || [ "$seconds" -ge "$EST_ADDONS" ] || seconds=$EST_ADDONS
  [ "$web" = 0 ] || [ "$seconds" -ge "$EST_WEB" ] || seconds=$EST_WEB
  [ "$agent" = 0 ] || [ "$seconds" -ge $((packages + EST_AGENT)) ] || seconds=$((packages + EST_AGENT))
  if [ ${#builds[@]} -gt 0 ]; then
    local list="${builds[0]}" last=$((${#builds[@]} - 1))
    for ((i = 1; i < last; i++)); do list+=", ${builds[i]}"; done
    [ "$last" = 0 ] || list+=" and ${builds[last]}"
    what+=("building $list")
  fi
  [ ${#what[@]} -gt 0 ] || return 0
  local line="${what[0]}"
  for ((i = 1; i < ${#what[@]}; i++)); do line+="; ${what[i]}"; done
  [ "$fresh" = 0 ] || line="a fresh machine: $line"
  echo "$line; $(duration_range "$seconds")"
}

# duration_range SECONDS: "about 40 s" or "about 2-3 minutes", leaving room for a slower mirror.
duration_range() {
  local low=$(($1 * 85 / 100)) high=$(($1 * 115 / 100))
  if [ "$high" -lt 90 ]; then
    echo "about $(((($1 + 5) / 10) * 10)) s"
    return
  fi
  local from=$(((low + 30) / 60)) to=$(((high + 30) / 60))
  [ "$from" -ge 1 ] || from=1
  [ "$to" -ge "$from" ] || to=$from
  if [ "$from" = "$to" ]; then echo "about $from minutes"; else echo "about $from-$to minutes"; fi
}
