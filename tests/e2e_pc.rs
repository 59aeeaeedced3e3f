//! End to end on an emulated PC: the bundled recipe for a fifteen-drive PC
//! (recipes/x86-15-drive-raid6.toml, with a password and a key put in as a
//! user would) built on Debian's amd64 packages, booted by `nasforge
//! emulate` on qemu's q35 with UEFI firmware and fifteen blank disks on
//! three AHCI controllers. Unattended setup builds the raid6; a 64 MiB file
//! goes to the share and comes back over SMB with its sha256; then the PC
//! boots with two of the fifteen missing, and the array assembles degraded
//! under its name, the file reads back intact and status says degraded.
//!
//! Slow (minutes under TCG): runs when NASFORGE_SLOW_TESTS=1 (.ci/run).

mod board;
mod common;

use board::*;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const DISKS: usize = 15;

/// The bundled recipe as a user makes it theirs: a password, their key.
fn users_recipe(pubkey: &str) -> String {
    let bundled = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes/x86-15-drive-raid6.toml"),
    )
    .unwrap();
    let password = "password = \"change-me-before-building\"";
    let key = "# ssh_authorized_keys = [\"ssh-ed25519 AAAA... you@laptop\"]";
    assert!(bundled.contains(password) && bundled.contains(key));
    bundled
        .replace(password, &format!("password = \"{PASSWORD}\""))
        .replace(key, &format!("ssh_authorized_keys = [\"{pubkey}\"]"))
}

/// Polls an SSH command until its output satisfies `ready`.
fn wait_for_output(
    board: &mut Board,
    key: &Path,
    command: &str,
    limit: Duration,
    ready: impl Fn(&str) -> bool,
) -> String {
    let start = Instant::now();
    loop {
        let (_, out) = board.ssh(key, command);
        if ready(&out) {
            return out;
        }
        assert!(
            start.elapsed() < limit,
            "not within {limit:?}, `{command}` said:\n{out}"
        );
        std::thread::sleep(Duration::from_secs(5));
    }
}

#[test]
fn fifteen_drives_on_an_emulated_pc_raid6_survives_two_missing() {
    if !slow_tests_enabled("fifteen_drives_on_an_emulated_pc_raid6_survives_two_missing") {
        return;
    }
    let mut t = Phases::new();
    let cache = persistent_cache(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("nasforge-e2e-pc-")
        .tempdir()
        .unwrap();
    let d = dir.path();
    let key = d.join("id_ed25519");
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key));
    let pubkey = std::fs::read_to_string(d.join("id_ed25519.pub")).unwrap();
    write_recipe(d, "pc.toml", &users_recipe(pubkey.trim()));
    let r = nasforge(&["build", "pc.toml", "--timings"], d, &cache);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("sas ✓") && r.stderr.contains("md ✓"),
        "{}",
        r.stderr
    );
    t.lap("build: Debian amd64 base (cached after the first run), packages, installer");
    let image = d.join("out/x86-15-drive-raid6.img");
    assert!(
        !contains_bytes(&image, PASSWORD.as_bytes()),
        "the password is in the image"
    );

    // Named files, so each keeps its serial when others are left out.
    let disks: Vec<PathBuf> = (0..DISKS)
        .map(|i| {
            let p = d.join(format!("member{i:02}.img"));
            std::fs::File::create(&p).unwrap().set_len(GIB).unwrap();
            p
        })
        .collect();
    let mut pc = Board::boot(d, &image, &disks, "boot1.log");
    pc.wait_for("nasforge-setup: setup complete", Duration::from_secs(2400));
    let log1 = pc.log();
    assert!(
        log1.contains("Create raid6 array 'data'"),
        "{}",
        tail(&log1, 60)
    );
    t.lap("first boot: UEFI, offline packages, 15 partitions, mdadm --create raid6, mkfs");
    pc.wait_for_ssh(&key, Duration::from_secs(300));
    let (ok, detail) = pc.ssh(&key, "sudo -S mdadm --detail /dev/md/data");
    assert!(
        ok && detail.contains("Raid Level : raid6") && detail.contains("Raid Devices : 15"),
        "{detail}"
    );
    let uuid = detail
        .lines()
        .find(|l| l.trim_start().starts_with("UUID :"))
        .unwrap()
        .trim()
        .to_string();
    // Three controllers, as the guest sees them: q35's own AHCI and two more.
    let (_, hosts) = pc.ssh(
        &key,
        "for d in /sys/block/sd*; do readlink -f $d/device | cut -d/ -f1-5; done | sort -u",
    );
    assert_eq!(hosts.lines().count(), 3, "{hosts}");

    let payload = d.join("payload.bin");
    write_payload(&payload, 64 << 20);
    let want = sha256_file(&payload);
    assert_eq!(
        smb_roundtrip(&pc, d, &payload, "payload.bin"),
        want,
        "SMB put/get round trip"
    );
    t.lap("smbclient: 64 MiB put and get");
    // md refuses to start a raid6 that lost two members before its first
    // resync ended ("cannot start dirty degraded array"): a new NAS's owner
    // waits for it too, as status tells them.
    wait_for_output(
        &mut pc,
        &key,
        "cat /proc/mdstat",
        Duration::from_secs(1800),
        |s| s.contains("[15/15]") && !s.contains("resync") && !s.contains("recovery"),
    );
    t.lap("the initial resync");
    pc.poweroff(&key);
    t.lap("power off");

    // Two members gone, one from each end of the case.
    let remaining: Vec<PathBuf> = disks
        .iter()
        .enumerate()
        .filter(|(i, _)| ![0, DISKS - 1].contains(i))
        .map(|(_, p)| p.clone())
        .collect();
    let mut pc = Board::boot(d, &image, &remaining, "boot2.log");
    pc.wait_for_ssh(&key, Duration::from_secs(600));
    wait_for_output(
        &mut pc,
        &key,
        "cat /proc/mdstat; mountpoint /srv/data",
        Duration::from_secs(300),
        |s| s.contains("[15/13]") && s.contains("is a mountpoint"),
    );
    let (ok, after) = pc.ssh(&key, "sudo -S mdadm --detail /dev/md/data");
    assert!(
        ok && after.contains(&uuid) && after.contains("degraded"),
        "the same array came back degraded ({uuid}):\n{after}"
    );
    assert_eq!(
        smb_get(&pc, d, "payload.bin"),
        want,
        "the file on a raid6 missing two members"
    );
    let (_, status) = pc.ssh(&key, "sudo -S nasforge-setup status");
    assert!(
        status.contains("raid6, degraded (13 of 15 members)"),
        "{status}"
    );
    t.lap("boot with two members missing: degraded, mounted, file intact, status says so");
    pc.poweroff(&key);
}
