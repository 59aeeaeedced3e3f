//! The command line as a user meets it: `check` with recipe mistakes,
//! `inspect` on fixture images, `--help`.

mod common;

use common::*;

fn check(text: &str) -> Cli {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.img"), b"").unwrap();
    write_recipe(dir.path(), "r.toml", text);
    nasforge(&["check", "r.toml"], dir.path(), dir.path())
}

#[test]
fn check_accepts_a_good_recipe() {
    // check reads a local base image (to learn whose first boot it has), so
    // a placeholder is refused by name ...
    let r = check("[base]\npath = \"x.img\"\n[board]\nmodel = \"cm4\"\n");
    assert_eq!(r.status, 1, "{}", r.stdout);
    assert!(
        r.stderr
            .contains("reading x.img: reading the partition table of x.img: the image is 0 bytes"),
        "{}",
        r.stderr
    );
    // ... and a real one passes.
    let dir = tempfile::tempdir().unwrap();
    let img = RpiFixture::default().build(dir.path());
    std::fs::rename(img, dir.path().join("x.img")).unwrap();
    write_recipe(
        dir.path(),
        "r.toml",
        "[base]\npath = \"x.img\"\n[board]\nmodel = \"cm4\"\n",
    );
    let r = nasforge(&["check", "r.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("r.toml: ok — r for Raspberry Pi Compute Module 4, output out/r.img"),
        "{}",
        r.stdout
    );
}

#[test]
fn recipe_errors_name_file_line_and_column() {
    let r = check("[base]\npath = \"x.img\"\n[board]\nmodel = \"pi6\"\n");
    assert_eq!(r.status, 1);
    assert!(r.stderr.starts_with("error: r.toml:4:9: unknown variant `pi6`, expected one of `pi4`, `cm4`, `pi5`, `cm5`, `rock3a`, `rock4b`, `rock5b`, `generic-arm64`"), "{}", r.stderr);
    assert!(
        r.stderr.contains("4 | model = \"pi6\"\n  |         ^^^^^"),
        "{}",
        r.stderr
    );

    let r =
        check("[base]\npath = \"x.img\"\n[board]\nmodel = \"pi5\"\n[output]\npaht = \"a.img\"\n");
    assert!(
        r.stderr.contains("r.toml:6:1: unknown field `paht`")
            && r.stderr.contains("did you mean `path`?"),
        "{}",
        r.stderr
    );

    let r = check("[base]\npath = \"x.img\"\n[board]\nmodel = \"pi5\"\npcie_gen = \"3\"\n");
    assert!(
        r.stderr
            .contains("r.toml:5:12: invalid type: string \"3\", expected u8"),
        "{}",
        r.stderr
    );

    let r = check("[base]\npath = \"x.img\"\n[board\nmodel = \"pi5\"\n");
    assert!(
        r.stderr.contains("r.toml:3:"),
        "TOML syntax errors are located too: {}",
        r.stderr
    );
}

#[test]
fn recipe_errors_never_show_a_password() {
    const SECRET: &str = "hunter2-Tr0ub4dor";
    const HASH: &str = "$6$salt0123$Wq0eSUZgBVwrkBLd3ljY3AJ7ND1GhbFEiD0ZxqkPWNC42hsa2u8rYvfmCi9AhG0ae6TbG7HM.hZ7CLhzdXE.y1";
    let head = "[base]\npath = \"x.img\"\n[board]\nmodel = \"cm4\"\n";
    let cases = [
        // An error on the password line itself (both forms given).
        format!(
            "{head}[[system.users]]\nname = \"admin\"\npassword = \"{SECRET}\"\npassword_hash = \"{HASH}\"\n"
        ),
        // An error on the line above, and one on the line below.
        format!(
            "{head}[[system.users]]\nname = \"Admin\"\npassword = \"{SECRET}\"\nsudo = \"yes\"\n"
        ),
        // A syntax error on the password line.
        format!("{head}[[system.users]]\nname = \"admin\"\npassword = \"{SECRET}\" sudo = true\n"),
        // The password beside the error, in an inline table.
        format!(
            "{head}[system]\nusers = [{{ name = \"Admin\", password = '{SECRET}', sudo = true }}]\n"
        ),
        // A secret key where none belongs, quoted, with the hash of root.
        format!("{head}[system]\n\"root_password_hash\" = \"{HASH}\"\nhostname = \"bad_name\"\n"),
        // A number for a password: the parser quotes the value.
        format!("{head}[[system.users]]\nname = \"admin\"\npassword = 918273645\n"),
    ];
    for (n, text) in cases.iter().enumerate() {
        let r = check(text);
        assert_eq!(r.status, 1, "case {n}: {}", r.stderr);
        assert!(r.stderr.contains("r.toml:"), "case {n}: {}", r.stderr);
        let out = format!("{}{}", r.stdout, r.stderr);
        let leaked = [SECRET, HASH, "Wq0eSUZgBVwrkBLd3", "918273645"]
            .into_iter()
            .filter(|s| out.contains(s))
            .collect::<Vec<_>>();
        assert!(leaked.is_empty(), "case {n} shows {leaked:?}:\n{out}");
    }
    // The masked line still shows where the error is.
    let r = check(&cases[0]);
    assert!(r.stderr.contains("password = \"***\""), "{}", r.stderr);
}

#[test]
fn check_says_when_the_local_image_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    write_recipe(
        dir.path(),
        "r.toml",
        "[base]\npath = \"nope.img.xz\"\n[board]\nmodel = \"pi5\"\n",
    );
    let r = nasforge(&["check", "r.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("base image ") && r.stderr.contains("nope.img.xz does not exist"),
        "{}",
        r.stderr
    );
}

#[test]
fn inspect_reports_layout_kernels_and_pcie_settings() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("{PIOS_CONFIG}[pi5]\ndtparam=pciex1\ndtparam=pciex1_gen=3\n");
    let img = RpiFixture {
        config,
        raid456: false,
        ..Default::default()
    }
    .build(dir.path());
    let r = nasforge(&["inspect", img.to_str().unwrap()], dir.path(), dir.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    let out = &r.stdout;
    assert!(out.contains("MBR partition table (1234abcd)"), "{out}");
    assert!(
        out.contains("FAT    bootfs [boot]") && out.contains("ext4   rootfs [root]"),
        "{out}"
    );
    assert!(out.contains("os: Debian GNU/Linux 12 (bookworm)"), "{out}");
    assert!(out.contains("pi5 boots 6.6.51+rpt-rpi-2712 — kernel_2712.img is what the pi5 firmware loads by default"), "{out}");
    assert!(out.contains("cm4 boots 6.6.51+rpt-rpi-v8"), "{out}");
    assert!(
        out.contains(
            "sata ✓ (libata=m, ahci=m), md ✗ (md_mod=m, raid0=m, raid1=m, raid10=m, raid456=-)"
        ),
        "{out}"
    );
    assert!(
        out.contains("config.txt for pi5: pciex1=on pciex1_gen=3"),
        "{out}"
    );
    assert!(
        out.contains("config.txt for pi4: pciex1=(off) pciex1_gen=(default)"),
        "{out}"
    );

    let r = nasforge(
        &["inspect", "--json", img.to_str().unwrap()],
        dir.path(),
        dir.path(),
    );
    let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(j["table"], "mbr");
    assert_eq!(j["family"], "rpi");
    assert_eq!(j["partitions"][0]["label"], "bootfs");
    assert_eq!(j["partitions"][1]["fs"], "ext4");
    assert_eq!(j["pcie"]["pi5"]["pciex1_gen"], "3");
    let pi5 = j["booted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["board"] == "pi5")
        .unwrap();
    assert_eq!(pi5["version"], V2712);
    let k = j["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["version"] == V2712)
        .unwrap();
    assert_eq!(k["capabilities"]["md"]["missing"][0], "raid456");
    assert_eq!(k["modules"]["ahci"], "module");
}

#[test]
fn inspect_reads_compressed_images_and_armbian() {
    let dir = tempfile::tempdir().unwrap();
    let img = armbian_image(dir.path(), &["rockchip-rk3588-sata1.dtbo"]);
    run(std::process::Command::new("xz")
        .args(["-1", "-k"])
        .arg(&img));
    let r = nasforge(&["inspect", "armbian.img.xz"], dir.path(), dir.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("armbian.img.xz: "), "{}", r.stdout);
    assert!(r.stdout.contains("GPT partition table"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "rock5b boots {ARMBIAN_VERSION} — /boot/Image links to vmlinuz-{ARMBIAN_VERSION}"
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("armbianEnv.txt: overlay_prefix=rockchip-rk3588 overlays=uart7-m2 fdtfile=rockchip/rk3588-rock-5b.dtb"), "{}", r.stdout);
}

#[test]
fn inspect_refuses_what_is_not_a_disk_image() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.img"), vec![7u8; 4096]).unwrap();
    let r = nasforge(&["inspect", "notes.img"], dir.path(), dir.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr
            .contains("no partition table: the first sector has no MBR boot signature"),
        "{}",
        r.stderr
    );
}

#[test]
fn help_teaches_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let r = nasforge(&["--help"], dir.path(), dir.path());
    for word in ["check", "build", "inspect", "Examples:"] {
        assert!(r.stdout.contains(word), "{}", r.stdout);
    }
}

#[test]
fn bundled_recipes_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            nasforge::recipe::Recipe::load(&p).unwrap_or_else(|e| panic!("{e:#}"));
            n += 1;
        }
    }
    assert!(n >= 3, "expected the bundled recipes in {}", dir.display());
}

