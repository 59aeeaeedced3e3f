//! The PC: qemu's q35 machine with UEFI firmware from Debian's `ovmf`
//! package, booting the image as a PC boots its disk: the firmware finds the
//! boot loader on the EFI system partition (EFI/BOOT/BOOTX64.EFI) and GRUB
//! reads its own grub.cfg, so the kernel arguments are the image's.
//!
//! Data disks go on AHCI controllers of six ports each: q35's own (00:1f.2)
//! and as many more `ich9-ahci` as the disks need. qemu's emulated SAS HBAs
//! (mptsas1068, megasas) come up in the guest but show it no disks, so a SAS
//! HBA's many disks are stood in for by several SATA controllers, which the
//! guest sees and groups the same way.

use anyhow::{Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// SATA ports on each emulated AHCI controller.
const PORTS: usize = 6;

/// q35's own AHCI controller and three more: a 15-drive case and a few to spare.
const CONTROLLERS: usize = 4;

pub const MAX_DISKS: usize = PORTS * CONTROLLERS;

/// Debian's `ovmf`: the firmware's code (read-only) and the template of its
/// variable store, whose copy is the PC's NVRAM.
const CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
const VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";

pub(super) struct Firmware {
    code: PathBuf,
    vars: PathBuf,
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
/// the boot order) and the AHCI controllers beyond q35's own that `sata`
/// disks need.
pub(super) fn machine_args(cmd: &mut Command, firmware: &Firmware, overlay: &Path, sata: usize) {
    cmd.args(["-M", "q35", "-cpu", "max"]);
    cmd.arg("-drive").arg(format!(
        "if=pflash,format=raw,unit=0,readonly=on,file={}",
        firmware.code.display()
    ));
    cmd.arg("-drive").arg(format!(
        "if=pflash,format=raw,unit=1,file={}",
        firmware.vars.display()
    ));
    cmd.arg("-drive")
        .arg(format!(
            "if=none,id=root,format=qcow2,file={}",
            overlay.display()
        ))
        .args(["-device", "virtio-blk-pci,drive=root,bootindex=0"]);
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
        machine_args(&mut cmd, &fw, Path::new("root.qcow2"), 15);
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
            line.contains("virtio-blk-pci,drive=root,bootindex=0"),
            "{line}"
        );
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
