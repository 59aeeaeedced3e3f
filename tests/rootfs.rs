//! `nasforge build` with `[packages]`, `[system]`, `[storage]` and
//! `[[shares]]`: what lands in the root filesystem and on the boot
//! partition, checked with debugfs, mtools and Python's crypt.

mod common;

use common::http::Server;
use common::repo::{Pkg, Repo, SUITE, status};
use common::*;
use std::path::Path;
use std::process::Command;

const PASSWORD: &str = "correct horse battery staple";
/// The SMTP relay's password: kept in clear, but only root may read it.
const SMTP_PASSWORD: &str = "relay pass 8e1f";
/// The ntfy topic is its token: whoever knows it reads the alerts.
const NTFY_TOPIC: &str = "nas-alerts-5c7d1e";
const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVaNxqK0P7lyC3Ue1dDnrrIqdBgPjs0Lh6D3bhKkn8u me@laptop";

fn accounts(extra_passwd: &str, userconf: bool) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![
        (
            "etc/passwd".to_string(),
            format!("root:x:0:0:root:/root:/bin/bash\n{extra_passwd}").into_bytes(),
        ),
        (
            "etc/shadow".into(),
            b"root:*:19000:0:99999:7:::\npi:*:19000:0:99999:7:::\n".to_vec(),
        ),
        (
            "etc/group".into(),
            b"root:x:0:\nshadow:x:42:\nsudo:x:27:\nusers:x:100:\npi:x:1000:\n".to_vec(),
        ),
        (
            "etc/gshadow".into(),
            b"root:*::\nsudo:*::\npi:!::\n".to_vec(),
        ),
        ("etc/skel/.bashrc".into(), b"# bashrc\n".to_vec()),
        (
            "etc/hosts".into(),
            b"127.0.0.1\tlocalhost\n127.0.1.1\traspberrypi\n".to_vec(),
        ),
        ("usr/share/zoneinfo/Europe/Berlin".into(), b"TZif2".to_vec()),
        (
            "lib/systemd/system/ssh.service".into(),
            b"[Unit]\nDescription=OpenBSD Secure Shell server\n".to_vec(),
        ),
    ];
    if userconf {
        files.push((
            "usr/lib/userconf-pi/userconf".into(),
            b"#!/bin/sh\n".to_vec(),
        ));
    }
    files
}

struct Env {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
    server: Server,
}

fn env(userconf: bool) -> Env {
    env_with(userconf, vec![])
}

