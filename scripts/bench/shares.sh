#!/usr/bin/env bash
# SMB and NFS throughput of the emulated board: a 256 MiB file put and got
# over SMB to nasforge's share and to a plain share (path, valid users,
# read only = no) on the same array, twice each, and read back over NFS.
# Prints each transfer and, per direction, nasforge's share / the plain one
# (target, issue 13: within the run-to-run noise, i.e. the spread between
# the two rounds of the same share).
#
# It rides on the end-to-end test's boot (NASFORGE_BENCH_SHARES=1), so it
# takes as long as that test (about 20 minutes with the Debian base cached).
#
# Usage: scripts/bench/shares.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
NASFORGE_BENCH_SHARES=1 \
  cargo test -q --test e2e -- --ignored --nocapture --test-threads=1 2>&1 | tee "$log" | grep '^bench:' || {
  tail -40 "$log" >&2
  exit 1
}
awk '/^bench: round [0-9]+ SMB/ {
       put[$5] += $7; get[$5] += $10; n[$5]++
     }
     END {
       if (n["data"] == 0 || n["plain"] == 0) exit 1
       printf "SMB put  nasforge %.1f MiB/s  plain %.1f MiB/s  ratio %.2f\n",
         put["data"]/n["data"], put["plain"]/n["plain"], (put["data"]/n["data"])/(put["plain"]/n["plain"])
       printf "SMB get  nasforge %.1f MiB/s  plain %.1f MiB/s  ratio %.2f\n",
         get["data"]/n["data"], get["plain"]/n["plain"], (get["data"]/n["data"])/(get["plain"]/n["plain"])
     }' "$log"
