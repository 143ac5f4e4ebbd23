# shellcheck shell=bash
# Docker's storage on btrfs, so that a sandbox's disk_mb can be enforced (README, "Disk quota").
# Sourced by setup.sh, which defines say, act, die, has_systemd, wait_for_docker and apt_update; the
# functions here only read the environment below, so test/unit/setup-storage.test.ts can call
# them with a scratch image and mount point.
#
# Neither XFS nor ext4 quotas are available on every kernel, btrfs qgroups are wherever btrfs
# is: dockerd's btrfs driver bounds a container's writable layer with `--storage-opt size`
# through them. The engine's data-root becomes a btrfs file system in a sparse image file,
# loop-mounted (no disk to partition):
#   SANDBOXD_STORAGE_IMAGE  the image file (default /var/lib/sandboxd-docker.img)
#   SANDBOXD_STORAGE_ROOT   its mount point, dockerd's data-root (default /var/lib/sandboxd-docker)
#   SANDBOXD_STORAGE_GB     its size when made (default 64, never more than 90% of the free space)
#   SANDBOXD_SETUP_DISK_QUOTA=1  move a running dockerd that holds other containers or images
#                           (they stay in its old data-root, unused) ; =0 leaves storage alone
STORAGE_IMAGE="${SANDBOXD_STORAGE_IMAGE:-/var/lib/sandboxd-docker.img}"
STORAGE_ROOT="${SANDBOXD_STORAGE_ROOT:-/var/lib/sandboxd-docker}"
STORAGE_GB="${SANDBOXD_STORAGE_GB:-64}"
# Smallest image worth making: the three images and a few sandboxes.
STORAGE_MIN_GB="${SANDBOXD_STORAGE_MIN_GB:-8}"

# What to do about dockerd's storage, from what is observed (a pure function, for the tests):
#   $1 running: 1 when dockerd answers      $2 driver: its storage driver ('' when not running)
#   $3 root: its data-root                  $4 mounted: 1 when STORAGE_ROOT is a btrfs mount
#   $5 foreign: 1 when it holds containers or images that are not sandboxd's
#   $6 opt: SANDBOXD_SETUP_DISK_QUOTA ('' unset, 0 or 1)
# Prints one word:
#   skip       opt is 0: storage is left as it is
#   ok         dockerd already keeps its data on the mounted btrfs root: nothing to change
#   configure  dockerd is not running: prepare the root and daemon.json before it starts
#   switch     dockerd runs elsewhere (or on the root's unmounted directory) and holds nothing but
#              sandboxd's own containers and images, or the admin opted in: restart it on the root
#   leave      dockerd runs elsewhere and holds other work: say how to opt in, change nothing
storage_decision() {
  local running="$1" driver="$2" root="$3" mounted="$4" foreign="$5" opt="$6"
  if [ "$opt" = 0 ]; then echo skip; return; fi
  if [ "$running" != 1 ]; then echo configure; return; fi
  if [ "$driver" = btrfs ] && [ "$root" = "$STORAGE_ROOT" ] && [ "$mounted" = 1 ]; then echo ok; return; fi
  if [ "$foreign" != 1 ] || [ "$opt" = 1 ]; then echo switch; return; fi
  echo leave
}

# 1 when STORAGE_ROOT is a mounted btrfs file system.
storage_mounted() {
  [ "$(findmnt -n -o FSTYPE --target "$STORAGE_ROOT" 2>/dev/null)" = btrfs ] &&
    [ "$(findmnt -n -o TARGET --target "$STORAGE_ROOT" 2>/dev/null)" = "$STORAGE_ROOT" ] && echo 1 || echo 0
}

# 1 when the running dockerd holds containers that sandboxd did not make or images it did not build.
engine_foreign() {
  if docker ps -a --format '{{.Label "sandboxd.managed"}}' 2>/dev/null | grep -qv '^true$'; then echo 1; return; fi
  if docker images --format '{{.Repository}}' 2>/dev/null | grep -v '^<none>$' | grep -qv '^sandboxd'; then echo 1; return; fi
  echo 0
}

