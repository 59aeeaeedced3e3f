//! The PC: qemu's q35 machine with UEFI firmware from Debian's `ovmf`
//! package, booting the image as a PC boots its disk: the firmware finds the
//! boot loader on the EFI system partition (EFI/BOOT/BOOTX64.EFI) and GRUB
//! reads its own grub.cfg, so the kernel arguments are the image's.
//!
//! Data disks go on AHCI controllers of six ports each: q35's own (00:1f.2)
//! and as many more `ich9-ahci` as the disks need, or (`--sas-disk`) behind
//! LSI SAS1068 HBAs, qemu's `mptsas1068`, eight to an HBA as on the real
//! card: the guest's `mptsas` driver puts each disk under a SAS port and
//! end device in sysfs, as mpt3sas does on a PC with an LSI 9211 or 9300.

use anyhow::{Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// SATA ports on each emulated AHCI controller.
const PORTS: usize = 6;

/// q35's own AHCI controller and three more: a 15-drive case and a few to spare.
const CONTROLLERS: usize = 4;

pub const MAX_DISKS: usize = PORTS * CONTROLLERS;

/// Phys on qemu's SAS1068: the guest asks for eight devices and no more (a
/// ninth on the bus is never seen).
const SAS_PORTS: usize = 8;

const SAS_HBAS: usize = 4;

const MAX_SAS_DISKS: usize = SAS_PORTS * SAS_HBAS;

/// Whether `count` SAS disks can be attached to the machine emulated.
pub(super) fn check_sas(count: usize, is_pc: bool) -> Result<()> {
    if count > 0 && !is_pc {
        bail!(
            "--sas-disk and --sas-disks need the emulated PC: the emulated arm64 board has no SAS HBA (build for `model = \"x86-64\"`, or attach the disks with --disk)"
        );
    }
    if count > MAX_SAS_DISKS {
        bail!(
            "{count} SAS disks asked for, but the emulated PC's {SAS_HBAS} SAS HBAs take {MAX_SAS_DISKS}: attach the rest with --disk"
        );
    }
    Ok(())
}

/// The HBA the `k`th SAS disk starts, when it is the first on it.
pub(super) fn sas_hba(k: usize) -> Option<String> {
    k.is_multiple_of(SAS_PORTS)
        .then(|| format!("mptsas1068,id=sas{}", k / SAS_PORTS))
}

/// The `k`th SAS disk, drive `d{drive}`. qemu's mptsas reports a disk's
/// `wwn` as its SAS address (hw/scsi/mptconfig.c), and the guest makes no
/// end device, so no disk, for address 0, qemu's default: each disk gets
/// one, a locally assigned name (NAA 3) made from its serial so that it
/// stays with the disk when others are left out.
pub(super) fn sas_device(k: usize, drive: usize, serial: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(serial.as_bytes());
    let low = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes")) & ((1 << 60) - 1);
    format!(
        "scsi-hd,bus=sas{}.0,scsi-id={},drive=d{drive},serial={serial},wwn={:#018x}",
        k / SAS_PORTS,
        k % SAS_PORTS,
        (3u64 << 60) | low
    )
}

/// Whether the SSDs and `--without-image-disk` asked for fit the machine.
pub(super) fn check_ssds(count: usize, without_image_disk: bool, is_pc: bool) -> Result<()> {
    if (count > 0 || without_image_disk) && !is_pc {
        bail!(
            "--ssd and --without-image-disk need the emulated PC: the emulated arm64 board boots from its card (build for `model = \"x86-64\"`)"
        );
    }
    if without_image_disk && count == 0 {
        bail!(
            "--without-image-disk leaves the PC nothing to boot from: give it the other SSD of a mirrored system with --ssd FILE"
        );
    }
    Ok(())
}

/// The `n`th SSD (from 1), drive `d{drive}`: NVMe, and in the boot order
/// after the image's disk. Every boot disk needs its place there: once any
/// device has a bootindex, OVMF drops the boot options of disks without one
/// (BdsPlatform.c, SetBootOrderFromQemu), and a PC whose first SSD is
/// pulled would find nothing to boot.
pub(super) fn ssd_device(n: usize, drive: usize, serial: &str) -> String {
    format!("nvme,drive=d{drive},serial={serial},bootindex={n}")
}

/// Debian's `ovmf`: the firmware's code (read-only) and the template of its
/// variable store, whose copy is the PC's NVRAM.
const CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
const VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";

pub(super) struct Firmware {
    pub(super) code: PathBuf,
    pub(super) vars: PathBuf,
}

/// The firmware, with the PC's own copy of the variable store in `workdir`:
/// kept between runs as a PC keeps its NVRAM, and started afresh with the
/// board's disk (`reset`), so no boot entry outlives the disk it named.
pub(super) fn firmware(workdir: &Path, reset: bool) -> Result<Firmware> {
    firmware_from(Path::new(CODE), Path::new(VARS), workdir, reset)
}

fn firmware_from(code: &Path, template: &Path, workdir: &Path, reset: bool) -> Result<Firmware> {
    for f in [code, template] {
        if !f.is_file() {
            bail!(
                "UEFI firmware {} not found: install Debian's ovmf package (scripts/setup does)",
                f.display()
            );
        }
    }
    let vars = workdir.join("OVMF_VARS.fd");
    if reset || !vars.is_file() {
        let part = workdir.join("OVMF_VARS.fd.part");
        std::fs::copy(template, &part)?;
        std::fs::rename(&part, &vars)?;
    }
    Ok(Firmware {
        code: code.to_path_buf(),
        vars,
    })
}

/// The machine and its firmware, the PC's boot disk on virtio (first in
/// the boot order; none when it is pulled) and the AHCI controllers beyond
/// q35's own that `sata` disks need.
pub(super) fn machine_args(
    cmd: &mut Command,
    firmware: &Firmware,
    overlay: Option<&Path>,
    sata: usize,
) {
    cmd.args(["-M", "q35", "-cpu", "max"]);
    cmd.arg("-drive").arg(format!(
        "if=pflash,format=raw,unit=0,readonly=on,file={}",
        firmware.code.display()
    ));
    cmd.arg("-drive").arg(format!(
        "if=pflash,format=raw,unit=1,file={}",
        firmware.vars.display()
    ));
    // A serial, so the guest names it in /dev/disk/by-id as it names
    // every other disk.
    if let Some(overlay) = overlay {
        cmd.arg("-drive")
            .arg(format!(
                "if=none,id=root,format=qcow2,file={}",
                overlay.display()
            ))
            .args([
                "-device",
                "virtio-blk-pci,drive=root,serial=system,bootindex=0",
            ]);
    }
    for c in 1..sata.div_ceil(PORTS) {
        cmd.arg("-device").arg(format!("ich9-ahci,id=ahci{c}"));
    }
}

/// The qemu bus of the `port`th SATA disk: q35's own controller is `ide`.
pub(super) fn sata_bus(port: usize) -> String {
    match (port / PORTS, port % PORTS) {
        (0, p) => format!("ide.{p}"),
        (c, p) => format!("ahci{c}.{p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_disks_to_a_controller_and_q35s_own_first() {
        let buses: Vec<String> = (0..15).map(sata_bus).collect();
        assert_eq!(buses[0], "ide.0");
        assert_eq!(buses[5], "ide.5");
        assert_eq!(buses[6], "ahci1.0");
        assert_eq!(buses[14], "ahci2.2");
        let mut cmd = Command::new("qemu");
        let fw = Firmware {
            code: "code.fd".into(),
            vars: "vars.fd".into(),
        };
        machine_args(&mut cmd, &fw, Some(Path::new("root.qcow2")), 15);
        let line: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let line = line.join(" ");
        assert!(
            line.contains("-device ich9-ahci,id=ahci1 -device ich9-ahci,id=ahci2"),
            "{line}"
        );
        assert!(!line.contains("ahci3"), "{line}");
        assert!(
            line.contains("if=pflash,format=raw,unit=0,readonly=on,file=code.fd"),
            "{line}"
        );
        assert!(
            line.contains("virtio-blk-pci,drive=root,serial=system,bootindex=0"),
            "{line}"
        );
        let mut pulled = Command::new("qemu");
        machine_args(&mut pulled, &fw, None, 0);
        let line: Vec<String> = pulled
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(!line.join(" ").contains("drive=root"), "{line:?}");
    }

    #[test]
    fn ssds_boot_after_the_image_disk_and_only_on_the_pc() {
        assert_eq!(
            ssd_device(1, 16, "ssd-two"),
            "nvme,drive=d16,serial=ssd-two,bootindex=1"
        );
        assert!(check_ssds(1, true, true).is_ok());
        assert!(check_ssds(2, false, true).is_ok());
        assert!(check_ssds(0, false, false).is_ok());
        let e = check_ssds(0, true, true).unwrap_err().to_string();
        assert_eq!(
            e,
            "--without-image-disk leaves the PC nothing to boot from: give it the other SSD of a mirrored system with --ssd FILE"
        );
        for (count, pulled) in [(1, false), (0, true)] {
            let e = check_ssds(count, pulled, false).unwrap_err().to_string();
            assert_eq!(
                e,
                "--ssd and --without-image-disk need the emulated PC: the emulated arm64 board boots from its card (build for `model = \"x86-64\"`)"
            );
        }
    }

    #[test]
    fn sas_disks_only_on_the_pc_and_no_more_than_its_hbas_take() {
        assert!(check_sas(32, true).is_ok());
        assert!(check_sas(0, false).is_ok());
        let e = check_sas(33, true).unwrap_err().to_string();
        assert_eq!(
            e,
            "33 SAS disks asked for, but the emulated PC's 4 SAS HBAs take 32: attach the rest with --disk"
        );
        let e = check_sas(1, false).unwrap_err().to_string();
        assert!(e.contains("need the emulated PC"), "{e}");
    }

    #[test]
    fn eight_sas_disks_to_an_hba_each_with_an_address_that_follows_its_serial() {
        let hbas: Vec<String> = (0..15).filter_map(sas_hba).collect();
        assert_eq!(hbas, ["mptsas1068,id=sas0", "mptsas1068,id=sas1"]);
        let first = sas_device(0, 3, "member00");
        assert!(
            first.starts_with("scsi-hd,bus=sas0.0,scsi-id=0,drive=d3,serial=member00,wwn=0x3"),
            "{first}"
        );
        let ninth = sas_device(8, 11, "member08");
        assert!(
            ninth.starts_with("scsi-hd,bus=sas1.0,scsi-id=0,drive=d11,"),
            "{ninth}"
        );
        let wwn = |d: &str| d.rsplit_once("wwn=").unwrap().1.to_string();
        assert_eq!(wwn(&first).len(), 18);
        assert_eq!(wwn(&sas_device(5, 0, "member00")), wwn(&first));
        assert_ne!(wwn(&ninth), wwn(&first));
    }

    #[test]
    fn the_nvram_is_kept_until_the_disk_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (code, template) = (d.join("code.fd"), d.join("vars-template.fd"));
        std::fs::write(&code, b"code").unwrap();
        std::fs::write(&template, b"blank nvram").unwrap();
        let work = d.join("work");
        std::fs::create_dir(&work).unwrap();
        let fw = firmware_from(&code, &template, &work, false).unwrap();
        assert_eq!(std::fs::read(&fw.vars).unwrap(), b"blank nvram");
        std::fs::write(&fw.vars, b"boot entries").unwrap();
        firmware_from(&code, &template, &work, false).unwrap();
        assert_eq!(std::fs::read(&fw.vars).unwrap(), b"boot entries");
        firmware_from(&code, &template, &work, true).unwrap();
        assert_eq!(std::fs::read(&fw.vars).unwrap(), b"blank nvram");
        assert!(!work.join("OVMF_VARS.fd.part").exists());
    }

    #[test]
    fn without_ovmf_it_says_which_package() {
        let dir = tempfile::tempdir().unwrap();
        let err = firmware_from(
            &dir.path().join("nope.fd"),
            &dir.path().join("nope-vars.fd"),
            dir.path(),
            false,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("install Debian's ovmf package"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
