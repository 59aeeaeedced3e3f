//! Package resolution against an image: apt on the build host, the image's
//! status, sources and keyring, a signed repository served on 127.0.0.1.

mod common;

use common::http::Server;
use common::repo::{Pkg, Repo, SUITE, status};
use common::*;
use nasforge::image::Image;
use std::path::PathBuf;

struct Env {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
    repo: Repo,
    server: Server,
    image: PathBuf,
}

fn env(pkgs: &[Pkg], installed: &[(&str, &str, &[&str])]) -> Env {
    env_with_source(pkgs, installed, None)
}

/// With `uri` as the image's source address instead of the test server's.
fn env_with_source(pkgs: &[Pkg], installed: &[(&str, &str, &[&str])], uri: Option<&str>) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::build(dir.path(), pkgs);
    let server = Server::start(repo.root.clone());
    let sources = format!(
        "Types: deb\nURIs: {}\nSuites: {SUITE}\nComponents: main\nSigned-By: /usr/share/keyrings/nasforge-test.gpg\n",
        uri.map_or_else(|| server.url(""), String::from)
    );
    let image = RpiFixture {
        root_files: vec![
            ("var/lib/dpkg/status".into(), status(installed).into_bytes()),
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
        repo,
        server,
        image,
    }
}

fn resolve(e: &Env, install: &[&str]) -> anyhow::Result<nasforge::packages::Resolved> {
    resolve_with(e, install, None, false)
}

fn resolve_with(
    e: &Env,
    install: &[&str],
    mirror: Option<&str>,
    refresh: bool,
) -> anyhow::Result<nasforge::packages::Resolved> {
    let image = Image::open(&e.image)?;
    let root = image.ext4().unwrap();
    let install: Vec<String> = install.iter().map(|s| s.to_string()).collect();
    nasforge::packages::resolve(&root, &install, mirror, e.cache.path(), refresh)
}

fn names(r: &nasforge::packages::Resolved) -> Vec<String> {
    let mut v: Vec<String> = r
        .debs
        .iter()
        .map(|d| format!("{} {}", d.package, d.version))
        .collect();
    v.sort();
    v
}

#[test]
fn resolves_like_apt_alternatives_provides_versions_and_installed() {
    let e = env(
        &[
            Pkg {
                name: "nas-a",
                version: "1.0",
                fields: &["Depends: missing-x | alt-b, virt-v, lib-c (>= 2.0), old-d (>= 1.0)"],
            },
            Pkg {
                name: "alt-b",
                version: "1.0",
                fields: &[],
            },
            Pkg {
                name: "prov-p",
                version: "1.0",
                fields: &["Provides: virt-v"],
            },
            Pkg {
                name: "lib-c",
                version: "1.0",
                fields: &[],
            },
            Pkg {
                name: "lib-c",
                version: "2.1",
                fields: &[],
            },
            Pkg {
                name: "old-d",
                version: "1.0",
                fields: &[],
            },
        ],
        &[("old-d", "1.0", &[]), ("lib-c", "1.5", &[])],
    );
    let r = resolve(&e, &["nas-a"]).unwrap();
    assert_eq!(r.architecture, "arm64");
    // The alternative that exists, the provider of the virtual package, the
    // newer lib-c the constraint needs, and nothing already satisfied.
    assert_eq!(
        names(&r),
        vec!["alt-b 1.0", "lib-c 2.1", "nas-a 1.0", "prov-p 1.0"]
    );
    for d in &r.debs {
        assert_eq!(
            sha256_file(&d.local),
            d.sha256,
            "{} is the verified file",
            d.filename
        );
    }
    let summary = r.summary();
    assert!(
        summary.starts_with("+ 4 packages (")
            && summary.ends_with("): nas-a 1.0 and 3 dependencies"),
        "{summary}"
    );
}

#[test]
fn an_unsatisfiable_conflict_names_the_packages() {
    let e = env(
        &[
            Pkg {
                name: "nas-e",
                version: "1.0",
                fields: &["Depends: pkg-f, pkg-g"],
            },
            Pkg {
                name: "pkg-f",
                version: "1.0",
                fields: &[],
            },
            Pkg {
                name: "pkg-g",
                version: "1.0",
                fields: &["Conflicts: pkg-f"],
            },
        ],
        &[],
    );
    let err = format!("{:#}", resolve(&e, &["nas-e"]).unwrap_err());
    assert!(
        err.contains("apt cannot install nas-e on this image"),
        "{err}"
    );
    assert!(
        err.contains("nas-e") && (err.contains("pkg-g") || err.contains("pkg-f")),
        "{err}"
    );
}

#[test]
fn a_tampered_index_is_refused_naming_the_file() {
    let e = env(
        &[Pkg {
            name: "nas-a",
            version: "1.0",
            fields: &[],
        }],
        &[],
    );
    let p = e.repo.packages_file();
    let text = std::fs::read_to_string(&p).unwrap();
    // Same length, so only the hash can tell.
    std::fs::write(
        &p,
        text.replace(
            "Description: test package nas-a",
            "Description: test package nas-z",
        ),
    )
    .unwrap();
    let err = format!("{:#}", resolve(&e, &["nas-a"]).unwrap_err());
    assert!(
        err.contains("could not read the image's package repositories"),
        "{err}"
    );
    assert!(
        err.contains("dists/test/main/binary-arm64/Packages") && err.contains("Hash Sum mismatch"),
        "{err}"
    );
}

