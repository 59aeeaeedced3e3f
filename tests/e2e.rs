//! End to end on an emulated board: build a NAS image from a replica of
//! Raspberry Pi OS (trixie), the release users download today
//! (tests/replica: nasforge's Debian trixie base with Raspberry Pi OS's
//! first boot: userconf-pi's own service renames the `pi` user at uid 1000
//! from userconf.txt, cloud-init reads the boot partition), write Raspberry
//! Pi Imager's OS customisation onto it as Imager does (a hostname and a
//! user of its own), boot it with `nasforge emulate` (its userland on the
//! Debian stand-in kernel, as every Raspberry Pi OS image boots there) on
//! qemu's virt machine with an AHCI controller and four SATA disks, and
//! six USB disks (tests/usb: a raid1, a disk kept as it is, a UAS quirk,
//! and a pool of three disks of 1, 2 and 3 GiB that the kept disk joins), and check the NAS from the host the way a user would:
//! smbclient, an NFS client, SSH as the renamed user. A ZFS raidz1 on three
//! more SATA disks (tests/zfs) shares every boot. Then a power cut during
//! setup, and a reboot with a member disk missing from the md array and one
//! from the pool (the array assembles under its name, the pool is imported
//! and mounted, both degraded, files intact), on which the NAS is cared for
//! (tests/care): alerts, replace, grow, apply. Faults while the NAS is busy
//! (tests/faults) share the second boot: a USB member pulled out and put
//! back while five clients copy, and one failing every read and write.
//!
//! Slow (minutes under TCG): runs when NASFORGE_SLOW_TESTS=1 (.ci/run).

mod board;
mod care;
mod common;
mod faults;
mod home_network;
mod load;
mod replica;
mod usb;
mod zfs;

use board::*;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A file on the running board's boot partition as the board's disk holds
/// it now: the overlay read as qemu has written it (`-U`: qemu holds the
/// lock), so only what the guest has flushed is there.
fn boot_file_now(dir: &Path, name: &str) -> String {
    let snap = dir.join("snapshot.img");
    run(Command::new("qemu-img")
        .args(["convert", "-U", "-O", "raw"])
        .arg(dir.join("emulate/root.qcow2"))
        .arg(&snap));
    let table = run(Command::new("sfdisk").arg("--json").arg(&snap));
    let table: serde_json::Value = serde_json::from_slice(&table.stdout).unwrap();
    let start = table["partitiontable"]["partitions"][0]["start"]
        .as_u64()
        .unwrap();
    let out = Command::new("mtype")
        .env("MTOOLS_SKIP_CHECK", "1")
        .arg("-i")
        .arg(format!("{}@@{}", snap.display(), start * 512))
        .arg(format!("::{name}"))
        .output()
        .unwrap();
    std::fs::remove_file(&snap).unwrap();
    printed(&out)
}

