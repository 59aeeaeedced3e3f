//! `[kernel] build`: the remedy a kernel without SATA/md gets, installing a
//! built kernel into Raspberry Pi and Armbian images (from a build placed in
//! the cache, so these run in seconds), and — behind
//! NASFORGE_SLOW_TESTS=1 — the real thing: Debian's linux-source-6.1
//! configured with the kernel-configs fragments, cross-compiled for arm64,
//! booted in qemu with an AHCI controller and two disks, and installed into
//! an image.

mod common;

use common::*;
use nasforge::kernel::build::{BuildInfo, BuildSpec};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// An uncompressed arm64 "Image" carrying the version banner.
fn raw_kernel(release: &str) -> Vec<u8> {
    let mut raw = vec![0u8; 200_000];
    raw[..4].copy_from_slice(b"MZ\0\0");
    let banner = format!(
        "Linux version {release} (nasforge@nasforge) (aarch64-linux-gnu-gcc 12.2.0) #1 SMP\n\0"
    );
    raw[100_000..100_000 + banner.len()].copy_from_slice(banner.as_bytes());
    raw
}

fn spec_of(recipe: &Path) -> BuildSpec {
    nasforge::recipe::Recipe::load(recipe)
        .unwrap()
        .kernel
        .build
        .expect("the recipe has [kernel] build")
}

/// Puts a finished build for `spec` into the cache, shaped like a real one.
fn fake_build(
    cache: &Path,
    spec: &BuildSpec,
    release: &str,
    dtbs: &[(&str, Vec<u8>)],
    modules_dep: &str,
) -> PathBuf {
    let dir = nasforge::kernel::build::cached_dir(spec, cache).unwrap();
    let m = dir.join("modules/lib/modules").join(release);
    fs::create_dir_all(m.join("kernel/drivers/ata")).unwrap();
    fs::write(
        m.join("modules.builtin"),
        format!("kernel/drivers/block/loop.ko\n{BOARD_DRIVERS}"),
    )
    .unwrap();
    fs::write(m.join("modules.dep"), modules_dep).unwrap();
    fs::write(m.join("kernel/drivers/ata/ahci.ko"), b"\x7fELF ahci").unwrap();
    fs::write(dir.join("Image"), raw_kernel(release)).unwrap();
    fs::write(dir.join("config"), "CONFIG_ATA=m\nCONFIG_SATA_AHCI=m\n").unwrap();
    fs::write(dir.join("System.map"), "ffff800008000000 T _text\n").unwrap();
    for (rel, data) in dtbs {
        let p = dir.join("dtbs").join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    }
    let info = BuildInfo {
        release: release.into(),
        source: "test".into(),
        source_digest: "0".into(),
        defconfig: "bcm2712_defconfig".into(),
        fragments: vec!["sata.config".into()],
        modules: true,
        compile_seconds: 0.0,
        source_tree: PathBuf::new(),
    };
    fs::write(
        dir.join("result.json"),
        serde_json::to_string(&info).unwrap(),
    )
    .unwrap();
    dir
}

/// A directory that passes for a kernel tree (the build is in the cache).
fn fake_tree(dir: &Path) {
    fs::create_dir_all(dir.join("linux")).unwrap();
    fs::write(dir.join("linux/Makefile"), "VERSION = 6\n").unwrap();
    fs::write(dir.join("linux/Kconfig"), "mainmenu \"test\"\n").unwrap();
}

fn mcopy_out(img: &Path, offset: u64, name: &str, dest: &Path) -> Option<Vec<u8>> {
    let ok = Command::new("mcopy")
        .env("MTOOLS_SKIP_CHECK", "1")
        .arg("-n")
        .arg("-i")
        .arg(format!("{}@@{offset}", img.display()))
        .arg(format!("::{name}"))
        .arg(dest)
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    ok.then(|| fs::read(dest).unwrap())
}

fn debugfs_bytes(img: &Path, offset: u64, path: &str) -> Vec<u8> {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    run(Command::new("debugfs")
        .arg("-R")
        .arg(format!("dump {path} {}", tmp.path().display()))
        .arg(format!("{}?offset={offset}", img.display())));
    fs::read(tmp.path()).unwrap()
}

