#!/usr/bin/env bash
# Builder throughput against the tools a person would otherwise use.
# Prints, for one generated 2.5 GiB Raspberry-Pi-shaped image holding ~1 GiB
# of data:
#   build   nasforge build (raw in, raw out, sha256 included) / cp --sparse=always,
#           with the page cache warm, and cold (caches dropped before each
#           command; root only); and against cp followed by sha256sum, which
#           is what a person needs to publish the same image and its digest
#   xz      nasforge's decompress phase of an .img.xz build / xz -dc > file
#   rss     nasforge's peak resident memory over both builds
# Targets (issue 2): build <= 1.3, xz <= 1.05, rss <= 64 MiB.
#
# Usage: scripts/bench/build.sh [WORKDIR]   (default: a temporary directory)
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
trap '[ -z "${1:-}" ] && rm -rf "$work"' EXIT

cargo build --release -q
bin=$PWD/target/release/nasforge

img=$work/base.img
if [ ! -f "$img" ]; then
  echo "generating $img ..." >&2
  boot_start=8192; boot_sectors=$((512 * 2048)); root_start=$((boot_start + boot_sectors))
  total=$((2560 * 1024 * 1024))
  truncate -s "$total" "$img"
  printf 'label: dos\nlabel-id: 0x1234abcd\nstart=%s, size=%s, type=c\nstart=%s, type=83\n' \
    "$boot_start" "$boot_sectors" "$root_start" | sfdisk -q "$img"
  mkfs.vfat -F 32 -s 4 -n bootfs --offset "$boot_start" "$img" $((boot_sectors / 2)) >/dev/null
  printf 'dtparam=audio=on\n\n[all]\n' >"$work/config.txt"
  printf 'console=tty1 root=PARTUUID=1234abcd-02 rootwait\n' >"$work/cmdline.txt"
  MTOOLS_SKIP_CHECK=1 mcopy -i "$img@@$((boot_start * 512))" "$work/config.txt" "$work/cmdline.txt" ::
  tree=$work/tree
  mkdir -p "$tree/var/lib" "$tree/usr/lib/modules/6.6.51+rpt-rpi-2712"
  head -c 1G /dev/urandom >"$tree/var/lib/payload.bin"
  printf 'kernel/drivers/ata/ahci.ko.xz:\n' >"$tree/usr/lib/modules/6.6.51+rpt-rpi-2712/modules.dep"
  root_kib=$(((total / 512 - root_start) / 2))
  mke2fs -q -t ext4 -L rootfs -d "$tree" -E offset=$((root_start * 512)) "$img" "${root_kib}k"
  rm -rf "$tree"
  xz -T0 -3 -k "$img"
fi

cat >"$work/raw.toml" <<TOML
[base]
path = "base.img"
[board]
model = "pi5"
pcie_gen = 3
[output]
path = "out/raw.img"
TOML
sed 's/base.img"/base.img.xz"/; s#out/raw.img#out/fromxz.img#' "$work/raw.toml" >"$work/xz.toml"

seconds() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$(date +%s.%N) - $s" | bc; }
rss_kib() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n1; }

# Each timed command starts after the previous one's writes reached the disk.
settle() { rm -f "$work/copy.img" "$work/plain.img" "$work/out/raw.img" "$work/out/fromxz.img"; sync; }
cold() { [ "$(id -u)" = 0 ] && echo 3 >/proc/sys/vm/drop_caches; }

settle; cat "$img" >/dev/null
t_cp=$(seconds cp --sparse=always "$img" "$work/copy.img"); settle
t_cpsum=$(seconds sh -c "cp --sparse=always '$img' '$work/copy.img' && sha256sum '$work/copy.img'"); settle
t_build=$(cd "$work" && seconds "$bin" build raw.toml); settle
if [ "$(id -u)" = 0 ]; then
  cold; t_cp_cold=$(seconds cp --sparse=always "$img" "$work/copy.img"); settle
  cold; t_build_cold=$(cd "$work" && seconds "$bin" build raw.toml); settle
fi
t_xz=$(seconds sh -c "xz -dc '$img.xz' > '$work/plain.img'"); settle
t_dec=$(cd "$work" && "$bin" build xz.toml --timings 2>&1 | awk '$1 == "decompress" { sub("s", "", $2); print $2 }')
settle
rss1=$(cd "$work" && rss_kib "$bin" build raw.toml)
rss2=$(cd "$work" && rss_kib "$bin" build xz.toml)
rss=$(( rss1 > rss2 ? rss1 : rss2 ))

ratio() { echo "$1 / $2" | bc -l; }
printf 'build   %6.2fs / cp --sparse=always %6.2fs = %.2f (target <= 1.3), page cache warm\n' "$t_build" "$t_cp" "$(ratio "$t_build" "$t_cp")"
if [ -n "${t_build_cold:-}" ]; then
  printf 'build   %6.2fs / cp --sparse=always %6.2fs = %.2f (target <= 1.3), page cache cold\n' "$t_build_cold" "$t_cp_cold" "$(ratio "$t_build_cold" "$t_cp_cold")"
fi
printf 'build   %6.2fs / cp + sha256sum     %6.2fs = %.2f, the same output by hand\n' "$t_build" "$t_cpsum" "$(ratio "$t_build" "$t_cpsum")"
printf 'xz      %6.2fs / xz -dc             %6.2fs = %.2f (target <= 1.05)\n' "$t_dec" "$t_xz" "$(echo "$t_dec / $t_xz" | bc -l)"
printf 'rss     %d MiB peak (target <= 64)\n' $((rss / 1024))