#[test]
#[ignore = "slow, minutes under emulation (and root): NASFORGE_SLOW_TESTS=1 scripts/test runs it, as .ci/run does"]
fn a_nas_from_build_to_a_real_client_on_an_emulated_board() {
    let mut t = Phases::new();
    let cache = persistent_cache(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("nasforge-e2e-")
        .tempdir()
        .unwrap();
    let d = dir.path();
    let key = d.join("id_ed25519");
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key));
    let pubkey = std::fs::read_to_string(d.join("id_ed25519.pub")).unwrap();

    // smbtorture's root (a native mmdebstrap, mostly downloading and
    // unpacking) is made on the host while the arm64 base builds under
    // qemu-user, not in the minutes the suites have on a fresh machine.
    let torture = {
        let cache = cache.clone();
        std::thread::spawn(move || home_network::Torture::of("trixie", &cache))
    };
    let base = replica::trixie_base(&cache);
    replica::raspberry_pi_os(&base, &d.join("pios.img"));
    t.lap("Debian trixie base (cached after the first run), made a Raspberry Pi OS replica");
    let sinks = care::Sinks::start();

    write_recipe(
        d,
        "nas.toml",
        &format!(
            r#"name = "nas"
[base]
path = "pios.img"
[board]
model = "pi4"
[kernel]
require = ["sata", "md"]
[system]
hostname = "e2enas"
[[system.users]]
name = "admin"
sudo = true
password = "{PASSWORD}"
ssh_authorized_keys = ["{}"]
[storage]
mode = "unattended"
{usb_keys}[[storage.arrays]]
name = "data"
level = "raid5"
# The three 2 GiB disks named member*; the USB one that holds someone's
# data is not named, and the pool takes the zfs* ones.
disks = {{ transport = "sata", serial = "member*", min_size = "1.5GiB", count = 3 }}
filesystem = "ext4"
mount = "/srv/data"
[[shares]]
name = "data"
path = "/srv/data"
smb = {{ users = ["admin"] }}
nfs = {{ clients = "10.0.2.0/24" }}
[[shares]]
name = "backup"
path = "/srv/data/backup"
smb = {{ users = ["admin"], timemachine = true, timemachine_max_size = "1536MiB" }}
[[shares]]
name = "media"
path = "/srv/data/media"
smb = {{ users = ["admin"], guest = true }}
{usb_tables}{zfs_tables}[packages]
# avahi's command-line tools, to ask the board's own responder what it says.
install = ["avahi-utils"]
{alerts}
[output]
path = "out/nas.img"
"#,
            pubkey.trim(),
            alerts = sinks.recipe(),
            usb_keys = usb::storage_keys(),
            usb_tables = usb::recipe_tables(),
            zfs_tables = zfs::recipe_tables(),
        ),
    );
    let zfs_lines = |stderr: &str| -> String {
        stderr
            .lines()
            .filter(|l| l.to_lowercase().contains("zfs"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let r = nasforge(&["build", "nas.toml", "--timings"], d, &cache);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stderr.contains("boot:/userconf.txt"), "{}", r.stderr);
    eprintln!("e2e: the build said of ZFS:\n{}", zfs_lines(&r.stderr));
    t.lap("build the image (ZFS modules compiled unless cached)");
    // The same trixie image for a Pi 5: Debian's 6.12 has its device tree
    // but neither the RP1 nor its SD card driver.
    let pi5 = std::fs::read_to_string(d.join("nas.toml"))
        .unwrap()
        .replace("model = \"pi4\"", "model = \"pi5\"");
    write_recipe(d, "pi5.toml", &pi5);
    let r = nasforge(&["check", "pi5.toml"], d, &cache);
    assert!(
        r.status == 1
            && r.stderr
                .contains("board.model: the Raspberry Pi 5 cannot boot this image: kernel 6.12.")
            && r.stderr.contains("has no driver for the RP1 southbridge"),
        "{}",
        r.stderr
    );
    let built = d.join("out/nas.img");
    assert!(
        !contains_bytes(&built, PASSWORD.as_bytes()),
        "the password is in the image"
    );
    // The card as Raspberry Pi Imager leaves it with its OS customisation
    // on: a hostname, a user and a timezone of its own.
    let image = d.join("card.img");
    run(Command::new("cp")
        .arg("--sparse=always")
        .arg(&built)
        .arg(&image));
    let imager_hash = nasforge::system::secrets::crypt_password(
        "imager-password",
        nasforge::system::secrets::Scheme::Yescrypt,
    )
    .unwrap();
    replica::Imager {
        hostname: "imager-pi",
        user: "alice",
        password_hash: &imager_hash,
        ssh_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGltYWdlcmltYWdlcmltYWdlcmltYWdlcmltYWdlcmlt alice@laptop",
        timezone: "Europe/London",
    }
    .customise(&image, 1796380000000);

    let mut disks: Vec<PathBuf> = Vec::new();
    for i in 0..3 {
        let p = d.join(format!("member{i}.img"));
        std::fs::File::create(&p).unwrap().set_len(2 * GIB).unwrap();
        disks.push(p);
    }
    // On USB, as the six SATA ports hold the md members and the pool's:
    // between the raid1's 512 MiB and the kept disk's 1 GiB, no rule's size.
    let old = d.join("usb-olddata.img");
    ext4_disk_with_file(
        &old,
        768 << 20,
        "olddata",
        "precious.txt",
        "family photos, do not lose\n",
    );
    let old_sha = sha256_file(&old);
    let usb = usb::Usb::create(d);
    let pool = zfs::disks(d);
    let mut all = disks.clone();
    all.extend(pool.iter().cloned());
    all.push(old.clone());
    all.extend(usb.disks.iter().cloned());

    // First boot, cut after the raid5 exists with its filesystem and
    // before mdadm.conf lists it: as the USB raid1 is being made. About
    // 15 minutes on a 2-core machine, but over 30 in a CI run whose other
    // lane booted the emulated PC alongside: the limit is there to name a
    // hang, not to time it.
    let mut board = Board::boot(d, &image, &all, "boot1.log");
    board.wait_for("Create raid1 array 'docs'", Duration::from_secs(2700));
    t.lap("first boot: offline packages, partitions, mdadm --create, mkfs");
    let log1 = board.log();
    assert!(
        log1.contains("Create raid5 array 'data'"),
        "{}",
        tail(&log1, 60)
    );
    board.power_cut();
    t.lap("power cut");

    // The next boot resumes from the journal and finishes. mdadm.conf
    // lists no array yet, and only listed ones start at boot (`AUTO -all`):
    // setup assembles the raid5 from its members before it goes on.
    let mut board = Board::boot(d, &image, &all, "boot2.log");
    board.wait_for("nasforge-setup: setup complete", Duration::from_secs(1800));
    let log2 = board.log();
    // Resumed from the journal: the first step it runs is the one the power
    // cut interrupted, and the raid5's disks are not partitioned nor the
    // array created again.
    let first = log2
        .lines()
        .find(|l| l.contains("nasforge-setup: ["))
        .unwrap_or("");
    assert!(
        log2.contains("nasforge-setup:   /dev/md/data assembled again from its members")
            && !first.contains("'data'")
            && !first.contains("/dev/md/data"),
        "setup did not assemble the raid5 and resume where it stopped: {first}\n{}",
        tail(&log2, 60)
    );
    assert!(
        !log2.contains("Create raid5 array") && !log2.contains(") for 'data'"),
        "{}",
        tail(&log2, 60)
    );
    t.lap("second boot: setup resumed and finished");
    // What a user reads on their workstation is on the card as soon as setup
    // says so, without waiting for a clean shutdown.
    let card = boot_file_now(d, "nasforge-status.txt");
    assert!(
        card.contains("Setup: complete") && card.contains("/srv/data"),
        "nasforge-status.txt on the boot partition:\n{card}"
    );
    care::secret_kept_off_the_card(d);
    board.wait_for_ssh(&key, Duration::from_secs(300));
    // userconf renamed pi: the same uid, pi-gen's groups, sudo among them,
    // and userconf.txt consumed; nasforge's first boot ran after it.
    let (ok, id) = board.ssh(
        &key,
        "id; test ! -e /boot/firmware/userconf.txt && echo consumed",
    );
    assert!(
        ok && id.contains("uid=1000(admin)") && id.contains("(sudo)") && id.contains("consumed"),
        "{id}"
    );
    // Imager's user-data ran through Raspberry Pi OS's cloud-init: the
    // recipe's hostname and users hold (no second account, none of Imager's
    // name), and its other settings were applied.
    let (ok, who) = board.ssh(
        &key,
        "hostname; getent passwd alice || echo no-alice; getent passwd | awk -F: '$3 >= 1000 && $3 < 60000 { print $1 }'; grep '^127.0.1.1' /etc/hosts; readlink /etc/localtime",
    );
    let lines: Vec<&str> = who.lines().collect();
    assert!(
        ok && lines.first() == Some(&"e2enas")
            && lines.contains(&"no-alice")
            && lines.iter().filter(|l| **l == "admin").count() == 1
            && who.contains("127.0.1.1\te2enas")
            && !who.contains("imager-pi")
            && who.contains("Europe/London"),
        "{who}"
    );
    // First boot saves its log once more as it ends, a moment after setup
    // says it is complete.
    let mut log = String::new();
    board.wait_until(
        "nasforge-setup.log on the boot partition to tell the whole first boot",
        Duration::from_secs(180),
        Duration::from_secs(10),
        |_| {
            log = boot_file_now(d, "nasforge-setup.log");
            log.contains("nasforge-setup: setup complete")
        },
    );
    assert!(
        log.contains("nasforge-firstboot: setting up storage")
            && log.contains("Raspberry Pi Imager's customisation (user-data on the boot partition) sets hostname timezone user"),
        "nasforge-setup.log on the boot partition:\n{log}"
    );
    assert!(
        boot_file_now(d, "nasforge-setup.previous.log").contains("nasforge-firstboot: installing"),
        "the log of the boot the power cut ended, saved while it ran"
    );

    // From the host, as a user would.
    let payload = d.join("payload.bin");
    write_payload(&payload, 64 << 20);
    let want = sha256_file(&payload);
    assert_eq!(
        smb_roundtrip(&board, d, &payload, "payload.bin"),
        want,
        "SMB put/get round trip"
    );
    t.lap("smbclient: 64 MiB put and get");
    zfs::check_after_setup(&board, &key, d, &payload, &want);
    t.lap("ZFS: module and tools agree, raidz1 by id, datasets, SMB beside md");
    let nfs = Command::new("nfs-ls")
        .arg(format!(
            "nfs://127.0.0.1/srv/data?version=4&nfsport={}",
            board.nfs
        ))
        .output()
        .unwrap();
    let listing = printed(&nfs);
    if !(nfs.status.success() && listing.contains("payload.bin")) {
        // What the board thinks it exports, and whether the array is still
        // mounted where the share lives.
        let (_, why) = board.ssh(
            &key,
            "mountpoint /srv/data; sudo -S sh -c 'exportfs -v; journalctl -b --no-pager' \
             | grep -iE 'srv-data|inactive unit|md127|md/data|nfs|mountd|exportfs|/srv' | tail -80",
        );
        panic!("NFS listing:\n{listing}\non the board:\n{why}");
    }
    let cat = nfs_cat(&board, "payload.bin");
    assert!(
        cat.status.success(),
        "nfs-cat: {}",
        String::from_utf8_lossy(&cat.stderr)
    );
    assert_eq!(sha256_bytes(&cat.stdout), want, "the file read over NFS");
    t.lap("NFS: listed and read back");
    usb.check_board(&board, &key, d);
    t.lap("USB: transport, quirk active, uas driver, raid1, kept disk shared as it is");
    let pooled = usb.check_pool(&board, &key, d);
    t.lap("USB pool: mergerfs over d1, d2 and the kept disk, files spread, nightly sync run");
    faults::usb_member_pulled_under_load(&board, &key, d, &sinks);
    t.lap("under load: a USB member pulled out and put back, every copy intact, re-added, check clean");
    faults::usb_member_fails(&board, &key, d, &sinks);
    t.lap("a USB member failing every read and write: failed by md, reported, nothing read wrong, reseated");
    home_network::found_by_name(&board, &key, "e2enas", "backup");
    t.lap("found by name: avahi-resolve, avahi-browse, wsdd2");
    home_network::time_machine_and_guests(&board, &key, d, 1536);
    t.lap("Time Machine limit and folder, guest share");
    home_network::add_plain_share(&board, &key);
    home_network::shares_behave_like_samba_own(&board, &torture.join().unwrap());
    t.lap("smbtorture: nasforge's share beside a plain one, vfs.fruit");
    if std::env::var("NASFORGE_BENCH_SHARES").is_ok_and(|v| v == "1") {
        home_network::throughput(&board, d);
    }
    home_network::remove_plain_share(&board, &key);

    let (ok, mdstat) = board.ssh(&key, "cat /proc/mdstat");
    assert!(ok && mdstat.contains(": active raid5"), "{mdstat}");
    let (ok, detail) = board.ssh(&key, "sudo -S mdadm --detail /dev/md/data");
    assert!(
        ok && (detail.contains("State : clean")
            || detail.contains("resyncing")
            || detail.contains("active")),
        "{detail}"
    );
    let uuid = detail
        .lines()
        .find(|l| l.trim_start().starts_with("UUID :"))
        .unwrap()
        .trim()
        .to_string();
    let (_, fstab) = board.ssh(&key, "cat /etc/fstab");
    assert!(
        fstab
            .lines()
            .any(|l| l.starts_with("UUID=") && l.contains("/srv/data") && l.contains("nofail")),
        "{fstab}"
    );
    let (ok, status) = board.ssh(&key, "sudo -S nasforge-setup status --json");
    assert!(ok, "{status}");
    // The JSON, without sudo's prompt before it or a note after it.
    let json: serde_json::Value =
        serde_json::Deserializer::from_str(status.trim_start_matches(|c| c != '{'))
            .into_iter()
            .next()
            .unwrap()
            .unwrap();
    assert!(json.to_string().contains("\"data\""), "{json}");
    // First boot installed nasforge-setup's completions and manual page.
    let (ok, help) = board.ssh(
        &key,
        "head -c 200 /usr/local/share/bash-completion/completions/nasforge-setup; head -c 300 /usr/local/share/man/man8/nasforge-setup.8",
    );
    assert!(
        ok && help.contains("_nasforge__setup()") && help.contains(".TH nasforge-setup 8"),
        "{help}"
    );
    t.lap("ssh: mdstat, mdadm --detail, fstab, status");
    board.poweroff(&key);
    assert_eq!(
        sha256_file(&old),
        old_sha,
        "the disk holding data was left byte-identical"
    );
    usb.files_identical();
    t.lap("power off; the other disk untouched");

    // The next boot, with a member disk gone from the array and one from
    // the pool: the array assembles from mdadm.conf under its name and runs
    // degraded, the pool is imported from its cache file DEGRADED, and the
    // files are intact. Two blank disks are there to replace the array's
    // member and to grow onto.
    let mut degraded: Vec<PathBuf> = vec![disks[0].clone(), disks[2].clone()];
    degraded.extend(care::blank_disks(d));
    // The disk holding data stayed untouched above; its USB port takes a
    // blank disk for the ZFS pool's replace (the xHCI has seven).
    degraded.extend([pool[0].clone(), pool[2].clone(), zfs::spare(d)]);
    // And the pool's d1 (1 GiB) is gone; a blank USB disk is there to
    // replace it.
    degraded.extend(usb.disks.iter().filter(|p| **p != usb.pool[0]).cloned());
    degraded.push(usb.spare.clone());
    let mark = sinks.mark();
    let mut board = Board::boot(d, &image, &degraded, "boot4.log");
    board.wait_for_ssh(&key, Duration::from_secs(600));
    let start = Instant::now();
    loop {
        let (_, md) = board.ssh(&key, "cat /proc/mdstat; mountpoint /srv/data");
        if md.contains("[3/2]") && md.contains("is a mountpoint") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "the array did not come up degraded and mounted:\n{md}"
        );
        std::thread::sleep(Duration::from_secs(5));
    }
    let (ok, after) = board.ssh(&key, "sudo -S mdadm --detail /dev/md/data");
    assert!(
        ok && after.contains(&uuid),
        "the same array came back ({uuid}):\n{after}"
    );
    usb.quirk_active(&board, &key);
    usb.kept_disk_mounted(&board, &key);
    assert_eq!(
        smb_get(&board, d, "payload.bin"),
        want,
        "the file on a degraded array"
    );
    let (_, status) = board.ssh(&key, "sudo -S nasforge-setup status");
    assert!(status.to_lowercase().contains("degraded"), "{status}");
    zfs::check_degraded(&board, &key, d, &want);
    zfs::replace_lost(&board, &key, d, &want);
    usb.pool_without_d1(&board, &key, d, &pooled);
    t.lap("next boot, a disk missing from the array, the ZFS pool and the USB pool: same array, pools imported and mounted, degraded, files intact, scrub clean, status says so; the ZFS pool's and the USB pool's lost disks replaced");
    let care = care::Care {
        dir: d,
        image: &image,
        key: &key,
        disks: &degraded,
        payload_sha: &want,
        sinks: &sinks,
    };
    care::after_a_member_went_missing(&care, board, mark, &mut t);
}
