//! `[packages]`: what to stage for the offline first boot beyond what the
//! storage plan needs, and the Debian archive to resolve it from.

use crate::section::{Checked, RecipeText, checked, url_problem};
use nasforge_engine::spec::{Alerts, Share, Storage};
use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackagesSection {
    /// Packages to install at first boot (with their dependencies), beyond
    /// what `[storage]` and `[[shares]]` need, which is always added.
    #[serde(default)]
    pub install: Option<Vec<String>>,
    /// Replaces the address of the image's Debian archive entries.
    pub mirror: Option<String>,
}

/// The packages to stage, with those the storage plan needs added.
pub struct Staged {
    pub install: Vec<String>,
    pub mirror: Option<String>,
}

pub(crate) const MIRROR_SCHEMES: &[&str] = &["http", "https", "file"];
pub(crate) const MIRROR_HELP: &str = "a Debian archive address such as `http://mirror.example/debian` or `file:///srv/mirror/debian`";
pub(crate) const PACKAGE_NAME_HELP: &str = "lowercase letters, digits, `+`, `-` and `.`";

/// Debian policy's package name: what apt and mmdebstrap's `--include=`
/// (a comma-separated list) read as exactly one package.
pub(crate) fn is_package_name(name: &str) -> bool {
    name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
}

pub fn parse(
    raw: Option<&Spanned<PackagesSection>>,
    storage: Option<&Storage>,
    shares: &[Share],
    alerts: Option<&Alerts>,
    at: &RecipeText,
) -> Checked<Staged> {
    let mut errs = Vec::new();
    let (mut install, mirror) = match raw {
        Some(p) => {
            let list = p.get_ref().install.clone().unwrap_or_default();
            for name in list.iter().filter(|n| !is_package_name(n)) {
                errs.push(
                    at.at(
                        p.span(),
                        format!("`{}` is not a Debian package name", name.escape_debug()),
                    )
                    .with_help(PACKAGE_NAME_HELP),
                );
            }
            (list, p.get_ref().mirror.clone())
        }
        None => (vec![], None),
    };
    // What the storage plan needs on the board is always staged: the board
    // is offline at first boot, so a missing mkfs would fail there, after
    // the arrays exist.
    for r in nasforge_engine::spec::required_packages(storage, shares, alerts) {
        if !install.iter().any(|p| p == r) {
            install.push(r.to_string());
        }
    }
    if let Some(why) = mirror
        .as_deref()
        .and_then(|m| url_problem(m, MIRROR_SCHEMES))
    {
        errs.push(at.at_path("packages.mirror", &why).with_help(MIRROR_HELP));
    }
    checked(Staged { install, mirror }, errs)
}