fn debugfs_stat(img: &Path, offset: u64, path: &str) -> String {
    stdout(
        Command::new("debugfs")
            .arg("-R")
            .arg(format!("stat {path}"))
            .arg(format!("{}?offset={offset}", img.display())),
    )
}

const PI5_BUILD: &str = r#"
[base]
path = "rpi.img"
[board]
model = "pi5"
[kernel]
require = ["sata", "md"]
build = { source = "linux" }
[output]
path = "out/pinas.img"
"#;

#[test]
fn a_kernel_without_md_gets_the_build_lines_for_its_board() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    RpiFixture {
        raid456: false,
        ..Default::default()
    }
    .build(dir.path());
    write_recipe(
        dir.path(),
        "pinas.toml",
        "[base]\npath = \"rpi.img\"\n[board]\nmodel = \"pi5\"\n[kernel]\nrequire = [\"sata\", \"md\"]\n",
    );
    let r = nasforge(&["build", "pinas.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("lacks md (missing raid456)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("[kernel]\nrequire = [\"sata\", \"md\"]\nbuild = { source = \"https://github.com/raspberrypi/linux/archive/<commit>.tar.gz\", sha256 = \"<sha256 of that file>\", defconfig = \"bcm2712_defconfig\", fragments = [\"sata\", \"md-raid\", \"nas\"] }"),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&dir.path().join("out")), Vec::<String>::new());

    // `kernel build` on a recipe without `[kernel] build` says the same.
    let r = nasforge(&["kernel", "build", "pinas.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("has no `[kernel] build`")
            && r.stderr.contains("defconfig = \"bcm2712_defconfig\""),
        "{}",
        r.stderr
    );
}

