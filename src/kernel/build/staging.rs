//! After compiling: the build's files gathered in the staging directory that
//! becomes the cached result (`modules_install` + `depmod -b`,
//! `dtbs_install`, the Image, its config and System.map).

use super::make::{Make, tool};
use super::{ARCH, with_log};
use anyhow::{Context, Result};
use std::fs;
use std::path::Path;
use std::process::Command;

/// Fills `staging` from the objects in `make.obj`; `log` is the build log
/// a failure points at.
pub(super) fn stage(
    make: &mut Make,
    staging: &Path,
    release: &str,
    modules: bool,
    log: &Path,
) -> Result<()> {
    install_modules(make, &staging.join("modules"), release, modules, log)?;
    install_dtbs(make, &staging.join("dtbs"), log)?;
    fs::copy(
        make.obj.join("arch").join(ARCH).join("boot/Image"),
        staging.join("Image"),
    )
    .context("copying the built Image")?;
    fs::copy(make.obj.join(".config"), staging.join("config"))?;
    fs::copy(make.obj.join("System.map"), staging.join("System.map"))?;
    Ok(())
}

/// `lib/modules/<release>` under `mod_root`, depmod'ed for the target; it
/// exists (with modules.builtin) even for a kernel without modules.
fn install_modules(
    make: &mut Make,
    mod_root: &Path,
    release: &str,
    modules: bool,
    log: &Path,
) -> Result<()> {
    let obj = make.obj;
    if modules {
        let path = format!("INSTALL_MOD_PATH={}", mod_root.display());
        // depmod is run below, explicitly, on the staging directory.
        make.run(
            "modules_install",
            &[
                "INSTALL_MOD_STRIP=1",
                "DEPMOD=true",
                &path,
                "modules_install",
            ],
            false,
        )
        .map_err(with_log(log))?;
    }
    let mod_dir = mod_root.join("lib/modules").join(release);
    fs::create_dir_all(&mod_dir)?;
    for link in ["build", "source"] {
        let p = mod_dir.join(link);
        if p.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            fs::remove_file(&p)?;
        }
    }
    for f in [
        "modules.builtin",
        "modules.builtin.modinfo",
        "modules.order",
    ] {
        if !mod_dir.join(f).exists() && obj.join(f).is_file() {
            fs::copy(obj.join(f), mod_dir.join(f))?;
        }
    }
    let out = Command::new(tool("depmod").unwrap_or_else(|| "depmod".into()))
        .arg("-b")
        .arg(mod_root)
        .arg("-F")
        .arg(obj.join("System.map"))
        .arg(release)
        .output()
        .context("running depmod")?;
    if !out.status.success() {
        return Err(with_log(log)(anyhow::anyhow!(
            "depmod -b {} {release} failed: {}",
            mod_root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// `dtbs_install` into `dtbs`, with the overlay README a Raspberry Pi
/// tree carries beside its overlays.
fn install_dtbs(make: &mut Make, dtbs: &Path, log: &Path) -> Result<()> {
    let path = format!("INSTALL_DTBS_PATH={}", dtbs.display());
    make.run("dtbs_install", &[&path, "dtbs_install"], false)
        .map_err(with_log(log))?;
    fs::create_dir_all(dtbs)?;
    let readme = make
        .src
        .join("arch")
        .join(ARCH)
        .join("boot/dts/overlays/README");
    if readme.is_file() && dtbs.join("overlays").is_dir() {
        fs::copy(&readme, dtbs.join("overlays/README"))?;
    }
    Ok(())
}
