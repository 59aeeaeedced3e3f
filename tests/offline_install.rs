//! The staged set is complete and installable with no network: a NAS recipe
//! on a real Debian bookworm image (built from Debian's packages by `[base]
//! debian`, the PC's amd64 base the emulated PC boots, cached once per
//! machine), then the first-boot install step run inside the output's root
//! filesystem, in a network namespace with no network at all. Bookworm is
//! covered here (and by the PC scenario) while the emulated board runs
//! trixie; its 6.1 kernel has no ntfs3, so a kept disk stages ntfs-3g. The
//! arm64 install runs on the emulated board itself (trixie) and in
//! tests/armbian_boot.rs; a Pi 5 refused for a kernel without its device
//! tree is tests/build_rpi.rs's.
//!
//! Slow (the base image takes minutes to build the first time): runs when
//! NASFORGE_SLOW_TESTS=1, as .ci/run sets it.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Mounted(Vec<PathBuf>);

impl Drop for Mounted {
    fn drop(&mut self) {
        for m in self.0.iter().rev() {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}

/// A child process killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "slow, minutes under emulation (and root): NASFORGE_SLOW_TESTS=1 scripts/test runs it, as .ci/run does"]
fn staged_packages_install_offline_with_no_network() {
    second_to_the_board();
    let dir = tempfile::tempdir().unwrap();
    write_recipe(
        dir.path(),
        "nas.toml",
        &(r#"[base]
debian = { suite = "bookworm", arch = "amd64" }
[board]
model = "x86-64"
[system]
hostname = "pinas"
[[system.users]]
name = "admin"
sudo = true
password = "offline test password"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "raid5"
disks = { transport = "sata", count = 3 }
filesystem = "ext4"
mount = "/srv/data"
# A USB disk kept as it is, its filesystem not named (as a WD Elements
# disk ships NTFS): bookworm's kernel has no ntfs3, so ntfs-3g is staged.
[[storage.disks]]
name = "media"
match = { transport = "usb" }
keep = true
mount = "/srv/media"
[[shares]]
name = "data"
path = "/srv/data"
smb = { users = ["admin"] }
nfs = { clients = "10.0.2.0/24" }
[output]
path = "out/nas.img"
"#
        .to_string()
            + &host_installer_section()),
    );
    let cache = persistent_cache(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let started = std::time::Instant::now();
    let r = nasforge(&["build", "nas.toml", "--timings"], dir.path(), &cache);
    assert_eq!(r.status, 0, "{}", r.stderr);
    eprintln!(
        "build: {:.0}s\n{}",
        started.elapsed().as_secs_f64(),
        r.stderr
    );
    assert!(r.stderr.contains("x86-64 boots 6.1."), "{}", r.stderr);
    assert!(
        r.stderr.contains("ntfs-3g staged: kernel 6.1.")
            && r.stderr
                .contains("has no `ntfs3` module, and a kept disk may hold ntfs"),
        "{}",
        r.stderr
    );
    let img = dir.path().join("out/nas.img");
    let root = sfdisk_parts(&img)[1].0 * 512;
    e2fsck(&img, root);
    // Each board made from the image gets a machine id of its own.
    assert_eq!(
        debugfs_cat(&img, root, "/etc/machine-id"),
        "uninitialized\n"
    );
    // `check` reads the same cached base and finds nothing wrong.
    let checked = nasforge(&["check", "nas.toml"], dir.path(), &cache);
    assert_eq!(checked.status, 0, "{}", checked.stderr);

    let mnt = dir.path().join("root");
    std::fs::create_dir(&mnt).unwrap();
    run(Command::new("mount")
        .arg("-o")
        .arg(format!("loop,offset={root}"))
        .arg(&img)
        .arg(&mnt));
    let mut mounted = Mounted(vec![mnt.clone()]);
    // The Debian base is an ordinary system: nothing of mmdebstrap's
    // install-time service blocking is left in it.
    assert!(
        !mnt.join("usr/sbin/policy-rc.d").exists(),
        "mmdebstrap's policy-rc.d was left in the image"
    );
    assert!(!mnt.join("usr/sbin/start-stop-daemon.REAL").exists());
    assert!(
        !mnt.join("etc/dpkg/dpkg.cfg.d/nasforge-build").exists(),
        "the build's unsafe-io for dpkg was left in the image: the board's dpkg must sync"
    );
    for (fs, target) in [("proc", "proc"), ("sysfs", "sys")] {
        run(Command::new("mount")
            .args(["-t", fs, fs])
            .arg(mnt.join(target)));
        mounted.0.push(mnt.join(target));
    }
    run(Command::new("mount")
        .args(["--bind", "/dev"])
        .arg(mnt.join("dev")));
    mounted.0.push(mnt.join("dev"));

    // A first boot that fails while the install holds update-initramfs and
    // byte-compiling back (dpkg finds a package it cannot configure) puts
    // both back: a board left with update-initramfs diverted to /bin/true
    // would not boot its next kernel.
    let broken = dir.path().join("broken");
    std::fs::create_dir_all(broken.join("DEBIAN")).unwrap();
    std::fs::write(
        broken.join("DEBIAN/control"),
        "Package: nasforge-broken\nVersion: 1\nArchitecture: all\nMaintainer: nasforge tests <tests@invalid>\nDescription: a package whose configuration fails\n",
    )
    .unwrap();
    std::fs::write(broken.join("DEBIAN/postinst"), "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(
        broken.join("DEBIAN/postinst"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    run(Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(&broken)
        .arg(mnt.join("tmp/nasforge-broken.deb")));
    let unconfigured = Command::new("chroot")
        .arg(&mnt)
        .args(["dpkg", "-i", "/tmp/nasforge-broken.deb"])
        .output()
        .unwrap();
    assert!(!unconfigured.status.success(), "its postinst fails");
    let failed = Command::new("unshare")
        .args(["--net", "chroot"])
        .arg(&mnt)
        .args(["/usr/lib/nasforge/firstboot", "packages"])
        .output()
        .unwrap();
    let failed_log = String::from_utf8_lossy(&failed.stderr);
    assert!(
        !failed.status.success()
            && failed_log.contains("finishing an interrupted package installation failed"),
        "{failed_log}"
    );
    assert_no_local_diversions(&mnt, &format!("a failed first boot: {failed_log}"));
    assert!(
        !mnt.join("usr/sbin/update-initramfs").is_symlink()
            && std::fs::read_to_string(mnt.join("usr/sbin/update-initramfs"))
                .unwrap()
                .contains("initramfs"),
        "update-initramfs is the packaged script again"
    );
    run(Command::new("chroot")
        .arg(&mnt)
        .args(["dpkg", "--purge", "nasforge-broken"]));

    // Another program holds debconf's database while the install starts,
    // as a distribution's own first-boot job may (dpkg-reconfigure): the
    // packages whose scripts use debconf fail, and the first boot waits
    // for the database and finishes the install. It is let go shortly
    // after the first boot says it waits. The holder is one process that
    // takes the lock as debconf does (flock(1) would leave the lock with
    // its command when killed).
    let mut killed = Killed(
        Command::new("perl")
            .args([
                "-MFcntl=:flock",
                "-e",
                "open(my $f, '<', $ARGV[0]) or die; flock($f, LOCK_EX) or die; $| = 1; print \"held\\n\"; sleep 600",
            ])
            .arg(mnt.join("var/cache/debconf/config.dat"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut held = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(killed.0.stdout.as_mut().unwrap()),
        &mut held,
    )
    .unwrap();
    assert_eq!(held, "held\n");
    let mut holder = Some(killed);
    let started = std::time::Instant::now();
    let mut install = Command::new("unshare")
        .args(["--net", "chroot"])
        .arg(&mnt)
        .args(["sh", "-c", "/usr/lib/nasforge/firstboot packages 2>&1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = String::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(install.stdout.take().unwrap())) {
        let line = line.unwrap();
        // Let go a little later, so that the first boot is seen waiting.
        if line.contains("nasforge-firstboot: the install failed; waiting")
            && let Some(h) = holder.take()
        {
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(8));
                drop(h);
            });
        }
        log += &line;
        log.push('\n');
    }
    let status = install.wait().unwrap();
    assert!(status.success(), "the offline install failed:\n{log}");
    assert!(
        log.contains("is locked by another process")
            && log.contains("nasforge-firstboot: debconf's database was free after"),
        "the install met debconf's database held, waited and finished:\n{log}"
    );
    eprintln!("offline install: {:.0}s", started.elapsed().as_secs_f64());

    let packages = [
        "mdadm",
        "samba",
        "nfs-kernel-server",
        "smartmontools",
        "avahi-daemon",
        "wsdd2",
        "ntfs-3g",
    ];
    let status = stdout(
        Command::new("chroot")
            .arg(&mnt)
            .args([
                "dpkg-query",
                "-W",
                "-f",
                "${Package} ${db:Status-Status}\\n",
            ])
            .args(packages),
    );
    for p in packages {
        assert!(
            status.contains(&format!("{p} installed")),
            "{p} is not installed:\n{status}\n{log}"
        );
    }
    assert!(mnt.join("var/lib/nasforge/packages-installed").exists());
    // Without their documentation and manual pages, with their copyright;
    // dpkg's path-exclude is gone once they are installed.
    assert!(mnt.join("usr/share/doc/samba/copyright").is_file());
    assert!(!mnt.join("usr/share/doc/samba/changelog.Debian.gz").exists());
    assert!(!mnt.join("usr/share/man/man8/smbd.8.gz").exists());
    assert!(
        !mnt.join("etc/dpkg/dpkg.cfg.d/nasforge-firstboot").exists(),
        "the first boot's path-exclude stays for packages installed later"
    );
    assert!(
        !mnt.join("var/lib/nasforge/debs").exists(),
        "the staged packages are removed once installed"
    );
    // Byte-compiling was held back by diverting py3compile and py_compile.py:
    // no diversion is left, and py_compile.py is the packaged file again.
    assert_no_local_diversions(&mnt, "the first boot");
    let py_compile = mnt.join("usr/lib/python3.11/py_compile.py");
    assert!(
        std::fs::read_to_string(&py_compile)
            .unwrap()
            .contains("def compile("),
        "{} is not Python's own",
        py_compile.display()
    );
    let verify = Command::new("chroot")
        .arg(&mnt)
        .args(["dpkg", "--verify", "libpython3.11-minimal"])
        .output()
        .unwrap();
    let verify = String::from_utf8_lossy(&verify.stdout);
    assert!(
        !verify.contains("py_compile.py"),
        "py_compile.py differs from libpython3.11-minimal's: {verify}"
    );
    drop(mounted);
}

/// Nothing the first boot held back with dpkg-divert is left in `mnt`.
fn assert_no_local_diversions(mnt: &Path, after: &str) {
    let diversions = stdout(
        Command::new("chroot")
            .arg(mnt)
            .args(["dpkg-divert", "--list"]),
    );
    assert!(
        !diversions.contains("local diversion"),
        "{after} left diversions:\n{diversions}"
    );
}
