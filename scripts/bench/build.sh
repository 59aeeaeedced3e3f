#!/usr/bin/env bash
# Builder throughput against the tools a person would otherwise use.
# Prints, for one generated 2.5 GiB Raspberry-Pi-shaped image holding ~1 GiB
# of data:
#   build   nasforge build (raw in, raw out, sha256 included) against the
#           single-pass floor, max(cp --sparse=always, sha256 of the output
#           by openssl), with the page cache warm (openssl uses the CPU's
#           SHA instructions as nasforge does; Debian's sha256sum does not
#           and is printed for reference only); and cold (caches dropped
#           before each command; root only) against cp alone
#   xz in   nasforge's decompress phase of an .img.xz base / xz -dc > file
#   xz out  nasforge's output phase of an .img.xz build (compress, both
#           digests, fsync) / xz -T0 at the same preset, with the peak
#           memory of each
#   rss     nasforge's peak resident memory over the raw builds
# Targets (issues 2 and 19): build <= 1.2 x floor, xz in <= 1.05,
# xz out <= 1.0, rss <= 64 MiB for raw builds.
#
# Usage: scripts/bench/build.sh [WORKDIR]   (default: a temporary directory)
#   NASFORGE_BENCH_XZ=0 skips the compression figures (minutes each).
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
sed 's#out/raw.img#out/packed.img.xz#' "$work/raw.toml" >"$work/pack.toml"

seconds() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$(date +%s.%N) - $s" | bc; }
rss_kib() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n1; }

# Each timed command starts after the previous one's writes reached the disk.
settle() { rm -f "$work/copy.img" "$work/plain.img" "$work/out/raw.img" "$work/out/fromxz.img" "$work/out/packed.img.xz" "$work/packed.xz"; sync; }
cold() { [ "$(id -u)" = 0 ] && echo 3 >/proc/sys/vm/drop_caches; }
phase() { awk -v p="$1" '$1 == p { sub("s", "", $2); print $2 }'; }

settle; cat "$img" >/dev/null
t_cp=$(seconds cp --sparse=always "$img" "$work/copy.img"); settle
t_build=$(cd "$work" && seconds "$bin" build raw.toml)
cat "$work/out/raw.img" >/dev/null
t_sum=$(seconds openssl dgst -sha256 "$work/out/raw.img")
t_coreutils=$(seconds sha256sum "$work/out/raw.img"); settle
if [ "$(id -u)" = 0 ]; then
  cold; t_cp_cold=$(seconds cp --sparse=always "$img" "$work/copy.img"); settle
  cold; t_build_cold=$(cd "$work" && seconds "$bin" build raw.toml); settle
fi
t_xz=$(seconds sh -c "xz -dc '$img.xz' > '$work/plain.img'"); settle
t_dec=$(cd "$work" && "$bin" build xz.toml --timings 2>&1 | phase decompress)
settle
rss1=$(cd "$work" && rss_kib "$bin" build raw.toml)
rss2=$(cd "$work" && rss_kib "$bin" build xz.toml)
rss=$(( rss1 > rss2 ? rss1 : rss2 ))
if [ "${NASFORGE_BENCH_XZ:-1}" != 0 ]; then
  # Both compress the finished image of the raw build, from the page cache.
  (cd "$work" && "$bin" build raw.toml >/dev/null 2>&1)
  cp --sparse=always "$work/out/raw.img" "$work/plain.img"; cat "$work/plain.img" >/dev/null
  t_xzc=$(seconds sh -c "xz -T0 -6 -c '$work/plain.img' > '$work/packed.xz'")
  rss_xzc=$(/usr/bin/time -f %M sh -c "xz -T0 -6 -c '$work/plain.img' > '$work/packed.xz'" 2>&1 | tail -n1)
  rm -f "$work/packed.xz"
  out=$(cd "$work" && /usr/bin/time -f 'rss %M' "$bin" build pack.toml --timings 2>&1)
  t_pack=$(phase output <<<"$out")
  rss_pack=$(awk '$1 == "rss" { print $2 }' <<<"$out")
fi
settle

ratio() { echo "$1 / $2" | bc -l; }
floor=$(echo "if ($t_cp > $t_sum) $t_cp else $t_sum" | bc -l)
printf 'build   %6.2fs / floor %6.2fs = %.2f (target <= 1.2), page cache warm; floor = max(cp --sparse=always %.2fs, openssl sha256 %.2fs); sha256sum %.2fs\n' \
  "$t_build" "$floor" "$(ratio "$t_build" "$floor")" "$t_cp" "$t_sum" "$t_coreutils"
if [ -n "${t_build_cold:-}" ]; then
  printf 'build   %6.2fs / cp --sparse=always %6.2fs = %.2f, page cache cold\n' "$t_build_cold" "$t_cp_cold" "$(ratio "$t_build_cold" "$t_cp_cold")"
fi
printf 'xz in   %6.2fs / xz -dc             %6.2fs = %.2f (target <= 1.05)\n' "$t_dec" "$t_xz" "$(ratio "$t_dec" "$t_xz")"
if [ -n "${t_pack:-}" ]; then
  printf 'xz out  %6.2fs / xz -T0 -6          %6.2fs = %.2f (target <= 1.0); peak memory %d MiB / %d MiB\n' \
    "$t_pack" "$t_xzc" "$(ratio "$t_pack" "$t_xzc")" $((rss_pack / 1024)) $((rss_xzc / 1024))
fi
printf 'rss     %d MiB peak over the raw builds (target <= 64)\n' $((rss / 1024))
