//! Test fixtures made with the real tools (sfdisk, sgdisk, mkfs.vfat, mtools,
//! mke2fs -d), shaped like the images users start from, plus helpers that
//! check results with tools independent of nasforge's own code.
#![allow(dead_code)]

pub mod http;
pub mod repo;
pub use nasforge_testkit::stdin::spawn_with_stdin;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const MIB: u64 = 1 << 20;

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run(cmd).stdout).into_owned()
}

/// The Raspberry Pi OS config.txt as pi-gen writes it (abridged, same shape).
pub const PIOS_CONFIG: &str = "# For more options and information see\n# http://rptl.io/configtxt\n# Some settings may impact device functionality. See link above for details\n\n# Uncomment some or all of these to enable the optional hardware interfaces\n#dtparam=i2c_arm=on\n#dtparam=i2s=on\n#dtparam=spi=on\n\n# Enable audio (loads snd_bcm2835)\ndtparam=audio=on\n\n# Automatically load overlays for detected cameras\ncamera_auto_detect=1\n\n# Enable DRM VC4 V3D driver\ndtoverlay=vc4-kms-v3d\nmax_framebuffers=2\n\n# Run in 64-bit mode\narm_64bit=1\n\n[cm4]\n# Enable host mode on the 2711 built-in XHCI USB controller.\notg_mode=1\n\n[cm5]\ndtoverlay=dwc2,dr_mode=host\n\n[all]\n";

pub const PIOS_CMDLINE: &str = "console=serial0,115200 console=tty1 root=PARTUUID=1234abcd-02 rootfstype=ext4 fsck.repair=yes rootwait quiet init=/usr/lib/raspberrypi-sys-mods/firstboot\n";

/// modules.dep of a kernel with SATA and md as modules, as Raspberry Pi OS ships.
pub fn modules_dep(with_raid456: bool) -> String {
    let mut s = String::from(
        "kernel/drivers/ata/libata.ko.xz:\nkernel/drivers/ata/libahci.ko.xz: kernel/drivers/ata/libata.ko.xz\nkernel/drivers/ata/ahci.ko.xz: kernel/drivers/ata/libahci.ko.xz kernel/drivers/ata/libata.ko.xz\nkernel/drivers/md/md-mod.ko.xz:\nkernel/drivers/md/raid0.ko.xz: kernel/drivers/md/md-mod.ko.xz\nkernel/drivers/md/raid1.ko.xz: kernel/drivers/md/md-mod.ko.xz\nkernel/drivers/md/raid10.ko.xz: kernel/drivers/md/md-mod.ko.xz\nkernel/fs/nfsd/nfsd.ko.xz:\nkernel/drivers/usb/storage/uas.ko.xz:\n",
    );
    if with_raid456 {
        s.push_str("kernel/drivers/md/raid456.ko.xz: kernel/drivers/md/md-mod.ko.xz kernel/crypto/async_tx/async_pq.ko.xz\n");
    }
    s
}

/// A gzip-compressed arm64 "Image" whose banner carries `version`, as
/// Raspberry Pi OS ships kernel8.img.
pub fn fake_kernel(version: &str) -> Vec<u8> {
    let mut raw = vec![0u8; 300_000];
    raw[..4].copy_from_slice(b"MZ\0\0");
    let banner = format!("Linux version {version} (builder@host) (gcc 12.2.0) #1 SMP PREEMPT\n\0");
    raw[200_000..200_000 + banner.len()].copy_from_slice(banner.as_bytes());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    gz.finish().unwrap()
}

pub struct RpiFixture {
    pub first_sector: u64,
    pub boot_mib: u64,
    pub root_mib: u64,
    pub config: String,
    pub cmdline: String,
    pub raid456: bool,
    /// Random data written into the root filesystem, to give it bulk.
    pub payload: u64,
    /// Extra files for the root filesystem: (path without leading /, content).
    pub root_files: Vec<(String, Vec<u8>)>,
    /// The device trees on the boot partition.
    pub device_trees: Vec<String>,
    /// modules.builtin lines of the kernels beyond loop: the boards' drivers.
    pub board_drivers: String,
}

