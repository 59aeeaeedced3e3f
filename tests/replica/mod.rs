//! Replicas of the vendor images users start from, made from nasforge's
//! Debian base of the release the vendor builds on and the vendor's own
//! first-boot code, for tests that need the vendor's first boot to run on
//! the emulated board (through `nasforge emulate`'s stand-in kernel).
//! README.md beside this file names every source and lists what differs
//! from the real image.
#![allow(dead_code)]

use crate::common::*;
use nasforge::image::Image;
use nasforge::image::ext4::{Ext4, Op};
use std::path::Path;
use std::process::Command;

/// The Debian packages the Raspberry Pi OS replica needs in its base, beside
/// nasforge's own set: userconf-service reads userconf.txt through dos2unix
/// (userconf-pi's debian/control), and Raspberry Pi OS (trixie) carries
/// cloud-init and an SSH server that is off until asked for (pi-gen
/// stage2/01-sys-tweaks, stage2/04-cloud-init).
pub const PIOS_PACKAGES: &[&str] = &["dos2unix", "cloud-init", "openssh-server"];

/// The Debian base of the e2e test and the offline install: trixie, with
/// what the Raspberry Pi OS replica needs.
pub fn trixie_base(cache: &Path) -> std::path::PathBuf {
    nasforge::debian::DebianBase {
        suite: "trixie".into(),
        arch: "arm64".into(),
        mirror: None,
        packages: PIOS_PACKAGES.iter().map(|p| p.to_string()).collect(),
    }
    .image(cache)
    .unwrap()
}

/// cloud-init's configuration on Raspberry Pi OS: the NoCloud seed on the
/// boot partition and no SSH host keys of cloud-init's making, the keys of
/// pi-gen's stage2/04-cloud-init/files/99_raspberry-pi.cfg (2025-10-06),
/// which Raspberry Pi's rpi-cloud-init-mods package carries since.
const CLOUD_CFG: &str = "# nasforge's Raspberry Pi OS replica: NoCloud from the boot partition\n\
datasource_list: [ NoCloud, None ]\n\
datasource:\n  NoCloud:\n    seedfrom: file:///boot/firmware\n\
ssh:\n  emit_keys_to_console: false\n\
no_ssh_fingerprints: true\n\
ssh_deletekeys: false\n\
ssh_genkeytypes: []\n";

/// The default user of cloud-init's `raspberry-pi-os` variant (cloud-init
/// 25.2, config/cloud.cfg.tmpl), which Imager's `user:` is merged over;
/// trixie's cloud-init 25.1 predates that variant.
const CLOUD_DEFAULT_USER: &str = "# nasforge's Raspberry Pi OS replica: cloud-init 25.2's raspberry-pi-os default user\n\
system_info:\n  default_user:\n    name: pi\n    lock_passwd: True\n    gecos: Raspberry Pi OS\n    groups: [adm, dialout, cdrom, audio, users, sudo, video, games, plugdev, input, gpio, spi, i2c, netdev, render, lpadmin]\n    sudo: [\"ALL=(ALL) NOPASSWD:ALL\"]\n    shell: /bin/bash\n";

/// Raspberry Pi's cloud-init units read the seed once the boot partition is
/// mounted (a drop-in of rpi-cloud-init-mods whose text is not public; the
/// image's unit carries this).
const CLOUD_MOUNT: &str = "# nasforge's Raspberry Pi OS replica: the seed is on the boot partition\n[Unit]\nRequiresMountsFor=/boot/firmware\n";

/// raspberrypi-sys-mods' rpi-resize.service (pios/trixie), enabled by
/// pi-gen: on the first boot (machine-id `uninitialized`) it has systemd
/// grow the root filesystem into the partition the initramfs grew, then
/// disables itself. The replica's is written from that description.
const RPI_RESIZE: &str = "# nasforge's Raspberry Pi OS replica of raspberrypi-sys-mods' rpi-resize.service\n\
[Unit]\n\
Description=Grow and trim root filesystem on first boot\n\
DefaultDependencies=no\n\
ConditionFirstBoot=yes\n\
After=systemd-remount-fs.service systemd-growfs-root.service\n\
Wants=first-boot-complete.target systemd-growfs-root.service fstrim.service\n\
Before=first-boot-complete.target fstrim.service shutdown.target\n\
Conflicts=shutdown.target\n\
\n\
[Service]\n\
Type=oneshot\n\
RemainAfterExit=yes\n\
ExecStart=/usr/bin/true\n\
ExecStartPost=/usr/bin/systemctl disable %n\n\
\n\
[Install]\n\
WantedBy=sysinit.target\n";