#[test]
fn emulate_explains_what_it_cannot_boot() {
    let dir = tempfile::tempdir().unwrap();
    let img = RpiFixture::default().build(dir.path());
    let r = nasforge(
        &[
            "emulate",
            img.to_str().unwrap(),
            "--disks",
            "2x64M",
            "--headless",
        ],
        dir.path(),
        dir.path(),
    );
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains("kernel 6.6.51+rpt-rpi-2712 has no virtio block driver, so qemu's virt machine cannot boot it"), "{}", r.stderr);
    assert!(
        r.stderr.contains("[base] debian"),
        "the error says what to do: {}",
        r.stderr
    );

    // Without qemu on the PATH.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nasforge"))
        .args(["emulate", img.to_str().unwrap()])
        .env("PATH", dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("qemu-system-aarch64 not found: install qemu-system-arm"),
        "{stderr}"
    );

    let r = nasforge(
        &["emulate", img.to_str().unwrap(), "--disks", "9x1G"],
        dir.path(),
        dir.path(),
    );
    assert!(
        r.stderr.contains(
            "9 SATA disks asked for, but the emulated board's SATA controller has 6 ports: attach the rest with --usb-disk"
        ),
        "{}",
        r.stderr
    );

    let disk = dir.path().join("sas-a.img");
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let r = nasforge(
        &[
            "emulate",
            img.to_str().unwrap(),
            "--sas-disk",
            disk.to_str().unwrap(),
        ],
        dir.path(),
        dir.path(),
    );
    assert!(
        r.status == 1
            && r.stderr
                .contains("--sas-disk and --sas-disks need the emulated PC"),
        "{}",
        r.stderr
    );

    let ssd = dir.path().join("ssd-two.img");
    std::fs::File::create(&ssd)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let r = nasforge(
        &[
            "emulate",
            img.to_str().unwrap(),
            "--ssd",
            ssd.to_str().unwrap(),
            "--without-image-disk",
        ],
        dir.path(),
        dir.path(),
    );
    assert!(
        r.status == 1
            && r.stderr.contains("--ssd and --without-image-disk need the emulated PC: the emulated arm64 board boots from its card"),
        "{}",
        r.stderr
    );
}

