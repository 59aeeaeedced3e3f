//! Faults while the NAS is busy (issue 36), on the emulated board's raid1
//! of two USB disks (`docs`, tests/usb): four SMB clients on the host copy
//! files to and from it and one NFS client reads from it (bookworm's libnfs
//! cannot write over NFSv4) for a fixed time, and halfway one of its disks
//! is pulled out with `nasforge fault`, as a USB bridge resetting looks to
//! the board. Every copy a client saw succeed
//! must hold its source's bytes, the array must run on the other disk, the
//! alert must reach the host's sinks within a minute, status must name the
//! disk by its serial, and the clients must go on. Put back, the disk is
//! re-added with no command on the board (mdadm.conf's `POLICY
//! action=re-add`, carried out by udev's `mdadm --incremental`), md copies
//! what its write-intent bitmap says changed, and md's own check then
//! finds the two halves identical.

use super::care::Sinks;
use super::common::*;
use super::load::*;
use super::{Board, write_payload};
use std::path::Path;
use std::time::{Duration, Instant};

const DOCS: Share = Share {
    name: "docs",
    path: "/srv/docs",
};

/// How long the clients copy before the disk is pulled, and after.
const HALF: Duration = Duration::from_secs(15);
/// The disk pulled out: the raid1's bulk-only half (tests/usb names it).
/// Not its UAS half, which is the one bridge resets hit most: qemu cannot
/// plug a UAS disk back in at run time (`nasforge fault` says so); to md a
/// vanished USB disk is the same either way.
const PULLED: &str = "usb-docs0";
/// What md says of /dev/md/NAME, from the board.
fn md_state(board: &Board, key: &Path, name: &str) -> String {
    let (_, out) = board.ssh(
        key,
        &format!("md=$(basename $(readlink -f /dev/md/{name})); echo degraded=$(cat /sys/block/$md/md/degraded) sync=$(cat /sys/block/$md/md/sync_action) state=$(cat /sys/block/$md/md/array_state); cat /proc/mdstat"),
    );
    out
}

