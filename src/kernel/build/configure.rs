//! Configuring a kernel: `make <defconfig>` (or a full config file), the
//! fragments merged as merge_config.sh does, `make olddefconfig`, and the
//! check that every fragment value survived.

use super::ARCH;
use super::kernels_dir;
use super::make::{Make, check_tools};
use super::source::prepare_source;
use super::spec::{BuildSpec, Defconfig};
use crate::kernel::fragments::{self, Fragment};
use crate::kernel::kconfig::{Config, Kconfig};
use anyhow::{Context, Result, bail};
use std::fs;
use std::io::Write;
use std::path::Path;

/// What configuring produced: the checked `.config` and what merging did.
#[derive(Debug, Clone)]
pub struct Configured {
    pub config: String,
    pub redefinitions: Vec<fragments::Redefinition>,
    pub dropped: Vec<fragments::Dropped>,
    /// What the Kconfig reader could not follow (also in the build log).
    pub kconfig_warnings: Vec<String>,
}

fn defconfig_name_ok(t: &str) -> bool {
    t.ends_with("config")
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
}

/// The `.config` before the fragments: what `make <defconfig>` writes into
/// `obj`, or the full config file the recipe names.
fn base_config(defconfig: &Defconfig, make: &mut Make) -> Result<String> {
    match defconfig {
        Defconfig::Target(t) => {
            if !defconfig_name_ok(t) {
                bail!(
                    "`{t}` is not a defconfig make target (expected a name like bcm2712_defconfig)"
                );
            }
            let configs = make.src.join("arch").join(ARCH).join("configs");
            if t.ends_with("_defconfig") && !configs.join(t).is_file() {
                let mut have: Vec<String> = fs::read_dir(&configs)
                    .map(|d| {
                        d.filter_map(|e| e.ok())
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                have.sort();
                bail!(
                    "this kernel tree has no arch/{ARCH}/configs/{t}; it has: {}. (bcm27xx defconfigs exist only in raspberrypi/linux)",
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                );
            }
            make.run("defconfig", &[t], false)?;
            fs::read_to_string(make.obj.join(".config")).context("reading the defconfig's .config")
        }
        Defconfig::File(p) => {
            fs::read_to_string(p).with_context(|| format!("reading config file {}", p.display()))
        }
    }
}

/// `make <defconfig>`, merge, `make olddefconfig`, verify. The `.config`
/// ends up in `obj`.
pub(super) fn configure(
    spec: &BuildSpec,
    make: &mut Make,
    frags: &[Fragment],
) -> Result<Configured> {
    let obj_config = make.obj.join(".config");
    let base = base_config(&spec.defconfig, make)?;
    let merged = fragments::merge(&base, frags);
    for r in &merged.redefinitions {
        writeln!(
            make.log,
            "nasforge: {} redefines CONFIG_{} ({} -> {}, was from {})",
            r.fragment,
            r.symbol,
            r.previous,
            r.new,
            r.previous_from.as_deref().unwrap_or("the defconfig")
        )?;
    }
    fs::write(&obj_config, &merged.text)?;
    make.run("olddefconfig", &["olddefconfig"], false)?;
    let final_text = fs::read_to_string(&obj_config)?;
    let kconfig = Kconfig::read_tree(make.src, ARCH);
    for w in &kconfig.warnings {
        writeln!(make.log, "nasforge: Kconfig reader: {w}")?;
    }
    let dropped = fragments::verify(&merged.requested, &Config::parse(&final_text), &kconfig);
    Ok(Configured {
        config: final_text,
        redefinitions: merged.redefinitions,
        dropped,
        kconfig_warnings: kconfig.warnings,
    })
}

/// Configures without compiling: `nasforge kernel build --config-only`, and
/// the fragment checks on a real tree.
pub fn check_config(spec: &BuildSpec, cache: &Path) -> Result<Configured> {
    check_tools()?;
    let frags = spec.load_fragments()?;
    let src = prepare_source(spec, cache, None)?;
    let work = tempfile::tempdir_in({
        let d = kernels_dir(cache).join("work");
        fs::create_dir_all(&d)?;
        d
    })?;
    let log = fs::File::create(work.path().join("config.log"))?;
    let mut make = Make {
        src: &src.tree,
        obj: work.path(),
        log,
    };
    configure(spec, &mut make, &frags)
}
