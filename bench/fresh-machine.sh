#!/usr/bin/env bash
# How long `npm start` takes on a fresh machine: from nothing to `GET /status` answering.
#
# Usage: sudo bash bench/fresh-machine.sh [COMMIT]   (default HEAD; run from a checkout)
#
# A fresh machine here is a container, privileged but for one capability, of a Debian bookworm tree made by mmdebstrap
# (variant `important`, as a Debian server install has it, plus ca-certificates), imported once
# as sandboxd-fresh/bookworm. Into it go the files of COMMIT (`git archive`: no node_modules, no
# dist), Node.js with npm and its headers from this host (Debian's nodejs is 18), this host's
# CA certificates, npm settings and apt settings (no DEP-11 indexes, gzipped indexes), and nothing else:
# apt's and npm's caches are cold. Inside, setup starts a dockerd of its own (Docker in Docker,
# its data on btrfs in a loop-mounted image, as on a host). The container is removed afterwards.
# Each line of setup's output is printed with the seconds since the start; the last line is the
# time to the first answer of /status. SANDBOXD_FRESH_KEEP=1 keeps the container.
set -euo pipefail
commit="${1:-HEAD}"
image=sandboxd-fresh/bookworm
name="sandboxd-fresh-$$"
work="$(mktemp -d /tmp/sandboxd-fresh-XXXXXX)"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! docker image inspect "$image" >/dev/null 2>&1; then
  echo "fresh: making $image (mmdebstrap --variant=important bookworm)" >&2
  mmdebstrap --quiet --variant=important --include=ca-certificates bookworm "$work/rootfs.tar"
  docker import "$work/rootfs.tar" "$image" >/dev/null
  rm -f "$work/rootfs.tar"
fi
git archive --format=tar --prefix=sandboxd/ "$commit" >"$work/src.tar"

cleanup() {
  if [ "${SANDBOXD_FRESH_KEEP:-0}" != 1 ]; then
    # The inner dockerd's loop-mounted storage is released with the container's mount namespace.
    # The inner dockerd's containers are removed by it (their cgroups are the host's hierarchy's);
    # the rest goes with the container's namespaces, its loop-mounted storage included.
    docker exec "$name" sh -c 'docker ps -aq | xargs -r docker rm -f' >/dev/null 2>&1 || true
    docker rm -f "$name" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
# Privileged but for CAP_SYS_RESOURCE, which this kind of host withholds (--privileged asks for
# it and fails): every other capability, no seccomp or AppArmor, /sys and the cgroup hierarchies
# mounted writable again inside, and the loop devices the btrfs storage image needs.
loops=()
for dev in /dev/loop-control /dev/loop[0-9]* /dev/btrfs-control; do [ -e "$dev" ] && loops+=(--device "$dev"); done
docker run -d --name "$name" --cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined \
  --security-opt apparmor=unconfined --security-opt systempaths=unconfined "${loops[@]}" "$image" sleep infinity >/dev/null
docker exec "$name" bash -c '
  set -e
  mount -o remount,rw /sys
  awk "\$3 == \"cgroup\" { print \$2, \$4 }" /proc/mounts | while read -r dir opts; do
    umount "$dir"
    mount -t cgroup -o "$(echo "$opts" | tr , "\n" | grep -v -E "^(ro|rw|nosuid|nodev|noexec|relatime)$" | paste -sd,)" cgroup "$dir"
  done'

# Node.js 20 and npm as this host has them (with nodedir=/usr in its npmrc, node-gyp takes the
# headers from /usr/include/node instead of downloading them, for better-sqlite3).
node_bin="$(command -v node)"
npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
docker cp -q "$node_bin" "$name:/usr/bin/node"
docker exec "$name" mkdir -p /usr/lib/node_modules /usr/include
docker cp -q "$npm_dir" "$name:/usr/lib/node_modules/npm"
[ ! -d /usr/include/node ] || docker cp -q /usr/include/node "$name:/usr/include/node"
docker exec "$name" sh -c 'ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/bin/npm; ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/bin/npx; mkdir -p /usr/etc'
# npm's settings as this host has them (its CA file for the registry, nodedir, no audit or fund).
for rc in /usr/etc/npmrc /root/.npmrc; do if [ -f "$rc" ]; then docker cp -q "$rc" "$name:$rc"; fi; done
for crt in /usr/local/share/ca-certificates/*.crt; do if [ -f "$crt" ]; then docker cp -q "$crt" "$name:/usr/local/share/ca-certificates/"; fi; done
for conf in /etc/apt/apt.conf.d/99farm-no-dep11 /etc/apt/apt.conf.d/docker-gzip-indexes; do if [ -f "$conf" ]; then docker cp -q "$conf" "$name:$conf"; fi; done
docker exec "$name" update-ca-certificates >/dev/null 2>&1
docker cp -q "$work/src.tar" "$name:/src.tar"
docker exec "$name" sh -c 'tar -xf /src.tar -C / && rm /src.tar'

echo "fresh: $(git rev-parse --short "$commit") in $name; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# The storage image gets a name of its own: mkfs.btrfs refuses a path that the host's loop
# devices (whose backing files sysfs shows to every container) already hold.
docker exec -e SANDBOXD_STORAGE_IMAGE=/var/lib/sandboxd-fresh-docker.img "$name" bash -c '
  cd /sandboxd
  start=$EPOCHREALTIME
  : >/tmp/start.log
  elapsed() { echo "$EPOCHREALTIME $start" | awk "{ printf \"%6.1f\", \$1 - \$2 }"; }
  (npm start 2>&1 | while IFS= read -r line; do echo "$(elapsed) $line"; done) >/tmp/start.log 2>&1 </dev/null &
  run=$!
  tail -n +1 -f /tmp/start.log 2>/dev/null &
  follow=$!
  # The port is probed by bash (a node per probe would cost the machine CPU seconds), /status by node.
  until (exec 3<>/dev/tcp/127.0.0.1/18888) 2>/dev/null &&
    node -e "fetch(\"http://127.0.0.1:18888/status\").then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"; do
    sleep 0.5
    if ! kill -0 "$run" 2>/dev/null; then sleep 1; kill "$follow"; echo "fresh: npm start ended before /status answered"; exit 1; fi
  done
  sleep 0.2
  kill "$follow"
  echo "fresh: GET /status answered after $(elapsed) s"
'
# CPU seconds the container used (setup, its dockerd and the image builds; not the sandboxes the
# server starts): a figure that other work on the host does not inflate as it does the wall time.
cpuacct="/sys/fs/cgroup/cpuacct/docker/$(docker inspect -f '{{.Id}}' "$name")/cpuacct.usage"
if [ -r "$cpuacct" ]; then
  echo "fresh: CPU used: $(awk '{ printf "%.0f", $1 / 1e9 }' "$cpuacct") s; load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
else
  echo "fresh: load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
fi
