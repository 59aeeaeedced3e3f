//! `nasforge build` on Raspberry-Pi-OS-shaped images, through the real
//! binary, with results checked by sfdisk, fsck.vfat, e2fsck and mtools.

mod common;

use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;

const PI5_RECIPE: &str = r#"
name = "pinas"
[base]
path = "rpi.img"
[board]
model = "pi5"
pcie_gen = 3
[boot]
cmdline_remove = ["quiet"]
cmdline_append = ["systemd.show_status=1"]
[kernel]
require = ["sata", "md"]
[output]
path = "out/pinas.img"
"#;

struct Built {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl Built {
    fn path(&self, p: &str) -> std::path::PathBuf {
        self.dir.path().join(p)
    }
}

fn setup(fixture: RpiFixture, recipe: &str) -> Built {
    let dir = tempfile::tempdir().unwrap();
    fixture.build(dir.path());
    write_recipe(dir.path(), "pinas.toml", recipe);
    Built {
        dir,
        cache: tempfile::tempdir().unwrap(),
    }
}

fn build(b: &Built, recipe: &str) -> Cli {
    nasforge(&["build", recipe], b.dir.path(), b.cache.path())
}

fn boot_offset(img: &Path) -> (u64, u64) {
    let p = &sfdisk_parts(img)[0];
    (p.0 * 512, p.1 * 512)
}

fn root_offset(img: &Path) -> u64 {
    sfdisk_parts(img)[1].0 * 512
}

#[test]
fn pi5_build_sets_pcie_keeps_everything_else_and_is_fsck_clean() {
    let b = setup(RpiFixture::default(), PI5_RECIPE);
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("pi5 boots 6.6.51+rpt-rpi-2712: sata ✓ (libata=m, ahci=m), md ✓"),
        "{}",
        r.stderr
    );

    let out = b.path("out/pinas.img");
    // The partition table is the base image's, untouched.
    assert_eq!(sfdisk_parts(&out), sfdisk_parts(&b.path("rpi.img")));
    let (boot, boot_size) = boot_offset(&out);
    fsck_vfat(&out, boot, boot_size, b.dir.path());
    e2fsck(&out, root_offset(&out));

    let config = mtype(&out, boot, "config.txt");
    assert_eq!(
        config,
        format!("{PIOS_CONFIG}\n[pi5]\ndtparam=pciex1\ndtparam=pciex1_gen=3\n\n[all]\n")
    );
    let cmdline = mtype(&out, boot, "cmdline.txt");
    assert_eq!(
        cmdline,
        PIOS_CMDLINE
            .replace(" quiet", "")
            .replace("\n", " systemd.show_status=1\n")
    );

