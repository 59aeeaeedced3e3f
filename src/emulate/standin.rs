//! A stand-in kernel for images whose own kernels cannot run on qemu's
//! `virt` machine: Raspberry Pi OS's (rpi-v8, rpi-2712: built for the Pi's
//! own SoC, no virtio) and Armbian's (vendor kernels for one SoC). Debian's
//! arm64 kernel of the release the userland is built on boots the image's
//! own userland instead, so the vendor's first boot (userconf-pi,
//! cloud-init, armbian-firstrun) and nasforge's run before a board ever
//! does.
//!
//! The kernel, its initramfs and its modules come from nasforge's own
//! Debian base of that release (`crate::debian`), built once per machine.
//! The modules are an ext4 disk of their own, kept in the cache and seen by
//! each board through a copy-on-write overlay in its work directory; a
//! script appended to the base's initramfs mounts it at
//! `/lib/modules/<version>` of the image's root filesystem. Packages that
//! add modules for that kernel (nasforge's ZFS modules, when the image's
//! kernel is the stand-in's own) and depmod write there, and the board
//! keeps them between runs; nothing of the stand-in is written to the
//! image.

use crate::debian::DebianBase;
use crate::image::Image;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The modules disk's filesystem label, which the initramfs script mounts.
const LABEL: &str = "NFSTANDIN";

/// What the stand-in changes against the real board, said before it boots.
pub(super) const DIFFERENCES: &[&str] = &[
    "no vendor firmware or boot loader: config.txt and armbianEnv.txt are not read (cmdline.txt's arguments are), and no device tree",
    "no GPIO, HATs, camera or display; the network card is virtio, the SATA controller an ich9-ahci",
    "the image's own initramfs does not run (Raspberry Pi OS grows its root partition and picks a new disk id there): the board does that at its first boot",
    "the kernel is loaded at a fixed address (nokaslr): randomised, it isolates its page tables from programs', which emulation pays for on every system call",
];

pub(super) struct StandIn {
    pub(super) kernel: PathBuf,
    pub(super) initrd: PathBuf,
    /// The modules disk in the cache, shared by every board.
    pub(super) modules: PathBuf,
    /// This board's overlay of it.
    pub(super) disk: PathBuf,
    pub(super) version: String,
}

/// The initramfs script that mounts the modules disk where the image's
/// userland looks for modules. Run by initramfs-tools after the root
/// filesystem is mounted (`local-bottom`), before systemd starts, so udev's
/// first pass already finds every driver.
const MOUNT_SCRIPT: &str = r#"#!/bin/sh
# nasforge emulate: the stand-in kernel's modules are on a disk of their
# own; mount them where the image's userland looks for modules. The
# directory made here lands in the emulator's overlay, never in the image.
case "$1" in prereqs) exit 0 ;; esac
. /scripts/functions
disk=/dev/disk/by-label/NFSTANDIN
tries=0
while [ ! -b "$disk" ] && [ "$tries" -lt 20 ]; do
	sleep 1
	tries=$((tries + 1))
done
modules="${rootmnt}/usr/lib/modules"
[ -d "$modules" ] || modules="${rootmnt}/lib/modules"
version="$(uname -r)"
mkdir -p "$modules/$version"
if mount -t ext4 "$disk" "$modules/$version"; then
	log_success_msg "nasforge: the stand-in kernel's modules are at ${modules#"$rootmnt"}/$version"
else
	log_failure_msg "nasforge: cannot mount the stand-in kernel's modules from $disk"
fi
exit 0
"#;

/// The base initramfs's `local-bottom` stage holds nothing of its own
/// (checked when the stand-in is made), so this order is the whole stage.
const MOUNT_ORDER: &str = "/scripts/local-bottom/nasforge-standin \"$@\"\n[ -e /conf/param.conf ] && . /conf/param.conf\n";

