use super::paths::is_safe_path;
use super::shares::is_nfs_client;
use super::storage::is_mail_address;
use super::*;

fn array(level: Level, filesystem: Filesystem) -> Array {
    Array {
        vdevs: None,
        name: "a".into(),
        level,
        disks: DiskMatch::default(),
        filesystem,
        mount: "/srv/a".into(),
        wipe: false,
    }
}

fn storage(mode: Mode, arrays: Vec<Array>) -> Storage {
    Storage {
        mode,
        arrays,
        mailaddr: None,
        alert_program: None,
        spin_down: SpinDown::Off,
        disks: Vec::new(),
        usb_quirks: Vec::new(),
    }
}

fn share(smb: bool, nfs: bool) -> Share {
    Share {
        quota: None,
        name: "s".into(),
        path: "/srv/a/s".into(),
        smb: smb.then(|| Smb {
            users: vec!["admin".into()],
            timemachine: false,
            timemachine_max_size: None,
            readonly: false,
            guest: false,
        }),
        nfs: nfs.then(|| Nfs {
            clients: Clients(vec!["192.168.1.0/24".into()]),
            readonly: false,
        }),
    }
}

#[test]
fn required_packages_follow_the_plan() {
    assert!(
        required_packages(None, &[], None).is_empty(),
        "no storage, no shares"
    );
    let raid = storage(Mode::Unattended, vec![array(Level::Raid5, Filesystem::Xfs)]);
    assert_eq!(
        required_packages(Some(&raid), &[share(true, false)], None),
        [
            "mdadm",
            "xfsprogs",
            "samba",
            "samba-vfs-modules",
            "avahi-daemon",
            "wsdd2",
            "smartmontools"
        ]
    );
    let two = storage(
        Mode::Unattended,
        vec![
            array(Level::Single, Filesystem::Ext4),
            array(Level::Single, Filesystem::Btrfs),
        ],
    );
    assert_eq!(
        required_packages(Some(&two), &[share(false, true)], None),
        [
            "mdadm",
            "e2fsprogs",
            "btrfs-progs",
            "nfs-kernel-server",
            "avahi-daemon",
            "smartmontools"
        ]
    );
    assert_eq!(
        required_packages(Some(&two), &[share(true, true), share(true, false)], None),
        [
            "mdadm",
            "e2fsprogs",
            "btrfs-progs",
            "samba",
            "samba-vfs-modules",
            "nfs-kernel-server",
            "avahi-daemon",
            "wsdd2",
            "smartmontools"
        ]
    );
    // A kept ntfs disk brings ntfs-3g, for kernels without ntfs3.
    let mut kept = storage(Mode::Unattended, vec![]);
    kept.disks =
        vec![toml::from_str(
        "name = \"m\"\nmatch = {}\nkeep = true\nmount = \"/srv/m\"\nfilesystem = \"ntfs\"\n",
    )
    .unwrap()];
    assert_eq!(
        required_packages(Some(&kept), &[], None),
        ["mdadm", "smartmontools", "ntfs-3g"]
    );
    // The wizard chooses on the board: everything it may choose.
    let wizard = storage(Mode::Wizard, vec![]);
    assert_eq!(
        required_packages(Some(&wizard), &[], None),
        [
            "mdadm",
            "e2fsprogs",
            "xfsprogs",
            "btrfs-progs",
            "samba",
            "samba-vfs-modules",
            "nfs-kernel-server",
            "avahi-daemon",
            "wsdd2",
            "smartmontools",
            "hd-idle",
            "msmtp",
            "curl",
            "ca-certificates"
        ]
    );
}