#[test]
fn a_built_kernel_is_installed_beside_the_stock_one_on_a_pi5() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let base = RpiFixture::default().build(dir.path());
    fake_tree(dir.path());
    let recipe = write_recipe(dir.path(), "pinas.toml", PI5_BUILD);
    let release = "6.6.51-v8-16k-nasforge";
    let built = fake_build(
        cache.path(),
        &spec_of(&recipe),
        release,
        &[
            ("broadcom/bcm2712-rpi-5-b.dtb", vec![0xd1; 4096]),
            ("broadcom/bcm2712-rpi-500.dtb", vec![0xd2; 4096]),
            ("overlays/nasforge-test.dtbo", vec![0xd3; 512]),
        ],
        &modules_dep(true),
    );

    let r = nasforge(&["kernel", "build", "pinas.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with(&format!(
            "kernel {release}: sata ✓ (libata=m, ahci=m), md ✓"
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("(cached)"), "{}", r.stdout);

    let r = nasforge(&["build", "pinas.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "pi5 boots {release}: sata ✓ (libata=m, ahci=m), md ✓"
        )),
        "{}",
        r.stderr
    );

    let out = dir.path().join("out/pinas.img");
    let parts = sfdisk_parts(&out);
    assert_eq!(parts, sfdisk_parts(&base));
    let (boot, boot_size, root) = (parts[0].0 * 512, parts[0].1 * 512, parts[1].0 * 512);
    fsck_vfat(&out, boot, boot_size, dir.path());
    e2fsck(&out, root);

    // The kernel under its own name, chosen in the board's own section.
    let config = mtype(&out, boot, "config.txt");
    assert_eq!(
        config,
        format!("{PIOS_CONFIG}\n[pi5]\ndtparam=pciex1\nkernel=kernel-nasforge.img\n\n[all]\n")
    );
    let tmp = dir.path().join("copied");
    assert_eq!(
        mcopy_out(&out, boot, "kernel-nasforge.img", &tmp).unwrap(),
        fs::read(built.join("Image")).unwrap()
    );
    // The stock kernels stay, untouched, as the fallback.
    assert_eq!(
        mcopy_out(&out, boot, "kernel_2712.img", &tmp).unwrap(),
        fake_kernel(V2712)
    );
    assert_eq!(
        mcopy_out(&out, boot, "kernel8.img", &tmp).unwrap(),
        fake_kernel(V8)
    );
    // Device trees replaced, the stock copy kept; overlays added.
    assert_eq!(
        mcopy_out(&out, boot, "bcm2712-rpi-5-b.dtb", &tmp).unwrap(),
        vec![0xd1; 4096]
    );
    assert_eq!(
        mcopy_out(&out, boot, "nasforge-stock/bcm2712-rpi-5-b.dtb", &tmp).unwrap(),
        vec![0xd0; 4096]
    );
    assert_eq!(
        mcopy_out(&out, boot, "bcm2712-rpi-500.dtb", &tmp).unwrap(),
        vec![0xd2; 4096]
    );
    assert_eq!(
        mcopy_out(&out, boot, "overlays/nasforge-test.dtbo", &tmp).unwrap(),
        vec![0xd3; 512]
    );
    assert!(
        mcopy_out(&out, boot, "nasforge-stock/bcm2712-rpi-500.dtb", &tmp).is_none(),
        "only replaced files are kept"
    );

    // Modules beside the stock kernels' (merged /usr: /lib -> usr/lib).
    let dep = debugfs_cat(
        &out,
        root,
        &format!("/usr/lib/modules/{release}/modules.dep"),
    );
    assert_eq!(dep, modules_dep(true));
    assert_eq!(
        debugfs_cat(
            &out,
            root,
            &format!("/usr/lib/modules/{release}/kernel/drivers/ata/ahci.ko")
        ),
        "\x7fELF ahci"
    );
    assert!(
        debugfs_cat(&out, root, &format!("/boot/config-{release}")).contains("CONFIG_SATA_AHCI=m")
    );
    for stock in [V8, V2712] {
        assert_eq!(
            debugfs_cat(&out, root, &format!("/usr/lib/modules/{stock}/modules.dep")),
            modules_dep(true)
        );
    }

    // What inspect reads off the output: the Pi 5 boots the new kernel.
    let r = nasforge(&["inspect", "out/pinas.img"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    let line = r
        .stdout
        .lines()
        .position(|l| {
            l.starts_with(&format!(
                "pi5 boots {release} — config.txt sets kernel=kernel-nasforge.img"
            ))
        })
        .unwrap_or_else(|| panic!("{}", r.stdout));
    let caps = r.stdout.lines().nth(line + 1).unwrap();
    assert!(caps.contains("sata ✓") && caps.contains("md ✓"), "{caps}");
    assert!(
        r.stdout.contains(&format!("pi4 boots {V8}")),
        "other boards keep their kernel:\n{}",
        r.stdout
    );

    let manifest: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(dir.path().join("out/pinas.manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["kernel"]["version"], release);
    let files: Vec<&str> = manifest["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["file"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"bootfs:/kernel-nasforge.img")
            && files.contains(&format!("rootfs:/usr/lib/modules/{release}").as_str()),
        "{files:?}"
    );
    // The published sha256 is of the image as finally written.
    run(Command::new("sha256sum")
        .arg("-c")
        .arg("pinas.img.sha256")
        .current_dir(dir.path().join("out")));
}

#[test]
fn a_built_kernel_without_the_pi5s_own_drivers_is_refused_at_the_board() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    RpiFixture::default().build(dir.path());
    fake_tree(dir.path());
    let recipe = write_recipe(dir.path(), "pinas.toml", PI5_BUILD);
    // A kernel with SATA and md but built for another machine (as the
    // qemu-virt test kernel is): no RP1, no Pi 5 SD card driver.
    let built = fake_build(
        cache.path(),
        &spec_of(&recipe),
        "6.6.51-nasforge",
        &[],
        &modules_dep(true),
    );
    fs::write(
        built.join("modules/lib/modules/6.6.51-nasforge/modules.builtin"),
        "kernel/drivers/block/loop.ko\n",
    )
    .unwrap();
    let r = nasforge(&["build", "pinas.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("board.model: the Raspberry Pi 5 cannot boot this image: kernel 6.6.51-nasforge has no driver for the RP1 southbridge"),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&dir.path().join("out")), Vec::<String>::new());
}

#[test]
fn a_built_kernel_without_md_stops_the_build_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    RpiFixture::default().build(dir.path());
    fake_tree(dir.path());
    let recipe = write_recipe(
        dir.path(),
        "pinas.toml",
        &PI5_BUILD.replace(
            "build = { source = \"linux\" }",
            "build = { source = \"linux\", fragments = [\"sata\"] }",
        ),
    );
    fake_build(
        cache.path(),
        &spec_of(&recipe),
        "6.6.51-nasforge",
        &[],
        "kernel/drivers/ata/libata.ko:\nkernel/drivers/ata/ahci.ko: kernel/drivers/ata/libata.ko\n",
    );
    let r = nasforge(&["build", "pinas.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(r.stderr.contains("the kernel built by `[kernel] build` (6.6.51-nasforge) lacks md (missing md_mod, raid0, raid1, raid10, raid456)"), "{}", r.stderr);
    assert_eq!(files_under(&dir.path().join("out")), Vec::<String>::new());
}

#[test]
fn a_built_kernel_replaces_the_links_u_boot_loads_on_armbian() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    armbian_image(
        dir.path(),
        &[
            "rockchip-rk3588-sata1.dtbo",
            "rockchip-rk3588-uart7-m2.dtbo",
        ],
    );
    fake_tree(dir.path());
    let recipe = write_recipe(
        dir.path(),
        "rock.toml",
        "[base]\npath = \"armbian.img\"\n[board]\nmodel = \"rock5b\"\n[kernel]\nrequire = [\"sata\", \"md\"]\nbuild = { source = \"linux\" }\n[output]\npath = \"out/rock.img\"\n",
    );
    let release = "6.12.1-nasforge";
    fake_build(
        cache.path(),
        &spec_of(&recipe),
        release,
        &[
            ("rockchip/rk3588-rock-5b.dtb", vec![0xe1; 2048]),
            (
                "rockchip/overlay/rockchip-rk3588-uart7-m2.dtbo",
                vec![0xe2; 256],
            ),
            ("broadcom/bcm2711-rpi-4-b.dtb", vec![0xe3; 128]),
        ],
        &(modules_dep(true) + "kernel/drivers/ata/ahci_dwc.ko:\n"),
    );
    let r = nasforge(&["build", "rock.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "rock5b boots {release}: sata ✓ (libata=m, ahci=m, ahci_dwc=m), md ✓"
        )),
        "{}",
        r.stderr
    );

    let out = dir.path().join("out/rock.img");
    e2fsck(&out, 16 * MIB);
    let off = 16 * MIB;
    assert!(
        debugfs_stat(&out, off, "/boot/Image")
            .contains(&format!("Fast link dest: \"vmlinuz-{release}\""))
    );
    assert!(
        debugfs_stat(&out, off, "/boot/dtb")
            .contains(&format!("Fast link dest: \"dtb-{release}\""))
    );
    assert_eq!(
        debugfs_bytes(&out, off, &format!("/boot/vmlinuz-{release}")),
        raw_kernel(release)
    );
    // The stock kernel and its device trees stay; the fixture's /boot/dtb
    // was a directory, so it is kept under another name.
    assert_eq!(
        debugfs_cat(&out, off, &format!("/boot/vmlinuz-{ARMBIAN_VERSION}")),
        "kernel"
    );
    assert_eq!(
        debugfs_cat(
            &out,
            off,
            "/boot/dtb.stock/rockchip/overlay/rockchip-rk3588-sata1.dtbo"
        ),
        "dtbo"
    );
    // The new device trees, and the overlay armbianEnv.txt names carried over.
    let new = format!("/boot/dtb-{release}/rockchip");
    assert_eq!(
        debugfs_bytes(&out, off, &format!("{new}/rk3588-rock-5b.dtb")),
        vec![0xe1; 2048]
    );
    assert_eq!(
        debugfs_cat(
            &out,
            off,
            &format!("{new}/overlay/rockchip-rk3588-sata1.dtbo")
        ),
        "dtbo"
    );
    assert_eq!(
        debugfs_bytes(
            &out,
            off,
            &format!("{new}/overlay/rockchip-rk3588-uart7-m2.dtbo")
        ),
        vec![0xe2; 256]
    );
    assert!(debugfs_cat(&out, off, "/boot/armbianEnv.txt").contains("overlays=uart7-m2 sata1\n"));
    // Only the board's vendor directory of device trees is installed.
    let listing = stdout(
        Command::new("debugfs")
            .arg("-R")
            .arg(format!("ls -p /boot/dtb-{release}"))
            .arg(format!("{}?offset={off}", out.display())),
    );
    assert!(
        listing.contains("/rockchip/") && !listing.contains("/broadcom/"),
        "{listing}"
    );

    let r = nasforge(&["inspect", "out/rock.img"], dir.path(), cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "rock5b boots {release} — /boot/Image links to vmlinuz-{release}"
        )),
        "{}",
        r.stdout
    );
}

#[test]
fn armbian_refuses_a_build_without_the_boards_device_tree() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    armbian_image(dir.path(), &["rockchip-rk3588-sata1.dtbo"]);
    fake_tree(dir.path());
    let recipe = write_recipe(
        dir.path(),
        "rock.toml",
        "[base]\npath = \"armbian.img\"\n[board]\nmodel = \"rock5b\"\n[kernel]\nbuild = { source = \"linux\" }\n",
    );
    fake_build(
        cache.path(),
        &spec_of(&recipe),
        "6.12.1-nasforge",
        &[("rockchip/rk3568-rock-3a.dtb", vec![1])],
        &modules_dep(true),
    );
    let r = nasforge(&["build", "rock.toml"], dir.path(), cache.path());
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(r.stderr.contains("armbianEnv.txt loads the device tree rockchip/rk3588-rock-5b.dtb, and the built kernel has no rockchip/rk3588-rock-5b.dtb"), "{}", r.stderr);
}

