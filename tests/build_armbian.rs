//! `nasforge build` on Armbian-shaped GPT images: armbianEnv.txt edited on
//! the ext4 root through debugfs, checked with sgdisk and e2fsck.

mod common;

use common::*;
use std::process::Command;

const ROCK5B: &str = "[base]\npath = \"armbian.img\"\n[board]\nmodel = \"rock5b\"\n[kernel]\nrequire = [\"sata\", \"md\"]\n[output]\npath = \"out/rock.img\"\n";

fn sgdisk_verify(img: &std::path::Path) {
    let out = stdout(Command::new("sgdisk").arg("-v").arg(img));
    assert!(out.contains("No problems found"), "{out}");
}

fn root_uuid(img: &std::path::Path) -> String {
    stdout(
        Command::new("blkid")
            .args(["-p", "-s", "UUID", "-o", "value", "--offset"])
            .arg((16 * MIB).to_string())
            .arg(img),
    )
    .trim()
    .to_string()
}

#[test]
fn rock5b_gains_its_sata_overlay_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let img = armbian_image(
        dir.path(),
        &[
            "rockchip-rk3588-sata1.dtbo",
            "rockchip-rk3588-uart7-m2.dtbo",
        ],
    );
    write_recipe(dir.path(), "rock.toml", ROCK5B);
    let r = nasforge(&["build", "rock.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "rock5b boots {ARMBIAN_VERSION}: sata ✓ (libata=m, ahci=m, ahci_dwc=m)"
        )),
        "{}",
        r.stderr
    );
    let out = dir.path().join("out/rock.img");
    sgdisk_verify(&out);
    e2fsck(&out, 16 * MIB);
    let env = debugfs_cat(&out, 16 * MIB, "/boot/armbianEnv.txt");
    // The build's root filesystem has a UUID of its own, which the boot
    // script's rootdev= and fstab follow.
    let uuid = root_uuid(&out);
    assert!(uuid.len() == 36 && uuid != ARMBIAN_ROOT_UUID, "{uuid}");
    assert_eq!(
        env,
        ARMBIAN_ENV
            .replace("overlays=uart7-m2\n", "overlays=uart7-m2 sata1\n")
            .replace(ARMBIAN_ROOT_UUID, &uuid)
    );
    assert_eq!(
        debugfs_cat(&out, 16 * MIB, "/etc/fstab"),
        ARMBIAN_FSTAB.replace(ARMBIAN_ROOT_UUID, &uuid)
    );
    assert!(
        r.stderr.contains(&format!(
            "root filesystem: UUID {ARMBIAN_ROOT_UUID} -> {uuid}"
        )),
        "{}",
        r.stderr
    );
    // Built again from the same base: another UUID.
    let again = nasforge(&["build", "rock.toml", "--force"], dir.path(), cache.path());
    assert_eq!(again.status, 0, "{}", again.stderr);
    let second = root_uuid(&out);
    assert!(second != uuid && second != ARMBIAN_ROOT_UUID, "{second}");
    e2fsck(&out, 16 * MIB);
    // The root filesystem changed after the copy was hashed: the digest is
    // completed from a checkpoint and must still be right.
    run(Command::new("sha256sum")
        .arg("-c")
        .arg("rock.img.sha256")
        .current_dir(dir.path().join("out")));
    // U-Boot's bytes outside any partition are carried over.
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(
        &bytes[32 * 1024..32 * 1024 + 23],
        b"RKNS idbloader stand-in"
    );
    let _ = img;
}

#[test]
fn vendor_kernel_overlay_name_is_used_when_that_is_what_the_image_has() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    armbian_image(dir.path(), &["rock-5b-sata.dtbo"]);
    write_recipe(dir.path(), "rock.toml", ROCK5B);
    let r = nasforge(&["build", "rock.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    let env = debugfs_cat(
        &dir.path().join("out/rock.img"),
        16 * MIB,
        "/boot/armbianEnv.txt",
    );
    assert!(env.contains("overlays=uart7-m2 rock-5b-sata\n"), "{env}");
}