    // .sha256 in sha256sum format, checked by sha256sum itself.
    run(Command::new("sha256sum")
        .arg("-c")
        .arg("pinas.img.sha256")
        .current_dir(b.path("out")));
    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(b.path("out/pinas.manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["output"]["sha256"], sha256_file(&out));
    assert_eq!(manifest["board"], "pi5");
    assert_eq!(manifest["kernel"]["version"], V2712);
    let changes = manifest["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 3, "{manifest:#}");
    assert_eq!(changes[2]["file"], "root filesystem");
    assert_eq!(changes[0]["file"], "bootfs:/config.txt");
    assert_eq!(
        changes[0]["before_sha256"],
        nasforge::io::hash::sha256_hex(PIOS_CONFIG.as_bytes())
    );
    assert_eq!(
        changes[0]["after_sha256"],
        nasforge::io::hash::sha256_hex(config.as_bytes())
    );
    assert_eq!(changes[1]["file"], "bootfs:/cmdline.txt");
    // No password in it: an ordinary file to share.
    assert_eq!(manifest["secrets"], serde_json::json!([]));
    assert_eq!(mode(&out), 0o644);
    assert!(!r.stderr.contains("readable only by you"), "{}", r.stderr);
    // Only the three output files, no leftovers.
    assert_eq!(
        files_under(&b.path("out")),
        vec!["pinas.img", "pinas.img.sha256", "pinas.manifest.json"]
    );
}

#[test]
fn rebuilding_from_its_own_output_changes_nothing() {
    let b = setup(RpiFixture::default(), PI5_RECIPE);
    assert_eq!(build(&b, "pinas.toml").status, 0);
    let again = PI5_RECIPE
        .replacen("path = \"rpi.img\"", "path = \"out/pinas.img\"", 1)
        .replace(
            "[output]\npath = \"out/pinas.img\"",
            "[output]\npath = \"again/pinas.img\"",
        );
    write_recipe(b.dir.path(), "again.toml", &again);
    let r = build(&b, "again.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("settings already as the recipe wants them"),
        "{}",
        r.stderr
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(b.path("again/pinas.manifest.json")).unwrap())
            .unwrap();
    // Nothing but the root filesystem's UUID, which each build makes anew.
    let changes = manifest["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{manifest:#}");
    assert_eq!(changes[0]["file"], "root filesystem");
}

#[test]
fn a_conflicting_gen_is_replaced_in_place() {
    let config = format!("{PIOS_CONFIG}\n[pi5]\ndtparam=pciex1\ndtparam=pciex1_gen=2\n");
    let b = setup(
        RpiFixture {
            config: config.clone(),
            first_sector: 16384,
            ..Default::default()
        },
        PI5_RECIPE,
    );
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let out = b.path("out/pinas.img");
    let (boot, _) = boot_offset(&out);
    assert_eq!(
        boot,
        16384 * 512,
        "the 8 MiB layout of 2025+ images is read by type, not position"
    );
    assert_eq!(
        mtype(&out, boot, "config.txt"),
        config.replace("pciex1_gen=2", "pciex1_gen=3")
    );
}

#[test]
fn xz_in_xz_out_round_trips_and_sha256_covers_both_forms() {
    let b = setup(
        RpiFixture {
            payload: 8 * MIB,
            ..Default::default()
        },
        &PI5_RECIPE
            .replace("rpi.img\"", "rpi.img.xz\"")
            .replace("out/pinas.img\"", "out/pinas.img.xz\""),
    );
    run(Command::new("xz")
        .args(["-T2", "-3", "-k"])
        .arg(b.path("rpi.img")));
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let out = b.path("out/pinas.img.xz");
    run(Command::new("xz").arg("-t").arg(&out));
    run(Command::new("sha256sum")
        .arg("-c")
        .arg("pinas.img.xz.sha256")
        .current_dir(b.path("out")));
    run(Command::new("xz").args(["-dk"]).arg(&out));
    let raw = b.path("out/pinas.img");
    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(b.path("out/pinas.manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["output"]["image_sha256"], sha256_file(&raw));
    assert_eq!(manifest["base"]["format"], "xz");
    e2fsck(&raw, root_offset(&raw));
    // The payload survived decompression, recompression and decompression.
    let payload_a = debugfs_cat(
        &b.path("rpi.img"),
        root_offset(&raw),
        "/var/lib/payload.bin",
    );
    let payload_b = debugfs_cat(&raw, root_offset(&raw), "/var/lib/payload.bin");
    assert_eq!(payload_a.len(), payload_b.len());
    assert!(payload_a == payload_b);
}

#[test]
fn gzip_input_is_accepted() {
    let b = setup(
        RpiFixture::default(),
        &PI5_RECIPE.replace("rpi.img\"", "rpi.img.gz\""),
    );
    run(Command::new("gzip")
        .args(["-k", "-1"])
        .arg(b.path("rpi.img")));
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let out = b.path("out/pinas.img");
    let (boot, size) = boot_offset(&out);
    fsck_vfat(&out, boot, size, b.dir.path());
    assert!(mtype(&out, boot, "config.txt").contains("dtparam=pciex1_gen=3"));
}

#[test]
fn output_is_sparse() {
    use std::os::unix::fs::MetadataExt;
    let b = setup(
        RpiFixture {
            root_mib: 512,
            ..Default::default()
        },
        PI5_RECIPE,
    );
    assert_eq!(build(&b, "pinas.toml").status, 0);
    let m = fs::metadata(b.path("out/pinas.img")).unwrap();
    assert!(
        m.blocks() * 512 < m.len() / 4,
        "{} bytes allocated for a {} byte image",
        m.blocks() * 512,
        m.len()
    );
}

#[test]
fn truncated_archive_fails_and_leaves_nothing() {
    let b = setup(
        RpiFixture {
            payload: 4 * MIB,
            ..Default::default()
        },
        &PI5_RECIPE.replace("rpi.img\"", "rpi.img.xz\""),
    );
    run(Command::new("xz").args(["-k", "-1"]).arg(b.path("rpi.img")));
    let xz = fs::read(b.path("rpi.img.xz")).unwrap();
    fs::write(b.path("rpi.img.xz"), &xz[..xz.len() * 2 / 3]).unwrap();
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("rpi.img.xz is not a valid xz archive")
            && r.stderr.contains("truncated or corrupt"),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&b.path("out")), Vec::<String>::new());
}

#[test]
fn wrong_sha256_for_a_local_image_fails_and_leaves_nothing() {
    let recipe = PI5_RECIPE.replace(
        "path = \"rpi.img\"",
        &format!("path = \"rpi.img\"\nsha256 = \"{}\"", "ab".repeat(32)),
    );
    let b = setup(RpiFixture::default(), &recipe);
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("sha256 mismatch for base image") && r.stderr.contains(&"ab".repeat(32)),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&b.path("out")), Vec::<String>::new());
    // The right sha256 is accepted.
    let good = sha256_file(&b.path("rpi.img"));
    write_recipe(
        b.dir.path(),
        "pinas.toml",
        &recipe.replace(&"ab".repeat(32), &good),
    );
    assert_eq!(build(&b, "pinas.toml").status, 0);
}

#[test]
fn a_kernel_without_raid456_stops_the_build_before_any_change() {
    let b = setup(
        RpiFixture {
            raid456: false,
            ..Default::default()
        },
        PI5_RECIPE,
    );
    let before = sha256_file(&b.path("rpi.img"));
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("the kernel pi5 boots, 6.6.51+rpt-rpi-2712 (kernel_2712.img is what the pi5 firmware loads by default")
            && r.stderr.contains("lacks md (missing raid456)"),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&b.path("out")), Vec::<String>::new());
    assert_eq!(
        sha256_file(&b.path("rpi.img")),
        before,
        "the base image is never written"
    );
}

