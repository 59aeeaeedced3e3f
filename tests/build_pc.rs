//! `inspect` and `nasforge build` on PC images (board `x86-64`): GPT laid out
//! as Debian's cloud images are (debian-cloud-images'
//! config_space/bullseye/hooks/partition.AMD64: p14 BIOS boot, p15 EFI
//! System, p1 the root), the boot loader where UEFI firmware looks for it,
//! and the modules of Debian's `amd64` kernel or of its `cloud-amd64` one,
//! which has no AHCI and no SAS HBA drivers.

mod common;

use common::http::Server;
use common::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const GENERIC: &str = "6.1.0-57-amd64";
const CLOUD: &str = "6.1.0-57-cloud-amd64";
const ESP_START: u64 = 8192;
const ESP_SECTORS: u64 = 253952;
const ROOT_START: u64 = ESP_START + ESP_SECTORS;

/// Where Debian's amd64 kernel keeps the drivers the check looks for.
fn modules_dep(cloud: bool) -> String {
    let mut dep = String::from(
        "kernel/drivers/ata/libata.ko: kernel/drivers/scsi/scsi_mod.ko\n\
         kernel/drivers/md/md-mod.ko:\nkernel/drivers/md/raid0.ko: kernel/drivers/md/md-mod.ko\n\
         kernel/drivers/md/raid1.ko: kernel/drivers/md/md-mod.ko\nkernel/drivers/md/raid10.ko: kernel/drivers/md/md-mod.ko\n\
         kernel/drivers/md/raid456.ko: kernel/drivers/md/md-mod.ko\nkernel/fs/nfsd/nfsd.ko:\n",
    );
    if !cloud {
        dep.push_str(
            "kernel/drivers/ata/ahci.ko: kernel/drivers/ata/libahci.ko kernel/drivers/ata/libata.ko\n\
             kernel/drivers/scsi/mpt3sas/mpt3sas.ko: kernel/drivers/scsi/scsi_transport_sas.ko\n\
             kernel/drivers/scsi/megaraid/megaraid_sas.ko:\n\
             kernel/drivers/message/fusion/mptsas.ko: kernel/drivers/message/fusion/mptscsih.ko\n\
             kernel/drivers/usb/storage/uas.ko:\n",
        );
    }
    dep
}

/// A PC image whose EFI system partition holds `loaders` and whose root has
/// one kernel, linked from `/vmlinuz` as Debian's linux-base does.
fn pc_image(dir: &Path, name: &str, version: &str, loaders: &[&str]) -> PathBuf {
    let img = dir.join(name);
    let root_sectors = 96 * 2048;
    let total = (ROOT_START + root_sectors) * 512 + MIB;
    fs::File::create(&img).unwrap().set_len(total).unwrap();
    let table = format!(
        "label: gpt\nunit: sectors\n\n\
         start=2048, size=6144, type=21686148-6449-6E6F-744E-656564454649, name=\"BIOS boot\"\n\
         start={ESP_START}, size={ESP_SECTORS}, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=\"EFI System\"\n\
         start={ROOT_START}, size={root_sectors}, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709\n"
    );
    let mut sfdisk = spawn_with_stdin(Command::new("sfdisk").arg("-q").arg(&img), &table);
    assert!(sfdisk.wait().unwrap().success());
    run(Command::new("mkfs.vfat")
        .args(["-F", "32", "-s", "1", "-n", "UEFI", "--offset"])
        .arg(ESP_START.to_string())
        .arg(&img)
        .arg((ESP_SECTORS / 2).to_string()));
    let esp = dir.join(format!("{name}.esp"));
    for l in loaders {
        let p = esp.join(l);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b"MZ boot loader stand-in").unwrap();
    }
    if !loaders.is_empty() {
        run(Command::new("mcopy")
            .env("MTOOLS_SKIP_CHECK", "1")
            .arg("-s")
            .arg("-i")
            .arg(format!("{}@@{}", img.display(), ESP_START * 512))
            .arg(esp.join("EFI"))
            .arg("::"));
    }
    let tree = dir.join(format!("{name}.root"));
    let modules = tree.join("usr/lib/modules").join(version);
    fs::create_dir_all(&modules).unwrap();
    fs::create_dir_all(tree.join("boot")).unwrap();
    fs::create_dir_all(tree.join("etc")).unwrap();
    std::os::unix::fs::symlink("usr/lib", tree.join("lib")).unwrap();
    fs::write(
        tree.join("etc/os-release"),
        "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n",
    )
    .unwrap();
    fs::write(
        modules.join("modules.builtin"),
        "kernel/drivers/block/loop.ko\n",
    )
    .unwrap();
    fs::write(modules.join("modules.dep"), modules_dep(version == CLOUD)).unwrap();
    fs::write(tree.join(format!("boot/vmlinuz-{version}")), b"kernel").unwrap();
    std::os::unix::fs::symlink(format!("boot/vmlinuz-{version}"), tree.join("vmlinuz")).unwrap();
    run(Command::new("mke2fs")
        .args(["-q", "-t", "ext4", "-d"])
        .arg(&tree)
        .arg("-E")
        .arg(format!("offset={}", ROOT_START * 512))
        .arg(&img)
        .arg(format!("{}k", root_sectors / 2)));
    img
}

