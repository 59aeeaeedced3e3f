//! Raspberry Pi OS and Armbian as their first boots really behave: images
//! shaped like trixie-era Raspberry Pi OS (userconf-pi's own scripts, a `pi`
//! user at uid 1000 with pi-gen's groups, cloud-init, both kernels, its own
//! z50 hook) and Armbian 25.x (root:1234, PermitRootLogin yes,
//! armbian-firstrun), built with nasforge and checked with the real tools:
//! debugfs, e2fsck, the host's `sshd -T` and `visudo -cf`, and userconf-pi's
//! own name check.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

const PASSWORD: &str = "a long password nobody guesses";
const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVaNxqK0P7lyC3Ue1dDnrrIqdBgPjs0Lh6D3bhKkn8u me@laptop";
/// yescrypt (as Armbian's `passwd` in the chroot writes it, PAM's default
/// since Debian 11) of `1234`, made with libxcrypt for this fixture.
const ARMBIAN_ROOT_1234: &str =
    "$y$j9T$V8kx0b3zJ5dF1Ym2Qr7Gn.$WqpFxUjm4kO5VO4dNlWxIFHysKpnAOdWHrL1SG0Mem.";

fn accounts_with_pi() -> Vec<(String, Vec<u8>)> {
    let mut group = String::from("root:x:0:\nshadow:x:42:\n");
    let mut gshadow = String::from("root:*::\n");
    for (i, g) in PI_GEN_GROUPS.iter().enumerate() {
        group.push_str(&format!("{g}:x:{}:pi\n", 100 + i));
        gshadow.push_str(&format!("{g}:*::pi\n"));
    }
    group.push_str("pi:x:1000:\n");
    gshadow.push_str("pi:!::\n");
    vec![
        (
            "etc/passwd".into(),
            b"root:x:0:0:root:/root:/bin/bash\npi:x:1000:1000:,,,:/home/pi:/bin/bash\n".to_vec(),
        ),
        (
            "etc/shadow".into(),
            b"root:*:20000:0:99999:7:::\npi:!:20000:0:99999:7:::\n".to_vec(),
        ),
        ("etc/group".into(), group.into_bytes()),
        ("etc/gshadow".into(), gshadow.into_bytes()),
    ]
}

/// A Raspberry Pi OS (trixie, 2025-10 on) root: what its first boot reads.
fn pios_fixture() -> RpiFixture {
    let mut files = accounts_with_pi();
    files.extend(
        userconf_pi_files()
            .into_iter()
            .map(|(path, data, _)| (path, data)),
    );
    files.extend(raspi_firmware("Serge Schneider <serge@raspberrypi.com>"));
    files.extend([
        ("etc/ssh/sshd_config".to_string(), debian_sshd_config().into_bytes()),
        ("etc/ssh/sshd_config.d/.keep".into(), vec![]),
        (
            "usr/lib/systemd/system/ssh.service".into(),
            b"[Unit]\nDescription=OpenBSD Secure Shell server\n".to_vec(),
        ),
        (
            "etc/sudoers.d/README".into(),
            b"# Files in this directory are read by sudo.\n".to_vec(),
        ),
        // pi-gen stage2/04-cloud-init: cloud-init reads user-data from the
        // boot partition (NoCloud, seedfrom file:///boot/firmware). Its
        // cloud.cfg is Debian's package's own (unpacked by scripts/setup).
        (
            "etc/cloud/cloud.cfg".into(),
            std::fs::read(CLOUD_INIT_CFG).unwrap_or_else(|e| panic!("{CLOUD_INIT_CFG}: {e}")),
        ),
        (
            "etc/cloud/cloud.cfg.d/99_raspberry-pi.cfg".into(),
            b"datasource_list: [ NoCloud, None ]\ndatasource:\n  NoCloud:\n    seedfrom: file:///boot/firmware\n".to_vec(),
        ),
    ]);
    RpiFixture {
        root_files: files,
        ..Default::default()
    }
}

fn recipe(users: &str) -> String {
    format!(
        "name = \"pios\"\n[base]\npath = \"rpi.img\"\n[board]\nmodel = \"pi5\"\n[system]\nhostname = \"pinas\"\n{users}[output]\npath = \"out/pios.img\"\n"
    )
}

struct Built {
    dir: tempfile::TempDir,
    stderr: String,
    img: std::path::PathBuf,
    root: u64,
}