/// The stand-in for a userland built on Debian `release`, made once per
/// Debian base and kept in the cache.
pub(super) fn prepare(release: &str, cache: &Path, workdir: &Path, fresh: bool) -> Result<StandIn> {
    let mut standin = cached(release, cache)?;
    standin.disk = board_disk(&standin, workdir, fresh)?;
    Ok(standin)
}

fn cached(release: &str, cache: &Path) -> Result<StandIn> {
    let base = base_image(release, cache)?;
    let stem = base
        .file_stem()
        .and_then(|s| s.to_str())
        .context("a Debian base image without a name")?
        .to_string();
    let dir = cache.join("standin").join(&stem);
    let standin = |version: String| StandIn {
        kernel: dir.join("vmlinuz"),
        initrd: dir.join("initrd.img"),
        modules: dir.join("modules.img"),
        disk: PathBuf::new(),
        version,
    };
    if let Ok(v) = std::fs::read_to_string(dir.join("version")) {
        return Ok(standin(v.trim().to_string()));
    }
    std::fs::create_dir_all(cache.join("standin"))?;
    let _lock = crate::io::lock::Lock::take(&cache.join("standin").join(format!("{stem}.lock")))?;
    if let Ok(v) = std::fs::read_to_string(dir.join("version")) {
        return Ok(standin(v.trim().to_string()));
    }
    let work = tempfile::Builder::new()
        .prefix(".standin-")
        .tempdir_in(cache.join("standin"))?;
    let version = extract(&base, work.path())?;
    std::fs::write(work.path().join("version"), format!("{version}\n"))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(work.keep(), &dir)
        .with_context(|| format!("moving the stand-in kernel into {}", dir.display()))?;
    Ok(standin(version))
}

/// A Debian arm64 base of `release` already in the cache (any: they carry
/// the same kernel package), else the plain one, built now.
fn base_image(release: &str, cache: &Path) -> Result<PathBuf> {
    let prefix = format!("{release}-arm64-");
    let mut cached: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(cache.join("debian"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".img"))
        })
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    cached.sort();
    if let Some((_, newest)) = cached.pop() {
        return Ok(newest);
    }
    println!(
        "building Debian {release}'s arm64 base once, for its kernel (minutes; kept in {})",
        cache.join("debian").display()
    );
    DebianBase {
        suite: release.to_string(),
        arch: "arm64".into(),
        mirror: None,
        packages: vec![],
    }
    .image(cache)
}