/// The cloud-init seed pi-gen leaves on the boot partition (stage2/
/// 04-cloud-init/files, copied there since 2025-11-24): a NoCloud instance
/// that asks for nothing until Imager writes over it.
const SEED: &[(&str, &str)] = &[
    (
        "meta-data",
        "# cloud-init NoCloud meta-data (nasforge's Raspberry Pi OS replica)\ndsmode: local\ninstance_id: rpios-image\n",
    ),
    (
        "user-data",
        "#cloud-config\n# cloud-init user-data (nasforge's Raspberry Pi OS replica): nothing set\n",
    ),
    (
        "network-config",
        "# cloud-init network-config (nasforge's Raspberry Pi OS replica): nothing set\n",
    ),
];

/// Makes `out` a Raspberry Pi OS (trixie) replica from `base`, nasforge's
/// Debian trixie arm64 base built with [`PIOS_PACKAGES`].
pub fn raspberry_pi_os(base: &Path, out: &Path) {
    run(Command::new("cp").arg("--sparse=always").arg(base).arg(out));
    let image = Image::open(out).unwrap();
    let root = image.ext4().unwrap();
    let disk_id = image.layout.disk_id.clone();
    let boot_part = image.boot().unwrap().clone();
    let root_part = image.root().unwrap().clone();

    root.apply(&pios_root_ops(&root, &disk_id)).unwrap();
    pios_accounts(&root);
    let read = |p: &str| String::from_utf8(root.read(p).unwrap().unwrap()).unwrap();
    // pi-gen lists every Debian component (stage0/00-configure-apt);
    // the base has contrib (OpenZFS) already. The updates and security
    // suites are left out: the build resolves against the kernel the base
    // has.
    let sources = read("/etc/apt/sources.list");
    assert!(
        sources.contains(" main contrib non-free-firmware"),
        "{sources}"
    );
    root.replace(
        "/etc/apt/sources.list",
        sources
            .replace(
                " main contrib non-free-firmware",
                " main contrib non-free non-free-firmware",
            )
            .as_bytes(),
        0o644,
    )
    .unwrap();
    // pi-gen's stage1/01-sys-tweaks/files/fstab, by PARTUUID.
    root.replace(
        "/etc/fstab",
        format!(
            "proc            /proc           proc    defaults          0       0\nPARTUUID={disk_id}-01  /boot/firmware  vfat    defaults          0       2\nPARTUUID={disk_id}-02  /               ext4    defaults,noatime  0       1\n"
        )
        .as_bytes(),
        0o644,
    )
    .unwrap();

    let boot = format!("{}@@{}", out.display(), boot_part.start);
    let fat_files = fat_listing(&boot);
    let kernel = fat_files
        .iter()
        .find(|n| n.starts_with("vmlinuz-"))
        .unwrap_or_else(|| panic!("no kernel on the base's boot partition: {fat_files:?}"))
        .clone();
    let initrd = kernel.replacen("vmlinuz-", "initrd.img-", 1);
    // The Pi 4's firmware loads kernel8.img, and its initramfs8 with
    // auto_initramfs=1, as Raspberry Pi OS lays them out.
    let dir = tempfile::tempdir().unwrap();
    for (from, to) in [(&kernel, "kernel8.img"), (&initrd, "initramfs8")] {
        let local = dir.path().join(to);
        run(mtools("mcopy")
            .arg("-i")
            .arg(&boot)
            .arg(format!("::{from}"))
            .arg(&local));
        run(mtools("mcopy")
            .arg("-o")
            .arg("-i")
            .arg(&boot)
            .arg(&local)
            .arg(format!("::{to}")));
        run(mtools("mdel").arg("-i").arg(&boot).arg(format!("::{from}")));
    }
    let mut files: Vec<(&str, String)> = vec![
        ("config.txt", format!("{PIOS_CONFIG}auto_initramfs=1\n")),
        (
            "cmdline.txt",
            format!(
                "console=serial0,115200 console=tty1 root=PARTUUID={disk_id}-02 rootfstype=ext4 fsck.repair=yes rootwait resize\n"
            ),
        ),
        (
            "issue.txt",
            "Raspberry Pi reference replica (nasforge tests/replica), modelled on 2026-06-18-raspios-trixie-arm64\n".into(),
        ),
    ];
    files.extend(SEED.iter().map(|(n, t)| (*n, t.to_string())));
    for (name, text) in files {
        let local = dir.path().join(name);
        std::fs::write(&local, text).unwrap();
        run(mtools("mcopy")
            .arg("-o")
            .arg("-i")
            .arg(&boot)
            .arg(&local)
            .arg(format!("::{name}")));
    }
    // pi-gen's labels (export-image/prerun.sh).
    run(mtools("mlabel").arg("-i").arg(&boot).arg("::bootfs"));
    run(Command::new("tune2fs").args(["-L", "rootfs"]).arg(format!(
        "{}?offset={}",
        out.display(),
        root_part.start
    )));
}

