//! `[base] debian` for a PC: Debian bookworm amd64 built from packages with
//! mmdebstrap, laid out as a UEFI disk (GPT, EFI system partition with GRUB
//! at the removable path, ext4 root), then checked with tools that are not
//! nasforge's: sfdisk, sgdisk -v, fsck.vfat -n, e2fsck -fn, blkid, debugfs.
//!
//! Slow (packages download and install, once per machine; natively, no
//! emulation): runs when NASFORGE_SLOW_TESTS=1, as .ci/run sets it.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

const ESP_TYPE: &str = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B";
const ROOT_X86_64_TYPE: &str = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709";

fn blkid_uuid(img: &Path, offset: u64) -> String {
    stdout(
        Command::new("blkid")
            .args(["-p", "-s", "UUID", "-o", "value", "-O"])
            .arg(offset.to_string())
            .arg(img),
    )
    .trim()
    .to_string()
}

/// The machine field of a PE image's COFF header.
fn pe_machine(bytes: &[u8]) -> u16 {
    assert_eq!(&bytes[..2], b"MZ", "not a PE image");
    let pe = u32::from_le_bytes(bytes[0x3c..0x40].try_into().unwrap()) as usize;
    assert_eq!(&bytes[pe..pe + 4], b"PE\0\0", "no PE signature");
    u16::from_le_bytes([bytes[pe + 4], bytes[pe + 5]])
}

