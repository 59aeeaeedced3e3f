//! `[base]`: the image a build starts from, downloaded (`url` with its
//! `sha256`), on this machine (`path`) or built from Debian's packages
//! (`debian`).

use crate::debian::DebianBase;
use crate::diag::Located;
use crate::section::{Checked, RecipeText, checked, sha256_problem, url_problem};
use serde::Deserialize;
use std::path::PathBuf;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BaseFile {
    url: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    sha256: Option<Spanned<String>>,
    debian: Option<Spanned<DebianBase>>,
}

impl BaseFile {
    /// Built by nasforge from Debian's packages, so laid out by it.
    pub(super) fn is_debian(&self) -> bool {
        self.debian.is_some()
    }
}

/// Where the base image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseSource {
    Url(String),
    Path(PathBuf),
    /// Built from Debian's packages (cached per machine).
    Debian(DebianBase),
}

#[derive(Debug, Clone)]
pub struct Base {
    pub source: BaseSource,
    /// Lowercase hex; always present for a URL.
    pub sha256: Option<String>,
}

/// A base built from Debian's packages runs the board's programs only when
/// it is of the board's architecture.
pub(super) fn arch_problem(
    raw: &Spanned<BaseFile>,
    model: crate::board::Model,
    at: &RecipeText,
) -> Option<Located> {
    let d = raw.get_ref().debian.as_ref()?;
    let want = model.info().arch;
    let have = &d.get_ref().arch;
    (*have != want).then(|| {
        at.at(
            d.span(),
            format!("board `{model}` runs {want} programs, but this base is built for `{have}`"),
        )
        .with_help(format!("set `arch = \"{want}\"` in `[base] debian`"))
    })
}

/// `base.path` is resolved against the recipe's own directory, so a recipe
/// and the image beside it move together.
pub(super) fn parse(raw: &Spanned<BaseFile>, at: &RecipeText) -> Checked<Base> {
    let base = raw.get_ref();
    let mut errs = Vec::new();
    let given = [
        base.url.is_some(),
        base.path.is_some(),
        base.debian.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    let source = match (&base.url, &base.path, &base.debian) {
        _ if given > 1 => {
            errs.push(
                at.at(raw.span(), "`base` names more than one image")
                    .with_help("keep one of `url` (with `sha256`), `path` or `debian`"),
            );
            None
        }
        (None, None, None) => {
            errs.push(at.at(
                raw.span(),
                "`base` needs `url` (with `sha256`), `path` or `debian`",
            ));
            None
        }
        (Some(u), _, _) => Some(url(u, base.sha256.is_some(), at, &mut errs)),
        (_, Some(p), _) => Some(path(p, at, &mut errs)),
        (_, _, Some(d)) => {
            errs.extend(crate::debian::check(d, at));
            if let Some(s) = &base.sha256 {
                errs.push(at.at(
                    s.span(),
                    "`sha256` checks a downloaded or local image, not one built from packages",
                ));
            }
            Some(BaseSource::Debian(d.get_ref().clone()))
        }
    };
    let sha256 = base.sha256.as_ref().map(|s| {
        let (digest, err) = sha256_problem(s, at);
        errs.extend(err);
        digest
    });
    match source {
        Some(source) => checked(Base { source, sha256 }, errs),
        None => Err(errs),
    }
}

fn url(
    u: &Spanned<String>,
    has_sha256: bool,
    at: &RecipeText,
    errs: &mut Vec<Located>,
) -> BaseSource {
    let url = u.get_ref();
    if let Some(why) = url_problem(url, &["http", "https"]) {
        errs.push(
            at.at(u.span(), why)
                .with_help("for a file on this machine use `path = \"...\"`"),
        );
    }
    if !has_sha256 {
        errs.push(at.at(u.span(), "a downloaded base image needs its `sha256`").with_help("copy it from the publisher's `.sha256` file beside the image; nasforge never trusts an unchecked download"));
    }
    BaseSource::Url(url.clone())
}

fn path(p: &Spanned<String>, at: &RecipeText, errs: &mut Vec<Located>) -> BaseSource {
    let lower = p.get_ref().to_ascii_lowercase();
    if ![".img", ".img.xz", ".img.gz", ".raw"]
        .iter()
        .any(|s| lower.ends_with(s))
    {
        errs.push(
            at.at(
                p.span(),
                format!("`{}` is not a disk image name", p.get_ref()),
            )
            .with_help("expected a .img, .img.xz or .img.gz file"),
        );
    }
    BaseSource::Path(at.dir().join(p.get_ref()))
}