/// What the packages and pi-gen put on the root filesystem for the first
/// boot: userconf-pi (enabled as pi-gen's `rename-user -f -s` enables it),
/// raspberrypi-sys-mods' get_fw_loc and first-boot resize, the cloud-init
/// configuration, an SSH server that is off with no host keys, and a
/// machine id left for the first boot.
fn pios_root_ops(root: &Ext4, disk_id: &str) -> Vec<Op> {
    let units = "/etc/systemd/system";
    let mut ops = root
        .missing_dirs(&[
            "/usr/lib/userconf-pi",
            "/usr/lib/raspberrypi-sys-mods",
            "/usr/share/userconf-pi",
            "/etc/ssh/sshd_config.d",
            "/etc/cloud/cloud.cfg.d",
            "/usr/lib/systemd/system/cloud-init-main.service.d",
            "/etc/systemd/system/sysinit.target.wants",
            "/etc/systemd/system/multi-user.target.wants",
        ])
        .unwrap();
    for (path, data, mode) in userconf_pi_files() {
        ops.push(Op::root_file(format!("/{path}"), data, mode));
    }
    let banner = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vendor/userconf-pi/sshd_banner"),
    )
    .unwrap();
    ops.push(Op::root_file(
        "/usr/share/userconf-pi/sshd_banner",
        banner,
        0o644,
    ));
    // rename-user -f -s: userconfig on, getty@tty1 off, sshd's banner.
    ops.push(Op::Symlink {
        path: format!("{units}/multi-user.target.wants/userconfig.service"),
        target: "/usr/lib/systemd/system/userconfig.service".into(),
    });
    let getty = format!("{units}/getty.target.wants/getty@tty1.service");
    if root.readlink(&getty).unwrap().is_some() {
        ops.push(Op::Remove { path: getty });
    }
    ops.push(Op::root_file(
        "/etc/ssh/sshd_config.d/rename_user.conf",
        "Banner /usr/share/userconf-pi/sshd_banner\n",
        0o644,
    ));
    // pi-gen stage2/01-sys-tweaks: ssh off (ENABLE_SSH=0) and its host
    // keys removed; openssh's sshd-keygen.service makes them on the first
    // boot that starts it.
    for unit in [
        format!("{units}/multi-user.target.wants/ssh.service"),
        format!("{units}/sshd.service"),
        format!("{units}/sockets.target.wants/ssh.socket"),
    ] {
        if root.readlink(&unit).unwrap().is_some() {
            ops.push(Op::Remove { path: unit });
        }
    }
    for e in root.list("/etc/ssh").unwrap().unwrap_or_default() {
        if e.name.starts_with("ssh_host_") {
            ops.push(Op::Remove {
                path: format!("/etc/ssh/{}", e.name),
            });
        }
    }
    ops.push(Op::root_file(
        "/usr/lib/systemd/system/rpi-resize.service",
        RPI_RESIZE,
        0o644,
    ));
    ops.push(Op::Symlink {
        path: format!("{units}/sysinit.target.wants/rpi-resize.service"),
        target: "/usr/lib/systemd/system/rpi-resize.service".into(),
    });
    ops.push(Op::root_file(
        "/etc/cloud/cloud.cfg.d/99_raspberry-pi.cfg",
        CLOUD_CFG,
        0o644,
    ));
    ops.push(Op::root_file(
        "/etc/cloud/cloud.cfg.d/98_raspberry-pi-os-default-user.cfg",
        CLOUD_DEFAULT_USER,
        0o644,
    ));
    ops.push(Op::root_file(
        "/usr/lib/systemd/system/cloud-init-main.service.d/41-rpi-firmware-mount.conf",
        CLOUD_MOUNT,
        0o644,
    ));
    // Debian's raspi-firmware hooks write a config.txt of their own at
    // every kernel or initramfs change; Raspberry Pi OS's only copy kernels
    // and device trees, so the replica has none.
    for hook in [
        "/etc/kernel/postinst.d/z50-raspi-firmware",
        "/etc/initramfs/post-update.d/z50-raspi-firmware",
    ] {
        if root.owner(hook).unwrap().is_some() {
            ops.push(Op::Remove { path: hook.into() });
        }
    }
    // pi-gen export-image/05-finalise.
    let issue = format!(
        "Raspberry Pi reference replica (nasforge tests/replica), modelled on 2026-06-18-raspios-trixie-arm64, disk {disk_id}\n"
    );
    ops.push(Op::root_file("/etc/rpi-issue", issue, 0o644));
    for (path, text) in [
        ("/etc/hostname", "raspberrypi\n"),
        (
            "/etc/hosts",
            "127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\nff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n\n127.0.1.1\traspberrypi\n",
        ),
    ] {
        ops.push(Op::Remove { path: path.into() });
        ops.push(Op::root_file(path, text, 0o644));
    }
    let machine_id = root.read("/etc/machine-id").unwrap().unwrap_or_default();
    assert_eq!(
        machine_id, b"uninitialized\n",
        "the base leaves the machine id to the first boot, as pi-gen does"
    );
    ops
}

