//! An Armbian image rehearsed before flashing: a replica of Armbian (trixie)
//! for a ROCK 5B (tests/replica), made a NAS image by `nasforge build`,
//! booted with `nasforge emulate` on the Debian stand-in kernel, as every
//! Armbian image boots there. Armbian's own first run (SSH host keys made
//! anew by dpkg) happens as on the board, nasforge's first boot waits for it,
//! installs its packages and sets up storage unattended (a disk kept as it
//! is), and the logins the recipe set hold: the recipe's user with its key,
//! root's default password gone, no first-login wizard.
//!
//! Slow (minutes under TCG): runs when NASFORGE_SLOW_TESTS=1 (.ci/run).

mod board;
mod common;
mod replica;

use board::*;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
#[ignore = "slow, minutes under emulation (and root): NASFORGE_SLOW_TESTS=1 scripts/test runs it, as .ci/run does"]
fn an_armbian_image_first_boots_its_own_way_then_nasforges_on_the_stand_in_kernel() {
    let mut t = Phases::new();
    second_to_the_board();
    let cache = persistent_cache(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let dir = tempfile::Builder::new()
        .prefix("nasforge-armbian-")
        .tempdir()
        .unwrap();
    let d = dir.path();
    let key = d.join("id_ed25519");
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key));
    let pubkey = std::fs::read_to_string(d.join("id_ed25519.pub")).unwrap();
    let base = replica::trixie_base(&cache);
    replica::armbian(&base, &d.join("armbian.img"));
    t.lap("Debian trixie base (cached), made an Armbian replica");

    let inspect = nasforge(&["inspect", "armbian.img"], d, &cache);
    assert!(
        inspect.stdout.contains("rock5b boots 6.12.")
            && inspect
                .stdout
                .contains("Armbian's default root password `1234`"),
        "{}",
        inspect.stdout
    );
    write_recipe(
        d,
        "rock.toml",
        &format!(
            r#"name = "rock"
[base]
path = "armbian.img"
[board]
model = "rock5b"
# A SATA card on the M.2 M-key slot: no overlay (Debian's kernel has none
# of Armbian's).
overlays = []
[system]
hostname = "rocknas"
[[system.users]]
name = "admin"
sudo = true
password = "{PASSWORD}"
ssh_authorized_keys = ["{}"]
# One disk kept as it is: setup runs unattended on Armbian, and what is
# staged is little (mdadm, smartmontools, the alerts' HTTP client), not a
# NAS's hundred packages, minutes under TCG that the emulated board spends
# on Raspberry Pi OS already.
[storage]
mode = "unattended"
[[storage.disks]]
name = "old"
match = {{ transport = "sata" }}
keep = true
filesystem = "ext4"
mount = "/srv/old"
[alerts]
ntfy = "https://ntfy.example/rocknas-secret-topic"
[output]
path = "out/rock.img"
"#,
            pubkey.trim()
        ),
    );
    let r = nasforge(&["build", "rock.toml"], d, &cache);
    assert_eq!(r.status, 0, "{}", r.stderr);
    let image = d.join("out/rock.img");
    let root = sfdisk_parts(&image)[0].0 * 512;
    let built_key = debugfs_cat(&image, root, "/etc/ssh/ssh_host_ed25519_key.pub");
    assert!(built_key.starts_with("ssh-ed25519 "), "{built_key}");
    // The board's copy of the recipe carries the ntfy topic, a token:
    // root only.
    let copy = debugfs_stat(&image, root, "/boot/nasforge.toml");
    assert!(
        copy.contains("Mode:  0600") && copy.contains("User:     0"),
        "{copy}"
    );
    t.lap("build the NAS image");

    let old = d.join("old.img");
    ext4_disk_with_file(&old, 64 << 20, "old", "kept.txt", "kept as it is\n");
    let mut board = Board::boot(d, &image, &[old], "armbian.log");
    board.wait_for(
        "nasforge-firstboot: first boot complete",
        Duration::from_secs(1200),
    );
    t.lap("first boot: Armbian's first run, nasforge's packages");
    let log = board.log();
    assert!(
        log.contains("nasforge: the stand-in kernel's modules are at /usr/lib/modules/6.12."),
        "{}",
        tail(&log, 80)
    );
    board.wait_for_ssh(&key, Duration::from_secs(300));
    let (ok, said) = board.ssh(
        &key,
        "uname -r; hostname; systemctl is-enabled armbian-firstrun; cat /etc/ssh/ssh_host_ed25519_key.pub; test -e /root/.not_logged_in_yet || echo no-first-login; sudo -S sshd -T | grep -i '^permitrootlogin'; sudo -S cat /etc/shadow | grep '^root:' | cut -d: -f2 | cut -c1",
    );
    assert!(ok, "{said}");
    let lines: Vec<&str> = said.lines().map(str::trim).collect();
    assert!(
        lines.first().is_some_and(|l| l.ends_with("-arm64")),
        "the stand-in's Debian kernel: {said}"
    );
    assert!(lines.contains(&"rocknas"), "{said}");
    assert!(
        lines.contains(&"disabled"),
        "armbian-firstrun ran and disabled itself: {said}"
    );
    assert!(
        said.contains("ssh-ed25519 ") && !said.contains(built_key.trim()),
        "armbian-firstrun made new host keys: {said}\nbuilt: {built_key}"
    );
    assert!(lines.contains(&"no-first-login"), "{said}");
    assert!(
        said.to_lowercase()
            .contains("permitrootlogin without-password")
            && lines.iter().any(|l| *l == "*" || *l == "!"),
        "root: no password, none over SSH: {said}"
    );
    let setup = board.log();
    assert!(
        setup.contains("nasforge-firstboot: packages installed")
            && setup.contains("nasforge-setup: setup complete"),
        "{}",
        tail(&setup, 40)
    );
    let (ok, kept) = board.ssh(&key, "cat /srv/old/kept.txt");
    assert!(ok && kept.contains("kept as it is"), "{kept}");
    t.lap("ssh: new host keys, no first-login wizard, root locked");
    board.poweroff(&key);
}
