//! ZFS on the workstation, against an image shaped like Raspberry Pi OS
//! (kernel 6.6.51+rpt-rpi-v8, installed by dpkg) and a signed repository
//! served on 127.0.0.1: what a build takes from the image's sources (the
//! kernel's headers and the kbuild package they name, the newest zfs-dkms
//! that builds for the kernel, the userland of exactly its version), and
//! the refusals that stop a build before anything is written.
//!
//! The compile itself runs in the slow end-to-end test, for the Debian
//! base's real kernel.

mod common;

use common::http::Server;
use common::repo::{Pkg, Repo, SUITE, status};
use common::*;
use nasforge::image::Image;
use std::path::PathBuf;

const RELEASE: &str = V8;
const KERNEL_PACKAGE: &str = "linux-image-6.6.51+rpt-rpi-v8";
const KERNEL_VERSION: &str = "1:6.6.51-1+rpt3";

/// The META file at the top of an OpenZFS source tree, with the kernel
/// range it builds for.
fn meta(version: &str, max: &str) -> String {
    format!(
        "Meta:          1\nName:          zfs\nVersion:       {version}\nRelease:       1\nLicense:       CDDL\nAuthor:        OpenZFS\nLinux-Maximum: {max}\nLinux-Minimum: 4.18\n"
    )
}

struct Env {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
    _server: Server,
    image: PathBuf,
}

fn env(pkgs: &[Pkg], files: &[(&str, &str, &str)]) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::build_with_files(dir.path(), pkgs, files);
    let server = Server::start(repo.root.clone());
    let sources = format!(
        "Types: deb\nURIs: {}\nSuites: {SUITE}\nComponents: main\nSigned-By: /usr/share/keyrings/nasforge-test.gpg\n",
        server.url("")
    );
    let image = RpiFixture {
        root_files: vec![
            (
                "var/lib/dpkg/status".into(),
                status(&[(KERNEL_PACKAGE, KERNEL_VERSION, &[])]).into_bytes(),
            ),
            (
                format!("var/lib/dpkg/info/{KERNEL_PACKAGE}.list"),
                format!("/.\n/boot\n/boot/vmlinuz-{RELEASE}\n/usr/lib/modules\n/usr/lib/modules/{RELEASE}\n/usr/lib/modules/{RELEASE}/modules.builtin\n").into_bytes(),
            ),
            (
                "etc/apt/sources.list.d/test.sources".into(),
                sources.into_bytes(),
            ),
            (
                "usr/share/keyrings/nasforge-test.gpg".into(),
                repo.keyring.clone(),
            ),
        ],
        ..Default::default()
    }
    .build(dir.path());
    Env {
        dir,
        cache: tempfile::tempdir().unwrap(),
        _server: server,
        image,
    }
}

fn inputs(e: &Env) -> anyhow::Result<nasforge::zfs::sources::Inputs> {
    let image = Image::open(&e.image).unwrap();
    let root = image.ext4().unwrap();
    let kernel = nasforge::zfs::kernel_package::find(&root, RELEASE)?;
    let apt = nasforge::packages::ImageApt::open(&root, None, e.cache.path(), false)?;
    nasforge::zfs::sources::resolve(&apt, RELEASE, Some(&kernel), e.cache.path())
}

const DKMS: &str = "usr/src/zfs-2.2.7/META";

fn zfs_packages() -> Vec<Pkg<'static>> {
    vec![
        Pkg {
            name: "zfs-dkms",
            version: "2.2.7-1",
            fields: &[],
        },
        Pkg {
            name: "zfsutils-linux",
            version: "2.2.7-1",
            fields: &[
                "Depends: libnvpair3linux (= 2.2.7-1), libzfs4linux (= 2.2.7-1), python3, libc6 (>= 2.34)",
            ],
        },
        Pkg {
            name: "zfs-zed",
            version: "2.2.7-1",
            fields: &[],
        },
        Pkg {
            name: "libnvpair3linux",
            version: "2.2.7-1",
            fields: &[],
        },
        Pkg {
            name: "libzfs4linux",
            version: "2.2.7-1",
            fields: &[],
        },
    ]
}