impl Default for RpiFixture {
    fn default() -> Self {
        RpiFixture {
            first_sector: 8192,
            boot_mib: 64,
            root_mib: 96,
            config: PIOS_CONFIG.into(),
            cmdline: PIOS_CMDLINE.into(),
            raid456: true,
            payload: 0,
            root_files: vec![],
            device_trees: RPI_DEVICE_TREES.iter().map(|d| d.to_string()).collect(),
            board_drivers: BOARD_DRIVERS.into(),
        }
    }
}

pub const V8: &str = "6.6.51+rpt-rpi-v8";
pub const V2712: &str = "6.6.51+rpt-rpi-2712";

/// What a vendor's kernel for the boards builds in, beyond SATA and md:
/// the drivers each board's storage path and network need
/// (overlays/<board>.toml `[[drivers]]`), for the Raspberry Pis and the
/// Rockchip boards alike.
pub const BOARD_DRIVERS: &str = "kernel/drivers/pci/controller/pcie-brcmstb.ko\nkernel/drivers/usb/host/xhci-pci.ko\nkernel/drivers/reset/reset-raspberrypi.ko\nkernel/drivers/net/ethernet/broadcom/genet/genet.ko\nkernel/drivers/mfd/rp1.ko\nkernel/drivers/mmc/host/sdhci-brcmstb.ko\nkernel/drivers/pci/controller/dwc/pcie-dw-rockchip.ko\nkernel/drivers/phy/rockchip/phy-rockchip-snps-pcie3.ko\nkernel/drivers/pci/controller/pcie-rockchip-host.ko\nkernel/drivers/phy/rockchip/phy-rockchip-pcie.ko\nkernel/drivers/net/ethernet/stmicro/stmmac/dwmac-rk.ko\n";

/// The device trees the Raspberry Pi firmware loads for the boards
/// nasforge knows, as Raspberry Pi OS carries them on its boot partition.
pub const RPI_DEVICE_TREES: &[&str] = &[
    "bcm2711-rpi-4-b.dtb",
    "bcm2711-rpi-cm4.dtb",
    "bcm2712-rpi-5-b.dtb",
    "bcm2712-rpi-cm5-cm5io.dtb",
];

