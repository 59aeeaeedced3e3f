//! `nasforge kernel ...`: what the kernel commands print. The kernel module
//! builds and checks; this side reads the recipe and words the report.

use crate::kernel::build::{self, remedy};
use crate::kernel::{Capability, board_extras, fragments};
use crate::recipe::Recipe;
use anyhow::{Result, bail};
use std::path::Path;

/// `nasforge kernel build RECIPE [--config-only]`: the report it prints.
pub fn build(recipe: &Recipe, cache: &Path, config_only: bool) -> Result<String> {
    let Some(spec) = &recipe.kernel.build else {
        bail!(
            "{} has no `[kernel] build`; {}",
            recipe.file.display(),
            remedy(
                recipe.board,
                if recipe.kernel.require.is_empty() {
                    &[Capability::Sata, Capability::Md]
                } else {
                    &recipe.kernel.require
                }
            )
        );
    };
    if config_only {
        let c = build::check_config(spec, cache)?;
        if !c.dropped.is_empty() {
            bail!("{}", fragments::report(&c.dropped));
        }
        let n: usize = spec
            .fragments
            .iter()
            .map(|f| f.load().map(|f| f.settings.len()).unwrap_or(0))
            .sum();
        return Ok(format!(
            "{}: all {n} fragment options are in the final .config\n",
            spec.defconfig
        ));
    }
    let built = build::build(spec, cache)?;
    let required: Vec<Capability> = if recipe.kernel.require.is_empty() {
        Capability::ALL.to_vec()
    } else {
        recipe.kernel.require.clone()
    };
    let extras = board_extras(recipe.board);
    let report = built.files().report(&extras);
    let caps: Vec<String> = required
        .iter()
        .map(|c| report.describe(*c, &extras))
        .collect();
    let mut out = format!("kernel {}: {}\n", built.info.release, caps.join(", "));
    out.push_str(&format!(
        "  built from {} with {} + {}\n",
        built.info.source,
        built.info.defconfig,
        built.info.fragments.join(" + ")
    ));
    out.push_str(&format!(
        "  in {}{}\n",
        built.dir.display(),
        if built.cached { " (cached)" } else { "" }
    ));
    for (phase, d) in &built.timings {
        out.push_str(&format!("  {phase:>18}  {:.1}s\n", d.as_secs_f64()));
    }
    if built.cached {
        out.push_str(&format!(
            "  {:>18}  {:.1}s (when it was built)\n",
            "kernel compile", built.info.compile_seconds
        ));
    }
    built.check(recipe.board, &recipe.kernel.require)?;
    Ok(out)
}
