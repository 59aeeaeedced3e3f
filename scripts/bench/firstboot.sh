#!/usr/bin/env bash
# The first boot of a recipe on the emulated board, phase by phase: the
# kernel up to nasforge's first-boot unit, the offline package install, each
# step of nasforge-setup, and the total to "setup complete" (issue 19's
# target for the bundled recipe: five minutes on a 2-core machine under
# TCG). Reads the times the board's own kernel stamps on the serial console.
#
# Usage: scripts/bench/firstboot.sh [RECIPE] [--disks 3x2G]
#   RECIPE defaults to recipes/pi4-debian-raid5.toml; its base is built (and
#   cached) first, as `nasforge build` does. NASFORGE_BENCH_SERIAL=FILE keeps
#   the whole console there (every command setup ran, with the kernel's time).
set -euo pipefail
cd "$(dirname "$0")/../.."
recipe=${1:-recipes/pi4-debian-raid5.toml}
shift || true
disks=(--disks 3x2G)
[ $# -gt 0 ] && disks=("$@")
work=$(mktemp -d)
# The board runs in a process group of its own, so that stopping it stops
# qemu too and nothing else (`kill 0` would also stop whoever called this).
emulator=
finish() {
  if [ -n "$emulator" ]; then kill -- "-$emulator" 2>/dev/null || true; fi
  if [ -n "${NASFORGE_BENCH_SERIAL:-}" ]; then cp "$work/serial.log" "$NASFORGE_BENCH_SERIAL"; fi
  rm -rf "$work"
}
trap finish EXIT
cargo build -q --release
nasforge=target/release/nasforge
"$nasforge" build "$recipe" -o "$work/nas.img" >"$work/build.log" 2>&1 || {
  tail -30 "$work/build.log" >&2
  exit 1
}
log="$work/serial.log"
set -m
"$nasforge" emulate "$work/nas.img" --headless --exit-on-reboot --fresh \
  --workdir "$work/emulate" --serial-log "$log" "${disks[@]}" >/dev/null &
emulator=$!
set +m
start=$(date +%s)
until grep -q 'nasforge-setup: setup complete\|nasforge-firstboot: FAILED\|nasforge-setup: FAILED' "$log" 2>/dev/null; do
  if [ $(( $(date +%s) - start )) -gt 3600 ]; then
    echo "no 'setup complete' within an hour; the console ends:" >&2
    tail -30 "$log" >&2
    exit 1
  fi
  sleep 5
done
if ! grep -q 'nasforge-setup: setup complete' "$log"; then
  grep -E 'FAILED' "$log" >&2
  exit 1
fi
# "[  123.456789] firstboot[513]: nasforge-setup: [3/20] Partition sda ..."
awk '
  function stamp(line) { sub(/^\[ */, "", line); return line + 0 }
  function phase(name, t) { if (last != "") printf "%8.1fs  %s\n", t - at, last; last = name; at = t }
  /nasforge-firstboot: installing/      { printf "%8.1fs  kernel to the first-boot unit\n", stamp($0); phase("package install (offline)", stamp($0)) }
  /nasforge-firstboot: packages installed/ { phase("first-boot unit: keys, ssh", stamp($0)) }
  /nasforge-setup: \[[0-9]+\/[0-9]+\]/  { s = $0; sub(/.*nasforge-setup: /, "", s); phase("setup " substr(s, 1, 70), stamp($0)) }
  /nasforge-setup: setup complete/      { phase("", stamp($0)); printf "%8.1fs  total, to setup complete\n", stamp($0); exit }
' "$log"
