//! A small signed Debian repository made with the real tools (dpkg-deb,
//! dpkg-scanpackages, gpg), served by the test HTTP server: to prove package
//! resolution, signature checks and tamper detection without the internet.

use super::{run, stdout};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Pkg<'a> {
    pub name: &'a str,
    pub version: &'a str,
    /// Extra control fields, e.g. "Depends: b (>= 2)"; an `Architecture:`
    /// among them replaces arm64.
    pub fields: &'a [&'a str],
}

impl Pkg<'_> {
    fn arch(&self) -> &str {
        self.fields
            .iter()
            .find_map(|f| f.strip_prefix("Architecture:"))
            .map_or("arm64", str::trim)
    }
}

/// The architectures the repository has an index for.
const ARCHES: &[&str] = &["arm64", "amd64"];

pub struct Repo {
    pub root: PathBuf,
    pub gnupg: PathBuf,
    /// The public key, binary, as an image's /usr/share/keyrings file.
    pub keyring: Vec<u8>,
}

pub const SUITE: &str = "test";

fn gpg(home: &Path) -> Command {
    let mut c = Command::new("gpg");
    c.env("GNUPGHOME", home).args([
        "--batch",
        "--quiet",
        "--pinentry-mode",
        "loopback",
        "--passphrase",
        "",
    ]);
    c
}

/// A fresh signing key in its own GnuPG home.
pub fn key(dir: &Path, name: &str) -> PathBuf {
    let home = dir.join(format!("gnupg-{name}"));
    fs::create_dir_all(&home).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).unwrap();
    run(gpg(&home).args([
        "--quick-gen-key",
        &format!("nasforge {name} <{name}@example.invalid>"),
        "ed25519",
        "sign",
        "never",
    ]));
    home
}

/// `text` clearsigned with `home`'s key, as an InRelease file is.
pub fn clearsign(home: &Path, text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("Release");
    fs::write(&file, text).unwrap();
    run(gpg(home).arg("--clearsign").arg(&file));
    fs::read_to_string(dir.path().join("Release.asc")).unwrap()
}

/// `home`'s public key, armored, as apt's trusted.gpg.d takes it in a
/// `.asc` file.
pub fn public_key(home: &Path) -> String {
    String::from_utf8(run(gpg(home).args(["--export", "--armor"])).stdout).unwrap()
}

impl Repo {
    /// Builds the packages into `dir/repo` and signs the index with a new key.
    pub fn build(dir: &Path, pkgs: &[Pkg]) -> Repo {
        Repo::build_with_files(dir, pkgs, &[])
    }

    /// As [`Repo::build`], with files in packages: (package, path, content).
    pub fn build_with_files(dir: &Path, pkgs: &[Pkg], files: &[(&str, &str, &str)]) -> Repo {
        let root = dir.join("repo");
        let pool = root.join("pool/main");
        fs::create_dir_all(&pool).unwrap();
        for p in pkgs {
            let tree = dir.join(format!("pkg-{}-{}", p.name, p.version));
            fs::create_dir_all(tree.join("DEBIAN")).unwrap();
            fs::create_dir_all(tree.join("usr/share/doc").join(p.name)).unwrap();
            fs::write(
                tree.join("usr/share/doc").join(p.name).join("README"),
                format!("{} {}\n", p.name, p.version),
            )
            .unwrap();
            let mut control = format!(
                "Package: {}\nVersion: {}\nMaintainer: nasforge tests <tests@example.invalid>\nDescription: test package {}\n",
                p.name, p.version, p.name
            );
            if p.arch() == "arm64" {
                control.push_str("Architecture: arm64\n");
            }
            for f in p.fields {
                control.push_str(f);
                control.push('\n');
            }
            fs::write(tree.join("DEBIAN/control"), control).unwrap();
            for (_, path, content) in files.iter().filter(|(n, _, _)| *n == p.name) {
                let f = tree.join(path);
                fs::create_dir_all(f.parent().unwrap()).unwrap();
                fs::write(f, content).unwrap();
            }
            run(Command::new("dpkg-deb")
                .args(["--root-owner-group", "-Zgzip", "--build"])
                .arg(&tree)
                .arg(pool.join(format!("{}_{}_{}.deb", p.name, p.version, p.arch()))));
        }
        let gnupg = key(dir, "repo");
        let keyring = run(gpg(&gnupg).arg("--export")).stdout;
        let repo = Repo {
            root,
            gnupg,
            keyring,
        };
        repo.index();
        repo
    }

    fn binary_dir(&self) -> PathBuf {
        self.arch_dir("arm64")
    }

    fn arch_dir(&self, arch: &str) -> PathBuf {
        self.root.join(format!("dists/{SUITE}/main/binary-{arch}"))
    }

    /// Writes each architecture's Packages, Release and the signed InRelease.
    pub fn index(&self) {
        for arch in ARCHES {
            let bin = self.arch_dir(arch);
            fs::create_dir_all(&bin).unwrap();
            let packages = stdout(
                Command::new("dpkg-scanpackages")
                    .args(["-m", "-a", arch, "pool", "/dev/null"])
                    .current_dir(&self.root),
            );
            fs::write(bin.join("Packages"), &packages).unwrap();
        }
        self.release();
    }

    /// Release over the current index files, signed with `gnupg`'s key.
    pub fn release_signed_by(&self, gnupg: &Path) {
        let rel = self.root.join(format!("dists/{SUITE}"));
        let mut sums = String::new();
        for arch in ARCHES {
            let packages = fs::read(self.arch_dir(arch).join("Packages")).unwrap();
            sums += &format!(
                " {} {} main/binary-{arch}/Packages\n",
                super::sha256_bytes(&packages),
                packages.len()
            );
        }
        let release = format!(
            "Origin: nasforge-test\nLabel: nasforge-test\nSuite: {SUITE}\nCodename: {SUITE}\nArchitectures: {}\nComponents: main\nDate: Sat, 01 Nov 2026 00:00:00 UTC\nSHA256:\n{sums}",
            ARCHES.join(" ")
        );
        fs::write(rel.join("Release"), &release).unwrap();
        fs::write(rel.join("InRelease"), clearsign(gnupg, &release)).unwrap();
    }

    pub fn release(&self) {
        self.release_signed_by(&self.gnupg.clone());
    }

    pub fn packages_file(&self) -> PathBuf {
        self.binary_dir().join("Packages")
    }

    pub fn deb(&self, name: &str, version: &str) -> PathBuf {
        self.root
            .join(format!("pool/main/{name}_{version}_arm64.deb"))
    }
}

/// A dpkg status file: `dpkg` itself (which fixes the architecture) and
/// the given installed packages.
pub fn status(installed: &[(&str, &str, &[&str])]) -> String {
    let mut s = String::from(
        "Package: dpkg\nStatus: install ok installed\nPriority: required\nEssential: yes\nArchitecture: arm64\nVersion: 1.21.22\nMaintainer: Dpkg Developers <debian-dpkg@lists.debian.org>\nDescription: Debian package management system\n\n",
    );
    for (name, version, fields) in installed {
        s.push_str(&format!("Package: {name}\nStatus: install ok installed\nArchitecture: arm64\nVersion: {version}\nMaintainer: t <t@example.invalid>\nDescription: installed {name}\n"));
        for f in *fields {
            s.push_str(f);
            s.push('\n');
        }
        s.push('\n');
    }
    s
}