/// The base booted on qemu's q35 with Debian's OVMF, `e` pressed on the
/// serial port until GRUB answers: editing the entry (where `init=/bin/sh`
/// would go) asks for a superuser, and none has a password.
fn grub_refuses_editing(base: &Path, scratch: &Path) {
    use std::io::{Read, Write};
    let vars = scratch.join("OVMF_VARS.fd");
    std::fs::copy("/usr/share/OVMF/OVMF_VARS_4M.fd", &vars).unwrap();
    let mut qemu = Command::new("qemu-system-x86_64")
        .args(["-machine", "q35", "-accel", "tcg", "-m", "512"])
        .args(["-display", "none", "-monitor", "none", "-serial", "stdio"])
        .args(["-snapshot", "-net", "none"])
        .arg("-drive")
        .arg("if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd")
        .arg("-drive")
        .arg(format!("if=pflash,format=raw,file={}", vars.display()))
        .arg("-drive")
        .arg(format!("file={},format=raw,if=virtio", base.display()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let mut out = qemu.stdout.take().unwrap();
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let mut keys = qemu.stdin.take().unwrap();
    let text = || String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    let started = std::time::Instant::now();
    // Pressed until GRUB's menu, which waits one second, takes one.
    while !text().contains("Enter username:")
        && !text().contains("setparams")
        && !text().contains("Linux version")
        && started.elapsed() < std::time::Duration::from_secs(300)
    {
        let _ = keys.write_all(b"e");
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let _ = qemu.kill();
    let _ = qemu.wait();
    drop(keys);
    reader.join().unwrap();
    let said = text();
    assert!(
        said.contains("Enter username:") && !said.contains("setparams"),
        "GRUB let its entry be edited, or never showed its menu:\n{}",
        said.chars()
            .rev()
            .take(3000)
            .collect::<String>()
            .chars()
            .rev()
            .collect::<String>()
    );
}

#[test]
#[ignore = "slow, minutes under emulation (and root): NASFORGE_SLOW_TESTS=1 scripts/test runs it, as .ci/run does"]
fn a_bookworm_amd64_base_is_a_uefi_disk_that_nasforge_builds_on() {
    let cache = persistent_cache(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let base = nasforge::debian::DebianBase {
        suite: "bookworm".into(),
        arch: "amd64".into(),
        mirror: None,
        packages: vec![],
    }
    .image(&cache)
    .unwrap();
    let dir = tempfile::tempdir().unwrap();

    let parts = sfdisk_parts(&base);
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(parts[0].2, ESP_TYPE);
    assert_eq!(parts[1].2, ROOT_X86_64_TYPE);
    let (esp, root) = (parts[0].0 * 512, parts[1].0 * 512);
    let verify = stdout(Command::new("sgdisk").arg("-v").arg(&base));
    assert!(verify.contains("No problems found"), "{verify}");
    fsck_vfat(&base, esp, parts[0].1 * 512, dir.path());
    e2fsck(&base, root);

    // GRUB for x86-64 UEFI where the firmware looks on a disk it has no entry for.
    let loader = dir.path().join("BOOTX64.EFI");
    run(Command::new("mcopy")
        .env("MTOOLS_SKIP_CHECK", "1")
        .arg("-i")
        .arg(format!("{}@@{esp}", base.display()))
        .arg("::EFI/BOOT/BOOTX64.EFI")
        .arg(&loader));
    assert_eq!(pe_machine(&std::fs::read(&loader).unwrap()), 0x8664);

    // grub.cfg and fstab name the filesystems this image holds.
    let (root_uuid, esp_uuid) = (blkid_uuid(&base, root), blkid_uuid(&base, esp));
    grub_refuses_editing(&base, dir.path());
    let grub = mtype(&base, esp, "EFI/BOOT/grub.cfg");
    assert!(
        grub.contains("set superusers=\"locked\"")
            && grub.contains("menuentry 'Debian GNU/Linux (nasforge)' --unrestricted {"),
        "{grub}"
    );
    assert!(
        grub.contains(&format!(
            "search --no-floppy --fs-uuid --set=root {root_uuid}"
        )),
        "{grub}"
    );
    // The kernel's root is this one until a mirror of it, named after it,
    // takes over (engine/src/steps/mirror.rs).
    assert!(
        grub.contains(&format!("set rootuuid={root_uuid}"))
            && grub.contains(&format!(
                "search --no-floppy --file --set=mirror /etc/nasforge/system-mirror.{root_uuid}"
            ))
            && grub.contains(
                "linux /vmlinuz root=UUID=$rootuuid ro console=tty0 console=ttyS0,115200n8"
            ),
        "{grub}"
    );
    let fstab = debugfs_cat(&base, root, "/etc/fstab");
    assert!(
        fstab.contains(&format!("UUID={root_uuid} / ext4")),
        "{fstab}"
    );
    assert!(
        fstab.contains(&format!("UUID={esp_uuid} /boot/efi vfat")),
        "{fstab}"
    );

    // The links GRUB loads lead to a kernel and an initramfs that exist.
    for (link, prefix) in [("/vmlinuz", "vmlinuz-"), ("/initrd.img", "initrd.img-")] {
        let stat = debugfs_stat(&base, root, link);
        let target = stat
            .lines()
            .find_map(|l| l.trim().strip_prefix("Fast link dest: "))
            .unwrap_or_else(|| panic!("{link} is not a link:\n{stat}"))
            .trim_matches('"')
            .to_string();
        assert!(
            target.starts_with(&format!("boot/{prefix}")),
            "{link} -> {target}"
        );
        assert!(target.ends_with("-amd64"), "{link} -> {target}");
        let file = debugfs_stat(&base, root, &format!("/{target}"));
        assert!(file.contains("Type: regular"), "{target}:\n{file}");
    }
    // What the build installed with changed its rules only while it ran.
    for gone in [
        "/etc/dpkg/dpkg.cfg.d/nasforge-build",
        "/usr/sbin/policy-rc.d",
    ] {
        let stat = debugfs_stat(&base, root, gone);
        assert!(
            !stat.contains("Inode:"),
            "{gone} is left in the image:\n{stat}"
        );
    }

    // nasforge reads the base as a PC's and builds on it.
    std::fs::copy(&base, dir.path().join("pc.img")).unwrap();
    write_recipe(
        dir.path(),
        "pc.toml",
        "[base]\npath = \"pc.img\"\n[board]\nmodel = \"x86-64\"\n[kernel]\nrequire = [\"sata\", \"sas\", \"md\"]\n[output]\npath = \"out/pc.img\"\n",
    );
    let scratch = tempfile::tempdir().unwrap();
    let r = nasforge(&["build", "pc.toml"], dir.path(), scratch.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("sas ✓ (mpt3sas=m, megaraid_sas=m, mptsas=m)"),
        "{}",
        r.stderr
    );
    // Its root filesystem has a UUID of its own, which GRUB and fstab follow;
    // the base keeps its own.
    let built = dir.path().join("out/pc.img");
    let uuid = blkid_uuid(&built, root);
    assert!(uuid.len() == 36 && uuid != root_uuid, "{uuid}");
    assert_eq!(blkid_uuid(&base, root), root_uuid);
    let grub_built = mtype(&built, esp, "EFI/BOOT/grub.cfg");
    assert_eq!(grub_built, grub.replace(&root_uuid, &uuid));
    assert_eq!(
        debugfs_cat(&built, root, "/etc/fstab"),
        fstab.replace(&root_uuid, &uuid)
    );
    e2fsck(&built, root);
    let r = nasforge(
        &["inspect", "--json", "out/pc.img"],
        dir.path(),
        scratch.path(),
    );
    let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(json["family"], "uefi");
    assert_eq!(json["efi_loader"], "EFI/BOOT/BOOTX64.EFI");
}