#[test]
fn a_signature_by_an_unknown_key_is_refused() {
    let e = env(
        &[Pkg {
            name: "nas-a",
            version: "1.0",
            fields: &[],
        }],
        &[],
    );
    let other = common::repo::key(e.dir.path(), "intruder");
    e.repo.release_signed_by(&other);
    let err = format!("{:#}", resolve(&e, &["nas-a"]).unwrap_err());
    assert!(
        err.contains("could not read the image's package repositories"),
        "{err}"
    );
    assert!(
        err.contains("NO_PUBKEY") || err.contains("not signed") || err.contains("signature"),
        "{err}"
    );
}

#[test]
fn a_tampered_package_is_refused_naming_the_file() {
    let e = env(
        &[Pkg {
            name: "nas-a",
            version: "1.0",
            fields: &[],
        }],
        &[],
    );
    let deb = e.repo.deb("nas-a", "1.0");
    let mut bytes = std::fs::read(&deb).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0xff;
    std::fs::write(&deb, bytes).unwrap();
    let err = format!("{:#}", resolve(&e, &["nas-a"]).unwrap_err());
    assert!(
        err.contains("nas-a_1.0_arm64.deb") && err.contains("sha256 mismatch"),
        "{err}"
    );
}

#[test]
fn a_second_resolution_makes_no_request_at_all() {
    let e = env(
        &[
            Pkg {
                name: "nas-a",
                version: "1.0",
                fields: &["Depends: alt-b"],
            },
            Pkg {
                name: "alt-b",
                version: "1.0",
                fields: &[],
            },
        ],
        &[],
    );
    resolve(&e, &["nas-a"]).unwrap();
    let first = e.server.request_count();
    assert!(
        first >= 3,
        "InRelease, Packages and two .debs were fetched: {first}"
    );
    let again = resolve(&e, &["nas-a"]).unwrap();
    assert_eq!(
        e.server.request_count(),
        first,
        "lists and packages come from the cache"
    );
    assert_eq!(names(&again), vec!["alt-b 1.0", "nas-a 1.0"]);
}

#[test]
fn a_missing_keyring_is_named_with_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let img = RpiFixture {
        root_files: vec![
            ("var/lib/dpkg/status".into(), status(&[]).into_bytes()),
            ("etc/apt/sources.list.d/x.sources".into(), b"Types: deb\nURIs: http://127.0.0.1:9/\nSuites: test\nComponents: main\nSigned-By: /usr/share/keyrings/gone.gpg\n".to_vec()),
        ],
        ..Default::default()
    }
    .build(dir.path());
    let image = Image::open(&img).unwrap();
    let err = format!(
        "{:#}",
        nasforge::packages::resolve(
            &image.ext4().unwrap(),
            &["x".into()],
            None,
            dir.path(),
            false
        )
        .unwrap_err()
    );
    assert!(err.contains("/etc/apt/sources.list.d/x.sources:1: the keyring /usr/share/keyrings/gone.gpg it is signed by is missing"), "{err}");
}

/// The image's Debian archive entry, replaced by `[packages] mirror`.
const IMAGE_ARCHIVE: &str = "http://127.0.0.1:9/debian";

/// nas-a in the test repository, which the image's sources do not point at.
fn env_needing_a_mirror() -> Env {
    env_with_source(
        &[Pkg {
            name: "nas-a",
            version: "1.0",
            fields: &[],
        }],
        &[],
        Some(IMAGE_ARCHIVE),
    )
}

#[test]
fn a_file_mirror_resolves_and_stages_with_the_signature_checked() {
    let e = env_needing_a_mirror();
    let mirror = format!("file://{}", e.repo.root.display());
    let resolved = resolve_with(&e, &["nas-a"], Some(&mirror), false).unwrap();
    assert_eq!(names(&resolved), vec!["nas-a 1.0"]);
    assert_eq!(e.server.request_count(), 0);
    assert_eq!(
        sha256_file(&resolved.debs[0].local),
        sha256_file(&e.repo.deb("nas-a", "1.0"))
    );
    nasforge::packages::stage(&resolved).unwrap();

    // The signature is checked for a local mirror too.
    let other = common::repo::key(e.dir.path(), "intruder");
    e.repo.release_signed_by(&other);
    let err = format!(
        "{:#}",
        resolve_with(&e, &["nas-a"], Some(&mirror), true).unwrap_err()
    );
    assert!(
        err.contains("could not read the image's package repositories"),
        "{err}"
    );
}

#[test]
fn a_mirror_with_a_newline_never_reaches_apt_as_a_field() {
    let e = env_needing_a_mirror();
    // Signed by a key the image does not trust: only `Trusted: yes` would
    // let apt accept it.
    let other = common::repo::key(e.dir.path(), "intruder");
    e.repo.release_signed_by(&other);
    let mirror = format!("{}\nTrusted: yes", e.server.url(""));
    let err = format!(
        "{:#}",
        resolve_with(&e, &["nas-a"], Some(&mirror), false).unwrap_err()
    );
    assert!(
        err.contains("apt source field URIs") && err.contains("\\nTrusted: yes"),
        "{err}"
    );
    assert_eq!(e.server.request_count(), 0, "apt never ran");
    assert!(
        !files_under(e.cache.path())
            .iter()
            .any(|f| f.ends_with(".sources")),
        "no sources file was written"
    );
}