/// [`env`] with more files in the image's root (they replace the
/// fixture's own).
fn env_with(userconf: bool, extra: Vec<(String, Vec<u8>)>) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::build(
        dir.path(),
        &[
            Pkg {
                name: "mdadm",
                version: "4.2-5",
                fields: &[],
            },
            Pkg {
                name: "samba",
                version: "2:4.17.12",
                fields: &["Depends: samba-common"],
            },
            Pkg {
                name: "samba-common",
                version: "2:4.17.12",
                fields: &[],
            },
            Pkg {
                name: "nfs-kernel-server",
                version: "1:2.6.2",
                fields: &[],
            },
            Pkg {
                name: "smartmontools",
                version: "7.3",
                fields: &[],
            },
            Pkg {
                name: "msmtp",
                version: "1.8.23-1",
                fields: &[],
            },
            Pkg {
                name: "ca-certificates",
                version: "20230311",
                fields: &[],
            },
            Pkg {
                name: "xfsprogs",
                version: "6.1.0",
                fields: &[],
            },
            Pkg {
                name: "samba-vfs-modules",
                version: "2:4.17.12",
                fields: &[],
            },
            Pkg {
                name: "avahi-daemon",
                version: "0.8-10",
                fields: &[],
            },
            Pkg {
                name: "wsdd2",
                version: "1.8.7",
                fields: &[],
            },
            Pkg {
                name: "btrfs-progs",
                version: "6.2",
                fields: &[],
            },
            // What the wizard stages for a kept disk's filesystem when the
            // kernel cannot mount it (this one lists neither module).
            Pkg {
                name: "exfat-fuse",
                version: "1",
                fields: &[],
            },
            Pkg {
                name: "ntfs-3g",
                version: "1",
                fields: &[],
            },
            Pkg {
                name: "hd-idle",
                version: "1.05-2",
                fields: &[],
            },
            Pkg {
                name: "msmtp",
                version: "1.8.23-1",
                fields: &[],
            },
            Pkg {
                name: "curl",
                version: "7.88.1-10",
                fields: &[],
            },
            Pkg {
                name: "mergerfs",
                version: "2.33.5-1",
                fields: &[],
            },
            Pkg {
                name: "snapraid",
                version: "12.2-1",
                fields: &[],
            },
            Pkg {
                name: "unattended-upgrades",
                version: "2.12",
                fields: &[],
            },
            Pkg {
                name: "ca-certificates",
                version: "20230311",
                fields: &[],
            },
        ],
    );
    let server = Server::start(repo.root.clone());
    let sources = format!(
        "Types: deb\nURIs: {}\nSuites: {SUITE}\nComponents: main\nSigned-By: /usr/share/keyrings/nasforge-test.gpg\n",
        server.url("")
    );
    let mut root_files = accounts("pi:x:1000:1000:,,,:/home/pi:/bin/bash\n", userconf);
    // Every Debian system has e2fsprogs (Priority: required), and since
    // bullseye libxcrypt as libcrypt1; bookworm's makes yescrypt hashes.
    root_files.push((
        "var/lib/dpkg/status".into(),
        status(&[
            ("e2fsprogs", "1.47.0-2", &[]),
            ("libcrypt1", "1:4.4.33-2", &[]),
        ])
        .into_bytes(),
    ));
    root_files.push((
        "etc/apt/sources.list.d/test.sources".into(),
        sources.into_bytes(),
    ));
    root_files.push((
        "usr/share/keyrings/nasforge-test.gpg".into(),
        repo.keyring.clone(),
    ));
    root_files.extend(extra);
    RpiFixture {
        root_files,
        root_mib: 64,
        ..Default::default()
    }
    .build(dir.path());
    write_recipe(
        dir.path(),
        "nas.toml",
        &format!(
            r#"name = "nas"
[base]
path = "rpi.img"
[board]
model = "pi4"
[system]
hostname = "pinas"
timezone = "Europe/Berlin"
[[system.users]]
name = "admin"
sudo = true
password = "{PASSWORD}"
ssh_authorized_keys = ["{KEY}"]
[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "raid5"
disks = {{ transport = "sata", count = 3 }}
filesystem = "ext4"
mount = "/srv/data"
[[shares]]
name = "data"
path = "/srv/data"
smb = {{ users = ["admin"] }}
nfs = {{ clients = "192.168.1.0/24" }}
[alerts]
email = "me@example.com"
ntfy = "https://ntfy.sh/{NTFY_TOPIC}"
[alerts.smtp]
host = "smtp.example.com"
user = "me@example.com"
password = "{SMTP_PASSWORD}"
[output]
path = "out/nas.img"
"#
        ),
    );
    Env {
        dir,
        cache: tempfile::tempdir().unwrap(),
        server,
    }
}

fn root_offset(img: &Path) -> u64 {
    sfdisk_parts(img)[1].0 * 512
}

fn boot_offset(img: &Path) -> u64 {
    sfdisk_parts(img)[0].0 * 512
}

fn stat(img: &Path, path: &str) -> String {
    stdout(
        Command::new("debugfs")
            .arg("-R")
            .arg(format!("stat {path}"))
            .arg(format!("{}?offset={}", img.display(), root_offset(img))),
    )
}

