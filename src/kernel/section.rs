//! `[kernel]`: the capabilities the booted kernel must have, and optionally
//! a kernel to build from source (`build = { source, sha256, defconfig,
//! fragments }`), with the board's defconfig and fragments filled in.

use super::Capability;
use super::build::{BuildSpec, Defconfig, FragmentRef, KernelSource};
use crate::board::{BoardKernel, Family, Model};
use crate::diag::{Located, did_you_mean};
use crate::section::{Checked, RecipeText, checked, sha256_problem, url_problem};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// `[kernel]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelFile {
    #[serde(default)]
    require: Vec<Capability>,
    build: Option<Spanned<BuildFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildFile {
    source: Spanned<String>,
    sha256: Option<Spanned<String>>,
    defconfig: Option<Spanned<String>>,
    fragments: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Default, Clone)]
pub struct Kernel {
    /// Capabilities the kernel the board boots must have; the build stops
    /// before changing anything when one is missing.
    pub require: Vec<Capability>,
    /// A kernel to compile and install.
    pub build: Option<BuildSpec>,
}

pub fn parse(raw: KernelFile, model: Model, at: &RecipeText) -> Checked<Kernel> {
    let build = match &raw.build {
        Some(b) => Some(build(b, model, at)?),
        None => None,
    };
    Ok(Kernel {
        require: raw.require,
        build,
    })
}

fn build(b: &Spanned<BuildFile>, model: Model, at: &RecipeText) -> Checked<BuildSpec> {
    let raw = b.get_ref();
    let info = model.info();
    let defaults = info.kernel.clone();
    let mut errs = Vec::new();
    let installable = !matches!(info.family, Family::Generic | Family::Uefi);
    if !installable {
        let mut e = at.at(
            b.span(),
            format!("nasforge cannot install a kernel on board `{model}`"),
        );
        e.help = defaults.unverified.clone();
        errs.push(e);
    }
    let source = source(raw, at, &mut errs);
    let defconfig = match &raw.defconfig {
        Some(d) => defconfig(d, at, &mut errs),
        None => match &defaults.defconfig {
            Some(d) => Defconfig::Target(d.clone()),
            None => {
                if installable {
                    errs.push(
                        at.at(
                            b.span(),
                            format!("no defconfig is known for board `{model}`"),
                        )
                        .with_help("name one: `defconfig = \"...\"`"),
                    );
                }
                Defconfig::Target(String::new())
            }
        },
    };
    let fragments = fragments(raw, &defaults, at, &mut errs);
    checked(
        BuildSpec {
            source,
            defconfig,
            fragments,
        },
        errs,
    )
}

/// `source`: a tarball to download (with its `sha256`), a local tarball or
/// a kernel tree, relative to the recipe.
fn source(raw: &BuildFile, at: &RecipeText, errs: &mut Vec<Located>) -> KernelSource {
    let dir = at.dir();
    let src = raw.source.get_ref();
    let span = raw.source.span();
    let is_tarball = [
        ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tar.zst", ".tar",
    ]
    .iter()
    .any(|e| src.ends_with(e));
    let sha = raw.sha256.as_ref().map(|s| {
        let (digest, err) = sha256_problem(s, at);
        errs.extend(err.map(|e| e.with_help("`sha256sum` of the source tarball")));
        digest
    });
    if src.contains('<') || src.contains('>') {
        errs.push(
            at.at(span.clone(), format!("`{src}` still holds a placeholder"))
                .with_help("replace the <...> part with the real commit or version"),
        );
    }
    if src.starts_with("https://") || src.starts_with("http://") {
        if let Some(why) = url_problem(src, &["http", "https"]) {
            errs.push(at.at(span.clone(), why));
        }
        if !is_tarball {
            errs.push(at.at(span.clone(), format!("`{src}` is not a source tarball URL")).with_help("use a .tar.gz or .tar.xz of the kernel tree (e.g. GitHub's /archive/<commit>.tar.gz), or a local tree path"));
        }
        if sha.is_none() {
            errs.push(
                at.at(span, "a downloaded kernel source needs its `sha256`").with_help(
                    "nasforge never builds from an unchecked download; `sha256sum` the tarball once",
                ),
            );
        }
        KernelSource::Url {
            url: src.clone(),
            sha256: sha.unwrap_or_default(),
        }
    } else if src.contains("://") {
        errs.push(at.at(
            span,
            format!("`{src}` is neither an http(s) URL nor a path"),
        ));
        KernelSource::Tree(PathBuf::new())
    } else if is_tarball {
        KernelSource::Tarball {
            path: dir.join(src),
            sha256: sha,
        }
    } else {
        if let Some(s) = &raw.sha256 {
            errs.push(
                at.at(
                    s.span(),
                    "`sha256` applies to a source tarball, not a kernel tree",
                )
                .with_help("a tree is identified by its content; remove `sha256`"),
            );
        }
        KernelSource::Tree(dir.join(src))
    }
}

/// `defconfig`: a make target (`bcm2712_defconfig`) or a full .config file.
fn defconfig(d: &Spanned<String>, at: &RecipeText, errs: &mut Vec<Located>) -> Defconfig {
    let v = d.get_ref();
    if v.contains('/') || (v.ends_with(".config") && !v.ends_with("_defconfig")) {
        Defconfig::File(at.dir().join(v))
    } else if v.ends_with("config")
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    {
        Defconfig::Target(v.clone())
    } else {
        errs.push(
            at.at(
                d.span(),
                format!("`{v}` is neither a defconfig target nor a config file"),
            )
            .with_help("a make target such as `bcm2712_defconfig`, or a path to a full .config"),
        );
        Defconfig::Target(String::new())
    }
}

/// `fragments`: bundled ones by name, or files; the board's by default.
fn fragments(
    raw: &BuildFile,
    defaults: &BoardKernel,
    at: &RecipeText,
    errs: &mut Vec<Located>,
) -> Vec<FragmentRef> {
    let Some(list) = &raw.fragments else {
        return defaults
            .fragments
            .iter()
            .map(|f| FragmentRef::Bundled(f.clone()))
            .collect();
    };
    if list.get_ref().is_empty() {
        errs.push(
            at.at(list.span(), "`fragments` is empty")
                .with_help(format!("the board's default is {:?}", defaults.fragments)),
        );
    }
    list.get_ref()
        .iter()
        .filter_map(|f| fragment(f, at.dir(), at, errs))
        .collect()
}

fn fragment(
    f: &Spanned<String>,
    dir: &Path,
    at: &RecipeText,
    errs: &mut Vec<Located>,
) -> Option<FragmentRef> {
    let name = f.get_ref();
    if name.ends_with(".config") || name.contains('/') {
        return Some(FragmentRef::File(dir.join(name)));
    }
    if super::fragments::bundled(name).is_some() {
        return Some(FragmentRef::Bundled(name.clone()));
    }
    let names: Vec<&str> = super::fragments::BUNDLED.iter().map(|(n, _)| *n).collect();
    let help = match did_you_mean(name, names.iter().copied()) {
        Some(s) => format!("did you mean `{s}`? (or a file: `my-options.config`)"),
        None => format!(
            "bundled fragments: {}; or a file: `my-options.config`",
            names.join(", ")
        ),
    };
    errs.push(
        at.at(f.span(), format!("no kernel fragment `{name}`"))
            .with_help(help),
    );
    None
}