fn build_pios(users: &str) -> Built {
    let dir = tempfile::tempdir().unwrap();
    pios_fixture().build(dir.path());
    write_recipe(dir.path(), "pios.toml", &recipe(users));
    let r = nasforge(&["build", "pios.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    let img = dir.path().join("out/pios.img");
    let root = sfdisk_parts(&img)[1].0 * 512;
    e2fsck(&img, root);
    Built {
        stderr: r.stderr,
        dir,
        img,
        root,
    }
}

/// cloud.cfg of the cloud-init package scripts/setup unpacks.
const CLOUD_INIT_CFG: &str = "/opt/nasforge-test/cloud-init/etc/cloud/cloud.cfg";

/// Runs cloud-init's own set_hostname and update_hostname modules (its
/// Debian package, unpacked by scripts/setup) on the image's /etc/cloud
/// merged with user-data as Raspberry Pi Imager writes it, user-data over
/// the system files as cloud-init merges them. Ok when both modules leave
/// the hostname alone (they get no cloud to change it with, so one that
/// would change it fails) and none of the modules that would touch the
/// hostname, /etc/hosts or the users is in the merged lists.
fn cloud_init_hostname(img: &Path, offset: u64, scratch: &Path) -> Result<(), String> {
    let etc = scratch.join("etc-cloud");
    let _ = std::fs::remove_dir_all(&etc);
    std::fs::create_dir_all(&etc).unwrap();
    run(Command::new("debugfs")
        .arg("-R")
        .arg(format!("rdump /etc/cloud {}", etc.display()))
        .arg(format!("{}?offset={offset}", img.display())));
    // raspberrypi/rpi-imager src/customization_generator.cpp (v2.0.11.1),
    // with a hostname and a user.
    let user_data = scratch.join("user-data");
    std::fs::write(
        &user_data,
        "#cloud-config\nmanage_resolv_conf: false\n\nhostname: imager-name\nmanage_etc_hosts: true\nuser:\n  name: alice\n  shell: /bin/bash\n  lock_passwd: false\n  passwd: \"$y$j9T$abc$def\"\n  sudo: null\n",
    )
    .unwrap();
    let script = r#"
import logging, sys
sys.path.insert(0, "/opt/nasforge-test/cloud-init/usr/lib/python3/dist-packages")
from cloudinit import util
from cloudinit.config import cc_set_hostname, cc_update_hostname
system = util.read_conf_with_confd(sys.argv[1] + "/cloud.cfg")
user = util.load_yaml(open(sys.argv[2]).read())
cfg = util.mergemanydict([user, system])
for module in (cc_set_hostname, cc_update_hostname):
    module.handle(module.__name__, cfg, None, logging.getLogger(), [])
run = [str(m if isinstance(m, str) else m[0]).replace("-", "_") for m in cfg["cloud_init_modules"]]
touching = [m for m in ("set_hostname", "update_hostname", "update_etc_hosts", "users_groups") if m in run]
if touching:
    sys.exit("cloud-init would run " + ", ".join(touching))
print("hostname kept")
"#;
    let out = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .arg(etc.join("cloud"))
        .arg(&user_data)
        .output()
        .unwrap();
    if out.status.success() && printed(&out).contains("hostname kept") {
        Ok(())
    } else {
        Err(printed(&out))
    }
}

/// sudo's own parser on a sudoers drop-in (`visudo -cf`).
fn visudo_accepts(scratch: &Path, text: &str) {
    let file = scratch.join("sudoers");
    std::fs::write(&file, text).unwrap();
    let check = Command::new("visudo")
        .arg("-cf")
        .arg(&file)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", printed(&check));
}

fn members(group_file: &str, group: &str) -> Vec<String> {
    group_file
        .lines()
        .find(|l| l.starts_with(&format!("{group}:")))
        .and_then(|l| l.split(':').nth(3))
        .unwrap_or("")
        .split(',')
        .filter(|m| !m.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn raspberry_pi_os_key_only_first_user_gets_userconf_its_groups_and_sudo() {
    let b = build_pios(&format!(
        "[[system.users]]\nname = \"admin\"\nsudo = true\nssh_authorized_keys = [\"{KEY}\"]\ngroups = [\"dialout\", \"gpio\"]\n"
    ));
    let boot = sfdisk_parts(&b.img)[0].0 * 512;
    let line = mtype(&b.img, boot, "userconf.txt");
    let name = line.split(':').next().unwrap();
    assert_eq!(name, "admin");
    assert!(userconf_accepts(name), "userconf-pi's own check");

    // The rename keeps pi's groups: sudo and the recipe's stay on uid 1000.
    let group = debugfs_cat(&b.img, b.root, "/etc/group");
    for g in ["sudo", "dialout", "gpio"] {
        assert_eq!(members(&group, g), ["pi"], "{g}: {group}");
    }
    // No password to give sudo: a drop-in that sudo's own parser accepts.
    let sudoers = debugfs_cat(&b.img, b.root, "/etc/sudoers.d/nasforge");
    assert!(
        sudoers.contains("\nadmin ALL=(ALL:ALL) NOPASSWD: ALL\n"),
        "{sudoers}"
    );
    visudo_accepts(b.dir.path(), &sudoers);
    let stat = debugfs_stat(&b.img, b.root, "/etc/sudoers.d/nasforge");
    assert!(
        stat.contains("Mode:  0440") && stat.contains("User:     0"),
        "{stat}"
    );

    // cloud-init keeps the recipe's hostname against Imager's user-data;
    // on the unchanged base it would not.
    assert_eq!(cloud_init_hostname(&b.img, b.root, b.dir.path()), Ok(()));
    let base = b.dir.path().join("rpi.img");
    let e = cloud_init_hostname(&base, b.root, b.dir.path()).unwrap_err();
    assert!(e.contains("AttributeError"), "{e}");
    let drop_in = debugfs_cat(&b.img, b.root, "/etc/cloud/cloud.cfg.d/99-nasforge.cfg");
    assert!(
        drop_in.contains("cloud_init_modules:\n") && !drop_in.contains("users-groups"),
        "{drop_in}"
    );
    // Root: locked, and no password login over SSH, as sshd itself reads it.
    assert!(debugfs_cat(&b.img, b.root, "/etc/shadow").starts_with("root:*:"));
    let sshd = sshd_effective(&b.img, b.root, b.dir.path());
    assert!(
        sshd.contains("\npermitrootlogin without-password\n"),
        "{sshd}"
    );
    // Its own z50 hook only copies kernels: nothing written for it.
    assert!(!b.stderr.contains("raspi-firmware"), "{}", b.stderr);
}

#[test]
fn raspberry_pi_os_sudo_false_takes_sudo_from_the_renamed_user() {
    let b = build_pios(&format!(
        "[[system.users]]\nname = \"media\"\npassword = \"{PASSWORD}\"\nsudo = false\n"
    ));
    let group = debugfs_cat(&b.img, b.root, "/etc/group");
    assert!(members(&group, "sudo").is_empty(), "{group}");
    assert_eq!(members(&group, "video"), ["pi"], "other groups stay");
    let gshadow = debugfs_cat(&b.img, b.root, "/etc/gshadow");
    assert!(gshadow.contains("\nsudo:*::\n"), "{gshadow}");
    assert!(!contains_bytes(&b.img, PASSWORD.as_bytes()));
    let stat = debugfs_stat(&b.img, b.root, "/etc/sudoers.d/nasforge");
    assert!(
        stat.is_empty(),
        "a user with a password needs no drop-in: {stat}"
    );
}

#[test]
fn first_users_userconf_refuses_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    pios_fixture().build(dir.path());
    let long = "a".repeat(33);
    let cases: Vec<(String, &str)> = vec![
        (
            "[[system.users]]\nname = \"ad_min\"\npassword = \"x\"\n".into(),
            "pios.toml:9:8: system.users[0].name: Raspberry Pi OS's userconf refuses `ad_min` for the first user",
        ),
        (
            "[[system.users]]\nname = \"_admin\"\npassword = \"x\"\n".into(),
            "its rule is lowercase letters, digits and `-`, starting with a letter, 1 to 32 characters, not root",
        ),
        (
            format!("[[system.users]]\nname = \"{long}\"\npassword = \"x\"\n"),
            "is not a valid user name: lowercase letters, digits, `_` and `-`, starting with a letter, at most 32 characters",
        ),
        (
            "[[system.users]]\nname = \"root\"\npassword = \"x\"\n".into(),
            "root is not listed here",
        ),
        (
            String::new(),
            "without one it waits at first boot for a person at the console (tty8): add a [[system.users]] entry",
        ),
    ];
    for (users, says) in &cases {
        let name = users.split('"').nth(1).filter(|_| !users.is_empty());
        if let Some(name) = name {
            assert!(!userconf_accepts(name), "userconf-pi itself refuses {name}");
        }
        write_recipe(dir.path(), "pios.toml", &recipe(users));
        for cmd in ["check", "build"] {
            let r = nasforge(&[cmd, "pios.toml"], dir.path(), dir.path());
            assert_ne!(r.status, 0, "{cmd} {users}");
            assert!(r.stderr.contains(says), "{cmd} {users}:\n{}", r.stderr);
            assert!(r.stderr.contains("pios.toml:"), "located: {}", r.stderr);
        }
        assert_eq!(files_under(&dir.path().join("out")), Vec::<String>::new());
    }
    // The same names pass on a base without userconf (Debian's own images).
    write_recipe(
        dir.path(),
        "debian.toml",
        "[base]\ndebian = { suite = \"bookworm\", arch = \"arm64\" }\n[board]\nmodel = \"pi4\"\n[[system.users]]\nname = \"ad_min\"\npassword = \"x\"\n",
    );
    let r = nasforge(&["check", "debian.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    // And a name userconf accepts passes check on the Pi OS image.
    assert!(userconf_accepts("nas-admin2"));
    write_recipe(
        dir.path(),
        "pios.toml",
        &recipe("[[system.users]]\nname = \"nas-admin2\"\npassword = \"x\"\n"),
    );
    let r = nasforge(&["check", "pios.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
}

const ARMBIAN_AUTOLOGIN: &[u8] =
    b"[Service]\nExecStart=\nExecStart=-/sbin/agetty --noissue --autologin root %I $TERM\nType=idle\n";

fn armbian_fixture(dir: &Path) -> std::path::PathBuf {
    let files: Vec<(String, Vec<u8>)> = vec![
        (
            "etc/passwd".into(),
            b"root:x:0:0:root:/root:/bin/bash\n".to_vec(),
        ),
        (
            "etc/shadow".into(),
            format!("root:{ARMBIAN_ROOT_1234}:20000:0:99999:7:::\n").into_bytes(),
        ),
        (
            "etc/group".into(),
            b"root:x:0:\nsudo:x:27:\nusers:x:100:\n".to_vec(),
        ),
        ("etc/gshadow".into(), b"root:*::\nsudo:*::\n".to_vec()),
        ("etc/ssh/sshd_config".into(), armbian_sshd_config().into_bytes()),
        ("etc/ssh/sshd_config.d/.keep".into(), vec![]),
        ("etc/sudoers.d/README".into(), b"#\n".to_vec()),
        ("root/.not_logged_in_yet".into(), b"".to_vec()),
        // armbian/build lib/functions/rootfs/distro-agnostic.sh, with
        // CONSOLE_AUTOLOGIN=yes (its default).
        (
            "etc/systemd/system/getty@.service.d/override.conf".into(),
            ARMBIAN_AUTOLOGIN.to_vec(),
        ),
        (
            "etc/systemd/system/serial-getty@.service.d/override.conf".into(),
            ARMBIAN_AUTOLOGIN.to_vec(),
        ),
        (
            "etc/systemd/system/getty@tty1.service.d/keep.conf".into(),
            b"[Service]\nTTYVTDisallocate=no\n".to_vec(),
        ),
        (
            "lib/systemd/system/ssh.service".into(),
            b"[Unit]\nDescription=OpenBSD Secure Shell server\n".to_vec(),
        ),
        // armbian/build packages/bsp/common/lib/systemd/system/armbian-firstrun.service
        (
            "lib/systemd/system/armbian-firstrun.service".into(),
            b"[Unit]\nDescription=Armbian first run tasks\nBefore=getty.target system-getty.slice\nAfter=ssh.service\n[Service]\nType=simple\nRemainAfterExit=yes\nEnvironmentFile=/etc/default/armbian-firstrun\nExecStart=/usr/lib/armbian/armbian-firstrun start\nTimeoutStartSec=2min\n[Install]\nWantedBy=multi-user.target\n".to_vec(),
        ),
    ];
    armbian_image_with(dir, &["rockchip-rk3588-sata1.dtbo"], &files)
}

/// A Rock 5B recipe on the Armbian fixture, writing `out`.
fn rock_recipe(dir: &Path, system: &str, out: &str) {
    write_recipe(
        dir,
        "rock.toml",
        &format!(
            "[base]\npath = \"armbian.img\"\n[board]\nmodel = \"rock5b\"\n{system}[output]\npath = \"{out}\"\n"
        ),
    );
}

#[test]
fn armbian_root_1234_is_reported_locked_and_kept_from_ssh() {
    let dir = tempfile::tempdir().unwrap();
    let img = armbian_fixture(dir.path());
    let before = nasforge(&["inspect", "armbian.img"], dir.path(), dir.path());
    assert_eq!(before.status, 0, "{}", before.stderr);
    assert!(
        before
            .stdout
            .contains("root: has a password (Armbian's default root password `1234`")
            && before
                .stdout
                .contains("root may log in over SSH with a password"),
        "{}",
        before.stdout
    );
    let root = sfdisk_parts(&img)[0].0 * 512;
    assert!(
        sshd_effective(&img, root, dir.path()).contains("\npermitrootlogin yes\n"),
        "the fixture is what Armbian ships"
    );

    rock_recipe(
        dir.path(),
        &format!(
            "[[system.users]]\nname = \"admin\"\nsudo = true\npassword = \"{PASSWORD}\"\n[[system.users]]\nname = \"keys\"\nsudo = true\nssh_authorized_keys = [\"{KEY}\"]\n[[system.users]]\nname = \"robot\"\nssh_authorized_keys = [\"{KEY}\"]\n"
        ),
        "out/rock.img",
    );
    let r = nasforge(&["build", "rock.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: the base image ships Armbian's default root password `1234`; the built image has `root`'s password locked"),
        "{}",
        r.stderr
    );
    let out = dir.path().join("out/rock.img");
    e2fsck(&out, root);
    let shadow = debugfs_cat(&out, root, "/etc/shadow");
    assert!(shadow.starts_with("root:*:"), "{shadow}");
    let manifest = std::fs::read_to_string(dir.path().join("out/rock.manifest.json")).unwrap();
    assert!(
        manifest.contains("root: Armbian's default root password `1234` locked"),
        "{manifest}"
    );
    assert!(
        sshd_effective(&out, root, dir.path()).contains("\npermitrootlogin without-password\n")
    );
    let after = nasforge(
        &["inspect", "out/rock.img", "--json"],
        dir.path(),
        dir.path(),
    );
    let json: serde_json::Value = serde_json::from_str(&after.stdout).unwrap();
    assert_eq!(json["root_access"]["password"], "locked", "{json}");
    assert_eq!(json["root_access"]["ssh_root_password_login"], false);
    assert!(
        debugfs_cat(&out, root, "/etc/passwd").contains("admin:x:1000:1000:"),
        "Armbian's first-login questions are answered by the recipe"
    );
    // With its first-login script skipped, Armbian's root autologin on the
    // consoles goes too; a drop-in that logs nobody in stays.
    for unit in ["getty@", "serial-getty@"] {
        let path = format!("/etc/systemd/system/{unit}.service.d/override.conf");
        assert_eq!(debugfs_stat(&out, root, &path), "", "{path}");
    }
    assert!(
        debugfs_cat(
            &out,
            root,
            "/etc/systemd/system/getty@tty1.service.d/keep.conf"
        )
        .contains("TTYVTDisallocate=no")
    );
    // Armbian has no passwordless sudo: the key-only user given sudo gets
    // it, the one with a password does not, and a key-only user the recipe
    // did not give sudo (a backup robot) gets neither the rule nor the group.
    let sudoers = debugfs_cat(&out, root, "/etc/sudoers.d/nasforge");
    assert!(
        sudoers.contains("\nkeys ALL=(ALL:ALL) NOPASSWD: ALL\n")
            && !sudoers.contains("admin")
            && !sudoers.contains("robot"),
        "{sudoers}"
    );
    let group = debugfs_cat(&out, root, "/etc/group");
    assert_eq!(members(&group, "sudo"), ["admin", "keys"], "{group}");
    visudo_accepts(dir.path(), &sudoers);

    // A root password of the recipe's own is kept; a known one is refused.
    let mine = nasforge::system::secrets::crypt_password(
        PASSWORD,
        nasforge::system::secrets::Scheme::Yescrypt,
    )
    .unwrap();
    rock_recipe(
        dir.path(),
        &format!("[system]\nroot_password_hash = \"{mine}\"\n"),
        "out/rock2.img",
    );
    let r = nasforge(&["build", "rock.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    let rock2 = dir.path().join("out/rock2.img");
    let shadow = debugfs_cat(&rock2, root, "/etc/shadow");
    assert!(shadow.starts_with(&format!("root:{mine}:")), "{shadow}");
    // No user in the recipe: Armbian's first login stays for root to
    // answer, but behind root's password, not as a console autologin.
    assert_ne!(debugfs_stat(&rock2, root, "/root/.not_logged_in_yet"), "");
    for unit in ["getty@", "serial-getty@"] {
        let path = format!("/etc/systemd/system/{unit}.service.d/override.conf");
        assert_eq!(
            debugfs_stat(&rock2, root, &path),
            "",
            "{path} without users"
        );
    }
    rock_recipe(
        dir.path(),
        &format!("[system]\nroot_password_hash = \"{ARMBIAN_ROOT_1234}\"\n"),
        "out/rock3.img",
    );
    let r = nasforge(&["check", "rock.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr
            .contains("system.root_password_hash: this is the hash of a password everyone knows"),
        "{}",
        r.stderr
    );
}

/// nasforge's first-boot script checking the recipe's hostname and users
/// after the vendor's first boot, run for real (`firstboot identity`) in a
/// mount and UTS namespace of its own: /etc overlaid so that its writes stay
/// there, /var/lib and /boot on tmpfs holding its settings and the boot
/// partition with Raspberry Pi Imager's user-data.
fn firstboot_identity(env: &str, hostname: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("files/board/firstboot");
    let body = r#"set -e
mkdir -p "$T/up" "$T/work"
mount -t overlay -o "lowerdir=/etc,upperdir=$T/up,workdir=$T/work" nasforge-test /etc
mount -t tmpfs nasforge-test /var/lib
mkdir /var/lib/nasforge
printf '%s' "$ENV" >/var/lib/nasforge/firstboot.env
mount -t tmpfs nasforge-test /boot
mkdir /boot/firmware
printf '#cloud-config\nmanage_resolv_conf: false\n\nhostname: imager-name\nmanage_etc_hosts: true\nuser:\n  name: alice\n' >/boot/firmware/user-data
echo "$NOW" >/etc/hostname
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$NOW" >/etc/hosts
hostname "$NOW"
set +e
"$SCRIPT" identity
echo "rc=$?"
echo "etc/hostname=$(cat /etc/hostname) hostname=$(hostname)"
cat /etc/hosts
cat /boot/firmware/nasforge-status.txt 2>/dev/null
"#;
    let out = Command::new("unshare")
        .args([
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "sh",
            "-c",
            body,
        ])
        .env("T", dir.path())
        .env("ENV", env)
        .env("NOW", hostname)
        .env("SCRIPT", &script)
        .output()
        .unwrap();
    let text = printed(&out);
    (text.contains("rc=0"), text)
}

#[test]
#[ignore = "needs root for mount namespaces: scripts/test runs it as root, as CI does"]
fn after_imagers_customisation_the_recipes_hostname_comes_back_and_a_missing_user_stops_first_boot()
{
    // SAFETY: geteuid has no preconditions.
    assert!(
        unsafe { libc::geteuid() } == 0,
        "needs root for mount namespaces: scripts/test runs it as root, as CI does"
    );
    // Imager's firstrun.sh set its own hostname in a boot of its own.
    let (ok, out) = firstboot_identity(
        "NASFORGE_HOSTNAME=nas\nNASFORGE_USERS=\"root\"\n",
        "imager-name",
    );
    assert!(ok, "{out}");
    assert!(out.contains("etc/hostname=nas hostname=nas"), "{out}");
    assert!(out.contains("127.0.1.1\tnas\n"), "{out}");
    assert!(
        out.contains("the hostname is 'imager-name', not the recipe's 'nas'"),
        "{out}"
    );
    assert!(
        out.contains("Raspberry Pi Imager's customisation (user-data on the boot partition) sets hostname user:"),
        "{out}"
    );
    // The recipe's hostname already: nothing said of it, nothing changed.
    let (ok, out) = firstboot_identity("NASFORGE_HOSTNAME=nas\nNASFORGE_USERS=\"root\"\n", "nas");
    assert!(ok && !out.contains("setting it back"), "{out}");
    // A recipe user that is not there (renamed by Imager) stops first boot,
    // saying so on the boot partition.
    let (ok, out) = firstboot_identity(
        "NASFORGE_HOSTNAME=nas\nNASFORGE_USERS=\"root nasforge-no-such-user\"\n",
        "nas",
    );
    assert!(!ok && out.contains("rc=1"), "{out}");
    assert!(
        out.contains("nasforge first boot failed")
            && out.contains("user(s) nasforge-no-such-user do not exist"),
        "{out}"
    );
}