/// Polls until docs runs with both halves and md has nothing left to copy;
/// how long that took.
fn docs_whole(board: &Board, key: &Path, limit: Duration, after: &str) -> Duration {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < limit {
        last = md_state(board, key, "docs");
        if last.contains("degraded=0") && last.contains("sync=idle") {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    panic!("docs was not whole again within {limit:?} of {after}:\n{last}");
}

/// A member pulled out while the clients copy, then put back.
/// In .ci/run once; `scripts/bench/soak.sh` asks for more cycles on the
/// same boot with NASFORGE_SOAK_CYCLES.
pub fn usb_member_pulled_under_load(board: &Board, key: &Path, dir: &Path, sinks: &Sinks) {
    let cycles: usize = std::env::var("NASFORGE_SOAK_CYCLES")
        .ok()
        .map(|n| n.parse().expect("NASFORGE_SOAK_CYCLES is a number"))
        .unwrap_or(1);
    for cycle in 1..=cycles {
        eprintln!("e2e: under load, cycle {cycle} of {cycles}");
        pulled_under_load(board, key, dir, sinks);
    }
}

fn pulled_under_load(board: &Board, key: &Path, dir: &Path, sinks: &Sinks) {
    let seed_file = dir.join("load-seed.bin");
    write_payload(&seed_file, FILE);
    let seed = ("load-seed.bin".to_string(), sha256_file(&seed_file));
    assert!(
        smb(
            board,
            DOCS,
            &format!("put {} {}", seed_file.display(), seed.0)
        ),
        "the seed file onto docs"
    );
    let state = md_state(board, key, "docs");
    assert!(
        state.contains("degraded=0"),
        "docs before the load:\n{state}"
    );
    let mark = sinks.mark();
    let start = Instant::now();
    let (copies, pulled_at, degraded_after, alert) = std::thread::scope(|s| {
        let clients: Vec<_> = clients()
            .into_iter()
            .map(|who| {
                let seed = &seed;
                s.spawn(move || client(board, dir, DOCS, &who, Some(seed), start, 2 * HALF))
            })
            .collect();
        std::thread::sleep(HALF.saturating_sub(start.elapsed()));
        assert_eq!(
            board.fault(&["unplug", PULLED]),
            format!("{PULLED} pulled out\n")
        );
        let pulled_at = start.elapsed();
        // md fails the member and runs on the other; the alert goes out.
        let mut degraded_after = None;
        let mut alert = None;
        while (degraded_after.is_none() || alert.is_none())
            && start.elapsed() < pulled_at + Duration::from_secs(90)
        {
            if degraded_after.is_none() && md_state(board, key, "docs").contains("degraded=1") {
                degraded_after = Some(start.elapsed() - pulled_at);
            }
            if alert.is_none()
                && let Some(a) = sinks
                    .alerts_since(mark)
                    .into_iter()
                    .find(|a| a.contains("docs"))
            {
                alert = Some((start.elapsed() - pulled_at, a));
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        let copies: Vec<Copy> = clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        (copies, pulled_at, degraded_after, alert)
    });
    let state = md_state(board, key, "docs");
    let degraded_after = degraded_after
        .unwrap_or_else(|| panic!("docs did not run degraded after {PULLED} was pulled:\n{state}"));
    assert!(
        state.contains("state=clean") || state.contains("state=active"),
        "docs runs on its other disk, not failed:\n{state}"
    );
    let (alert_after, alert) = alert.unwrap_or_else(|| {
        panic!(
            "no alert naming docs within 90 s of the pull; received: {:?}",
            sinks.alerts_since(mark)
        )
    });
    assert!(
        alert_after < Duration::from_secs(60),
        "the alert took {alert_after:?}: {alert}"
    );

    // Every copy a client saw succeed holds its source's bytes: gets were
    // compared as they came, puts are read on the board.
    let wrong: Vec<&Copy> = copies.iter().filter(|c| c.wrong).collect();
    assert!(
        wrong.is_empty(),
        "gets that read wrong bytes: {:?}",
        wrong
            .iter()
            .map(|c| (&c.client, c.ended))
            .collect::<Vec<_>>()
    );
    let puts: Vec<&Copy> = copies
        .iter()
        .filter(|c| c.way == Way::Put && c.ok)
        .collect();
    let lost = not_intact(board, key, DOCS, &puts);
    assert!(
        lost.is_empty(),
        "copies reported done but not intact on docs: {lost:?}"
    );

    // Throughput held, per half: what the clients moved in whole copies.
    let moved = |from: Duration, to: Duration| -> (u64, usize, usize) {
        let in_half: Vec<&Copy> = copies
            .iter()
            .filter(|c| c.ended >= from && c.ended < to)
            .collect();
        let done = in_half.iter().filter(|c| c.ok).count();
        ((done * FILE) as u64, done, in_half.len() - done)
    };
    let end = copies.iter().map(|c| c.ended).max().unwrap();
    let (before, done_before, failed_before) = moved(Duration::ZERO, pulled_at);
    let (after, done_after, failed_after) = moved(pulled_at, end + Duration::from_secs(1));
    let rate = |bytes: u64, d: Duration| bytes as f64 / (1 << 20) as f64 / d.as_secs_f64();
    eprintln!(
        "e2e: under load ({SMB_CLIENTS} SMB clients putting and getting, 1 NFS client getting, {} MiB files): before the pull {:.1} MiB/s ({done_before} copies, {failed_before} failed), after it {:.1} MiB/s ({done_after} copies, {failed_after} failed); md ran degraded {:.0}s after the pull, the alert reached the host {:.0}s after it; {} files put and checked, 0 lost",
        FILE >> 20,
        rate(before, pulled_at),
        rate(after, end - pulled_at),
        degraded_after.as_secs_f64(),
        alert_after.as_secs_f64(),
        puts.len(),
    );
    let failed: Vec<(&str, f64)> = copies
        .iter()
        .filter(|c| !c.ok)
        .map(|c| (c.client.as_str(), c.ended.as_secs_f64()))
        .collect();
    assert!(
        failed.is_empty(),
        "copies that failed (client, seconds in; the pull at {:.0}s): {failed:?}",
        pulled_at.as_secs_f64()
    );
    for who in clients() {
        assert!(
            copies
                .iter()
                .any(|c| c.client == who && c.ok && c.ended > pulled_at + Duration::from_secs(5)),
            "{who} copied nothing after the pull"
        );
    }

    let (ok, status) = board.ssh(key, "sudo -S nasforge-setup status");
    assert!(
        ok && status.lines().any(|l| l.contains("docs (md")
            && l.contains("degraded (1 of 2 members), missing the disk that was")
            && l.contains(&format!("serial {PULLED})"))),
        "status names the pulled disk:\n{status}"
    );

    // What md will copy when it is back: the dirty chunks of the half that
    // stayed.
    let (_, bitmap) = board.ssh(
        key,
        "sudo -S sh -c 'mdadm -X $(mdadm --detail /dev/md/docs | awk \"/active sync/ {print \\$NF}\")' | grep -E 'Bitmap|Chunksize'",
    );
    assert_eq!(
        board.fault(&["plug", PULLED]),
        format!("{PULLED} plugged back in\n")
    );
    let resynced = docs_whole(board, key, Duration::from_secs(300), "being put back");
    let (ok, detail) = board.ssh(key, "sudo -S mdadm --detail /dev/md/docs");
    assert!(ok && detail.matches("active sync").count() == 2, "{detail}");
    // md's own comparison of the two halves.
    let checked = Instant::now();
    let (ok, out) = board.ssh(
        key,
        "sudo -S sh -c 'md=$(basename $(readlink -f /dev/md/docs)); echo check > /sys/block/$md/md/sync_action; sleep 2; while [ $(cat /sys/block/$md/md/sync_action) != idle ]; do sleep 2; done; echo mismatches=$(cat /sys/block/$md/md/mismatch_cnt)'",
    );
    assert!(
        ok && out.contains("mismatches=0"),
        "md's check of docs:\n{out}"
    );
    eprintln!(
        "e2e: {PULLED} put back: re-added with no command on the board, docs whole again {:.0}s later (the half that stayed said: {}); md's check of both halves: 0 mismatches, {:.0}s",
        resynced.as_secs_f64(),
        bitmap.split_whitespace().collect::<Vec<_>>().join(" "),
        checked.elapsed().as_secs_f64()
    );
    let (_, rm) = board.ssh(key, "rm -f /srv/docs/load-*.bin && echo removed");
    assert!(rm.contains("removed"), "{rm}");
}

/// The raid1's bulk-only half, back in it, made to fail every read and
/// write (`nasforge fault io-errors`, qemu's blkdebug under it) while a
/// client copies: md fails the member and runs on the other half, the
/// client's file is whole and reads back whole, the alert names the array
/// and status the disk. Healed and reseated (pulled out and put back, as a
/// person would), the disk is re-added by mdadm.conf's policy as after a
/// bridge reset.
pub fn usb_member_fails(board: &Board, key: &Path, dir: &Path, sinks: &Sinks) {
    const FAILING: &str = "usb-docs0";
    let mark = sinks.mark();
    assert_eq!(
        board.fault(&["io-errors", FAILING]),
        format!("{FAILING} fails every read and write from now on\n")
    );
    let started = Instant::now();
    // One copy through the failure: md's write to the failing half errs,
    // and `sync` makes it reach the disks now.
    let data = source("failing", 0);
    let src = dir.join("failing.src");
    std::fs::write(&src, &data).unwrap();
    assert!(
        smb(
            board,
            DOCS,
            &format!("put {} load-failing-0.bin", src.display())
        ),
        "a put to docs while {FAILING} fails"
    );
    let (ok, out) = board.ssh(
        key,
        "sync; sudo -S sh -c 'echo 3 > /proc/sys/vm/drop_caches'",
    );
    assert!(ok, "{out}");
    // Past the board's page cache: the bytes come from a disk.
    let back = dir.join("failing.back");
    let _ = std::fs::remove_file(&back);
    assert!(smb(
        board,
        DOCS,
        &format!("get load-failing-0.bin {}", back.display())
    ));
    assert_eq!(
        sha256_file(&back),
        sha256_bytes(&data),
        "read back while {FAILING} fails"
    );
    let mut failed_after = None;
    while started.elapsed() < Duration::from_secs(90) {
        let state = md_state(board, key, "docs");
        if state.contains("degraded=1") {
            failed_after = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    let failed_after = failed_after.unwrap_or_else(|| {
        panic!(
            "md did not fail {FAILING} within 90 s:\n{}",
            md_state(board, key, "docs")
        )
    });
    let alert = sinks
        .alerts_since(mark)
        .into_iter()
        .find(|a| a.contains("docs"));
    let start = Instant::now();
    let alert = alert.or_else(|| {
        while start.elapsed() < Duration::from_secs(60) {
            if let Some(a) = sinks
                .alerts_since(mark)
                .into_iter()
                .find(|a| a.contains("docs"))
            {
                return Some(a);
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        None
    });
    assert!(
        alert.is_some(),
        "no alert naming docs after md failed {FAILING}: {:?}",
        sinks.alerts_since(mark)
    );
    let (ok, status) = board.ssh(key, "sudo -S nasforge-setup status");
    assert!(
        ok && status.lines().any(|l| l.contains("docs (md")
            && l.contains("missing the disk that was")
            && l.contains(&format!("serial {FAILING})"))),
        "status names the failed disk:\n{status}"
    );
    assert_eq!(
        board.fault(&["heal", FAILING]),
        format!("{FAILING} reads and writes again\n")
    );
    board.fault(&["unplug", FAILING]);
    // Put back only once the board has let go of it: udev's remove rule
    // (`mdadm -If`) takes the failed member out of the array, and until it
    // has, the disk coming back finds its slot taken.
    let out = Instant::now();
    while md_state(board, key, "docs")
        .lines()
        .any(|l| l.contains(": active raid1") && l.contains("(F)"))
    {
        assert!(
            out.elapsed() < Duration::from_secs(60),
            "the board kept the failed {FAILING} in docs after it was pulled:\n{}",
            md_state(board, key, "docs")
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    board.fault(&["plug", FAILING]);
    let whole = docs_whole(board, key, Duration::from_secs(300), "being reseated");
    eprintln!(
        "e2e: {FAILING} failing every read and write: md failed it {:.0}s after the first copy, the copy whole and read back whole from the other half; healed and reseated, re-added and whole {:.0}s later",
        failed_after.as_secs_f64(),
        whole.as_secs_f64()
    );
    let (_, rm) = board.ssh(key, "rm -f /srv/docs/load-*.bin && echo removed");
    assert!(rm.contains("removed"), "{rm}");
}
