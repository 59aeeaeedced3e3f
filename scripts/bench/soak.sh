#!/usr/bin/env bash
# Faults under load, for longer than .ci/run affords (issue 36): on the
# emulated board's raid1 of two USB disks, four SMB clients copy 4 MiB
# files to and from it and an NFS client reads from it for 40 seconds,
# while one of its disks is pulled out halfway (`nasforge fault`) and put
# back; every copy a client saw succeed is checked, the re-added disk is
# resynced and md's own check must find both halves identical. .ci/run does
# one such cycle; this does CYCLES on the same boot, then the rest of the
# end-to-end test (a member failing every read and write, and on).
#
# Prints each cycle's line (clients x MiB/s before and after the pull,
# copies, failures, seconds to degraded and to the alert, files checked and
# lost) and the totals. Takes as long as the end-to-end test (about 45
# minutes with the Debian base cached) plus about a minute and a half a cycle.
#
# Usage: scripts/bench/soak.sh [CYCLES]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/../.."
cycles=${1:-10}
case $cycles in '' | *[!0-9]*) echo "CYCLES must be a number, not '$cycles'" >&2; exit 2 ;; esac
log=$(mktemp)
trap 'rm -f "$log"' EXIT
NASFORGE_SOAK_CYCLES=$cycles \
  cargo test -q --test e2e -- --ignored --nocapture --test-threads=1 2>&1 | tee "$log" |
  grep -E '^e2e: (under load|usb-docs0 put back|usb-docs0 failing)' || {
  tail -40 "$log" >&2
  exit 1
}
awk '/^e2e: under load \(/ {
       n++
       for (i = 1; i <= NF; i++) {
         if ($i == "files" && $(i+1) == "put") checked += $(i-1)
         if ($(i+1) == "lost" && $i ~ /^[0-9]+$/) lost += $i
       }
     }
     END {
       if (n == 0) exit 1
       printf "%d pulls under load survived; %d files checked, %d lost\n", n, checked, lost
     }' "$log"
