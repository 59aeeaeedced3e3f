#!/usr/bin/env bash
# Flash throughput against dd. Prints, for one generated 2 GiB
# Raspberry-Pi-shaped image holding ~1 GiB of random data (half full), written
# to a loop device:
#   flash   nasforge flash (write + fsync + readback verify) / dd bs=4M conv=fsync
# Target (issue 8): <= 0.6.
#
# Each run gets a fresh loop device over a fresh, fully allocated 2 GiB
# backing file, attached with direct I/O where the kernel allows (so the
# loop device writes and reads the disk below it, like a card, instead of
# the host's page cache). The source image is read into the page cache
# before each run, so both sides pay the same (nothing) for reading it.
#
# Needs root (loop devices). Usage: scripts/bench/flash.sh [WORKDIR]
# (default: a temporary directory; an image already there is reused).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "scripts/bench/flash.sh: needs root for loop devices" >&2; exit 1; }
work=${1:-$(mktemp -d)}
mkdir -p "$work"
keep=${1:-}
loop=""
cleanup() {
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
  rm -f "$work/target.bin"
  [ -z "$keep" ] && rm -rf "$work"
  return 0
}
trap cleanup EXIT

cargo build --release -q -p nasforge
bin=$PWD/target/release/nasforge

img=$work/flash-2g.img
if [ ! -f "$img" ]; then
  echo "generating $img ..." >&2
  boot_start=8192; boot_sectors=$((256 * 2048)); root_start=$((boot_start + boot_sectors))
  total=$((2048 * 1024 * 1024))
  truncate -s "$total" "$img.tmp"
  printf 'label: dos\nlabel-id: 0x1234abcd\nstart=%s, size=%s, type=c\nstart=%s, type=83\n' \
    "$boot_start" "$boot_sectors" "$root_start" | sfdisk -q "$img.tmp"
  mkfs.vfat -F 32 -s 4 -n bootfs --offset "$boot_start" "$img.tmp" $((boot_sectors / 2)) >/dev/null
  printf 'dtparam=audio=on\n\n[all]\n' >"$work/config.txt"
  MTOOLS_SKIP_CHECK=1 mcopy -i "$img.tmp@@$((boot_start * 512))" "$work/config.txt" ::
  tree=$work/tree
  mkdir -p "$tree/var/lib"
  head -c 1G /dev/urandom >"$tree/var/lib/payload.bin"
  root_kib=$(((total / 512 - root_start) / 2))
  mke2fs -q -t ext4 -L rootfs -d "$tree" -E offset=$((root_start * 512)) "$img.tmp" "${root_kib}k"
  rm -rf "$tree" "$work/config.txt"
  mv "$img.tmp" "$img"
fi
size=$(stat -c %s "$img")

fresh_target() {
  [ -n "$loop" ] && losetup -d "$loop"
  rm -f "$work/target.bin"
  fallocate -l "$size" "$work/target.bin"
  loop=$(losetup -f --show --direct-io=on "$work/target.bin" 2>/dev/null || losetup -f --show "$work/target.bin")
  cat "$img" >/dev/null
  sync
}
seconds() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$(date +%s.%N) - $s" | bc; }

fresh_target
t_dd=$(seconds dd if="$img" of="$loop" bs=4M conv=fsync)
fresh_target
t_ours=$(seconds "$bin" flash "$img" "$loop" --yes)
# The readback must equal the image (outside the timing).
[ "$(head -c "$size" "$loop" | sha256sum)" = "$(sha256sum <"$img")" ] || { echo "flash: readback differs from the image" >&2; exit 1; }

printf 'data    %d MiB of %d MiB, loop direct-io=%s\n' \
  $(($(stat -c %b "$img") * 512 / 1048576)) $((size / 1048576)) "$(cat /sys/block/"${loop#/dev/}"/loop/dio 2>/dev/null || echo ?)"
printf 'flash   %6.2fs (verify included) / dd bs=4M conv=fsync %6.2fs = %.2f (target <= 0.6)\n' \
  "$t_ours" "$t_dd" "$(echo "$t_ours / $t_dd" | bc -l)"