fn recipe(base: &str) -> String {
    format!(
        "[base]\n{base}\n[board]\nmodel = \"x86-64\"\n[kernel]\nrequire = [\"sata\", \"sas\", \"md\"]\n[output]\npath = \"out/pc.img\"\n"
    )
}

#[test]
fn inspect_reports_the_efi_loader_and_the_sas_drivers() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    pc_image(
        dir.path(),
        "pc.raw",
        GENERIC,
        &["EFI/BOOT/BOOTX64.EFI", "EFI/debian/grubx64.efi"],
    );
    let r = nasforge(&["inspect", "pc.raw"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    for line in [
        "x86-64 boots 6.1.0-57-amd64 — /vmlinuz links to boot/vmlinuz-6.1.0-57-amd64",
        "sas ✓ (mpt3sas=m, megaraid_sas=m, mptsas=m)",
        "efi: EFI/BOOT/BOOTX64.EFI on the EFI system partition",
    ] {
        assert!(
            r.stdout.contains(line),
            "{line} missing from:\n{}",
            r.stdout
        );
    }
    let r = nasforge(&["inspect", "--json", "pc.raw"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(json["family"], "uefi");
    assert_eq!(json["efi_loader"], "EFI/BOOT/BOOTX64.EFI");
    assert_eq!(json["boot_partition"], 2);
    assert_eq!(json["root_partition"], 3);
    assert_eq!(json["kernels"][0]["capabilities"]["sas"]["ok"], true);
}

#[test]
fn a_debian_pc_image_downloaded_with_its_sha256_builds_and_stays_valid() {
    let dir = tempfile::tempdir().unwrap();
    let served = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    // Debian's cloud images: shim and GRUB where grub-install put them, the
    // removable path too (--force-extra-removable).
    let img = pc_image(
        served.path(),
        "debian-12-generic-amd64.raw",
        GENERIC,
        &[
            "EFI/BOOT/BOOTX64.EFI",
            "EFI/debian/shimx64.efi",
            "EFI/debian/grubx64.efi",
        ],
    );
    let server = Server::start(served.path().to_path_buf());
    let base = format!(
        "url = \"{}\"\nsha256 = \"{}\"",
        server.url("debian-12-generic-amd64.raw"),
        sha256_file(&img)
    );
    write_recipe(dir.path(), "pc.toml", &recipe(&base));
    let r = nasforge(&["build", "pc.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("sas ✓ (mpt3sas=m, megaraid_sas=m, mptsas=m)"),
        "{}",
        r.stderr
    );
    let out = dir.path().join("out/pc.img");
    let verify = stdout(Command::new("sgdisk").arg("-v").arg(&out));
    assert!(verify.contains("No problems found"), "{verify}");
    fsck_vfat(&out, ESP_START * 512, ESP_SECTORS * 512, dir.path());
    e2fsck(&out, ROOT_START * 512);
    assert_eq!(
        mtype(&out, ESP_START * 512, "EFI/BOOT/BOOTX64.EFI"),
        "MZ boot loader stand-in"
    );
    run(Command::new("sha256sum")
        .arg("-c")
        .arg("pc.img.sha256")
        .current_dir(dir.path().join("out")));
}

#[test]
fn the_cloud_kernel_is_refused_naming_what_it_lacks_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    pc_image(
        dir.path(),
        "debian-12-genericcloud-amd64.raw",
        CLOUD,
        &["EFI/BOOT/BOOTX64.EFI"],
    );
    write_recipe(
        dir.path(),
        "pc.toml",
        &recipe("path = \"debian-12-genericcloud-amd64.raw\""),
    );
    let r = nasforge(&["build", "pc.toml"], dir.path(), cache.path());
    assert_ne!(r.status, 0);
    for part in [
        "sata (missing ahci)",
        "sas (missing mpt3sas|megaraid_sas|mptsas)",
        "nasforge builds arm64 kernels only",
    ] {
        assert!(
            r.stderr.contains(part),
            "{part} missing from:\n{}",
            r.stderr
        );
    }
    assert!(!dir.path().join("out/pc.img").exists());
}

#[test]
fn an_image_without_an_efi_loader_is_not_taken_for_a_pc() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    pc_image(dir.path(), "blank.raw", GENERIC, &[]);
    write_recipe(dir.path(), "pc.toml", &recipe("path = \"blank.raw\""));
    let r = nasforge(&["build", "pc.toml"], dir.path(), cache.path());
    assert_ne!(r.status, 0);
    assert!(
        r.stderr.contains("x86-64 PC (UEFI) boots through UEFI, but this image has no EFI system partition with EFI/BOOT/BOOTX64.EFI"),
        "{}",
        r.stderr
    );
    assert!(!dir.path().join("out/pc.img").exists());
    let pi = RpiFixture::default().build(dir.path());
    let r = nasforge(
        &["inspect", "--json", pi.to_str().unwrap()],
        dir.path(),
        cache.path(),
    );
    let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(json["family"], "rpi");
    assert!(json.get("efi_loader").is_none());
}