fn root_tree(dir: &Path, versions: &[(&str, String)], builtin: &str) {
    for d in ["etc", "usr/lib/modules", "boot", "var/lib"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::os::unix::fs::symlink("usr/lib", dir.join("lib")).unwrap();
    fs::write(dir.join("usr/lib/os-release"), "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n").unwrap();
    std::os::unix::fs::symlink("../usr/lib/os-release", dir.join("etc/os-release")).unwrap();
    fs::write(dir.join("etc/hostname"), "raspberrypi\n").unwrap();
    for (v, dep) in versions {
        let m = dir.join("usr/lib/modules").join(v);
        fs::create_dir_all(&m).unwrap();
        fs::write(
            m.join("modules.builtin"),
            format!("kernel/drivers/block/loop.ko\n{builtin}"),
        )
        .unwrap();
        fs::write(m.join("modules.dep"), dep).unwrap();
    }
}

impl RpiFixture {
    /// An image laid out as pi-gen does: MBR, FAT32 `bootfs`, ext4 `rootfs`.
    pub fn build(&self, dir: &Path) -> PathBuf {
        let img = dir.join("rpi.img");
        let boot_start = self.first_sector;
        let boot_sectors = self.boot_mib * 2048;
        let root_start = boot_start + boot_sectors;
        let root_sectors = self.root_mib * 2048;
        let total = (root_start + root_sectors) * 512;
        let f = fs::File::create(&img).unwrap();
        f.set_len(total).unwrap();
        drop(f);
        let table = format!(
            "label: dos\nlabel-id: 0x1234abcd\nunit: sectors\n\nstart={boot_start}, size={boot_sectors}, type=c\nstart={root_start}, size={root_sectors}, type=83\n"
        );
        let mut sfdisk = spawn_with_stdin(Command::new("sfdisk").arg("-q").arg(&img), &table);
        assert!(sfdisk.wait().unwrap().success());

        run(Command::new("mkfs.vfat")
            // FAT32 like pi-gen. Its 512 MiB partition takes 4 sectors per
            // cluster; this smaller one needs 1 to keep the 65525 clusters
            // FAT32 requires (mkfs.vfat would size clusters for the whole file).
            .args(["-F", "32", "-s", "1", "-n", "bootfs", "--offset"])
            .arg(boot_start.to_string())
            .arg(&img)
            .arg((boot_sectors / 2).to_string()));
        let files = dir.join("bootfiles");
        fs::create_dir_all(&files).unwrap();
        fs::write(files.join("config.txt"), &self.config).unwrap();
        fs::write(files.join("cmdline.txt"), &self.cmdline).unwrap();
        fs::write(files.join("kernel8.img"), fake_kernel(V8)).unwrap();
        fs::write(files.join("kernel_2712.img"), fake_kernel(V2712)).unwrap();
        for dtb in &self.device_trees {
            fs::write(files.join(dtb), vec![0xd0u8; 4096]).unwrap();
        }
        let mut mcopy = Command::new("mcopy");
        mcopy.env("MTOOLS_SKIP_CHECK", "1").arg("-i").arg(format!(
            "{}@@{}",
            img.display(),
            boot_start * 512
        ));
        for name in [
            "config.txt",
            "cmdline.txt",
            "kernel8.img",
            "kernel_2712.img",
        ]
        .into_iter()
        .chain(self.device_trees.iter().map(String::as_str))
        {
            mcopy.arg(files.join(name));
        }
        run(mcopy.arg("::"));

        let tree = dir.join("roottree");
        let dep = modules_dep(self.raid456);
        root_tree(
            &tree,
            &[(V8, dep.clone()), (V2712, dep)],
            &self.board_drivers,
        );
        for (path, data) in &self.root_files {
            let p = tree.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, data).unwrap();
            // As Debian has them: root:shadow, 0640.
            if path == "etc/shadow" || path == "etc/gshadow" {
                use std::os::unix::fs::PermissionsExt;
                std::os::unix::fs::chown(&p, Some(0), Some(42)).unwrap();
                fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
            }
        }
        if self.payload > 0 {
            let mut data = vec![0u8; self.payload as usize];
            let mut x = 0x9e3779b97f4a7c15u64;
            for c in data.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
            }
            fs::write(tree.join("var/lib/payload.bin"), data).unwrap();
        }
        run(Command::new("mke2fs")
            .args(["-q", "-t", "ext4", "-L", "rootfs", "-d"])
            .arg(&tree)
            .arg("-E")
            .arg(format!("offset={}", root_start * 512))
            .arg(&img)
            .arg(format!("{}k", root_sectors / 2)));
        img
    }
}