/// pi-gen's first user: `pi` at uid 1000 in pi-gen's groups (those the
/// base has), its password locked and, since 2026-03 (`adduser
/// --disabled-login`), no login shell until it is renamed.
fn pios_accounts(root: &Ext4) {
    let read = |p: &str| String::from_utf8(root.read(p).unwrap().unwrap()).unwrap();
    let mut acc = nasforge::system::accounts::Accounts {
        passwd: read("/etc/passwd"),
        shadow: read("/etc/shadow"),
        group: read("/etc/group"),
        gshadow: Some(read("/etc/gshadow")),
    };
    let groups: Vec<String> = PI_GEN_GROUPS
        .iter()
        .filter(|g| acc.has_group(g))
        .map(|g| g.to_string())
        .collect();
    assert!(groups.iter().any(|g| g == "sudo"), "{groups:?}");
    let pi = acc.add_user("pi", None, &groups, 20000).unwrap();
    assert_eq!(pi.uid, 1000, "pi-gen's first user");
    let passwd = acc
        .passwd
        .replace("/home/pi:/bin/bash", "/home/pi:/usr/sbin/nologin");
    root.apply(&[Op::Mkdir {
        path: pi.home.clone(),
        mode: 0o755,
        uid: 1000,
        gid: 1000,
    }])
    .unwrap();
    for (path, text) in [
        ("/etc/passwd", &passwd),
        ("/etc/shadow", &acc.shadow),
        ("/etc/group", &acc.group),
        ("/etc/gshadow", acc.gshadow.as_ref().unwrap()),
    ] {
        root.replace(path, text.as_bytes(), 0o644).unwrap();
    }
}

fn mtools(tool: &str) -> Command {
    let mut cmd = Command::new(tool);
    cmd.env("MTOOLS_SKIP_CHECK", "1");
    cmd
}