/// `password_hash` and `root_password_hash` take only what crypt(5) allows
/// for the scheme: anything else could add fields or accounts to
/// /etc/shadow or userconf.txt.
#[test]
fn hostile_password_hashes_are_refused_and_real_ones_accepted() {
    use nasforge::system::secrets::{Scheme, crypt_password};
    let good = crypt_password("pw", Scheme::Sha512).unwrap();
    let y = crypt_password("pw", Scheme::Yescrypt).unwrap();
    let recipe = |key: &str, hash: &str| {
        let user = if key == "password_hash" {
            "[[system.users]]\nname = \"admin\"\n"
        } else {
            "[system]\n"
        };
        format!("[base]\npath = \"x.img\"\n[board]\nmodel = \"pi4\"\n{user}{key} = \"{hash}\"\n")
    };
    for (hash, reason) in [
        (format!("{good}\\nmallory"), "it contains '\\n'"),
        (format!("{good}:0:99999:7:::\\nmallory"), "it contains ':'"),
        (format!("{good}x"), "its hash is 87 characters long, not 86"),
        (
            format!("{}*", &y[..y.len() - 1]),
            "its hash has characters other than",
        ),
        (
            "$1$salt$hash".into(),
            "`$1$` is not a scheme nasforge accepts",
        ),
    ] {
        for (key, at) in [
            (
                "password_hash",
                "r.toml:7:17: system.users[0].password_hash",
            ),
            (
                "root_password_hash",
                "r.toml:6:22: system.root_password_hash",
            ),
        ] {
            let r = check(&recipe(key, &hash));
            assert_eq!(r.status, 1, "{hash}");
            assert!(
                r.stderr
                    .contains(&format!("{at}: not a crypt(3) hash: {reason}")),
                "{hash}: {}",
                r.stderr
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let img = RpiFixture::default().build(dir.path());
    std::fs::rename(img, dir.path().join("x.img")).unwrap();
    for hash in [&good, &y] {
        for key in ["password_hash", "root_password_hash"] {
            write_recipe(dir.path(), "r.toml", &recipe(key, hash));
            let r = nasforge(&["check", "r.toml"], dir.path(), dir.path());
            assert_eq!(r.status, 0, "{hash}: {}", r.stderr);
        }
    }
}

/// engine/tests/data/hostile-values.toml through `nasforge check`: every value
/// the board would write into a file, a unit or a command line is refused on
/// the workstation, at its line, with the board's own words.
#[test]
fn check_refuses_every_hostile_board_value_at_its_line() {
    let table: toml::Table =
        toml::from_str(include_str!("../engine/tests/data/hostile-values.toml")).unwrap();
    let template = table["template"].as_str().unwrap();
    // The template passes every recipe check: what stops it is the
    // placeholder base image, read only after them.
    let r = check(template);
    assert!(
        r.stderr.contains("reading x.img")
            && !r.stderr.contains("shares")
            && !r.stderr.contains("storage"),
        "{}",
        r.stderr
    );
    let cases = table["case"].as_array().unwrap();
    assert!(cases.len() >= 40);
    for case in cases {
        let text = |key: &str| case[key].as_str().unwrap();
        let (key, replace, error) = (text("key"), text("replace"), text("error"));
        let at = template.find(replace).unwrap();
        let line = template[..at].matches('\n').count() + 1;
        let r = check(&template.replacen(replace, text("with"), 1));
        assert_eq!(r.status, 1, "{key}: {}", r.stderr);
        let located = format!("r.toml:{line}:");
        assert!(
            r.stderr.lines().any(|l| l.contains(&located)
                && l.contains(error)
                && (l.contains(&format!(": {key}: ")) || l.contains("unknown variant"))),
            "{key} at line {line}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains(['\x1b', '\r']), "{:?}", r.stderr);
    }
}

#[test]
fn completions_and_the_manual_page_name_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let r = nasforge(&["completions", "bash"], dir.path(), dir.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.contains("_nasforge()"), "{}", r.stdout);
    for command in [
        "build",
        "flash",
        "emulate",
        "fault",
        "power-cut",
        "completions",
    ] {
        assert!(r.stdout.contains(command), "{command} in {}", r.stdout);
    }
    let r = nasforge(&["completions", "zsh"], dir.path(), dir.path());
    assert!(r.stdout.starts_with("#compdef nasforge"), "{}", r.stdout);
    let r = nasforge(&["man"], dir.path(), dir.path());
    assert!(
        r.status == 0 && r.stdout.contains(".TH nasforge 1") && r.stdout.contains("emulate"),
        "{}",
        r.stdout
    );
    let r = nasforge(&["completions", "tcsh"], dir.path(), dir.path());
    assert!(
        r.status == 2
            && r.stderr
                .contains("possible values: bash, elvish, fish, powershell, zsh"),
        "{}",
        r.stderr
    );
}