// ---------------------------------------------------------------------------
// The real kernel: NASFORGE_SLOW_TESTS=1.

const LINUX_SOURCE: &str = "/usr/src/linux-source-6.1.tar.xz";

/// The real-kernel tests share the cache and both cores: one at a time.
static REAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn real_source() {
    assert!(
        Path::new(LINUX_SOURCE).is_file(),
        "{LINUX_SOURCE} is missing: run scripts/setup"
    );
}

/// Kept between runs, so a second run finds the kernel compiled.
fn real_cache() -> PathBuf {
    let p = std::env::var_os("NASFORGE_KERNEL_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nasforge-kernel-cache")
        });
    fs::create_dir_all(&p).unwrap();
    p
}

fn real_recipe(dir: &Path, name: &str, model: &str, defconfig: &str, fragments: &str) -> PathBuf {
    let stem = name.trim_end_matches(".toml");
    write_recipe(
        dir,
        name,
        &format!(
            "[base]\npath = \"rpi.img\"\n[board]\nmodel = \"{model}\"\n[kernel]\nrequire = [\"sata\", \"md\"]\nbuild = {{ source = \"{LINUX_SOURCE}\", defconfig = \"{defconfig}\", fragments = [{fragments}] }}\n[output]\npath = \"out/{stem}.img\"\n"
        ),
    )
}