#[test]
fn ordinary_clients_paths_and_addresses_pass() {
    for client in [
        "*",
        "nas",
        "nas.lan",
        "*.lan",
        "nas-?.home.arpa",
        "192.168.1.7",
        "192.168.1.0/24",
        "10.0.0.0/8",
        "0.0.0.0/0",
        "fd00::/64",
        "2001:db8::1",
        "::1/128",
    ] {
        assert!(is_nfs_client(client), "{client}");
    }
    for client in [
        "",
        "10.0.0.0/",
        "10.0.0.0/+8",
        "fd00::/129",
        "nas-",
        "a..b",
        "1.2.3",
    ] {
        assert!(!is_nfs_client(client), "{client}");
    }
    for path in [
        "/",
        "/srv/data",
        "/srv/media_2.x/fotos-2024",
        "/mnt/.hidden",
    ] {
        assert!(is_safe_path(path), "{path}");
    }
    for path in ["", "/srv/data/", "/srv/Música", "/srv/a:b", "/srv/~x"] {
        assert!(!is_safe_path(path), "{path}");
    }
    for mail in ["root", "me@example.com", "nas+alerts@mail.example.org"] {
        assert!(is_mail_address(mail), "{mail}");
    }
    for mail in ["a@b@c", "@example.com", "me@", "-f@x", "a b", "a;b"] {
        assert!(!is_mail_address(mail), "{mail}");
    }
}

#[test]
fn alert_program_and_mailaddr_are_one_word_on_one_line() {
    let problems = |program: Option<&str>, mail: Option<&str>| {
        let mut s = storage(
            Mode::Unattended,
            vec![array(Level::Raid1, Filesystem::Ext4)],
        );
        s.alert_program = program.map(str::to_string);
        s.mailaddr = mail.map(str::to_string);
        validate(&s, &[])
            .into_iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
    };
    assert!(problems(Some("/usr/local/bin/nas-alert"), Some("me@example.com")).is_empty());
    for program in [
        "/usr/local/bin/nas-alert\nMAILADDR evil@example.com",
        "/bin/sh -c reboot",
        "/usr/bin/alert\t",
        "/usr/bin/al\x1bert",
    ] {
        let p = problems(Some(program), None);
        assert_eq!(p.len(), 1, "{program:?}: {p:?}");
        assert!(
            p[0].starts_with("storage.alert_program: `")
                && p[0].contains("without spaces or control characters")
                && !p[0].contains('\n'),
            "{p:?}"
        );
    }
    for mail in ["root\nPROGRAM /tmp/x", "a@b\x00", "a b", ""] {
        let p = problems(None, Some(mail));
        assert_eq!(p.len(), 1, "{mail:?}: {p:?}");
        assert!(p[0].starts_with("storage.mailaddr: "), "{p:?}");
    }
}

#[test]
fn alerts_bring_their_transports() {
    let alerts = |text: &str| toml::from_str::<Alerts>(text).unwrap();
    let mail = alerts("email = \"me@example.com\"\n[smtp]\nhost = \"smtp.example.com\"");
    assert_eq!(
        required_packages(None, &[], Some(&mail)),
        ["msmtp", "ca-certificates"]
    );
    let push = alerts("ntfy = \"https://ntfy.sh/nas\"");
    assert_eq!(
        required_packages(None, &[], Some(&push)),
        ["curl", "ca-certificates"]
    );
    assert!(required_packages(None, &[], Some(&alerts("temperature = 45"))).is_empty());
}

#[test]
fn alert_problems_point_at_their_line() {
    let text = "[alerts]\nemail = \"me@example.com\"\nntfy = \"ftp://x/y\"\n\n[alerts.smtp]\nhost = \"smtp.example.com\"\nport = 0\n";
    let err = DeviceRecipe::parse(text, Path::new("nasforge.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nasforge.toml:3:8: alerts.ntfy: `ftp://x/y` is not a web address"),
        "{err}"
    );
    assert!(
        err.contains("nasforge.toml:7:8: alerts.smtp.port: 0 is not a TCP port"),
        "{err}"
    );
    let err = DeviceRecipe::parse(
        "[alerts]\n[alerts.smtp]\nhost = \"h\"\ntls = \"ssl\"\n",
        Path::new("n.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(
            "n.toml:4:7: unknown variant `ssl`, expected one of `starttls`, `tls`, `off`"
        ),
        "{err}"
    );
}