fn headers_packages() -> Vec<Pkg<'static>> {
    vec![
        Pkg {
            name: "linux-headers-6.6.51+rpt-rpi-v8",
            version: KERNEL_VERSION,
            fields: &[
                "Depends: linux-headers-6.6.51+rpt-common-rpi (= 1:6.6.51-1+rpt3), linux-kbuild-6.6.51+rpt (>= 1:6.6.51-1+rpt3), gcc-12",
            ],
        },
        Pkg {
            name: "linux-headers-6.6.51+rpt-common-rpi",
            version: KERNEL_VERSION,
            fields: &[],
        },
        Pkg {
            name: "linux-kbuild-6.6.51+rpt",
            version: KERNEL_VERSION,
            fields: &[],
        },
        // A newer kernel's headers, which must not be taken instead.
        Pkg {
            name: "linux-headers-6.6.51+rpt-rpi-v8",
            version: "1:6.6.51-1+rpt4",
            fields: &[],
        },
    ]
}

#[test]
fn the_headers_of_the_booted_kernel_and_the_userland_of_the_modules_version_are_taken() {
    let mut pkgs = zfs_packages();
    pkgs.extend(headers_packages());
    let e = env(&pkgs, &[("zfs-dkms", DKMS, &meta("2.2.7", "6.12"))]);
    let i = inputs(&e).unwrap();
    assert_eq!(i.zfs.deb.version, "2.2.7-1");
    assert_eq!(i.zfs.upstream, "2.2.7");
    let mut headers: Vec<String> = i
        .headers
        .iter()
        .map(|d| format!("{} {}", d.package, d.version))
        .collect();
    headers.sort();
    assert_eq!(
        headers,
        vec![
            "linux-headers-6.6.51+rpt-common-rpi 1:6.6.51-1+rpt3",
            "linux-headers-6.6.51+rpt-rpi-v8 1:6.6.51-1+rpt3",
            "linux-kbuild-6.6.51+rpt 1:6.6.51-1+rpt3",
        ]
    );
    for d in i.headers.iter().chain([&i.zfs.deb]) {
        assert_eq!(
            sha256_file(&d.local),
            d.sha256,
            "{} as the signed index lists it",
            d.filename
        );
    }
    assert_eq!(
        i.userland,
        vec![
            "zfsutils-linux=2.2.7-1",
            "zfs-zed=2.2.7-1",
            "libnvpair3linux=2.2.7-1",
            "libzfs4linux=2.2.7-1",
        ]
    );
}

/// Runs `nasforge build` of a recipe with a raidz1 pool on the fixture and
/// returns its error; nothing may have been written.
fn build_fails(e: &Env) -> String {
    std::fs::rename(&e.image, e.dir.path().join("pios.img")).unwrap();
    write_recipe(
        e.dir.path(),
        "zfs.toml",
        r#"[base]
path = "pios.img"
[board]
model = "pi4"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "tank"
level = "raidz1"
disks = { count = 3 }
filesystem = "zfs"
mount = "/srv/tank"
[output]
path = "out/zfs.img"
"#,
    );
    let r = nasforge(&["build", "zfs.toml"], e.dir.path(), e.cache.path());
    assert_ne!(r.status, 0, "{}", r.stderr);
    assert!(
        files_under(&e.dir.path().join("out")).is_empty(),
        "nothing is written: {:?}",
        files_under(&e.dir.path().join("out"))
    );
    r.stderr
}

#[test]
fn an_image_whose_sources_lack_contrib_is_refused_naming_it() {
    let e = env(&headers_packages(), &[]);
    let err = build_fails(&e);
    assert!(
        err.contains("offer no zfs-dkms")
            && err.contains("Debian ships OpenZFS in `contrib`, which none of them lists")
            && err.contains("/etc/apt/sources.list.d/test.sources")
            && err.contains("Add `contrib`"),
        "{err}"
    );
}

#[test]
fn a_kernel_whose_headers_the_sources_no_longer_carry_is_refused() {
    let e = env(
        &zfs_packages(),
        &[("zfs-dkms", DKMS, &meta("2.2.7", "6.12"))],
    );
    let err = build_fails(&e);
    assert!(
        err.contains("have no linux-headers-6.6.51+rpt-rpi-v8 1:6.6.51-1+rpt3")
            && err.contains("the kernel the board boots (6.6.51+rpt-rpi-v8"),
        "{err}"
    );
}