/// An image as Debian's own kernels leave the boot partition: bookworm's
/// 6.1 ships no Pi 5 device tree; trixie's 6.12 ships one, but has neither
/// the RP1 driver nor the Pi 5's SD card driver (overlays/pi5.toml).
fn debian_kernel_shaped(release: &str) -> RpiFixture {
    let bookworm = release == "bookworm";
    let mut device_trees = vec!["bcm2711-rpi-4-b.dtb".to_string()];
    if !bookworm {
        device_trees.push("bcm2712-rpi-5-b.dtb".into());
    }
    RpiFixture {
        device_trees,
        board_drivers: "kernel/drivers/pci/controller/pcie-brcmstb.ko\nkernel/drivers/usb/host/xhci-pci.ko\nkernel/drivers/reset/reset-raspberrypi.ko\nkernel/drivers/net/ethernet/broadcom/genet/genet.ko\n".into(),
        ..Default::default()
    }
}

#[test]
fn a_pi5_that_cannot_boot_the_image_is_refused_at_its_model_line_and_a_pi4_is_not() {
    for release in ["bookworm", "trixie"] {
        let b = setup(debian_kernel_shaped(release), PI5_RECIPE);
        let before = sha256_file(&b.path("rpi.img"));
        let r = build(&b, "pinas.toml");
        assert_eq!(r.status, 1, "{release}: {}", r.stderr);
        let rp1 = "kernel 6.6.51+rpt-rpi-2712 has no driver for the RP1 southbridge (its Ethernet and USB ports): none of rp1, rp1_pci";
        assert!(
            r.stderr.contains(
                "pinas.toml:6:9: board.model: the Raspberry Pi 5 cannot boot this image: "
            ) && r.stderr.contains(rp1)
                && r.stderr.contains("sdhci-brcmstb")
                && r.stderr
                    .contains("help: build from a Raspberry Pi OS image")
                && r.stderr.contains("a `[kernel] build` of raspberrypi/linux"),
            "{release}: {}",
            r.stderr
        );
        assert_eq!(
            r.stderr.contains("the image has no bcm2712-rpi-5-b.dtb, the device tree the Raspberry Pi 5 firmware loads"),
            release == "bookworm",
            "{release}: {}",
            r.stderr
        );
        assert_eq!(files_under(&b.path("out")), Vec::<String>::new());
        assert_eq!(sha256_file(&b.path("rpi.img")), before);
        let check = nasforge(&["check", "pinas.toml"], b.dir.path(), b.cache.path());
        assert_eq!(check.status, 1, "{}", check.stderr);
        assert!(
            check.stderr.contains(
                "pinas.toml:6:9: board.model: the Raspberry Pi 5 cannot boot this image: "
            ),
            "{release}: {}",
            check.stderr
        );

        let ins = nasforge(&["inspect", "rpi.img"], b.dir.path(), b.cache.path());
        assert_eq!(ins.status, 0, "{}", ins.stderr);
        assert!(
            ins.stdout.contains("pi5 cannot boot 6.6.51+rpt-rpi-2712: ")
                && ins
                    .stdout
                    .contains("pi4 boots 6.6.51+rpt-rpi-v8 — kernel8.img"),
            "{release}: {}",
            ins.stdout
        );

        // The same image for a Pi 4, whose device tree and drivers it has.
        write_recipe(
            b.dir.path(),
            "pi4.toml",
            &PI5_RECIPE
                .replace("model = \"pi5\"\npcie_gen = 3\n", "model = \"pi4\"\n")
                .replace("out/pinas.img", "out/pi4.img"),
        );
        let r = build(&b, "pi4.toml");
        assert_eq!(r.status, 0, "{release}: {}", r.stderr);
        assert!(
            r.stderr.contains("pi4 boots 6.6.51+rpt-rpi-v8: sata ✓"),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn kernel_line_in_config_txt_decides_the_booted_kernel() {
    let config = format!("{PIOS_CONFIG}\n[pi5]\nkernel=kernel8.img\n");
    let b = setup(
        RpiFixture {
            config,
            ..Default::default()
        },
        PI5_RECIPE,
    );
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("pi5 boots 6.6.51+rpt-rpi-v8"),
        "{}",
        r.stderr
    );
}

#[test]
fn grow_enlarges_partition_and_filesystem() {
    let b = setup(
        RpiFixture::default(),
        &PI5_RECIPE.replace(
            "path = \"out/pinas.img\"",
            "path = \"out/pinas.img\"\ngrow = \"64MiB\"",
        ),
    );
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let before = sfdisk_parts(&b.path("rpi.img"));
    let after = sfdisk_parts(&b.path("out/pinas.img"));
    assert_eq!(after[0], before[0]);
    assert_eq!(after[1].0, before[1].0);
    assert_eq!(after[1].1, before[1].1 + 64 * 2048);
    e2fsck(&b.path("out/pinas.img"), after[1].0 * 512);
    assert_eq!(
        ext4_size(&b.path("out/pinas.img"), after[1].0 * 512),
        (96 + 64) * MIB
    );
}

#[test]
fn corrupt_partition_tables_are_clear_errors() {
    let b = setup(RpiFixture::default(), PI5_RECIPE);
    let img = b.path("rpi.img");
    let mut bytes = fs::read(&img).unwrap();
    // Make partition 2 start inside partition 1.
    let p2 = 446 + 16 + 8;
    bytes[p2..p2 + 4].copy_from_slice(&9000u32.to_le_bytes());
    fs::write(&img, &bytes).unwrap();
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 1);
    assert!(
        r.stderr
            .contains("corrupt partition table: partitions 1 and 2 overlap"),
        "{}",
        r.stderr
    );

    bytes[510] = 0;
    fs::write(&img, &bytes).unwrap();
    let r = build(&b, "pinas.toml");
    assert!(
        r.stderr
            .contains("no partition table: the first sector has no MBR boot signature"),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&b.path("out")), Vec::<String>::new());
}

