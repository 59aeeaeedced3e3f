use super::paths::is_safe_path;
use super::shares::is_nfs_client;
use super::storage::is_mail_address;
use super::*;

fn array(level: Level, filesystem: Filesystem) -> Array {
    Array {
        vdevs: None,
        spares: 0,
        parity: None,
        keep: Vec::new(),
        name: "a".into(),
        level,
        disk_match: Some(DiskMatch::default()),
        filesystem,
        mount: "/srv/a".into(),
        wipe: false,
        import: false,
        uuid: None,
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
        system_mirror: None,
        allow_failing: Vec::new(),
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
    let mut pool = array(Level::Pool, Filesystem::Ext4);
    pool.parity = Some(1);
    let pool = storage(Mode::Unattended, vec![pool]);
    assert_eq!(
        required_packages(Some(&pool), &[], None),
        [
            "mdadm",
            "e2fsprogs",
            "smartmontools",
            "mergerfs",
            "snapraid"
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
            "mergerfs",
            "snapraid",
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

/// The problems of one array of `level` over `count` disks with `vdevs`
/// and `spares`, as "path: message".
fn layout_problems(
    level: Level,
    fs: Filesystem,
    count: usize,
    vdevs: Option<usize>,
    spares: usize,
) -> Vec<String> {
    let mut a = array(level, fs);
    a.name = "tank".into();
    a.disk_match.as_mut().unwrap().count = Count::Exactly(count);
    a.vdevs = vdevs;
    a.spares = spares;
    validate(&storage(Mode::Unattended, vec![a]), &[])
        .into_iter()
        .map(|p| p.to_string())
        .collect()
}

#[test]
fn spares_need_a_level_that_rebuilds_and_leave_it_its_minimum() {
    use Filesystem::{Ext4, Zfs};
    assert_eq!(
        layout_problems(Level::Raid6, Ext4, 15, None, 1),
        Vec::<String>::new()
    );
    assert_eq!(
        layout_problems(Level::Raidz2, Zfs, 15, Some(2), 1),
        Vec::<String>::new()
    );
    assert_eq!(
        layout_problems(Level::Raid1, Ext4, 3, None, 1),
        Vec::<String>::new()
    );
    assert_eq!(
        layout_problems(Level::Raid0, Ext4, 4, None, 1),
        [
            "storage.arrays[0].spares: raid0 keeps no second copy, so a failed member cannot be rebuilt onto a spare; remove spares, or choose raid1, raid5, raid6 or raid10"
        ]
    );
    assert_eq!(
        layout_problems(Level::Single, Ext4, 1, None, 1),
        [
            "storage.arrays[0].spares: single keeps no second copy, so a failed member cannot be rebuilt onto a spare; remove spares, or choose raid1, raid5, raid6 or raid10"
        ]
    );
    assert_eq!(
        layout_problems(Level::Stripe, Zfs, 3, None, 1),
        [
            "storage.arrays[0].spares: stripe keeps no second copy, so a failed member cannot be rebuilt onto a spare; remove spares, or choose mirror, raidz1, raidz2 or raidz3"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raid6, Ext4, 5, None, 2),
        [
            "storage.arrays[0].spares: raid6 needs at least 4 active disks, but count = 5 with spares = 2 leaves 3; lower spares or raise count"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raid5, Ext4, 2, None, 3),
        [
            "storage.arrays[0].spares: raid5 needs at least 3 active disks, but count = 2 with spares = 3 leaves 0; lower spares or raise count"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raidz2, Zfs, 8, Some(2), 1),
        [
            "storage.arrays[0].spares: raidz2 needs at least 4 active disks in each of 2 vdevs (8 in all), but count = 8 with spares = 1 leaves 7; lower spares or raise count"
        ]
    );
}

#[test]
fn md_raid5_and_raid6_split_into_legs_that_divide_the_active_disks() {
    use Filesystem::{Ext4, Zfs};
    assert_eq!(
        layout_problems(Level::Raid6, Ext4, 14, Some(2), 0),
        Vec::<String>::new()
    );
    assert_eq!(
        layout_problems(Level::Raid5, Ext4, 9, Some(3), 0),
        Vec::<String>::new()
    );
    assert_eq!(
        layout_problems(Level::Raid6, Ext4, 1 + 7 * 2, Some(2), 0),
        [
            "storage.arrays[0].disks.count: 15 disks do not split into 2 legs of the same width; use a multiple of 2"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raid6, Ext4, 16, Some(2), 1),
        [
            "storage.arrays[0].disks.count: 15 active disks (count = 16 minus spares = 1) do not split into 2 legs of the same width; make count minus spares a multiple of 2: spares = 2 or count = 15"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raidz2, Zfs, 16, Some(2), 1),
        [
            "storage.arrays[0].disks.count: 15 active disks (count = 16 minus spares = 1) do not split into 2 vdevs of the same width; make count minus spares a multiple of 2: spares = 2 or count = 15"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raid6, Ext4, 6, Some(2), 0),
        [
            "storage.arrays[0].disks.count: raid6 needs at least 4 disks in each leg, but count = 6 over 2 leg(s) gives 3; raise count or choose another level"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raid1, Ext4, 4, Some(2), 0),
        [
            "storage.arrays[0].vdevs: raid1 cannot be split into legs: two raid1 legs striped together are what raid10 is: write level = \"raid10\" (md's own striped mirrors) and remove vdevs"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raid10, Ext4, 8, Some(2), 0),
        [
            "storage.arrays[0].vdevs: raid10 cannot be split into legs: this level stripes over all its disks already; remove vdevs, or use raid5 or raid6 legs (vdevs = 2 with level = \"raid6\" is raid60)"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raid6, Ext4, 8, Some(0), 0),
        [
            "storage.arrays[0].vdevs: vdevs = 0 leaves the array without legs; write 1 (the default), or 2 for two legs striped together"
        ]
    );
    assert_eq!(
        layout_problems(Level::Raid1, Ext4, 2, Some(1), 0),
        Vec::<String>::new(),
        "one leg is the array itself"
    );
}

#[test]
fn legs_are_named_after_their_array_and_must_not_clash() {
    let mut a = array(Level::Raid6, Filesystem::Ext4);
    a.name = "data".into();
    a.vdevs = Some(2);
    assert_eq!(a.md_names(), ["data", "data-0", "data-1"]);
    let mut b = array(Level::Raid1, Filesystem::Ext4);
    b.name = "data-1".into();
    b.mount = "/srv/b".into();
    let problems: Vec<String> = validate(&storage(Mode::Unattended, vec![a.clone(), b]), &[])
        .into_iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(
        problems,
        [
            "storage.arrays[1].name: `data-1` would name an array or leg of both this array and storage.arrays[0] (the legs of an array with vdevs are <name>-0, <name>-1, ...); every array and leg needs its own name, so rename one of them"
        ]
    );
    a.name = "a".repeat(31);
    let problems: Vec<String> = validate(&storage(Mode::Unattended, vec![a]), &[])
        .into_iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(
        problems,
        [format!(
            "storage.arrays[0].name: `{0}` leaves no room for the legs' names ({0}-1): md names are at most 32 characters; shorten it to 30 or fewer",
            "a".repeat(31)
        )]
    );
}
