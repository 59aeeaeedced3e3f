//! The arm64 board: qemu's `virt` machine with an `ich9-ahci` controller on
//! its PCIe bus: the guest's `ahci` driver binds to it exactly as to a JMB585
//! or ASM1166, and its disks are sdX.
//!
//! The Raspberry Pi firmware cannot be emulated, so the kernel and initramfs
//! are taken from the image's root filesystem and handed to qemu directly,
//! with the kernel arguments of the board's own cmdline.txt. A vendor's
//! image (Raspberry Pi OS, Armbian), whose kernels run only on their own
//! boards, boots its userland on a Debian stand-in kernel ([`super::standin`]).

use super::standin::{self, StandIn};
use crate::distro::{Distribution, Userland};
use crate::image::Image;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// SATA ports on qemu's ich9-ahci.
pub const MAX_DISKS: usize = 6;

/// The kernel and initramfs the guest boots, copied out of the image.
pub(super) struct Boot {
    pub(super) kernel: PathBuf,
    pub(super) initrd: Option<PathBuf>,
    pub(super) version: String,
    pub(super) root_arg: String,
    /// The rest of the board's cmdline.txt as it is on the board's disk
    /// now (`console=` aside: the emulated board has its own serial port).
    pub(super) card_args: Vec<String>,
    /// The Debian kernel standing in for a vendor's, and whose.
    pub(super) standin: Option<(StandIn, Userland)>,
}

/// What boots the image: its own kernel, or for a vendor's image a Debian
/// stand-in of the release its userland is built on.
pub(super) fn boot(image: &Image, workdir: &Path, cache: &Path, fresh: bool) -> Result<Boot> {
    let root = image
        .ext4()
        .context("the image has no ext4 root filesystem to boot")?;
    let userland = Userland::of(&root)?;
    if userland.distribution == Distribution::Other {
        return extract_boot(image, workdir);
    }
    let Some(release) = userland.debian_release() else {
        bail!(
            "{} here is built on {}, not on a Debian release: its own kernels run only on its boards, and nasforge's stand-in kernel is Debian's, so it cannot be booted here; try it on the board",
            userland.name(),
            userland.pretty
        );
    };
    let standin = standin::prepare(release, cache, workdir, fresh)?;
    Ok(Boot {
        kernel: standin.kernel.clone(),
        initrd: Some(standin.initrd.clone()),
        version: standin.version.clone(),
        root_arg: root_argument(image)?,
        card_args: Vec::new(),
        standin: Some((standin, userland)),
    })
}

fn extract_boot(image: &Image, workdir: &Path) -> Result<Boot> {
    let root = image
        .ext4()
        .context("the image has no ext4 root filesystem to take a kernel from")?;
    let files = crate::kernel::installed(image)?;
    let mut versions: Vec<String> = files.iter().map(|k| k.version.clone()).collect();
    versions.sort_by_key(|a| natural(a));
    let linked = ["/vmlinuz", "/boot/vmlinuz"]
        .iter()
        .filter_map(|l| root.readlink(l).ok().flatten())
        .find_map(|t| {
            t.rsplit('/')
                .next()
                .and_then(|n| n.strip_prefix("vmlinuz-"))
                .map(String::from)
        });
    let version = linked
        .or_else(|| versions.last().cloned())
        .context("the image has no kernel in /lib/modules, so there is nothing to boot")?;
    let info = files
        .iter()
        .find(|k| k.version == version)
        .context("the linked kernel has no /lib/modules directory")?;
    let r = info.report(&[]);
    let has = |m: &str| {
        r.modules
            .get(m)
            .is_some_and(|p| *p != crate::kernel::Presence::Absent)
    };
    // The report covers the NAS modules; virtio is looked up directly.
    let virtio = [&info.modules_builtin, &info.modules_dep].iter().any(|f| {
        f.as_deref()
            .is_some_and(|t| t.contains("virtio_blk.ko") || t.contains("virtio-blk.ko"))
    });
    if !virtio {
        bail!(
            "kernel {version} has no virtio block driver, so qemu's virt machine cannot boot it (Raspberry Pi OS kernels are built for the Pi's own hardware). Build the image from Debian's packages (`[base] debian = {{ suite = \"bookworm\", arch = \"arm64\" }}`) to try it here"
        );
    }
    if !has("ahci") {
        eprintln!(
            "warning: kernel {version} has no ahci driver: the emulated SATA disks will not appear"
        );
    }
    let kernel = workdir.join(format!("vmlinuz-{version}"));
    if !root.dump(&format!("/boot/vmlinuz-{version}"), &kernel)? {
        bail!("the image has /lib/modules/{version} but no /boot/vmlinuz-{version} to boot");
    }
    standin::kernel_format(&kernel)?;
    let initrd = workdir.join(format!("initrd.img-{version}"));
    let initrd = root
        .dump(&format!("/boot/initrd.img-{version}"), &initrd)?
        .then_some(initrd);
    Ok(Boot {
        kernel,
        initrd,
        version,
        root_arg: root_argument(image)?,
        card_args: Vec::new(),
        standin: None,
    })
}

