//! The built modules as a Debian package, staged with the others for the
//! offline first boot: dpkg on the board knows the files (an upgrade or a
//! removal takes them away cleanly), its postinst runs depmod for the one
//! kernel they are for, and it provides `zfs-modules`, which zfsutils-linux
//! recommends in place of zfs-dkms, so nothing ever compiles on the board.

use super::build::Modules;
use crate::packages::Deb;
use anyhow::{Context, Result, bail};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// `nasforge-zfs-modules-6.1.0-57-arm64`: one package per kernel, as
/// Debian names a kernel's out-of-tree modules.
pub fn package_name(release: &str) -> String {
    format!("nasforge-zfs-modules-{release}")
}

/// Where DKMS would have put them, which modprobe prefers over the tree.
fn module_dir(release: &str) -> String {
    format!("lib/modules/{release}/updates/dkms")
}

/// The control file: version and architecture of the modules' source, so
/// `dpkg -l` on the board says which OpenZFS it runs.
pub fn control(m: &Modules, arch: &str, installed_kib: u64) -> String {
    format!(
        "Package: {name}\nSource: zfs-linux\nVersion: {version}\nArchitecture: {arch}\nMaintainer: nasforge <nasforge@localhost>\nInstalled-Size: {installed_kib}\nDepends: kmod\nProvides: zfs-modules (= {version}), zfs-modules-{release}\nSection: contrib/kernel\nPriority: optional\nDescription: OpenZFS {upstream} kernel modules for Linux {release}\n Built by nasforge on the workstation from Debian's zfs-dkms {version}\n against the headers of the kernel this image boots, so that the board\n never compiles them.\n",
        name = package_name(&m.release),
        version = m.source_version,
        release = m.release,
        upstream = m.version,
    )
}

fn maintainer_script(release: &str, on: &str) -> String {
    format!(
        "#!/bin/sh\nset -e\n# The modules are found by modprobe only once depmod has indexed them.\nif [ \"$1\" = {on} ] && [ -d /lib/modules/{release} ]; then\n\tdepmod -a {release}\nfi\n"
    )
}

/// The package file, built once beside the cached modules (the same build
/// stages the same bytes), with its index entry for the staged repository.
pub fn package(m: &Modules, arch: &str) -> Result<Deb> {
    let filename = format!(
        "{}_{}_{arch}.deb",
        package_name(&m.release),
        m.source_version.replace(':', "%3a")
    );
    let out = m.dir.join(&filename);
    if !out.is_file() {
        build_deb(m, arch, &out)?;
    }
    let data = fs::File::open(&out)?;
    let size = data.metadata()?.len();
    let sha256 = crate::io::hash::hash_file(&data, |_| {})?;
    let installed_kib = installed_kib(m)?;
    let stanza = format!(
        "{}Filename: {filename}\nSize: {size}\nSHA256: {sha256}",
        control(m, arch, installed_kib)
            .split("Description:")
            .next()
            .unwrap_or(""),
    ) + &format!(
        "\nDescription: OpenZFS {} kernel modules for Linux {}",
        m.version, m.release
    );
    Ok(Deb {
        package: package_name(&m.release),
        version: m.source_version.clone(),
        architecture: arch.to_string(),
        filename,
        size,
        sha256,
        installed_size_kib: installed_kib,
        stanza,
        local: out,
    })
}

fn installed_kib(m: &Modules) -> Result<u64> {
    let mut bytes = 0;
    for f in &m.files {
        bytes += fs::metadata(m.module_dir().join(f))?.len();
    }
    Ok(bytes.div_ceil(1024))
}

fn build_deb(m: &Modules, arch: &str, out: &Path) -> Result<()> {
    let tree = tempfile::tempdir_in(&m.dir)?;
    let root = tree.path();
    let dir = root.join(module_dir(&m.release));
    fs::create_dir_all(&dir)?;
    for f in &m.files {
        fs::copy(m.module_dir().join(f), dir.join(f))?;
    }
    let debian = root.join("DEBIAN");
    fs::create_dir_all(&debian)?;
    fs::write(debian.join("control"), control(m, arch, installed_kib(m)?))?;
    for (name, on) in [("postinst", "configure"), ("postrm", "remove")] {
        let p = debian.join(name);
        fs::write(&p, maintainer_script(&m.release, on))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755))?;
    }
    let partial = out.with_extension("partial");
    let status = Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(root)
        .arg(&partial)
        // Fixed timestamps: the package's bytes follow from the modules alone.
        .env("SOURCE_DATE_EPOCH", "0")
        .output()
        .context("running dpkg-deb (scripts/setup installs dpkg)")?;
    if !status.status.success() {
        bail!(
            "dpkg-deb could not build {}: {}",
            out.display(),
            String::from_utf8_lossy(&status.stderr).trim()
        );
    }
    fs::rename(&partial, out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(dir: &Path) -> Modules {
        fs::create_dir_all(dir.join("modules")).unwrap();
        fs::write(dir.join("modules/zfs.ko"), vec![7u8; 5000]).unwrap();
        fs::write(dir.join("modules/spl.ko"), vec![9u8; 1000]).unwrap();
        Modules {
            release: "6.1.0-57-arm64".into(),
            version: "2.1.11-1+deb12u1".into(),
            source_version: "2.1.11-1+deb12u1".into(),
            files: vec!["spl.ko".into(), "zfs.ko".into()],
            configure_seconds: 1.0,
            compile_seconds: 1.0,
            dir: dir.to_path_buf(),
            cached: false,
        }
    }

    #[test]
    fn the_package_holds_the_modules_where_modprobe_looks_and_runs_depmod() {
        let d = tempfile::tempdir().unwrap();
        let m = modules(d.path());
        let deb = package(&m, "arm64").unwrap();
        assert_eq!(deb.package, "nasforge-zfs-modules-6.1.0-57-arm64");
        assert_eq!(
            deb.filename,
            "nasforge-zfs-modules-6.1.0-57-arm64_2.1.11-1+deb12u1_arm64.deb"
        );
        let listing = Command::new("dpkg-deb")
            .arg("-c")
            .arg(&deb.local)
            .output()
            .unwrap();
        let listing = String::from_utf8_lossy(&listing.stdout);
        assert!(
            listing.contains("./lib/modules/6.1.0-57-arm64/updates/dkms/zfs.ko")
                && listing.contains("root/root"),
            "{listing}"
        );
        let info = Command::new("dpkg-deb")
            .args(["-f"])
            .arg(&deb.local)
            .output()
            .unwrap();
        let info = String::from_utf8_lossy(&info.stdout);
        assert!(
            info.contains("Provides: zfs-modules (= 2.1.11-1+deb12u1)"),
            "{info}"
        );
        assert!(info.contains("Installed-Size: 6"), "{info}");
        let postinst = Command::new("dpkg-deb")
            .args(["-I"])
            .arg(&deb.local)
            .arg("postinst")
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&postinst.stdout).contains("depmod -a 6.1.0-57-arm64"),
            "{postinst:?}"
        );
        // The staged index entry describes exactly this file.
        assert!(
            deb.stanza.contains(&format!("SHA256: {}", deb.sha256)),
            "{}",
            deb.stanza
        );
        assert!(
            deb.stanza
                .contains("Package: nasforge-zfs-modules-6.1.0-57-arm64\n")
        );
        assert!(
            deb.stanza.ends_with("for Linux 6.1.0-57-arm64"),
            "{}",
            deb.stanza
        );
        // Built once: the second call stages the same bytes.
        let again = package(&m, "arm64").unwrap();
        assert_eq!(again.sha256, deb.sha256);
    }
}