#[test]
fn an_openzfs_too_old_for_the_kernel_is_refused_with_the_range_it_builds_for() {
    let e = env(
        &[Pkg {
            name: "zfs-dkms",
            version: "2.1.11-1",
            fields: &[],
        }],
        &[(
            "zfs-dkms",
            "usr/src/zfs-2.1.11/META",
            &meta("2.1.11", "6.2"),
        )],
    );
    let err = build_fails(&e);
    assert!(
        err.contains(
            "no zfs-dkms in the image's apt sources builds for the board's kernel 6.6.51+rpt-rpi-v8"
        ) && err.contains("zfs-dkms 2.1.11-1 builds for Linux 4.18 to 6.2"),
        "{err}"
    );
}

#[test]
fn a_kernel_dpkg_did_not_install_is_named() {
    let e = env(&[], &[]);
    let image = Image::open(&e.image).unwrap();
    let root = image.ext4().unwrap();
    let err = nasforge::zfs::kernel_package::find(&root, V2712)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("no installed package owns /lib/modules/{V2712}"))
            && err.contains(KERNEL_PACKAGE),
        "{err}"
    );
}

/// This machine's architecture in dpkg's spelling.
fn host_arch() -> String {
    stdout(std::process::Command::new("dpkg").arg("--print-architecture"))
        .trim()
        .to_string()
}

/// What `native_tools` finds in sources holding `extra` beside the
/// headers and zfs-dkms, with the sha256 of the file it downloaded.
fn native_tools_with(extra: Vec<Pkg<'static>>) -> Option<(nasforge::packages::Deb, String)> {
    let mut pkgs = zfs_packages();
    pkgs.extend(headers_packages());
    pkgs.extend(extra);
    let e = env(&pkgs, &[("zfs-dkms", DKMS, &meta("2.2.7", "6.12"))]);
    let i = inputs(&e).unwrap();
    let image = Image::open(&e.image).unwrap();
    let root = image.ext4().unwrap();
    let apt = nasforge::packages::ImageApt::open(&root, None, e.cache.path(), false).unwrap();
    nasforge::zfs::sources::native_tools(&apt, &i.headers, e.cache.path()).map(|d| {
        let sha = sha256_file(&d.local);
        (d, sha)
    })
}

/// Debian builds linux-kbuild for every architecture and marks it
/// Multi-Arch: foreign: the one for this machine, of the headers' version,
/// comes from the same signed sources, so fixdep, modpost and genksyms run
/// natively. Without it, or without Multi-Arch: foreign, the board's run
/// through qemu-user.
#[test]
fn the_kbuild_tools_for_this_machine_come_from_the_image_sources_when_they_carry_them() {
    let host = host_arch();
    if host == "arm64" {
        eprintln!("this machine is arm64 like the fixture's board: its tools are native already");
        return;
    }
    let arch: &'static str = Box::leak(format!("Architecture: {host}").into_boxed_str());
    let kbuild = |fields: &'static [&'static str]| Pkg {
        name: "linux-kbuild-6.6.51+rpt",
        version: KERNEL_VERSION,
        fields,
    };
    let foreign: &'static [&'static str] = Box::leak(vec![arch, "Multi-Arch: foreign"].into());
    let (tools, sha) = native_tools_with(vec![kbuild(foreign)]).expect("this machine's kbuild");
    assert_eq!(
        (
            tools.package.as_str(),
            tools.version.as_str(),
            tools.architecture.as_str()
        ),
        ("linux-kbuild-6.6.51+rpt", KERNEL_VERSION, host.as_str())
    );
    assert_eq!(sha, tools.sha256, "as the signed index lists it");

    let plain: &'static [&'static str] = Box::leak(vec![arch].into());
    assert!(
        native_tools_with(vec![kbuild(plain)]).is_none(),
        "not Multi-Arch: foreign"
    );
    assert!(native_tools_with(vec![]).is_none(), "not in the sources");
}