/// The vendor's own first-user code for Raspberry Pi OS, unmodified, as the
/// packages install it: userconf-pi (../shared/vendor) and the
/// raspberrypi-sys-mods script it asks where the boot partition is
/// (tests/vendor). (path in the image without the leading /, contents, mode)
pub fn userconf_pi_files() -> Vec<(String, Vec<u8>, u32)> {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = top.join("../shared/vendor/userconf-pi");
    let sys_mods = top.join("tests/vendor/raspberrypi-sys-mods");
    // (path in the image, source, mode), as debian/install places them.
    [
        (
            "usr/lib/userconf-pi/userconf-service",
            shared.join("userconf-service"),
            0o755,
        ),
        (
            "usr/lib/userconf-pi/userconf",
            shared.join("userconf"),
            0o755,
        ),
        ("usr/bin/cancel-rename", shared.join("cancel-rename"), 0o755),
        ("usr/bin/rename-user", shared.join("rename-user"), 0o755),
        (
            "usr/lib/systemd/system/userconfig.service",
            shared.join("debian/userconf-pi.userconfig.service"),
            0o644,
        ),
        (
            "usr/lib/raspberrypi-sys-mods/get_fw_loc",
            sys_mods.join("get_fw_loc"),
            0o755,
        ),
    ]
    .into_iter()
    .map(|(path, from, mode)| {
        let data = fs::read(&from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        (path.to_string(), data, mode)
    })
    .collect()
}

/// The groups pi-gen adds its first user to (stage2/01-sys-tweaks/01-run.sh).
pub const PI_GEN_GROUPS: &[&str] = &[
    "adm", "dialout", "cdrom", "audio", "users", "sudo", "video", "games", "plugdev", "input",
    "gpio", "spi", "i2c", "netdev", "render",
];

/// Whether userconf-pi's own `validate_user` (the function, cut from the
/// vendor's userconf-service and run by sh) accepts `name`.
pub fn userconf_accepts(name: &str) -> bool {
    let script = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vendor/userconf-pi/userconf-service"),
    )
    .unwrap();
    let start = script
        .find("validate_user() {")
        .expect("validate_user in userconf-service");
    let end = start + script[start..].find("\n}\n").unwrap() + 3;
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{}\nvalidate_user", &script[start..end]))
        .env("NEW_USER", name)
        .output()
        .unwrap();
    out.status.success()
}

/// Debian's own sshd_config (from the host's openssh-server), and Armbian's
/// edit of it (armbian/build lib/functions/rootfs/distro-agnostic.sh).
pub fn debian_sshd_config() -> String {
    fs::read_to_string("/usr/share/openssh/sshd_config")
        .expect("openssh-server's sshd_config (scripts/setup installs it)")
}

pub fn armbian_sshd_config() -> String {
    debian_sshd_config()
        .lines()
        .map(|l| {
            if l.starts_with("PermitRootLogin ") || l.starts_with("#PermitRootLogin ") {
                "PermitRootLogin yes".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// What the host's sshd makes of the image's /etc/ssh for a root login from
/// elsewhere (`sshd -T`), the Include pointed at the image's drop-ins.
pub fn sshd_effective(img: &Path, offset: u64, scratch: &Path) -> String {
    let etc = scratch.join("etc-ssh");
    let _ = fs::remove_dir_all(&etc);
    fs::create_dir_all(&etc).unwrap();
    run(Command::new("debugfs")
        .arg("-R")
        .arg(format!("rdump /etc/ssh {}", etc.display()))
        .arg(format!("{}?offset={offset}", img.display())));
    let dir = etc.join("ssh");
    let config = fs::read_to_string(dir.join("sshd_config"))
        .unwrap()
        .replace(
            "/etc/ssh/sshd_config.d",
            &dir.join("sshd_config.d").display().to_string(),
        );
    fs::write(dir.join("sshd_config"), config).unwrap();
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(etc.join("hostkey")));
    fs::create_dir_all("/run/sshd").unwrap();
    stdout(
        Command::new("/usr/sbin/sshd")
            .arg("-T")
            .arg("-f")
            .arg(dir.join("sshd_config"))
            .arg("-h")
            .arg(etc.join("hostkey"))
            .args(["-C", "user=root,host=client,addr=192.0.2.1"]),
    )
}

/// The z50 hook, owned by a `raspi-firmware` package with this maintainer
/// in the image's dpkg database (Debian's and Raspberry Pi OS's packages
/// share the name).
pub fn raspi_firmware(maintainer: &str) -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "etc/kernel/postinst.d/z50-raspi-firmware".into(),
            b"#!/bin/sh\n".to_vec(),
        ),
        (
            "var/lib/dpkg/info/raspi-firmware.list".into(),
            b"/.\n/etc\n/etc/kernel\n/etc/kernel/postinst.d\n/etc/kernel/postinst.d/z50-raspi-firmware\n".to_vec(),
        ),
        (
            "var/lib/dpkg/info/dpkg.list".into(),
            b"/.\n/usr/bin/dpkg\n".to_vec(),
        ),
        (
            "var/lib/dpkg/status".into(),
            format!("Package: dpkg\nStatus: install ok installed\nMaintainer: Dpkg Developers <debian-dpkg@lists.debian.org>\nArchitecture: arm64\nVersion: 1.22.21\n\nPackage: raspi-firmware\nStatus: install ok installed\nMaintainer: {maintainer}\nArchitecture: all\nVersion: 1.20240424+ds-6\n").into_bytes(),
        ),
    ]
}