#[test]
#[ignore = "slow, minutes under emulation (and root): NASFORGE_SLOW_TESTS=1 scripts/test runs it, as .ci/run does"]
fn real_source_reports_a_fragment_option_whose_dependency_is_off() {
    real_source();
    let _one = REAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // allnoconfig has no PCI, and nothing here turns it on.
    fs::write(
        dir.path().join("needs-pci.config"),
        "# AHCI without the bus it sits on\nCONFIG_ATA=y\nCONFIG_SATA_AHCI=y\n",
    )
    .unwrap();
    real_recipe(
        dir.path(),
        "k.toml",
        "pi5",
        "allnoconfig",
        "\"needs-pci.config\"",
    );
    let t = Instant::now();
    let r = nasforge(
        &["kernel", "build", "k.toml", "--config-only"],
        dir.path(),
        &real_cache(),
    );
    eprintln!(
        "config check on linux-source-6.1: {:.1}s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("1 kernel option from the fragments did not survive `make olddefconfig`"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("CONFIG_SATA_AHCI=y (needs-pci.config:3) was dropped (final value: off): it depends on PCI [its own `depends on`] (PCI=n)"),
        "{}",
        r.stderr
    );
}

#[test]
#[ignore = "slow, minutes under emulation (and root): NASFORGE_SLOW_TESTS=1 scripts/test runs it, as .ci/run does"]
fn real_source_keeps_every_production_fragment_option_on_arm64_defconfig() {
    real_source();
    let _one = REAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    real_recipe(
        dir.path(),
        "k.toml",
        "rock5b",
        "defconfig",
        "\"sata\", \"md-raid\", \"nas\", \"rockchip-sata\"",
    );
    let recipe = dir.path().join("k.toml");
    let r = nasforge(
        &["kernel", "build", "k.toml", "--config-only"],
        dir.path(),
        &real_cache(),
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("defconfig: all 27 fragment options are in the final .config"),
        "{}",
        r.stdout
    );
    // The Kconfig reader that explains dropped options follows the whole
    // real tree: every `source`, block and expression.
    let c = nasforge::kernel::build::check_config(&spec_of(&recipe), &real_cache()).unwrap();
    assert!(c.dropped.is_empty());
    assert_eq!(c.kconfig_warnings, Vec::<String>::new());
}