fn fat_listing(boot: &str) -> Vec<String> {
    stdout(mtools("mdir").args(["-b", "-i", boot, "::"]))
        .lines()
        .map(|l| l.trim_start_matches("::/").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// What Raspberry Pi Imager 2.x writes onto the boot partition when its OS
/// customisation is on (raspberrypi/rpi-imager v2.0.11.1,
/// src/downloadthread.cpp `_customizeImage` and
/// src/customization_generator.cpp `generateCloudInitUserData`): user-data
/// with a hostname and a user, meta-data with a new instance id, and that
/// id on cmdline.txt for cloud-init.
pub struct Imager<'a> {
    pub hostname: &'a str,
    pub user: &'a str,
    pub password_hash: &'a str,
    pub ssh_key: &'a str,
    pub timezone: &'a str,
}

impl Imager<'_> {
    pub fn user_data(&self) -> String {
        format!(
            "#cloud-config\nmanage_resolv_conf: false\n\nhostname: {}\nmanage_etc_hosts: true\npackages:\n- avahi-daemon\napt:\n  preserve_sources_list: true\n  conf: |\n    Acquire {{\n      Check-Date \"false\";\n    }};\ntimezone: {}\nkeyboard:\n  model: pc105\n  layout: \"gb\"\nuser:\n  name: {}\n  shell: /bin/bash\n  lock_passwd: false\n  passwd: \"{}\"\n  ssh_authorized_keys:\n    - \"{}\"\n  sudo: null\nssh_pwauth: false\nruncmd:\n  - [ systemctl, enable, --now, ssh ]\n",
            self.hostname, self.timezone, self.user, self.password_hash, self.ssh_key
        )
    }

    /// Writes the customisation onto `img`'s boot partition, as Imager does
    /// after writing the image to the card.
    pub fn customise(&self, img: &Path, instance: u64) {
        let start = sfdisk_parts(img)[0].0 * 512;
        let boot = format!("{}@@{start}", img.display());
        let dir = tempfile::tempdir().unwrap();
        let id = format!("rpi-imager-{instance}");
        let cmdline = mtype(img, start, "cmdline.txt");
        for (name, text) in [
            ("user-data", self.user_data()),
            ("meta-data", format!("instance-id: {id}\n")),
            (
                "cmdline.txt",
                format!("{} ds=nocloud;i={id}", cmdline.trim()),
            ),
        ] {
            let local = dir.path().join(name);
            std::fs::write(&local, text).unwrap();
            run(mtools("mcopy")
                .arg("-o")
                .arg("-i")
                .arg(&boot)
                .arg(&local)
                .arg(format!("::{name}")));
        }
    }
}

/// The ROCK 5B kernel command line's root, as Armbian's boot script passes
/// it from armbianEnv.txt (`rootdev=`); the replica's is by label.
pub const ARMBIAN_ROOT_LABEL: &str = "armbi_root";

/// armbian/build lib/functions/rootfs/distro-agnostic.sh: root's password
/// is `1234` until the first login asks for another.
pub const ARMBIAN_ROOT_PASSWORD: &str = "1234";

/// armbian-firstrun.service (armbian/build packages/bsp/common, v25.11.1),
/// written from its description: started after ssh, not waited for
/// (Type=simple), regenerating the SSH host keys once.
const ARMBIAN_FIRSTRUN_UNIT: &str = "# nasforge's Armbian replica of armbian/build's armbian-firstrun.service\n\
[Unit]\n\
Description=Armbian first run tasks\n\
Before=getty.target system-getty.slice\n\
After=ssh.service\n\
\n\
[Service]\n\
Type=simple\n\
RemainAfterExit=yes\n\
EnvironmentFile=/etc/default/armbian-firstrun\n\
ExecStart=/usr/lib/armbian/armbian-firstrun start\n\
TimeoutStartSec=2min\n\
\n\
[Install]\n\
WantedBy=multi-user.target\n";

/// What armbian-firstrun does that nasforge's first boot waits for: the
/// SSH host keys deleted and made again by dpkg, sshd restarted, then the
/// service disables itself.
const ARMBIAN_FIRSTRUN: &str = "#!/bin/sh\n\
# nasforge's Armbian replica of armbian/build's /usr/lib/armbian/armbian-firstrun:\n\
# the part of it a NAS sees (the SSH host keys made anew by dpkg).\n\
if [ \"$OPENSSHD_REGENERATE_HOST_KEYS\" = true ]; then\n\
\trm -f /etc/ssh/ssh_host*\n\
\tDEBIAN_FRONTEND=noninteractive dpkg-reconfigure openssh-server\n\
\tsystemctl restart ssh\n\
fi\n\
systemctl disable armbian-firstrun\n";

/// The first-login gate (/etc/profile.d/armbian-check-first-login.sh): a
/// root login shell runs the wizard while the marker exists.
const ARMBIAN_LOGIN_GATE: &str = "# nasforge's Armbian replica of armbian/build's armbian-check-first-login.sh\n\
if [ -w /root/ -a -f /root/.not_logged_in_yet ]; then\n\
\tbash /usr/lib/armbian/armbian-firstlogin\n\
fi\n";