# The image's size in GiB: STORAGE_GB, but at most 90% of what the disk under it has free.
storage_size_gb() {
  local free
  free="$(df -B1G --output=avail "$(dirname "$STORAGE_IMAGE")" | tail -n 1 | tr -d ' ')"
  local most=$((free * 9 / 10))
  if [ "$STORAGE_GB" -lt "$most" ]; then echo "$STORAGE_GB"; else echo "$most"; fi
}

# Makes the image when absent, mounts it when not mounted (after a reboot) and enables quotas.
# Returns 1 (after saying why) where it cannot, e.g. too little free disk.
ensure_storage_root() {
  if [ ! -f "$STORAGE_IMAGE" ]; then
    local size
    size="$(storage_size_gb)"
    if [ "$size" -lt "$STORAGE_MIN_GB" ]; then
      act "warning: a btrfs data-root under $(dirname "$STORAGE_IMAGE") could get ${size} GiB (SANDBOXD_STORAGE_GB, at most 90% of the free space), less than the ${STORAGE_MIN_GB} GiB it needs; dockerd keeps its storage and disk_mb is unsupported"
      return 1
    fi
    act "making a ${size} GiB sparse btrfs image for Docker's storage ($STORAGE_IMAGE)"
    truncate -s "${size}G" "$STORAGE_IMAGE"
    mkfs.btrfs -q "$STORAGE_IMAGE" >/dev/null
  fi
  if [ "$(storage_mounted)" != 1 ]; then
    act "mounting $STORAGE_IMAGE at $STORAGE_ROOT"
    mkdir -p "$STORAGE_ROOT"
    mount -o loop "$STORAGE_IMAGE" "$STORAGE_ROOT"
  fi
  ensure_simple_quotas
  # A systemd host mounts it at boot, before dockerd starts (nofail: a boot never waits on it).
  if has_systemd && ! grep -qs " $STORAGE_ROOT " /etc/fstab; then
    act "adding $STORAGE_ROOT to /etc/fstab"
    printf '%s %s btrfs loop,nofail 0 0\n' "$STORAGE_IMAGE" "$STORAGE_ROOT" >>/etc/fstab
  fi
}

# btrfs-progs that can enable simple quotas (6.7 or later: `btrfs quota enable --simple`); on
# bookworm, whose own is 6.2, from bookworm-backports.
ensure_btrfs_progs() {
  if command -v btrfs >/dev/null && btrfs quota enable --help 2>&1 | grep -q -- '--simple'; then return 0; fi
  . /etc/os-release
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    ensure_backports
    act "installing btrfs-progs from bookworm-backports (Docker's storage goes on btrfs, with simple quotas)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Options::=--force-unsafe-io -t bookworm-backports btrfs-progs >/dev/null
  elif ! command -v btrfs >/dev/null; then
    act "installing btrfs-progs (Docker's storage goes on btrfs)"
    apt_update
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Options::=--force-unsafe-io btrfs-progs >/dev/null
  fi
}

# The quota mode the kernel reports for STORAGE_ROOT's file system: squota, qgroup, or '' (off).
storage_quota_mode() {
  local uuid
  uuid="$(findmnt -n -o UUID --target "$STORAGE_ROOT" 2>/dev/null || true)"
  [ -n "$uuid" ] && cat "/sys/fs/btrfs/$uuid/qgroups/mode" 2>/dev/null || true
}