#[test]
fn recipe_for_the_wrong_family_is_refused() {
    let b = setup(RpiFixture::default(), &PI5_RECIPE.replace("model = \"pi5\"\npcie_gen = 3", "model = \"rock5b\"").replace("[boot]\ncmdline_remove = [\"quiet\"]\ncmdline_append = [\"systemd.show_status=1\"]\n", ""));
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains("Radxa ROCK 5B boots Armbian, but this image has no /boot/armbianEnv.txt; is it an Armbian image?"), "{}", r.stderr);
}

#[test]
fn long_config_lines_are_warned_about() {
    let long = format!("dtoverlay={}", "x".repeat(100));
    let b = setup(
        RpiFixture::default(),
        &PI5_RECIPE.replace("[boot]\n", &format!("[boot]\nconfig = [\"{long}\"]\n")),
    );
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: config.txt line")
            && r.stderr.contains("the firmware ignores it"),
        "{}",
        r.stderr
    );
}

#[test]
fn ctrl_c_mid_build_leaves_no_files() {
    let b = setup(
        RpiFixture {
            payload: 48 * MIB,
            ..Default::default()
        },
        &PI5_RECIPE.replace("rpi.img\"", "rpi.img.xz\""),
    );
    run(Command::new("xz")
        .args(["-T2", "-0", "-k"])
        .arg(b.path("rpi.img")));
    let child = Command::new(env!("CARGO_BIN_EXE_nasforge"))
        .args(["build", "pinas.toml"])
        .current_dir(b.dir.path())
        .env("NASFORGE_CACHE", b.cache.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the working copy to appear, then interrupt.
    let started = std::time::Instant::now();
    while files_under(&b.path("out")).is_empty() {
        assert!(
            started.elapsed().as_secs() < 60,
            "the build never started writing"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(files_under(&b.path("out")), Vec::<String>::new());
}

/// The Pi 5 recipe built on an image whose z50 hook belongs to a
/// raspi-firmware of this maintainer: (fixture, build output, image, root offset).
fn build_with_raspi_firmware(maintainer: &str) -> (Built, Cli, std::path::PathBuf, u64) {
    let fixture = RpiFixture {
        root_files: raspi_firmware(maintainer),
        ..Default::default()
    };
    let b = setup(fixture, PI5_RECIPE);
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let out = b.path("out/pinas.img");
    let off = root_offset(&out);
    (b, r, out, off)
}

#[test]
fn raspberry_pi_os_own_z50_hook_only_copies_kernels_so_nothing_is_persisted() {
    let (b, r, out, off) = build_with_raspi_firmware("Serge Schneider <serge@raspberrypi.com>");
    let stat = debugfs_stat(&out, off, "/etc/default/raspi-firmware-custom");
    assert!(stat.is_empty(), "{stat}");
    assert!(!r.stderr.contains("cmdline_remove"), "{}", r.stderr);
    let manifest = std::fs::read_to_string(b.path("out/pinas.manifest.json")).unwrap();
    assert!(!manifest.contains("raspi-firmware"), "{manifest}");
    e2fsck(&out, off);
}

#[test]
fn debian_raspi_firmware_images_keep_the_settings_across_kernel_updates() {
    let (b, r, out, off) =
        build_with_raspi_firmware("pkg-raspi <pkg-raspi-maintainers@lists.alioth.debian.org>");
    assert_eq!(
        debugfs_cat(&out, off, "/etc/default/raspi-firmware-custom"),
        "[pi5]\ndtparam=pciex1\ndtparam=pciex1_gen=3\n\n[all]\n"
    );
    assert_eq!(
        debugfs_cat(&out, off, "/etc/default/raspi-extra-cmdline"),
        "systemd.show_status=1\n"
    );
    assert!(r.stderr.contains("rewrites cmdline.txt on every kernel update, which brings back what `cmdline_remove` took out (quiet)"), "{}", r.stderr);
    e2fsck(&out, off);
    // A rebuild from the output adds nothing twice.
    let again = PI5_RECIPE
        .replacen("path = \"rpi.img\"", "path = \"out/pinas.img\"", 1)
        .replace(
            "[output]\npath = \"out/pinas.img\"",
            "[output]\npath = \"again/pinas.img\"",
        );
    write_recipe(b.dir.path(), "again.toml", &again);
    assert_eq!(build(&b, "again.toml").status, 0);
    assert_eq!(
        debugfs_cat(
            &b.path("again/pinas.img"),
            off,
            "/etc/default/raspi-firmware-custom"
        ),
        "[pi5]\ndtparam=pciex1\ndtparam=pciex1_gen=3\n\n[all]\n"
    );
}

#[test]
fn the_sha256_covers_root_filesystem_writes_with_no_boot_change() {
    // A Pi 4 needs no config.txt line; the only writes are /etc/localtime.
    let fixture = RpiFixture {
        root_files: vec![("usr/share/zoneinfo/Europe/Berlin".into(), b"TZif2".to_vec())],
        ..Default::default()
    };
    let b = setup(
        fixture,
        "[base]\npath = \"rpi.img\"\n[board]\nmodel = \"pi4\"\n[system]\ntimezone = \"Europe/Berlin\"\n[output]\npath = \"out/tz.img\"\n",
    );
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    run(Command::new("sha256sum")
        .arg("-c")
        .arg("tz.img.sha256")
        .current_dir(b.path("out")));
    let manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(b.path("out/tz.manifest.json")).unwrap()).unwrap();
    assert!(
        manifest["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["file"] == "root:/etc/localtime"),
        "{manifest:#}"
    );
}

#[test]
fn the_output_cannot_be_the_base_image() {
    let b = setup(
        RpiFixture::default(),
        "[base]\npath = \"rpi.img\"\n[board]\nmodel = \"pi4\"\n[output]\npath = \"rpi.img\"\n",
    );
    let before = sha256_file(&b.path("rpi.img"));
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("is the base image itself"),
        "{}",
        r.stderr
    );
    assert_eq!(sha256_file(&b.path("rpi.img")), before);
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn files_at_the_output_path_that_no_build_wrote_survive() {
    let b = setup(RpiFixture::default(), PI5_RECIPE);
    fs::create_dir_all(b.path("out")).unwrap();
    // Each of the three names the output takes, one at a time.
    for name in ["pinas.img", "pinas.img.sha256", "pinas.manifest.json"] {
        let theirs = b.path("out").join(name);
        fs::write(&theirs, b"{\"my\": \"notes\"}\n").unwrap();
        let r = build(&b, "pinas.toml");
        assert_eq!(r.status, 1, "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "out/{name} already exists and is not the output of an earlier nasforge build"
            )) && r.stderr.contains("pass --force to replace it"),
            "{}",
            r.stderr
        );
        assert_eq!(fs::read(&theirs).unwrap(), b"{\"my\": \"notes\"}\n");
        assert_eq!(files_under(&b.path("out")), vec![name.to_string()]);
        fs::remove_file(&theirs).unwrap();
    }
    // --force replaces such a file; a later build replaces its own output
    // without being asked.
    fs::write(b.path("out/pinas.img"), b"mine").unwrap();
    let r = nasforge(
        &["build", "pinas.toml", "--force"],
        b.dir.path(),
        b.cache.path(),
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    let first = fs::read_to_string(b.path("out/pinas.img.sha256")).unwrap();
    assert_ne!(fs::read(b.path("out/pinas.img")).unwrap(), b"mine");
    fs::write(
        b.path("pinas.toml"),
        PI5_RECIPE.replace("pcie_gen = 3", "pcie_gen = 2"),
    )
    .unwrap();
    let r = build(&b, "pinas.toml");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_ne!(
        fs::read_to_string(b.path("out/pinas.img.sha256")).unwrap(),
        first,
        "the previous output was replaced"
    );
    assert_eq!(
        files_under(&b.path("out")),
        vec!["pinas.img", "pinas.img.sha256", "pinas.manifest.json"]
    );
}

/// `[storage] usb_quirks` reaches cmdline.txt at build time, and Debian's
/// raspi-extra-cmdline, from which raspi-firmware regenerates it. (The
/// boot settings on their own: a whole build with [storage] would stage
/// packages from a mirror.)
#[test]
fn usb_quirks_named_in_the_recipe_are_on_the_kernel_command_line() {
    let fixture = RpiFixture {
        root_files: raspi_firmware("pkg-raspi <pkg-raspi-maintainers@lists.alioth.debian.org>"),
        ..Default::default()
    };
    let recipe = format!(
        "{PI5_RECIPE}[storage]\nmode = \"unattended\"\nusb_quirks = [\"152d:0578\", \"174C:55AA\"]\n[[storage.arrays]]\nname = \"d\"\nlevel = \"raid1\"\ndisks = {{ transport = \"usb\" }}\nfilesystem = \"ext4\"\nmount = \"/srv/d\"\n"
    );
    let b = setup(fixture, &recipe);
    let img = b.path("rpi.img");
    let recipe = nasforge::recipe::Recipe::load(&b.path("pinas.toml")).unwrap();
    let image = nasforge::image::Image::open(&img).unwrap();
    let applied = nasforge::boot::apply(&image, &recipe.boot_asked()).unwrap();
    drop(image);
    let word = "usb-storage.quirks=152d:0578:u,174c:55aa:u";
    assert!(
        applied
            .changes
            .iter()
            .any(|c| c.details.iter().any(|d| d.contains(word))),
        "{:?}",
        applied.changes
    );
    let (boot, boot_size) = boot_offset(&img);
    fsck_vfat(&img, boot, boot_size, b.dir.path());
    let cmdline = mtype(&img, boot, "cmdline.txt");
    assert_eq!(cmdline.lines().count(), 1, "{cmdline}");
    assert!(cmdline.contains(&format!(" {word}")), "{cmdline}");
    let off = root_offset(&img);
    e2fsck(&img, off);
    assert!(
        debugfs_cat(&img, off, "/etc/default/raspi-extra-cmdline").contains(word),
        "raspi-firmware's own source of cmdline.txt"
    );

    let bad =
        PI5_RECIPE.to_string() + "[storage]\nmode = \"wizard\"\nusb_quirks = [\"152d:0578:u\"]\n";
    write_recipe(b.dir.path(), "bad.toml", &bad);
    let r = build(&b, "bad.toml");
    assert_ne!(r.status, 0);
    assert!(
        r.stderr.contains("bad.toml:")
            && r.stderr
                .contains("write only the vendor and product id, such as \"152d:0578\""),
        "{}",
        r.stderr
    );
}