/// The wizard itself asks for a new root password on the terminal first,
/// and waits for it.
const ARMBIAN_FIRSTLOGIN: &str = "#!/bin/bash\n\
# nasforge's Armbian replica of armbian/build's armbian-firstlogin: it asks\n\
# for a new root password before anything else, and waits for it.\n\
read -r -s -p 'Create root password: ' password\n\
echo \"root:$password\" | chpasswd && rm -f /root/.not_logged_in_yet\n";

/// Console autologin as root (distro-agnostic.sh, CONSOLE_AUTOLOGIN=yes),
/// so that the wizard starts by itself on a board's first boot.
const ARMBIAN_AUTOLOGIN: &str = "[Service]\nExecStart=\nExecStart=-/sbin/agetty --noissue --autologin root %I $TERM\nType=idle\n";

/// Makes `out` an Armbian (trixie) replica for a ROCK 5B from `base`,
/// nasforge's Debian trixie arm64 base built with [`PIOS_PACKAGES`]: GPT,
/// one ext4 root at 16 MiB with /boot inside, as Armbian lays its Rockchip
/// images out.
pub fn armbian(base: &Path, out: &Path) {
    let image = Image::open(base).unwrap();
    let from = image.root().unwrap().clone();
    let start = 16 * MIB;
    let total = start + from.size + MIB;
    std::fs::File::create(out).unwrap().set_len(total).unwrap();
    run(Command::new("sgdisk")
        .arg("-n")
        .arg(format!("1:32768:+{}", from.size / 512))
        .args(["-t", "1:8300", "-c", "1:rootfs"])
        .arg(out));
    run(Command::new("dd")
        .arg(format!("if={}", base.display()))
        .arg(format!("of={}", out.display()))
        .args(["bs=1M", "conv=sparse,notrunc", "status=none"])
        .arg(format!("skip={}", from.start / MIB))
        .arg(format!("seek={}", start / MIB))
        .arg(format!("count={}", from.size / MIB)));
    let device = format!("{}?offset={start}", out.display());
    run(Command::new("tune2fs")
        .args(["-L", ARMBIAN_ROOT_LABEL])
        .arg(&device));
    let root = Ext4::new(out, start);
    let modules = root.list("/usr/lib/modules").unwrap().unwrap();
    let release = modules
        .iter()
        .map(|e| e.name.clone())
        .find(|n| n != "." && n != "..")
        .unwrap();
    let dtb = root
        .read(&format!(
            "/usr/lib/linux-image-{release}/rockchip/rk3588-rock-5b.dtb"
        ))
        .unwrap()
        .expect("Debian's kernel ships the ROCK 5B's device tree");
    let uuid = stdout(
        Command::new("blkid")
            .args(["-p", "-s", "UUID", "-o", "value", "--offset"])
            .arg(start.to_string())
            .arg(out),
    );
    let env = format!(
        "verbosity=1\nbootlogo=false\nconsole=both\nextraargs=cma=256M\noverlay_prefix=rockchip-rk3588\nfdtfile=rockchip/rk3588-rock-5b.dtb\nrootdev=UUID={}\nrootfstype=ext4\n",
        uuid.trim()
    );
    let release_file = "# PLEASE DO NOT EDIT THIS FILE\nBOARD=rock-5b\nBOARD_NAME=\"Rock 5B\"\nBOARDFAMILY=rockchip-rk3588\nLINUXFAMILY=rk35xx\nARCH=arm64\nBOOT_SOC=rk3588\nIMAGE_TYPE=user-built\nBOARD_TYPE=conf\nINITRD_ARCH=arm64\nKERNEL_IMAGE_TYPE=Image\nOVERLAY_DIR=\"/boot/dtb/rockchip/overlay\"\nVENDOR=\"Armbian-unofficial\"\nBOOTSCRIPT_DST=\"boot.cmd\"\nVERSION=25.11.1\nREVISION=25.11.1\n";
    let units = "/etc/systemd/system";
    let mut ops = root
        .missing_dirs(&[
            "/usr/lib/armbian",
            "/etc/profile.d",
            "/etc/default",
            &format!("/boot/dtb-{release}/rockchip/overlay"),
            &format!("{units}/multi-user.target.wants"),
            &format!("{units}/getty@.service.d"),
            &format!("{units}/serial-getty@.service.d"),
        ])
        .unwrap();
    ops.extend([
        Op::root_file("/boot/armbianEnv.txt", env, 0o644),
        Op::root_file(
            format!("/boot/dtb-{release}/rockchip/rk3588-rock-5b.dtb"),
            dtb,
            0o644,
        ),
        Op::Symlink {
            path: "/boot/dtb".into(),
            target: format!("dtb-{release}"),
        },
        Op::Symlink {
            path: "/boot/Image".into(),
            target: format!("vmlinuz-{release}"),
        },
        Op::root_file("/etc/armbian-release", release_file, 0o644),
        Op::root_file("/etc/armbian-image-release", release_file, 0o644),
        Op::root_file(
            "/etc/default/armbian-firstrun",
            "OPENSSHD_REGENERATE_HOST_KEYS=true\n",
            0o644,
        ),
        Op::root_file(
            "/usr/lib/systemd/system/armbian-firstrun.service",
            ARMBIAN_FIRSTRUN_UNIT,
            0o644,
        ),
        Op::root_file("/usr/lib/armbian/armbian-firstrun", ARMBIAN_FIRSTRUN, 0o755),
        Op::Symlink {
            path: format!("{units}/multi-user.target.wants/armbian-firstrun.service"),
            target: "/usr/lib/systemd/system/armbian-firstrun.service".into(),
        },
        Op::root_file(
            "/etc/profile.d/armbian-check-first-login.sh",
            ARMBIAN_LOGIN_GATE,
            0o644,
        ),
        Op::root_file(
            "/usr/lib/armbian/armbian-firstlogin",
            ARMBIAN_FIRSTLOGIN,
            0o755,
        ),
        Op::root_file("/root/.not_logged_in_yet", "", 0o644),
        Op::root_file(
            format!("{units}/getty@.service.d/override.conf"),
            ARMBIAN_AUTOLOGIN,
            0o644,
        ),
        Op::root_file(
            format!("{units}/serial-getty@.service.d/override.conf"),
            ARMBIAN_AUTOLOGIN,
            0o644,
        ),
        // Armbian leaves the machine id empty and masks systemd-firstboot
        // (lib/functions/rootfs/rootfs-create.sh).
        Op::Remove {
            path: "/etc/machine-id".into(),
        },
        Op::root_file("/etc/machine-id", "", 0o444),
        Op::Symlink {
            path: format!("{units}/systemd-firstboot.service"),
            target: "/dev/null".into(),
        },
    ]);
    root.apply(&ops).unwrap();
    // Root's password and sshd's PermitRootLogin yes (distro-agnostic.sh).
    let read = |p: &str| String::from_utf8(root.read(p).unwrap().unwrap()).unwrap();
    let hash = nasforge::system::secrets::crypt_password(
        ARMBIAN_ROOT_PASSWORD,
        nasforge::system::secrets::Scheme::Yescrypt,
    )
    .unwrap();
    let shadow: String = read("/etc/shadow")
        .lines()
        .map(|l| match l.strip_prefix("root:") {
            Some(rest) => {
                let fields: Vec<&str> = rest.splitn(2, ':').collect();
                format!("root:{hash}:{}\n", fields.get(1).unwrap_or(&""))
            }
            None => format!("{l}\n"),
        })
        .collect();
    root.replace("/etc/shadow", shadow.as_bytes(), 0o640)
        .unwrap();
    let sshd = read("/etc/ssh/sshd_config")
        .replace("#PermitRootLogin prohibit-password", "PermitRootLogin yes");
    assert!(sshd.contains("\nPermitRootLogin yes"), "{sshd}");
    root.replace("/etc/ssh/sshd_config", sshd.as_bytes(), 0o644)
        .unwrap();
    // The SSH server runs (Armbian enables it), with the keys made when the
    // image was built, until armbian-firstrun makes new ones.
    let ssh = format!("{units}/multi-user.target.wants/ssh.service");
    if root.readlink(&ssh).unwrap().is_none() {
        root.apply(&[Op::Symlink {
            path: ssh,
            target: "/usr/lib/systemd/system/ssh.service".into(),
        }])
        .unwrap();
    }
    for (path, text) in [
        ("/etc/hostname", "rock-5b\n"),
        (
            "/etc/fstab",
            &format!(
                "LABEL={ARMBIAN_ROOT_LABEL} / ext4 defaults,noatime,commit=120,errors=remount-ro 0 1\ntmpfs /tmp tmpfs defaults,nosuid 0 0\n"
            ),
        ),
    ] {
        root.replace(path, text.as_bytes(), 0o644).unwrap();
    }
}