/// The words of cmdline.txt on the board's disk (the overlay), which the
/// Raspberry Pi firmware reads on every boot: a kernel argument setup
/// wrote there (a USB quirk) is in effect after the board's reboot here
/// too. Only the boot partition's bytes are read out of the qcow2.
pub(super) fn card_args(image: &Image, overlay: &Path, workdir: &Path) -> Result<Vec<String>> {
    let Some(part) = image.boot() else {
        return Ok(Vec::new());
    };
    // qemu-img dd counts in blocks of bs: the largest power of two (up to
    // 1 MiB) that divides both the start and the size.
    let mut bs: u64 = 1 << 20;
    while bs > 512 && (part.start % bs != 0 || part.size % bs != 0) {
        bs /= 2;
    }
    let copy = workdir.join("boot-partition.img");
    let out = Command::new("qemu-img")
        .args(["dd", "-f", "qcow2", "-O", "raw"])
        .arg(format!("bs={bs}"))
        .arg(format!("skip={}", part.start / bs))
        .arg(format!("count={}", part.size / bs))
        .arg(format!("if={}", overlay.display()))
        .arg(format!("of={}", copy.display()))
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run qemu-img (package qemu-utils): {e}"))?;
    if !out.status.success() {
        bail!(
            "qemu-img could not read the boot partition of {}: {}",
            overlay.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let size = std::fs::metadata(&copy)?.len();
    let fat = crate::image::fat::Fat::open(std::fs::File::open(&copy)?, 0, size)?;
    let text = fat.read("cmdline.txt")?.unwrap_or_default();
    drop(fat);
    std::fs::remove_file(&copy)?;
    Ok(kernel_args(&String::from_utf8_lossy(&text)))
}

/// cmdline.txt's first line without `root=` (taken apart) and `console=`.
fn kernel_args(cmdline: &str) -> Vec<String> {
    cmdline
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter(|w| !w.starts_with("console=") && !w.starts_with("root="))
        .map(String::from)
        .collect()
}

/// `1.10` after `1.9`: version strings compared by their numbers.
fn natural(v: &str) -> Vec<(u64, String)> {
    v.split(|c: char| !c.is_ascii_alphanumeric())
        .map(|p| (p.parse().unwrap_or(0), p.to_string()))
        .collect()
}

/// The `root=` the board's own cmdline.txt uses, else the root partition's label.
fn root_argument(image: &Image) -> Result<String> {
    if let Some(fat) = image.fat(false)?
        && let Some(cmdline) = fat.read("cmdline.txt")?
    {
        let text = String::from_utf8_lossy(&cmdline);
        if let Some(r) = text.split_whitespace().find(|w| w.starts_with("root=")) {
            return Ok(r.to_string());
        }
    }
    let root = image.root().context("no root partition")?;
    match &root.label {
        Some(l) => Ok(format!("root=LABEL={l}")),
        None => Ok(format!(
            "root=PARTUUID={}-{:02}",
            image.layout.disk_id, root.number
        )),
    }
}

/// The machine, its kernel given directly with the board's arguments, the
/// board's disk on virtio, and the SATA controller.
pub(super) fn machine_args(cmd: &mut Command, boot: &Boot, overlay: &Path) {
    cmd.args(["-M", "virt", "-cpu", "cortex-a72"]);
    cmd.arg("-kernel").arg(&boot.kernel);
    if let Some(initrd) = &boot.initrd {
        cmd.arg("-initrd").arg(initrd);
    }
    let mut append = vec![boot.root_arg.clone()];
    append.extend(boot.card_args.iter().cloned());
    // nokaslr: with KASLR on, the arm64 kernel forces page table isolation,
    // so every system call and interrupt switches page tables, and qemu's
    // software TLB is flushed each time: under TCG a guest's system calls
    // ran 3 times slower and its forks 1.5 times (a busybox initramfs on
    // Debian trixie's 6.12 kernel, cortex-a72). What nasforge does on the
    // board does not depend on where the kernel is loaded.
    for w in ["rw", "console=ttyAMA0", "net.ifnames=0", "nokaslr"] {
        if !append.iter().any(|a| a == w) {
            append.push(w.to_string());
        }
    }
    cmd.arg("-append").arg(append.join(" "));
    cmd.arg("-drive")
        .arg(format!(
            "if=none,id=root,format=qcow2,file={}",
            overlay.display()
        ))
        .args(["-device", "virtio-blk-pci,drive=root"]);
    if let Some((standin, _)) = &boot.standin {
        standin::disk_args(cmd, &standin.disk);
    }
    cmd.args(["-device", "ich9-ahci,id=ahci"]);
}

/// The qemu bus of the `port`th SATA disk.
pub(super) fn sata_bus(port: usize) -> String {
    format!("ahci.{port}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_by_number() {
        let mut v = ["6.1.0-9-arm64".to_string(), "6.1.0-10-arm64".to_string()];
        v.sort_by_key(|a| natural(a));
        assert_eq!(v.last().unwrap(), "6.1.0-10-arm64");
    }

    #[test]
    fn the_card_gives_its_kernel_arguments_but_not_its_console_or_root() {
        assert_eq!(
            kernel_args(
                "console=tty0 console=ttyS1,115200 root=LABEL=RASPIROOT rw cma=64M usb-storage.quirks=46f4:0001:u rootwait\nignored line\n"
            ),
            [
                "rw",
                "cma=64M",
                "usb-storage.quirks=46f4:0001:u",
                "rootwait"
            ]
        );
    }

    /// A card image: an MBR with one FAT32 partition at 1 MiB (made by
    /// sfdisk, mkfs.vfat and mcopy) holding `cmdline`.
    fn card(dir: &Path, name: &str, cmdline: &str) -> PathBuf {
        use std::os::unix::fs::FileExt;
        let run = |cmd: &mut Command| {
            let out = cmd.output().unwrap();
            assert!(
                out.status.success(),
                "{cmd:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let fat = dir.join(format!("{name}.fat"));
        run(Command::new("mkfs.vfat")
            .args(["-C", "-F", "32", "-n", "bootfs"])
            .arg(&fat)
            .arg("34816"));
        let text = dir.join("cmdline.txt");
        std::fs::write(&text, cmdline).unwrap();
        run(Command::new("mcopy")
            .arg("-i")
            .arg(&fat)
            .arg(&text)
            .arg("::cmdline.txt"));
        let image = dir.join(name);
        std::fs::File::create(&image)
            .unwrap()
            .set_len(40 << 20)
            .unwrap();
        run(Command::new("sh").arg("-c").arg(format!(
            "echo 'start=2048, size=69632, type=c' | sfdisk -q '{}'",
            image.display()
        )));
        let bytes = std::fs::read(&fat).unwrap();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&image)
            .unwrap();
        f.write_all_at(&bytes, 1 << 20).unwrap();
        image
    }

    #[test]
    fn the_kernel_arguments_come_from_cmdline_txt_on_the_boards_disk() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let base = card(
            d,
            "nas.img",
            "console=serial0,115200 console=tty1 root=PARTUUID=1234abcd-02 rootwait quiet\n",
        );
        let workdir = d.join("nas.img.emulate");
        std::fs::create_dir_all(&workdir).unwrap();
        let (root, _) = super::super::overlay(&base, &workdir, false).unwrap();
        let image = Image::open(&base).unwrap();
        assert_eq!(
            card_args(&image, &root, &workdir).unwrap(),
            ["rootwait", "quiet"]
        );

        // The board rewrites cmdline.txt (setup's USB quirk): the write
        // lands in the overlay, and the next boot takes it from there.
        let rewritten = card(
            d,
            "rewritten.img",
            "console=serial0,115200 root=PARTUUID=1234abcd-02 rootwait usb-storage.quirks=46f4:0001:u\n",
        );
        let qemu_img = |args: &[&str]| {
            let out = Command::new("qemu-img").args(args).output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let (root_s, base_s) = (root.to_str().unwrap(), base.to_str().unwrap());
        qemu_img(&[
            "convert",
            "-f",
            "raw",
            "-O",
            "qcow2",
            rewritten.to_str().unwrap(),
            root_s,
        ]);
        qemu_img(&["rebase", "-u", "-F", "raw", "-b", base_s, root_s]);
        assert_eq!(
            card_args(&image, &root, &workdir).unwrap(),
            ["rootwait", "usb-storage.quirks=46f4:0001:u"]
        );
        assert_eq!(
            std::fs::read_dir(&workdir).unwrap().count(),
            1,
            "only root.qcow2: the boot partition's copy is gone"
        );
        let cmdline = std::fs::read(&base).unwrap();
        assert!(
            !String::from_utf8_lossy(&cmdline).contains("46f4:0001"),
            "the image itself is as built"
        );
    }
}