pub const ARMBIAN_VERSION: &str = "6.1.115-vendor-rk35xx";

pub const ARMBIAN_ENV: &str = "verbosity=1\nbootlogo=false\nconsole=both\nextraargs=cma=256M\noverlay_prefix=rockchip-rk3588\nfdtfile=rockchip/rk3588-rock-5b.dtb\noverlays=uart7-m2\nrootdev=UUID=4b1c0e42-05c4-4c0f-a55e-0e9b1ea9e2e7\nrootfstype=ext4\nusbstoragequirks=0x2537:0x1066:u,0x2537:0x1068:u\n";
/// The root filesystem's UUID in `armbian_image`, which armbianEnv.txt's
/// `rootdev=` and fstab name, as in Armbian's own images.
pub const ARMBIAN_ROOT_UUID: &str = "4b1c0e42-05c4-4c0f-a55e-0e9b1ea9e2e7";
/// Armbian's fstab line for the root (armbian/build
/// lib/functions/image/partitioning.sh).
pub const ARMBIAN_FSTAB: &str = "UUID=4b1c0e42-05c4-4c0f-a55e-0e9b1ea9e2e7 / ext4 defaults,noatime,commit=120,errors=remount-ro 0 1\ntmpfs /tmp tmpfs defaults,nosuid 0 0\n";

/// An Armbian Rockchip image: GPT, one ext4 `armbi_root` at 16 MiB with
/// /boot inside, U-Boot bytes at 32 KiB.
pub fn armbian_image(dir: &Path, overlays: &[&str]) -> PathBuf {
    armbian_image_with(dir, overlays, &[])
}

