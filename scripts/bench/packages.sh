#!/usr/bin/env bash
# Package resolution speed: the four-package NAS set (mdadm samba
# nfs-kernel-server smartmontools) resolved by apt against a Debian bookworm
# arm64 image (built from packages with `[base] debian`), on a warm cache.
# Prints the `packages` phase of the second of two builds. Target (issue 4):
# under 2 s.
#
# Usage: scripts/bench/packages.sh [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
cargo build --release -q
bin=$PWD/target/release/nasforge
cat >"$work/packages.toml" <<TOML
[base]
debian = { suite = "bookworm", arch = "arm64" }
[board]
model = "pi4"
[packages]
install = ["mdadm", "samba", "nfs-kernel-server", "smartmontools"]
[output]
path = "out/packages.img"
TOML
cd "$work"
"$bin" build packages.toml --timings >/dev/null 2>&1   # cold: base image, lists, downloads
t=$("$bin" build packages.toml --timings 2>&1 | awk '$1 == "packages" && $2 ~ /^[0-9.]+s$/ { sub("s", "", $2); print $2 }')
printf 'packages  %.2fs on a warm cache (target < 2 s)\n' "$t"
