#!/usr/bin/env bash
# What btrfs quota accounting costs the kernel (docs/decisions.md, "Disk quota"): on a scratch
# 4 GiB btrfs image per mode (off, full qgroups, simple quotas), a 3000-file subvolume is
# snapshotted 60 times; each snapshot gets a 100 MiB limit where quotas are on, a few writes and
# deletions, and is deleted, as a container's layer is. Prints the wall time and the CPU the
# file system's btrfs-cleaner and btrfs-transaction threads used. Root, btrfs-progs >= 6.7 and a
# kernel >= 6.7 (simple quotas). Usage: sudo bash bench/btrfs-quota-modes.sh [snapshots]
set -euo pipefail
ROUNDS="${1:-60}"
DIR="$(mktemp -d /tmp/btrfs-quota-bench.XXXXXX)"
trap 'umount "$DIR"/mnt-* 2>/dev/null || true; rm -rf "$DIR"' EXIT
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz="$(getconf CLK_TCK)"

for mode in off full simple; do
  img="$DIR/$mode.img" mnt="$DIR/mnt-$mode"
  truncate -s 4G "$img" && mkfs.btrfs -q "$img" && mkdir -p "$mnt" && mount -o loop "$img" "$mnt"
  # The threads this mount started are the newest of their names.
  cleaner="$(pgrep -n btrfs-cleaner)" transaction="$(pgrep -n btrfs-transacti)"
  case "$mode" in full) btrfs quota enable "$mnt" ;; simple) btrfs quota enable --simple "$mnt" ;; esac
  btrfs subvolume create "$mnt/base" >/dev/null
  for d in $(seq 1 30); do
    mkdir -p "$mnt/base/d$d"
    for f in $(seq 1 100); do head -c 4096 /dev/urandom >"$mnt/base/d$d/f$f"; done
  done
  sync
  start="$(date +%s.%N)"
  for i in $(seq 1 "$ROUNDS"); do
    btrfs subvolume snapshot "$mnt/base" "$mnt/s$i" >/dev/null
    [ "$mode" = off ] || btrfs qgroup limit 100M "$mnt/s$i"
    for d in 1 2 3 4 5; do head -c 65536 /dev/urandom >"$mnt/s$i/d$d/new"; rm -f "$mnt/s$i/d$d/f1"; done
    btrfs subvolume delete "$mnt/s$i" >/dev/null
  done
  btrfs subvolume sync "$mnt" >/dev/null
  sync
  end="$(date +%s.%N)"
  awk -v m="$mode" -v s="$start" -v e="$end" -v c="$(ticks "$cleaner")" -v t="$(ticks "$transaction")" -v hz="$hz" \
    'BEGIN { printf "%-6s wall %6.1f s   btrfs-cleaner %6.2f s CPU   btrfs-transaction %5.2f s CPU\n", m, e - s, c / hz, t / hz }'
  umount "$mnt"
  rm -f "$img"
done