/// `armbian_image` with extra root files: (path without leading /, content).
pub fn armbian_image_with(dir: &Path, overlays: &[&str], files: &[(String, Vec<u8>)]) -> PathBuf {
    let img = dir.join("armbian.img");
    let root_mib = 96;
    let total = (16 + root_mib + 1) * MIB;
    fs::File::create(&img).unwrap().set_len(total).unwrap();
    run(Command::new("sgdisk")
        .args(["-n", "1:32768:0", "-t", "1:8300", "-c", "1:rootfs"])
        .arg(&img));
    let mut f = fs::OpenOptions::new().write(true).open(&img).unwrap();
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(32 * 1024)).unwrap();
    f.write_all(b"RKNS idbloader stand-in").unwrap();
    drop(f);

    let tree = dir.join("armbiantree");
    root_tree(
        &tree,
        &[(
            ARMBIAN_VERSION,
            modules_dep(true) + "kernel/drivers/ata/ahci_dwc.ko:\n",
        )],
        BOARD_DRIVERS,
    );
    fs::write(tree.join("boot/armbianEnv.txt"), ARMBIAN_ENV).unwrap();
    fs::write(tree.join("etc/fstab"), ARMBIAN_FSTAB).unwrap();
    fs::write(
        tree.join(format!("boot/vmlinuz-{ARMBIAN_VERSION}")),
        b"kernel",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        format!("vmlinuz-{ARMBIAN_VERSION}"),
        tree.join("boot/Image"),
    )
    .unwrap();
    let ov = tree.join("boot/dtb/rockchip/overlay");
    fs::create_dir_all(&ov).unwrap();
    fs::write(tree.join("boot/dtb/rockchip/rk3588-rock-5b.dtb"), b"dtb").unwrap();
    for o in overlays {
        fs::write(ov.join(o), b"dtbo").unwrap();
    }
    for (path, data) in files {
        let p = tree.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, data).unwrap();
    }
    let start = 32768 * 512;
    let sectors = stdout(Command::new("sgdisk").args(["-i", "1"]).arg(&img));
    let size: u64 = sectors
        .lines()
        .find(|l| l.starts_with("Partition size:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap()
        .parse()
        .unwrap();
    run(Command::new("mke2fs")
        .args([
            "-q",
            "-t",
            "ext4",
            "-L",
            "armbi_root",
            "-U",
            ARMBIAN_ROOT_UUID,
            "-d",
        ])
        .arg(&tree)
        .arg("-E")
        .arg(format!("offset={start}"))
        .arg(&img)
        .arg(format!("{}k", size / 2)));
    img
}

/// `sfdisk --json` of an image: (start sector, size in sectors, type) per partition.
pub fn sfdisk_parts(img: &Path) -> Vec<(u64, u64, String)> {
    let json: serde_json::Value =
        serde_json::from_str(&stdout(Command::new("sfdisk").arg("--json").arg(img))).unwrap();
    json["partitiontable"]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["start"].as_u64().unwrap(),
                p["size"].as_u64().unwrap(),
                p["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `fsck.vfat -n` on the FAT partition (copied out: fsck.vfat takes no offset).
pub fn fsck_vfat(img: &Path, start: u64, size: u64, scratch: &Path) -> String {
    let part = scratch.join("boot.part");
    run(Command::new("dd")
        .arg(format!("if={}", img.display()))
        .arg(format!("of={}", part.display()))
        .args(["bs=512", "status=none", "conv=sparse"])
        .arg(format!("skip={}", start / 512))
        .arg(format!("count={}", size / 512)));
    let out = Command::new("fsck.vfat")
        .arg("-n")
        .arg(&part)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "fsck.vfat -n found problems:\n{text}");
    fs::remove_file(part).unwrap();
    text
}

/// Block count × block size of the ext4 at `offset`, from dumpe2fs.
pub fn ext4_size(img: &Path, offset: u64) -> u64 {
    let text = stdout(
        Command::new("dumpe2fs")
            .arg("-h")
            .arg(format!("{}?offset={offset}", img.display())),
    );
    let field = |name: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split(':').nth(1))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    field("Block count:") * field("Block size:")
}

pub fn e2fsck(img: &Path, offset: u64) -> String {
    let out = Command::new("e2fsck")
        .arg("-fn")
        .arg(format!("{}?offset={offset}", img.display()))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "e2fsck -fn found problems:\n{text}");
    text
}

/// A file from the FAT partition, read with mtools rather than nasforge's code.
pub fn mtype(img: &Path, offset: u64, name: &str) -> String {
    stdout(
        Command::new("mtype")
            .env("MTOOLS_SKIP_CHECK", "1")
            .arg("-i")
            .arg(format!("{}@@{offset}", img.display()))
            .arg(format!("::{name}")),
    )
}

/// A file from the ext4 root, read with debugfs directly.
pub fn debugfs_cat(img: &Path, offset: u64, path: &str) -> String {
    stdout(
        Command::new("debugfs")
            .arg("-R")
            .arg(format!("cat {path}"))
            .arg(format!("{}?offset={offset}", img.display())),
    )
}