fn crypt_verifies(password: &str, hash: &str) -> bool {
    let out = Command::new("python3")
        .args([
            "-W",
            "ignore",
            "-c",
            "import crypt,sys; print(crypt.crypt(sys.argv[1], sys.argv[2]) == sys.argv[2])",
            password,
            hash,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "True"
}

#[test]
fn a_nas_recipe_stages_packages_users_firstboot_and_no_plaintext() {
    let e = env(false);
    let r = nasforge(&["build", "nas.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("+ 11 packages (")
            && r.stderr.contains("curl 7.88.1-10")
            && r.stderr.contains("samba 2:4.17.12")
            && r.stderr.contains("wsdd2 1.8.7"),
        "{}",
        r.stderr
    );
    let img = e.dir.path().join("out/nas.img");
    let off = root_offset(&img);
    e2fsck(&img, off);
    let (boot, _) = (boot_offset(&img), 0);

    // The staged repository and its index.
    let index = debugfs_cat(&img, off, "/var/lib/nasforge/debs/Packages");
    assert!(
        index.contains("Package: mdadm") && index.contains("Filename: ./mdadm_4.2-5_arm64.deb"),
        "{index}"
    );
    assert!(
        stat(&img, "/var/lib/nasforge/debs/samba_2%3a4.17.12_arm64.deb").contains("Type: regular")
    );
    // apt reads the staged repository as the board will: one index, listed
    // by the Release file with its sha256, and no probing for others.
    let staged = e.dir.path().join("staged");
    std::fs::create_dir(&staged).unwrap();
    run(Command::new("debugfs")
        .arg("-R")
        .arg(format!("rdump /var/lib/nasforge/debs {}", staged.display()))
        .arg(format!("{}?offset={off}", img.display())));
    let list = staged.join("offline.list");
    std::fs::write(
        &list,
        format!("deb [trusted=yes] file:{}/debs ./\n", staged.display()),
    )
    .unwrap();
    std::fs::create_dir_all(staged.join("lists/partial")).unwrap();
    let update = Command::new("apt-get")
        .arg(format!("-oDir::Etc::SourceList={}", list.display()))
        .arg("-oDir::Etc::SourceParts=-")
        .arg(format!("-oDir::State::Lists={}/lists", staged.display()))
        .arg(format!("-oDir::Cache={}/cache", staged.display()))
        .args([
            "-oAPT::Get::List-Cleanup=false",
            "-oAcquire::Languages=none",
            "-oDebug::NoLocking=true",
            "update",
        ])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&update.stdout),
        String::from_utf8_lossy(&update.stderr)
    );
    assert!(
        update.status.success()
            && !said.contains("Err:")
            && !said.contains("W: ")
            && said.contains(" Release ["),
        "apt-get update of the staged repository:\n{said}"
    );
    // The first-boot service, enabled, and what it will do.
    let env_file = debugfs_cat(&img, off, "/var/lib/nasforge/firstboot.env");
    assert!(env_file.contains("NASFORGE_PACKAGES=\"mdadm e2fsprogs samba samba-vfs-modules nfs-kernel-server avahi-daemon wsdd2 smartmontools msmtp curl ca-certificates\"") && env_file.contains("NASFORGE_MODE=unattended"), "{env_file}");
    assert!(
        stat(
            &img,
            "/etc/systemd/system/multi-user.target.wants/nasforge-firstboot.service"
        )
        .contains("Fast link dest: \"/etc/systemd/system/nasforge-firstboot.service\"")
    );
    assert!(stat(&img, "/usr/lib/nasforge/firstboot").contains("Mode:  0755"));
    // nasforge-setup, built for the board.
    let setup = stat(&img, "/usr/local/sbin/nasforge-setup");
    assert!(setup.contains("Mode:  0755"), "{setup}");
    // mdadm's own install finds mdadm.conf there, so it lists no array of
    // disks that came from another machine, and boot assembles none.
    let mdadm = debugfs_cat(&img, off, "/etc/mdadm/mdadm.conf");
    assert!(
        mdadm.lines().any(|l| l == "AUTO -all")
            && mdadm
                .lines()
                .filter(|l| l.starts_with("ARRAY"))
                .eq(["ARRAY <ignore> UUID=00000000:00000000:00000000:00000000"]),
        "{mdadm}"
    );

    // Users: hashed password that verifies, keys with the right owner and mode.
    let passwd = debugfs_cat(&img, off, "/etc/passwd");
    assert!(
        passwd.contains("admin:x:1001:1001::/home/admin:/bin/bash"),
        "{passwd}"
    );
    let shadow = debugfs_cat(&img, off, "/etc/shadow");
    let hash = shadow
        .lines()
        .find(|l| l.starts_with("admin:"))
        .unwrap()
        .split(':')
        .nth(1)
        .unwrap()
        .to_string();
    assert!(
        hash.starts_with("$y$")
            && crypt_verifies(PASSWORD, &hash)
            && nasforge::system::secrets::verifies(PASSWORD, &hash),
        "a yescrypt hash on a yescrypt-capable base: {hash}"
    );
    assert!(
        stat(&img, "/etc/shadow").contains("Group:    42"),
        "shadow keeps its group"
    );
    assert!(debugfs_cat(&img, off, "/etc/group").contains("sudo:x:27:admin"));
    let keys = stat(&img, "/home/admin/.ssh/authorized_keys");
    assert!(
        keys.contains("Mode:  0600") && keys.contains("User:  1001"),
        "{keys}"
    );
    assert_eq!(
        debugfs_cat(&img, off, "/home/admin/.ssh/authorized_keys"),
        format!("{KEY}\n")
    );
    assert!(stat(&img, "/home/admin").contains("Mode:  0700"));
    assert!(
        stat(
            &img,
            "/etc/systemd/system/multi-user.target.wants/ssh.service"
        )
        .contains("symlink")
    );
    assert_eq!(debugfs_cat(&img, off, "/etc/hostname"), "pinas\n");
    assert!(debugfs_cat(&img, off, "/etc/hosts").contains("127.0.1.1\tpinas"));
    assert!(
        stat(&img, "/etc/localtime")
            .contains("Fast link dest: \"/usr/share/zoneinfo/Europe/Berlin\"")
    );

    // Samba gets the NT hash, never the password.
    let smb = debugfs_cat(&img, off, "/var/lib/nasforge/smbpasswd");
    assert!(
        smb.starts_with("admin:1001:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:")
            && smb.contains(&nasforge_engine::shares::smbpasswd::nt_hash(PASSWORD)),
        "{smb}"
    );
    // The recipe travels, without the passwords; the relay's is in a
    // file only root reads, beside the alert handlers and timers.
    let copy = mtype(&img, boot, "nasforge.toml");
    assert!(
        copy.contains("[[storage.arrays]]")
            && copy.contains("[alerts.smtp]")
            && !copy.contains(PASSWORD)
            && !copy.contains(SMTP_PASSWORD)
            && !copy.contains("password"),
        "{copy}"
    );
    let relay = stat(&img, "/etc/nasforge/smtp-password");
    assert!(
        relay.contains("Mode:  0600") && relay.contains("User:     0"),
        "{relay}"
    );
    assert_eq!(
        debugfs_cat(&img, off, "/etc/nasforge/smtp-password"),
        SMTP_PASSWORD
    );
    assert!(stat(&img, "/usr/lib/nasforge/mdadm-event").contains("Mode:  0755"));
    assert!(
        stat(
            &img,
            "/etc/systemd/system/timers.target.wants/nasforge-check.timer"
        )
        .contains("Fast link dest: \"/etc/systemd/system/nasforge-check.timer\"")
    );
    nasforge_engine::spec::DeviceRecipe::parse(&copy, Path::new("nasforge.toml"))
        .expect("the board can read the copy");

    assert!(
        !contains_bytes(&img, PASSWORD.as_bytes()),
        "the plaintext password is in the image"
    );
    run(Command::new("sha256sum")
        .arg("-c")
        .arg("nas.img.sha256")
        .current_dir(e.dir.path().join("out")));

    // The image holds password equivalents: only its owner may read it, the
    // build says so, and the manifest says where they are, not what.
    let out = e.dir.path().join("out");
    assert_eq!(mode(&out.join("nas.img")), 0o600);
    assert_eq!(mode(&out.join("nas.img.sha256")), 0o644);
    assert_eq!(mode(&out.join("nas.manifest.json")), 0o644);
    assert!(
        r.stderr.contains("out/nas.img is written readable only by you (mode 0600): it holds password hashes and Samba NT hashes")
            && r.stderr.contains("and the SMTP relay's password and the alerts' web hook or ntfy URL with its token; the manifest lists where"),
        "{}",
        r.stderr
    );
    let manifest_text = std::fs::read_to_string(out.join("nas.manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest_text).unwrap();
    assert_eq!(
        manifest["secrets"],
        serde_json::json!([
            {"file": "root:/etc/shadow", "kind": "crypt-hash", "accounts": ["admin"]},
            {"file": "root:/var/lib/nasforge/smbpasswd", "kind": "nt-hash", "accounts": ["admin"]},
            {"file": "root:/etc/nasforge/smtp-password", "kind": "smtp-password", "accounts": ["smtp"]},
            {"file": "boot:/nasforge.toml", "kind": "alert-token", "accounts": ["ntfy"]},
        ]),
        "{manifest:#}"
    );
    let nt = nasforge_engine::shares::smbpasswd::nt_hash(PASSWORD);
    assert!(
        !manifest_text.contains(&hash)
            && !manifest_text.contains(&nt[..12])
            && !manifest_text.contains(SMTP_PASSWORD)
            && !manifest_text.contains(NTFY_TOPIC),
        "no secret value in the manifest"
    );

    // A rebuild asks the mirror nothing; an .img.xz with secrets is private too.
    let before = e.server.request_count();
    let r = nasforge(
        &["build", "nas.toml", "-o", "out/again.img.xz"],
        e.dir.path(),
        e.cache.path(),
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(
        e.server.request_count(),
        before,
        "a second build makes no HTTP request"
    );
    assert_eq!(mode(&out.join("again.img.xz")), 0o600);
    assert!(
        r.stderr
            .contains("out/again.img.xz is written readable only by you")
    );
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The recipe with `[system] updates = "security"`, its reboot at 03:30,
/// and its security archive (the fixture lists none).
fn with_security_updates(dir: &Path) {
    let recipe = dir.join("nas.toml");
    let text = std::fs::read_to_string(&recipe).unwrap().replace(
        "timezone = \"Europe/Berlin\"\n",
        "timezone = \"Europe/Berlin\"\nupdates = \"security\"\nupdates_reboot = \"03:30\"\nupdates_mirror = \"http://security.example/debian-security\"\n",
    );
    std::fs::write(recipe, text).unwrap();
}

#[test]
fn security_updates_stage_unattended_upgrades_with_debians_security_archive_only() {
    // An image whose os-release names no release: unattended-upgrades
    // could not tell its security suite. Refused, nothing written.
    let e = env(false);
    with_security_updates(e.dir.path());
    let r = nasforge(&["build", "nas.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("names no VERSION_CODENAME"),
        "{}",
        r.stderr
    );
    assert!(!e.dir.path().join("out/nas.img").exists());

    let trixie = "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\nVERSION_CODENAME=trixie\nID=debian\n";
    let e = env_with(
        false,
        vec![("usr/lib/os-release".into(), trixie.as_bytes().to_vec())],
    );
    with_security_updates(e.dir.path());
    let r = nasforge(&["build", "nas.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("unattended-upgrades 2.12"),
        "{}",
        r.stderr
    );
    let img = e.dir.path().join("out/nas.img");
    let off = root_offset(&img);
    let conf = debugfs_cat(&img, off, "/etc/apt/apt.conf.d/52nasforge-updates");
    assert!(
        conf.contains("#clear Unattended-Upgrade::Origins-Pattern;")
            && conf.contains(
                "\"origin=Debian,codename=${distro_codename}-security,label=Debian-Security\";"
            )
            && conf.contains("APT::Periodic::Unattended-Upgrade \"1\";")
            && conf.contains("Unattended-Upgrade::Automatic-Reboot-Time \"03:30\";"),
        "{conf}"
    );
    let env = debugfs_cat(&img, off, "/var/lib/nasforge/firstboot.env");
    assert!(
        env.lines()
            .any(|l| l.starts_with("NASFORGE_PACKAGES=") && l.contains("unattended-upgrades")),
        "{env}"
    );
    // The fixture's sources list no security suite, like mmdebstrap's:
    // the recipe's archive is added.
    let listed = debugfs_cat(&img, off, "/etc/apt/sources.list.d/nasforge-security.list");
    assert!(
        listed.ends_with("\ndeb http://security.example/debian-security trixie-security main\n"),
        "{listed}"
    );
    assert!(
        r.stderr
            .contains("/etc/apt/sources.list.d/nasforge-security.list"),
        "{}",
        r.stderr
    );
}

#[test]
fn raspberry_pi_os_gets_its_first_user_through_userconf() {
    let e = env(true);
    let r = nasforge(&["build", "nas.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    let img = e.dir.path().join("out/nas.img");
    let line = mtype(&img, boot_offset(&img), "userconf.txt");
    let (name, hash) = line.trim().split_once(':').unwrap();
    assert_eq!(name, "admin");
    assert!(crypt_verifies(PASSWORD, hash), "{line}");
    let off = root_offset(&img);
    assert!(
        !debugfs_cat(&img, off, "/etc/passwd").contains("admin:"),
        "userconf creates it on first boot"
    );
    assert_eq!(
        debugfs_cat(&img, off, "/var/lib/nasforge/authorized_keys/admin"),
        format!("{KEY}\n")
    );
    assert!(debugfs_cat(&img, off, "/var/lib/nasforge/smbpasswd").starts_with("admin:1000:"));
    assert!(!contains_bytes(&img, PASSWORD.as_bytes()));
    let manifest = std::fs::read_to_string(e.dir.path().join("out/nas.manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert!(
        manifest["secrets"].as_array().unwrap().contains(
            &serde_json::json!({"file": "boot:/userconf.txt", "kind": "crypt-hash", "accounts": ["admin"]})
        ),
        "{manifest:#}"
    );
}

#[test]
fn system_mistakes_are_located() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.img"), b"").unwrap();
    write_recipe(
        dir.path(),
        "r.toml",
        "[base]\npath = \"x.img\"\n[board]\nmodel = \"pi4\"\n[system]\nhostname = \"pi nas\"\n[[system.users]]\nname = \"Admin\"\npassword_hash = \"plain\"\n",
    );
    let r = nasforge(&["check", "r.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr
            .contains("r.toml:6:12: system.hostname: `pi nas` is not a valid host name"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("r.toml:8:8: system.users[0].name: `Admin` is not a valid user name"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("r.toml:9:17: system.users[0].password_hash: not a crypt(3) hash"),
        "{}",
        r.stderr
    );
}

/// Every unit the image starts by itself (files and links under
/// /etc/systemd/system, their wants directories and drop-ins, links
/// followed into the image): (path, text).
fn enabled_units(img: &Path, scratch: &Path) -> Vec<(String, String)> {
    let dump = scratch.join("systemd");
    std::fs::create_dir(&dump).unwrap();
    run(Command::new("debugfs")
        .arg("-R")
        .arg(format!("rdump /etc/systemd/system {}", dump.display()))
        .arg(format!("{}?offset={}", img.display(), root_offset(img))));
    let mut units = Vec::new();
    let mut dirs = vec![dump.join("system")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = format!(
                "/etc/systemd/system/{}",
                path.strip_prefix(dump.join("system")).unwrap().display()
            );
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                dirs.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                let text = debugfs_cat(img, root_offset(img), target.to_str().unwrap());
                units.push((format!("{name} -> {}", target.display()), text));
            } else {
                units.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    units
}

/// A unit that gives a process a terminal is a login prompt, and no
/// prompt logs anyone in by itself.
fn assert_no_console_without_login(units: &[(String, String)]) {
    for (name, text) in units {
        let takes_tty = text.contains("TTYPath=") || text.contains("StandardInput=tty");
        assert!(
            !(takes_tty && text.contains("nasforge-setup")),
            "{name} runs nasforge-setup on a terminal:\n{text}"
        );
        if takes_tty {
            assert!(
                text.contains("agetty"),
                "{name} is not a login prompt:\n{text}"
            );
        }
        assert!(
            !text.contains("--autologin") && !text.contains("agetty -a"),
            "{name} logs in without a password:\n{text}"
        );
    }
}

#[test]
fn the_unit_check_finds_a_wizard_on_a_terminal() {
    let tty_wizard = "[Service]\nExecStart=/usr/local/sbin/nasforge-setup\nStandardInput=tty\nTTYPath=/dev/tty1\n";
    let autologin =
        "[Service]\nExecStart=\nExecStart=-/sbin/agetty --noissue --autologin root %I $TERM\n";
    for text in [tty_wizard, autologin] {
        let units = vec![("x.service".to_string(), text.to_string())];
        let caught = std::panic::catch_unwind(|| assert_no_console_without_login(&units));
        assert!(caught.is_err(), "{text}");
    }
    let getty = "[Service]\nExecStart=-/sbin/agetty -o '-p -- \\\\u' --noclear - $TERM\nTTYPath=/dev/%I\nStandardInput=tty\n";
    assert_no_console_without_login(&[("getty@.service".to_string(), getty.to_string())]);
}

#[test]
fn wizard_mode_waits_for_a_login() {
    let e = env(false);
    let recipe = std::fs::read_to_string(e.dir.path().join("nas.toml"))
        .unwrap()
        .replace("mode = \"unattended\"", "mode = \"wizard\"");
    std::fs::write(e.dir.path().join("nas.toml"), recipe).unwrap();
    let r = nasforge(&["build", "nas.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    // The wizard may keep any disk: what the kernel cannot mount is staged.
    for (package, module, fs) in [
        ("exfat-fuse", "exfat", "exfat"),
        ("ntfs-3g", "ntfs3", "ntfs"),
    ] {
        assert!(
            r.stderr.contains(&format!(
                "{package} staged: kernel {V8} has no `{module}` module, and a kept disk may hold {fs}"
            )),
            "{}",
            r.stderr
        );
    }
    let img = e.dir.path().join("out/nas.img");
    let off = root_offset(&img);
    let units = enabled_units(&img, e.dir.path());
    let names: Vec<&str> = units.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"/etc/systemd/system/nasforge-setup.service"),
        "{names:?}"
    );
    assert_no_console_without_login(&units);
    assert!(
        stat(&img, "/etc/issue.d/nasforge-setup.issue")
            .contains("Fast link dest: \"/usr/lib/nasforge/setup-pending.issue\""),
        "the login screen's note marks setup as pending"
    );
    assert!(
        debugfs_cat(&img, off, "/usr/lib/nasforge/setup-pending.issue")
            .contains("`sudo nasforge-setup`")
    );
    let snippet = debugfs_cat(&img, off, "/etc/profile.d/nasforge-setup.sh");
    assert!(
        snippet.contains("sudo /usr/local/sbin/nasforge-setup"),
        "{snippet}"
    );
    let parsed = Command::new("sh")
        .args(["-n", "-c", &snippet])
        .output()
        .unwrap();
    assert!(parsed.status.success(), "{parsed:?}");
    let env_file = debugfs_cat(&img, off, "/var/lib/nasforge/firstboot.env");
    assert!(env_file.contains("NASFORGE_MODE=wizard"), "{env_file}");
    // The filesystem is chosen on the board, so every mkfs is staged.
    assert!(
        env_file.contains("xfsprogs") && env_file.contains("btrfs-progs"),
        "{env_file}"
    );
}

/// Wizard mode is set up by someone who logs in and runs sudo: a recipe
/// with nobody who may is refused, at the mode, before anything is built.
#[test]
fn a_wizard_recipe_without_a_sudo_user_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.img"), b"").unwrap();
    let base = "[base]\npath = \"x.img\"\n[board]\nmodel = \"pi4\"\n[storage]\nmode = \"wizard\"\n";
    for users in [
        "",
        "[[system.users]]\nname = \"backup\"\npassword = \"pw\"\nsudo = false\n",
        "[[system.users]]\nname = \"backup\"\npassword = \"pw\"\n",
    ] {
        write_recipe(dir.path(), "r.toml", &format!("{base}{users}"));
        let r = nasforge(&["check", "r.toml"], dir.path(), dir.path());
        assert_eq!(r.status, 1, "{users}: {}", r.stdout);
        assert!(
            r.stderr.contains("r.toml:6:8: storage.mode: the wizard runs only after a login, as `sudo nasforge-setup`, and no [[system.users]] entry may use sudo"),
            "{}",
            r.stderr
        );
        assert!(!dir.path().join("out").exists());
    }
    write_recipe(
        dir.path(),
        "r.toml",
        &format!(
            "{base}[[system.users]]\nname = \"admin\"\nsudo = true\nssh_authorized_keys = [\"{KEY}\"]\n"
        ),
    );
    let r = nasforge(&["check", "r.toml"], dir.path(), dir.path());
    assert!(!r.stderr.contains("storage.mode"), "{}", r.stderr);
}