/// Boots `image` under TCG with an ich9-ahci controller and two disks, until
/// both disks are attached, the kernel panics, or `limit` passes.
fn boot_with_two_sata_disks(image: &Path, scratch: &Path, limit: Duration) -> String {
    for d in ["sata0.img", "sata1.img"] {
        fs::File::create(scratch.join(d))
            .unwrap()
            .set_len(64 * MIB)
            .unwrap();
    }
    let log = scratch.join("console.log");
    let mut child = Command::new("qemu-system-aarch64")
        .args([
            "-M",
            "virt",
            "-cpu",
            "cortex-a72",
            "-m",
            "512",
            "-accel",
            "tcg",
            "-nographic",
            "-no-reboot",
            "-nic",
            "none",
        ])
        .arg("-kernel")
        .arg(image)
        .args(["-append", "console=ttyAMA0 panic=-1"])
        .args(["-device", "ich9-ahci,id=ahci"])
        .arg("-drive")
        .arg(format!(
            "if=none,id=d0,file={},format=raw",
            scratch.join("sata0.img").display()
        ))
        .args(["-device", "ide-hd,drive=d0,bus=ahci.0"])
        .arg("-drive")
        .arg(format!(
            "if=none,id=d1,file={},format=raw",
            scratch.join("sata1.img").display()
        ))
        .args(["-device", "ide-hd,drive=d1,bus=ahci.1"])
        .stdin(Stdio::null())
        .stdout(fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("qemu-system-aarch64 (scripts/setup installs qemu-system-arm)");
    let start = Instant::now();
    loop {
        let text = fs::read_to_string(&log).unwrap_or_default();
        let done = (text.contains("[sda] Attached SCSI disk")
            && text.contains("[sdb] Attached SCSI disk"))
            || text.contains("Kernel panic");
        if done || start.elapsed() > limit {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            eprintln!("qemu exited: {status}");
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    let _ = child.wait();
    fs::read_to_string(&log).unwrap_or_default()
}

#[test]
#[ignore = "slow, minutes under emulation (and root): NASFORGE_SLOW_TESTS=1 scripts/test runs it, as .ci/run does"]
fn real_kernel_builds_boots_in_qemu_with_ahci_and_is_refused_for_a_pi5() {
    second_to_the_board();
    real_source();
    let _one = REAL.lock().unwrap_or_else(|e| e.into_inner());
    let cache = real_cache();
    let dir = tempfile::tempdir().unwrap();
    RpiFixture::default().build(dir.path());
    // A small base (allnoconfig) + the production SATA and md fragments +
    // what qemu's virt machine needs, with AHCI built in (no initramfs).
    let recipe = real_recipe(
        dir.path(),
        "virt.toml",
        "pi5",
        "allnoconfig",
        "\"sata\", \"md-raid\", \"qemu-virt\"",
    );

    let t = Instant::now();
    let r = nasforge(&["kernel", "build", "virt.toml"], dir.path(), &cache);
    let first = t.elapsed();
    assert_eq!(r.status, 0, "{}\n{}", r.stdout, r.stderr);
    eprintln!(
        "kernel build ({}): {:.0}s\n{}",
        if r.stdout.contains("(cached)") {
            "cached"
        } else {
            "compiled"
        },
        first.as_secs_f64(),
        r.stdout
    );
    let release = r
        .stdout
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':')
        .to_string();
    assert!(
        release.starts_with("6.1.") && release.ends_with("-nasforge"),
        "{}",
        r.stdout
    );
    // AHCI and libata built in (qemu-virt.config wins over sata.config's
    // modules), md as modules: what the capability check reads.
    assert!(
        r.stdout.contains(
            "sata ✓ (libata=y, ahci=y), md ✓ (md_mod=m, raid0=m, raid1=m, raid10=m, raid456=m)"
        ),
        "{}",
        r.stdout
    );

    // A second run is served from the cache.
    let t = Instant::now();
    let again = nasforge(&["kernel", "build", "virt.toml"], dir.path(), &cache);
    assert_eq!(again.status, 0, "{}", again.stderr);
    assert!(again.stdout.contains("(cached)"), "{}", again.stdout);
    eprintln!(
        "kernel build, second run: {:.1}s",
        t.elapsed().as_secs_f64()
    );

    // Boot it: the emulated "Pi with a PCIe SATA card".
    let built = nasforge::kernel::build::cached_dir(&spec_of(&recipe), &cache).unwrap();

    // An out-of-tree module builds against what the build kept of its
    // objects, as ZFS's do for a recipe with a pool and `[kernel] build`.
    let hello = dir.path().join("hello");
    fs::create_dir_all(&hello).unwrap();
    fs::write(
        hello.join("hello.c"),
        "#include <linux/module.h>\nMODULE_LICENSE(\"GPL\");\n",
    )
    .unwrap();
    fs::write(hello.join("Kbuild"), "obj-m := hello.o\n").unwrap();
    run(Command::new("make")
        .arg("-C")
        .arg(built.join("build"))
        .arg(format!("M={}", hello.display()))
        .args(["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-", "modules"]));
    let vermagic = stdout(
        Command::new("/sbin/modinfo")
            .args(["-F", "vermagic"])
            .arg(hello.join("hello.ko")),
    );
    assert!(vermagic.starts_with(&format!("{release} ")), "{vermagic}");
    // A pool on this small kernel is refused from its real .config, naming
    // the fragment that fixes it, before anything is written.
    let pool = fs::read_to_string(&recipe).unwrap().replace(
        "[output]\npath = \"out/virt.img\"",
        "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"tank\"\nlevel = \"mirror\"\ndisks = { count = 2 }\nfilesystem = \"zfs\"\nmount = \"/srv/tank\"\n[output]\npath = \"out/zfs.img\"",
    );
    write_recipe(dir.path(), "zfs.toml", &pool);
    let r = nasforge(&["build", "zfs.toml"], dir.path(), &cache);
    assert!(
        r.status != 0
            && r.stderr.contains("cannot load ZFS's modules: ")
            && r.stderr.contains("CONFIG_ZLIB_DEFLATE is not set")
            && r.stderr.contains("Add \"zfs\" to its `fragments`"),
        "{}",
        r.stderr
    );
    assert!(!dir.path().join("out/zfs.img").exists());
    let t = Instant::now();
    let log = boot_with_two_sata_disks(&built.join("Image"), dir.path(), Duration::from_secs(180));
    eprintln!("qemu boot to both disks: {:.1}s", t.elapsed().as_secs_f64());
    assert!(log.contains(&format!("Linux version {release}")), "{log}");
    let ahci = log
        .lines()
        .find(|l| l.starts_with("ahci 0000:") && l.contains(" AHCI ") && l.contains("SATA mode"))
        .unwrap_or_else(|| panic!("no AHCI controller found:\n{log}"));
    eprintln!("{ahci}");
    assert!(
        log.contains("ata1.00: ATA-7: QEMU HARDDISK")
            && log.contains("ata2.00: ATA-7: QEMU HARDDISK"),
        "{log}"
    );
    assert!(
        log.contains("[sda] Attached SCSI disk") && log.contains("[sdb] Attached SCSI disk"),
        "{log}"
    );

    // The modules as modules_install and depmod -b left them in the cache.
    let built = nasforge::kernel::build::cached_dir(&spec_of(&recipe), &cache).unwrap();
    let dep = fs::read_to_string(built.join(format!("modules/lib/modules/{release}/modules.dep")))
        .unwrap();
    assert!(dep.contains("raid456.ko"), "depmod -b output: {dep}");

    // Into a Raspberry Pi OS-shaped image it does not go: a kernel for
    // qemu's virt machine has no driver for the Pi 5's RP1 or SD card, so
    // the board could not boot it, and the build says so at the board.
    let t = Instant::now();
    let r = nasforge(&["build", "virt.toml"], dir.path(), &cache);
    eprintln!(
        "image build with the cached kernel: {:.1}s\n{}",
        t.elapsed().as_secs_f64(),
        r.stderr
    );
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "board.model: the Raspberry Pi 5 cannot boot this image: kernel {release} has no driver for the RP1 southbridge"
        )),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&dir.path().join("out")), Vec::<String>::new());
}