/// `debugfs stat` of a path in the ext4 root: empty when it does not exist.
pub fn debugfs_stat(img: &Path, offset: u64, path: &str) -> String {
    stdout(
        Command::new("debugfs")
            .arg("-R")
            .arg(format!("stat {path}"))
            .arg(format!("{}?offset={offset}", img.display())),
    )
}

pub fn sha256_bytes(data: &[u8]) -> String {
    nasforge::io::hash::sha256_hex(data)
}

pub fn sha256_file(path: &Path) -> String {
    stdout(Command::new("sha256sum").arg(path))
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

pub struct Cli {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the real `nasforge` binary, as a user would.
pub fn nasforge(args: &[&str], cwd: &Path, cache: &Path) -> Cli {
    let out = Command::new(env!("CARGO_BIN_EXE_nasforge"))
        .args(args)
        .current_dir(cwd)
        .env("NASFORGE_CACHE", cache)
        .output()
        .unwrap();
    Cli {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every file under `dir`, relative, sorted: to prove a failed build left nothing.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if !dir.exists() {
        return out;
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

pub fn write_recipe(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

/// The emulated board's test is the run's longest chain (tests/e2e.rs):
/// the other slow tests, which share the two cores with it, leave it the
/// larger share. Nice 5 for the calling thread (the test's own, under
/// libtest) and everything it starts; on Linux a thread's id names it to
/// renice.
pub fn second_to_the_board() {
    let Some(tid) = fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    else {
        return;
    };
    let _ = std::process::Command::new("renice")
        .args(["-n", "5", "-p", &tid])
        .stdout(std::process::Stdio::null())
        .status();
}

/// A disk image of `size` bytes holding an ext4 labelled `label` with one
/// file, `name`, at its root: a disk from elsewhere that setup keeps.
pub fn ext4_disk_with_file(img: &Path, size: u64, label: &str, name: &str, contents: &str) {
    fs::File::create(img).unwrap().set_len(size).unwrap();
    run(Command::new("mkfs.ext4").args(["-q", "-L", label]).arg(img));
    let file = img.with_file_name(name);
    fs::write(&file, contents).unwrap();
    run(Command::new("debugfs")
        .arg("-w")
        .arg("-R")
        .arg(format!("write {} {name}", file.display()))
        .arg(img));
}

/// The `[installer]` section for an amd64 image: the nasforge-setup this
/// test run built for the host, instead of `nasforge build`'s default, a
/// second compile of the whole dependency tree in the board profile (about
/// 250 CPU-s of a CI run's two cores). The emulated board's test still
/// takes the default, so scripts/build-setup stays proven. Built beside
/// the test binaries by `cargo nextest run --workspace`, as scripts/test
/// runs it (nasforge-setup's own tests need it).
pub fn host_installer_section() -> String {
    let exe = std::env::current_exe().unwrap();
    let binary = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("nasforge-setup");
    assert!(
        binary.is_file(),
        "{} is missing: run the tests with `cargo nextest run --workspace` (scripts/test), which builds it",
        binary.display()
    );
    format!("\n[installer]\nbinary = \"{}\"\n", binary.display())
}

/// A download and base-image cache that survives test runs (under the
/// target directory), so slow inputs are built once per machine.
pub fn persistent_cache(target_tmp: &Path) -> PathBuf {
    let dir = target_tmp.join("nasforge-cache");
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether `needle` occurs anywhere in the file's bytes, read in chunks.
pub fn contains_bytes(file: &Path, needle: &[u8]) -> bool {
    use std::io::Read;
    let mut f = std::fs::File::open(file).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return false;
        }
        carry.extend_from_slice(&buf[..n]);
        if carry.windows(needle.len()).any(|w| w == needle) {
            return true;
        }
        let keep = carry.len().saturating_sub(needle.len());
        carry.drain(..keep);
    }
}

/// What a command printed, stdout then stderr, for assertion messages.
pub fn printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