/// Copies the base's kernel and initramfs into `dir`, makes its modules a
/// disk image and appends the mount script to the initramfs; the version.
fn extract(base: &Path, dir: &Path) -> Result<String> {
    let image = Image::open(base)?;
    let root = image
        .ext4()
        .with_context(|| format!("the Debian base {} has no root filesystem", base.display()))?;
    let kernels = crate::kernel::installed(&image)?;
    let [kernel] = kernels.as_slice() else {
        bail!(
            "the Debian base {} should hold one kernel, not {}",
            base.display(),
            kernels.len()
        );
    };
    let version = kernel.version.clone();
    let vmlinuz = dir.join("vmlinuz");
    if !root.dump(&format!("/boot/vmlinuz-{version}"), &vmlinuz)? {
        bail!(
            "the Debian base {} has no /boot/vmlinuz-{version}",
            base.display()
        );
    }
    kernel_format(&vmlinuz)?;
    for stage in [
        "/usr/share/initramfs-tools/scripts/local-bottom",
        "/etc/initramfs-tools/scripts/local-bottom",
    ] {
        if root.list(stage)?.is_some_and(|e| !e.is_empty()) {
            bail!(
                "the Debian base {} has initramfs scripts in {stage}, which the stand-in's own would replace; rebuild the base",
                base.display()
            );
        }
    }
    let mut initrd = root
        .read(&format!("/boot/initrd.img-{version}"))?
        .with_context(|| {
            format!(
                "the Debian base {} has no /boot/initrd.img-{version}",
                base.display()
            )
        })?;
    initrd.resize(initrd.len().next_multiple_of(4), 0);
    initrd.extend(crate::image::cpio::newc(&[
        crate::image::cpio::Entry::dir("scripts/local-bottom"),
        crate::image::cpio::Entry::file(
            "scripts/local-bottom/ORDER",
            MOUNT_ORDER.as_bytes(),
            0o644,
        ),
        crate::image::cpio::Entry::file(
            "scripts/local-bottom/nasforge-standin",
            MOUNT_SCRIPT.as_bytes(),
            0o755,
        ),
    ]));
    std::fs::write(dir.join("initrd.img"), initrd)?;

    let tree = dir.join("tree");
    std::fs::create_dir(&tree)?;
    let modules = ["/usr/lib/modules", "/lib/modules"]
        .into_iter()
        .map(|d| format!("{d}/{version}"))
        .find(|d| root.list(d).ok().flatten().is_some())
        .with_context(|| {
            format!(
                "the Debian base {} has no modules for {version}",
                base.display()
            )
        })?;
    root.rdump(&modules, &tree)?;
    let contents = tree.join(&version);
    let bytes = du(&contents)?;
    let size_mib = bytes / (1 << 20) * 5 / 4 + 32;
    let out = Command::new("mke2fs")
        .args(["-q", "-t", "ext4", "-L", LABEL, "-d"])
        .arg(&contents)
        .arg(dir.join("modules.img"))
        .arg(format!("{size_mib}M"))
        .output()
        .context("running mke2fs (package e2fsprogs)")?;
    if !out.status.success() {
        bail!(
            "mke2fs could not make the stand-in's modules disk: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    std::fs::remove_dir_all(&tree)?;
    Ok(version)
}

/// The bytes of every regular file under `dir`.
fn du(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            total += du(&entry.path())?;
        } else if kind.is_file() {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

/// The board's view of the modules disk: a qcow2 overlay in its work
/// directory over the cached disk, made when missing (or when `fresh`).
fn board_disk(standin: &StandIn, workdir: &Path, fresh: bool) -> Result<PathBuf> {
    let path = workdir.join("standin-modules.qcow2");
    let stale = match (
        std::fs::metadata(&path),
        std::fs::metadata(&standin.modules),
    ) {
        (Ok(o), Ok(m)) => m.modified()? > o.modified()?,
        _ => true,
    };
    if fresh || stale {
        let _ = std::fs::remove_file(&path);
        super::qcow2_over(&standin.modules, &path)?;
    }
    Ok(path)
}

/// qemu's arguments for the board's modules disk.
pub(super) fn disk_args(cmd: &mut Command, disk: &Path) {
    cmd.arg("-drive")
        .arg(format!(
            "if=none,id=standin,format=qcow2,file={}",
            disk.display()
        ))
        .args([
            "-device",
            "virtio-blk-pci,drive=standin,serial=nasforge-standin",
        ]);
}

pub(super) fn kernel_format(path: &Path) -> Result<&'static str> {
    let mut head = [0u8; 64];
    let n = std::io::Read::read(&mut std::fs::File::open(path)?, &mut head)?;
    let head = &head[..n];
    if head.len() >= 0x3c && &head[0x38..0x3c] == b"ARM\x64" {
        return Ok("arm64 Image");
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok("gzip-compressed arm64 Image");
    }
    if head.starts_with(b"MZ") && head.len() >= 8 && &head[4..8] == b"zimg" {
        return Ok("EFI zboot arm64 Image");
    }
    bail!(
        "{} is not an arm64 kernel image qemu can load (no arm64 Image header)",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_script_is_valid_sh_and_names_the_disk_by_its_label() {
        let out = Command::new("sh")
            .args(["-n", "-c", MOUNT_SCRIPT])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(MOUNT_SCRIPT.contains(&format!("by-label/{LABEL}")));
    }
}