# Quotas on STORAGE_ROOT in simple mode (squota, Linux 6.7): an extent is charged to the subvolume
# that wrote it, so a container's limit is what it writes, and deleting a subvolume costs no
# back-reference walk. Full qgroup accounting made the kernel's btrfs-cleaner spend 31 s of CPU on
# 60 snapshot deletions that cost 0.4 s under simple quotas (docs/decisions.md, "Disk quota").
# A file system in full mode is switched (the limits of containers running on it lapse until they
# are made again); a kernel without simple quotas keeps full accounting, with a warning.
ensure_simple_quotas() {
  local mode
  mode="$(storage_quota_mode)"
  [ "$mode" = squota ] && return 0
  if [ "$mode" = qgroup ]; then
    act "switching btrfs quotas on $STORAGE_ROOT from full accounting to simple quotas"
    btrfs quota disable "$STORAGE_ROOT"
  else
    act "enabling btrfs simple quotas on $STORAGE_ROOT"
  fi
  if ! btrfs quota enable --simple "$STORAGE_ROOT" 2>/dev/null; then
    act "warning: this kernel or btrfs-progs has no simple quotas (Linux 6.7, btrfs-progs 6.7); full accounting costs CPU at every sandbox's removal"
    btrfs quota enable "$STORAGE_ROOT"
  fi
}

# Merges data-root and storage-driver into daemon.json, keeping everything else; prints `changed`.
merge_storage_config() {
  DAEMON_JSON="$1" STORAGE_ROOT="$STORAGE_ROOT" node -e '
    const fs = require("node:fs");
    const file = process.env.DAEMON_JSON;
    let text = "";
    try { text = fs.readFileSync(file, "utf8"); } catch (e) { if (e.code !== "ENOENT") throw e; }
    const config = text.trim() ? JSON.parse(text) : {};
    const next = { ...config, "data-root": process.env.STORAGE_ROOT, "storage-driver": "btrfs" };
    if (JSON.stringify(next) !== JSON.stringify(config)) {
      fs.writeFileSync(file, JSON.stringify(next, null, 2) + "\n");
      console.log("changed");
    }
  '
}

# Stops dockerd (only called when it holds nothing but sandboxd's work, or the admin opted in).
stop_dockerd() {
  if has_systemd; then systemctl stop docker; return; fi
  local pid
  pid="$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd || true)"
  [ -n "$pid" ] || die "dockerd answers but its pid is unknown; restart it yourself to load $1"
  kill -TERM "$pid"
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
  die "dockerd did not stop within 60 s"
}

# The storage phase of setup: after daemon.json has the runsc runtime, before dockerd starts.
# Sets STORAGE_RESTARTED=1 when it stopped dockerd (setup starts it again).
setup_storage() {
  local daemon_json="$1" running=0 driver='' root='' foreign=0
  STORAGE_RESTARTED=0
  if docker info >/dev/null 2>&1; then
    running=1
    driver="$(docker info --format '{{.Driver}}')"
    root="$(docker info --format '{{.DockerRootDir}}')"
    foreign="$(engine_foreign)"
  fi
  local decision
  decision="$(storage_decision "$running" "$driver" "$root" "$(storage_mounted)" "$foreign" "${SANDBOXD_SETUP_DISK_QUOTA:-}")"
  case "$decision" in
    skip) say "leaving Docker's storage as it is (SANDBOXD_SETUP_DISK_QUOTA=0)" ;;
    ok)
      ensure_storage_root || true
      say "Docker's storage is btrfs with quotas at $STORAGE_ROOT (disk_mb is enforced)"
      ;;
    configure | switch)
      if [ "$decision" = switch ]; then
        # Stopped first: the root may be the directory it runs on, which the mount would hide.
        act "restarting dockerd on $STORAGE_ROOT (it held only sandboxd's containers and images; images are built again)"
        stop_dockerd "$daemon_json"
        STORAGE_RESTARTED=1
      fi
      ensure_storage_root || return 0
      if [ "$(merge_storage_config "$daemon_json")" = changed ]; then act "set Docker's data-root to $STORAGE_ROOT (btrfs) in $daemon_json"; fi
      ;;
    leave)
      act "note: dockerd keeps its storage on ${driver} at ${root}, where disk_mb cannot be enforced, and holds other containers or images, so it is left as it is."
      act "      To move it to a btrfs data-root at $STORAGE_ROOT (the old one's containers and images stay there, unused; dockerd restarts): SANDBOXD_SETUP_DISK_QUOTA=1 bash scripts/setup.sh"
      ;;
  esac
}