#[test]
fn a_missing_overlay_is_an_error_naming_what_exists() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    armbian_image(dir.path(), &["rockchip-rk3588-sata0.dtbo"]);
    write_recipe(dir.path(), "rock.toml", ROCK5B);
    let r = nasforge(&["build", "rock.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains(
            "none of the overlays sata1, rock-5b-sata exists in /boot/dtb/rockchip/overlay"
        ) && r
            .stderr
            .contains("SATA overlays in this image: rockchip-rk3588-sata0.dtbo"),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&dir.path().join("out")), Vec::<String>::new());
}

#[test]
fn gpt_grow_moves_the_backup_header_and_resizes_ext4() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let img = armbian_image(dir.path(), &["rockchip-rk3588-sata1.dtbo"]);
    write_recipe(
        dir.path(),
        "rock.toml",
        &ROCK5B.replace(
            "path = \"out/rock.img\"",
            "path = \"out/rock.img\"\ngrow = \"100MiB\"",
        ),
    );
    let r = nasforge(&["build", "rock.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    let out = dir.path().join("out/rock.img");
    assert_eq!(
        std::fs::metadata(&out).unwrap().len(),
        std::fs::metadata(&img).unwrap().len() + 100 * MIB
    );
    sgdisk_verify(&out);
    let before = sfdisk_parts(&img);
    let after = sfdisk_parts(&out);
    assert_eq!(after[0].0, before[0].0);
    assert_eq!(after[0].1, before[0].1 + 100 * 2048);
    e2fsck(&out, 16 * MIB);
    let (fs, part) = (ext4_size(&out, 16 * MIB), after[0].1 * 512);
    assert!(
        fs <= part && part - fs < 4096,
        "filesystem {fs} bytes in a {part} byte partition"
    );
    assert!(debugfs_cat(&out, 16 * MIB, "/boot/armbianEnv.txt").contains("sata1"));
}

#[test]
fn a_damaged_gpt_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let img = armbian_image(dir.path(), &["rockchip-rk3588-sata1.dtbo"]);
    write_recipe(dir.path(), "rock.toml", ROCK5B);
    let mut bytes = std::fs::read(&img).unwrap();
    // Flip a byte of the primary header's disk GUID: its CRC no longer matches.
    bytes[512 + 60] ^= 0xff;
    std::fs::write(&img, &bytes).unwrap();
    let r = nasforge(&["build", "rock.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("corrupt GPT partition table"),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&dir.path().join("out")), Vec::<String>::new());
}

#[test]
fn usb_quirks_go_into_armbian_env_extraargs() {
    let dir = tempfile::tempdir().unwrap();
    let img = armbian_image(dir.path(), &["rockchip-rk3588-sata1.dtbo"]);
    write_recipe(
        dir.path(),
        "rock.toml",
        &format!(
            "{ROCK5B}[storage]\nmode = \"unattended\"\nusb_quirks = [\"357d:7788\"]\n[[storage.arrays]]\nname = \"d\"\nlevel = \"raid1\"\ndisks = {{ transport = \"usb\" }}\nfilesystem = \"ext4\"\nmount = \"/srv/d\"\n"
        ),
    );
    let recipe = nasforge::recipe::Recipe::load(&dir.path().join("rock.toml")).unwrap();
    let image = nasforge::image::Image::open(&img).unwrap();
    nasforge::boot::apply(&image, &recipe.boot_asked()).unwrap();
    drop(image);
    sgdisk_verify(&img);
    e2fsck(&img, 16 * MIB);
    let env = debugfs_cat(&img, 16 * MIB, "/boot/armbianEnv.txt");
    assert!(
        env.lines()
            .any(|l| l == "extraargs=cma=256M usb-storage.quirks=357d:7788:u"),
        "{env}"
    );
    assert!(env.contains("overlays=uart7-m2 sata1\n"), "{env}");
}
