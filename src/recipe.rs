//! The recipe: one TOML file that says which image to start from, which
//! board it is for, and what to change. Parsing is strict (`deny_unknown_fields`)
//! and every error points at a line and column of the file; the schema is
//! documented in docs/recipe.md.

use crate::board::{Family, Model};
use crate::diag::{Located, LocatedErrors, did_you_mean};
use crate::packages::PackagesSection;
use crate::size::Size;
use crate::system::SystemSection;
use nasforge_engine::spec::{DeviceRecipe, Share, Storage};
use serde::Deserialize;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeFile {
    name: Option<Spanned<String>>,
    base: Spanned<BaseFile>,
    board: BoardFile,
    #[serde(default)]
    boot: Option<Spanned<Boot>>,
    #[serde(default)]
    kernel: Kernel,
    #[serde(default)]
    output: OutputFile,
    storage: Option<Storage>,
    #[serde(default)]
    shares: Vec<Share>,
    packages: Option<Spanned<PackagesSection>>,
    #[serde(default)]
    system: SystemSection,
    installer: Option<InstallerFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallerFile {
    /// A nasforge-setup built for the image's architecture.
    binary: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaseFile {
    url: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    sha256: Option<Spanned<String>>,
    debian: Option<Spanned<crate::debian::DebianBase>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BoardFile {
    model: Model,
    pcie_gen: Option<Spanned<u8>>,
    overlays: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Boot {
    /// Extra config.txt lines for this board's section.
    #[serde(default)]
    pub config: Vec<String>,
    #[serde(default)]
    pub cmdline_append: Vec<String>,
    #[serde(default)]
    pub cmdline_remove: Vec<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kernel {
    /// Capabilities the kernel the board boots must have; the build stops
    /// before changing anything when one is missing.
    #[serde(default)]
    pub require: Vec<crate::kernel::Capability>,
    /// `build = { source, sha256, defconfig, fragments }` as written.
    #[serde(default, rename = "build")]
    build_file: Option<Spanned<KernelBuildFile>>,
    /// The validated `build`: a kernel to compile and install.
    #[serde(skip)]
    pub build: Option<crate::kernel::build::BuildSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct KernelBuildFile {
    source: Spanned<String>,
    sha256: Option<Spanned<String>>,
    defconfig: Option<Spanned<String>>,
    fragments: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputFile {
    path: Option<Spanned<String>>,
    grow: Option<Size>,
    xz_level: Option<Spanned<u32>>,
}

/// A recipe that parsed and passed every check.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub file: PathBuf,
    /// The recipe as read, to place errors found after parsing.
    pub text: String,
    pub name: String,
    pub base: Base,
    pub board: Model,
    pub pcie_gen: Option<u8>,
    /// Armbian overlays to add, each as alternative names; the board's
    /// defaults unless the recipe names its own.
    pub overlays: Vec<Vec<String>>,
    pub boot: Boot,
    pub kernel: Kernel,
    pub output: Output,
    /// What `nasforge-setup` builds on the board at first boot; parsed and
    /// checked here with the board's own types.
    pub storage: Option<Storage>,
    pub shares: Vec<Share>,
    /// Packages staged for the offline first boot (with their dependencies);
    /// empty when the recipe needs none.
    pub packages: Vec<String>,
    /// Replaces the image's Debian archive address for package resolution.
    pub mirror: Option<String>,
    pub system: SystemSection,
    /// `[installer] binary`, resolved against the recipe's directory.
    pub installer_binary: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Url(String),
    Path(PathBuf),
    /// Built from Debian's packages (cached per machine).
    Debian(crate::debian::DebianBase),
}

#[derive(Debug, Clone)]
pub struct Base {
    pub source: Source,
    /// Lowercase hex; always present for a URL.
    pub sha256: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Output {
    /// Relative to the working directory, like any output a command writes.
    pub path: PathBuf,
    pub compress: bool,
    pub grow: Option<u64>,
    pub xz_level: u32,
}

const DEFAULT_XZ_LEVEL: u32 = 6;

impl Recipe {
    pub fn load(file: &Path) -> anyhow::Result<Recipe> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read recipe {}: {e}", file.display()))?;
        Ok(Recipe::parse(file, &text)?)
    }

    /// `base.path` is resolved against the recipe's own directory, so a recipe
    /// and the image beside it move together.
    pub fn parse(file: &Path, text: &str) -> Result<Recipe, LocatedErrors> {
        let raw: RecipeFile =
            toml::from_str(text).map_err(|e| LocatedErrors(vec![toml_error(file, text, &e)]))?;
        let mut errs = Vec::new();
        let mut err = |span: Range<usize>, msg: String, help: Option<String>| {
            let mut e = Located::new(file, text, Some(span), msg);
            e.help = help;
            errs.push(e);
        };

        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("image")
            .to_string();
        let name = match &raw.name {
            Some(n) => {
                let ok = !n.get_ref().is_empty()
                    && n.get_ref()
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                    && !n.get_ref().starts_with('.');
                if !ok {
                    err(
                        n.span(),
                        format!("name `{}` cannot be used as a file name", n.get_ref()),
                        Some("use letters, digits, `-`, `_` and `.`".into()),
                    );
                }
                n.get_ref().clone()
            }
            None => stem,
        };

        let base = raw.base.get_ref();
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
                err(
                    raw.base.span(),
                    "`base` names more than one image".into(),
                    Some("keep one of `url` (with `sha256`), `path` or `debian`".into()),
                );
                None
            }
            (None, None, None) => {
                err(
                    raw.base.span(),
                    "`base` needs `url` (with `sha256`), `path` or `debian`".into(),
                    None,
                );
                None
            }
            (Some(u), _, _) => {
                let url = u.get_ref();
                if let Some(why) = url_problem(url, &["http", "https"]) {
                    err(
                        u.span(),
                        why,
                        Some("for a file on this machine use `path = \"...\"`".into()),
                    );
                }
                if base.sha256.is_none() {
                    err(u.span(), "a downloaded base image needs its `sha256`".into(), Some("copy it from the publisher's `.sha256` file beside the image; nasforge never trusts an unchecked download".into()));
                }
                Some(Source::Url(url.clone()))
            }
            (_, Some(p), _) => {
                let dir = file.parent().unwrap_or(Path::new("."));
                let path = dir.join(p.get_ref());
                let lower = p.get_ref().to_ascii_lowercase();
                if ![".img", ".img.xz", ".img.gz", ".raw"]
                    .iter()
                    .any(|s| lower.ends_with(s))
                {
                    err(
                        p.span(),
                        format!("`{}` is not a disk image name", p.get_ref()),
                        Some("expected a .img, .img.xz or .img.gz file".into()),
                    );
                }
                Some(Source::Path(path))
            }
            (_, _, Some(d)) => {
                let deb = d.get_ref();
                let word = |s: &str| {
                    !s.is_empty()
                        && s.chars().all(|c| {
                            c.is_ascii_lowercase() || c.is_ascii_digit() || "-+.".contains(c)
                        })
                };
                if !word(&deb.suite) || !word(&deb.arch) {
                    err(
                        d.span(),
                        format!(
                            "`{}`/`{}` is not a Debian suite and architecture",
                            deb.suite, deb.arch
                        ),
                        Some("e.g. debian = { suite = \"bookworm\", arch = \"arm64\" }".into()),
                    );
                }
                if let Some(why) = deb
                    .mirror
                    .as_deref()
                    .and_then(|m| url_problem(m, MIRROR_SCHEMES))
                {
                    err(
                        d.span(),
                        format!("`mirror`: {why}"),
                        Some(MIRROR_HELP.into()),
                    );
                }
                for name in deb.packages.iter().filter(|n| !is_package_name(n)) {
                    err(
                        d.span(),
                        format!("`{}` is not a Debian package name", name.escape_debug()),
                        Some(PACKAGE_NAME_HELP.into()),
                    );
                }
                if let Some(s) = &base.sha256 {
                    err(
                        s.span(),
                        "`sha256` checks a downloaded or local image, not one built from packages"
                            .into(),
                        None,
                    );
                }
                Some(Source::Debian(deb.clone()))
            }
        };
        let sha256 = base.sha256.as_ref().map(|s| {
            let v = s.get_ref().trim().to_ascii_lowercase();
            if v.len() != 64 || !v.chars().all(|c| c.is_ascii_hexdigit()) {
                err(
                    s.span(),
                    format!("`{}` is not a sha256 (64 hexadecimal digits)", s.get_ref()),
                    None,
                );
            }
            v
        });

        let model = raw.board.model;
        let info = model.info();
        let pcie_gen = raw.board.pcie_gen.as_ref().map(|g| {
            if info.pcie_gen.is_none() {
                err(
                    g.span(),
                    format!("board `{model}` has no configurable PCIe generation"),
                    Some("`pcie_gen` applies to pi5 and cm5".into()),
                );
            } else if !(1..=3).contains(g.get_ref()) {
                err(
                    g.span(),
                    format!("PCIe generation {} does not exist here", g.get_ref()),
                    Some("use 1, 2 or 3 (3 is uncertified but works with the JMB585)".into()),
                );
            }
            *g.get_ref()
        });
        let overlays = match &raw.board.overlays {
            Some(o) => {
                if info.family != Family::Armbian {
                    err(
                        o.span(),
                        format!(
                            "`overlays` are Armbian device-tree overlays; board `{model}` does not use them"
                        ),
                        Some("on a Raspberry Pi, put `dtoverlay=` lines in `[boot] config`".into()),
                    );
                }
                // Each name becomes a word of armbianEnv.txt's `overlays=` line.
                for name in o.get_ref() {
                    let ok = !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c));
                    if !ok {
                        err(
                            o.span(),
                            format!("`{}` is not a device-tree overlay name", name.escape_debug()),
                            Some("letters, digits, `-`, `_`, `.` and `+`, as in /boot/dtb/*/overlay/<prefix>-<name>.dtbo".into()),
                        );
                    }
                }
                o.get_ref().iter().map(|name| vec![name.clone()]).collect()
            }
            None => info.overlays.clone(),
        };

        let boot = match &raw.boot {
            Some(b) => {
                if info.family != Family::Rpi {
                    err(
                        b.span(),
                        format!(
                            "`[boot]` edits config.txt and cmdline.txt, which board `{model}` does not have"
                        ),
                        Some("remove the section, or pick a Raspberry Pi board".into()),
                    );
                }
                for line in &b.get_ref().config {
                    if line.contains(char::is_control) || line.trim_start().starts_with('[') {
                        err(
                            b.span(),
                            format!(
                                "config line `{}` must be a single setting, not a section or several lines",
                                line.escape_debug()
                            ),
                            Some(format!(
                                "nasforge puts these lines in the board's own section ([{}])",
                                info.section.clone().unwrap_or_default()
                            )),
                        );
                    }
                }
                for token in b
                    .get_ref()
                    .cmdline_append
                    .iter()
                    .chain(&b.get_ref().cmdline_remove)
                {
                    // A quote would make the kernel read the arguments after
                    // it as part of this one.
                    if token.is_empty()
                        || token.contains(|c: char| c.is_whitespace() || c.is_control() || c == '"')
                    {
                        err(
                            b.span(),
                            format!("cmdline entry `{}` must be one word", token.escape_debug()),
                            Some(
                                "give each kernel argument as its own list item, without quotes"
                                    .into(),
                            ),
                        );
                    }
                }
                b.get_ref().clone()
            }
            None => Boot::default(),
        };

        let kernel_build = raw.kernel.build_file.as_ref().and_then(|b| {
            use crate::kernel::build::{BuildSpec, Defconfig, FragmentRef, KernelSource};
            let b_ref = b.get_ref();
            let dir = file.parent().unwrap_or(Path::new("."));
            let defaults = model.info().kernel;
            let mut ok = true;
            if info.family == Family::Generic {
                err(b.span(), format!("nasforge cannot install a kernel on board `{model}`"), defaults.unverified.clone());
                ok = false;
            }
            let src = b_ref.source.get_ref();
            let is_tarball = [".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tar.zst", ".tar"].iter().any(|e| src.ends_with(e));
            let sha = b_ref.sha256.as_ref().map(|s| {
                let v = s.get_ref().trim().to_ascii_lowercase();
                if v.len() != 64 || !v.chars().all(|c| c.is_ascii_hexdigit()) {
                    err(s.span(), format!("`{}` is not a sha256 (64 hexadecimal digits)", s.get_ref()), Some("`sha256sum` of the source tarball".into()));
                    ok = false;
                }
                v
            });
            if src.contains('<') || src.contains('>') {
                err(b_ref.source.span(), format!("`{src}` still holds a placeholder"), Some("replace the <...> part with the real commit or version".into()));
                ok = false;
            }
            let source = if src.starts_with("https://") || src.starts_with("http://") {
                if let Some(why) = url_problem(src, &["http", "https"]) {
                    err(b_ref.source.span(), why, None);
                    ok = false;
                }
                if !is_tarball {
                    err(b_ref.source.span(), format!("`{src}` is not a source tarball URL"), Some("use a .tar.gz or .tar.xz of the kernel tree (e.g. GitHub's /archive/<commit>.tar.gz), or a local tree path".into()));
                    ok = false;
                }
                match &sha {
                    Some(sha) => KernelSource::Url { url: src.clone(), sha256: sha.clone() },
                    None => {
                        err(b_ref.source.span(), "a downloaded kernel source needs its `sha256`".into(), Some("nasforge never builds from an unchecked download; `sha256sum` the tarball once".into()));
                        ok = false;
                        KernelSource::Url { url: src.clone(), sha256: String::new() }
                    }
                }
            } else if src.contains("://") {
                err(b_ref.source.span(), format!("`{src}` is neither an http(s) URL nor a path"), None);
                ok = false;
                KernelSource::Tree(PathBuf::new())
            } else if is_tarball {
                KernelSource::Tarball { path: dir.join(src), sha256: sha.clone() }
            } else {
                if let Some(s) = &b_ref.sha256 {
                    err(s.span(), "`sha256` applies to a source tarball, not a kernel tree".into(), Some("a tree is identified by its content; remove `sha256`".into()));
                    ok = false;
                }
                KernelSource::Tree(dir.join(src))
            };
            let defconfig = match &b_ref.defconfig {
                Some(d) => {
                    let v = d.get_ref();
                    if v.contains('/') || (v.ends_with(".config") && !v.ends_with("_defconfig")) {
                        Defconfig::File(dir.join(v))
                    } else if v.ends_with("config") && v.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
                        Defconfig::Target(v.clone())
                    } else {
                        err(d.span(), format!("`{v}` is neither a defconfig target nor a config file"), Some("a make target such as `bcm2712_defconfig`, or a path to a full .config".into()));
                        ok = false;
                        Defconfig::Target(String::new())
                    }
                }
                None => match &defaults.defconfig {
                    Some(d) => Defconfig::Target(d.clone()),
                    None => {
                        if info.family != Family::Generic {
                            err(b.span(), format!("no defconfig is known for board `{model}`"), Some("name one: `defconfig = \"...\"`".into()));
                        }
                        ok = false;
                        Defconfig::Target(String::new())
                    }
                },
            };
            let fragments = match &b_ref.fragments {
                Some(list) => {
                    if list.get_ref().is_empty() {
                        err(list.span(), "`fragments` is empty".into(), Some(format!("the board's default is {:?}", defaults.fragments)));
                        ok = false;
                    }
                    list.get_ref()
                        .iter()
                        .filter_map(|f| {
                            let name = f.get_ref();
                            if name.ends_with(".config") || name.contains('/') {
                                Some(FragmentRef::File(dir.join(name)))
                            } else if crate::kernel::fragments::bundled(name).is_some() {
                                Some(FragmentRef::Bundled(name.clone()))
                            } else {
                                let names: Vec<&str> = crate::kernel::fragments::BUNDLED.iter().map(|(n, _)| *n).collect();
                                let help = match did_you_mean(name, names.iter().copied()) {
                                    Some(s) => format!("did you mean `{s}`? (or a file: `my-options.config`)"),
                                    None => format!("bundled fragments: {}; or a file: `my-options.config`", names.join(", ")),
                                };
                                err(f.span(), format!("no kernel fragment `{name}`"), Some(help));
                                ok = false;
                                None
                            }
                        })
                        .collect()
                }
                None => defaults.fragments.iter().map(|f| FragmentRef::Bundled(f.clone())).collect(),
            };
            ok.then_some(BuildSpec { source, defconfig, fragments })
        });

        let out_path = match &raw.output.path {
            Some(p) => {
                let s = p.get_ref();
                if !(s.ends_with(".img") || s.ends_with(".img.xz")) {
                    err(
                        p.span(),
                        format!("output `{}` must end in .img or .img.xz", s.escape_debug()),
                        None,
                    );
                }
                // The name is written into the `.sha256` file beside it, one line.
                if s.contains(char::is_control) {
                    err(
                        p.span(),
                        format!("output `{}` holds a control character", s.escape_debug()),
                        Some("use a plain file name".into()),
                    );
                }
                PathBuf::from(s)
            }
            None => PathBuf::from(format!("out/{name}.img")),
        };
        let xz_level = match &raw.output.xz_level {
            Some(l) if *l.get_ref() > 9 => {
                err(
                    l.span(),
                    format!("xz level {} is out of range", l.get_ref()),
                    Some("use 0 (fastest) to 9 (smallest)".into()),
                );
                DEFAULT_XZ_LEVEL
            }
            Some(l) => *l.get_ref(),
            None => DEFAULT_XZ_LEVEL,
        };

        // What the storage plan needs on the board is always staged: the board
        // is offline at first boot, so a missing mkfs would fail there,
        // after the arrays exist.
        let required: Vec<String> =
            nasforge_engine::spec::required_packages(raw.storage.as_ref(), &raw.shares)
                .into_iter()
                .map(String::from)
                .collect();
        let (mut packages, mirror) = match &raw.packages {
            Some(p) => {
                let list = p.get_ref().install.clone().unwrap_or_default();
                for name in list.iter().filter(|n| !is_package_name(n)) {
                    err(
                        p.span(),
                        format!("`{}` is not a Debian package name", name.escape_debug()),
                        Some(PACKAGE_NAME_HELP.into()),
                    );
                }

                (list, p.get_ref().mirror.clone())
            }
            None => (vec![], None),
        };
        for r in required {
            if !packages.contains(&r) {
                packages.push(r);
            }
        }
        let installer_binary = raw.installer.as_ref().map(|i| {
            let path = file
                .parent()
                .unwrap_or(Path::new("."))
                .join(i.binary.get_ref());
            if !path.is_file() {
                err(
                    i.binary.span(),
                    format!("{} does not exist", path.display()),
                    Some(
                        "paths are relative to the recipe; build one with scripts/build-setup"
                            .into(),
                    ),
                );
            }
            path
        });
        if let Some(why) = raw
            .packages
            .as_ref()
            .and_then(|p| p.get_ref().mirror.as_deref())
            .and_then(|m| url_problem(m, MIRROR_SCHEMES))
        {
            errs.push(at_path(file, text, "packages.mirror", &why).with_help(MIRROR_HELP));
        }
        let smb_users: Vec<String> = raw
            .shares
            .iter()
            .filter_map(|s| s.smb.as_ref())
            .flat_map(|s| s.users.iter().cloned())
            .collect();
        for (path, message) in crate::system::validate(&raw.system, &smb_users)
            .into_iter()
            .chain(crate::system::wizard_problems(
                raw.storage.as_ref(),
                &raw.system,
            ))
        {
            errs.push(at_path(file, text, &path, &message));
        }

        let device = DeviceRecipe {
            storage: raw.storage,
            shares: raw.shares,
        };
        for p in device.problems() {
            errs.push(at_path(file, text, &p.path, &p.message));
        }

        if !errs.is_empty() {
            errs.sort_by_key(|e| (e.line, e.col));
            return Err(LocatedErrors(errs));
        }
        Ok(Recipe {
            file: file.to_path_buf(),
            text: text.to_string(),
            name,
            base: Base {
                source: source.expect("checked above"),
                sha256,
            },
            board: model,
            pcie_gen,
            overlays,
            boot,
            kernel: Kernel {
                build: kernel_build,
                ..raw.kernel
            },
            output: Output {
                compress: out_path.to_string_lossy().ends_with(".xz"),
                path: out_path,
                grow: raw.output.grow.map(|s| s.0),
                xz_level,
            },
            storage: device.storage,
            shares: device.shares,
            packages,
            mirror,
            system: raw.system,
            installer_binary,
        })
    }
}

const MIRROR_SCHEMES: &[&str] = &["http", "https", "file"];
const MIRROR_HELP: &str = "a Debian archive address such as `http://mirror.example/debian` or `file:///srv/mirror/debian`";
const PACKAGE_NAME_HELP: &str = "lowercase letters, digits, `+`, `-` and `.`";

/// Debian policy's package name: what apt and mmdebstrap's `--include=`
/// (a comma-separated list) read as exactly one package.
fn is_package_name(name: &str) -> bool {
    name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
}

/// Why `value` cannot be used as an address with one of `schemes`, if it
/// cannot. Whitespace and control characters are refused before parsing: the
/// URL parser silently drops tabs and newlines, while an apt source or a
/// command line would read them as the start of another field or word.
fn url_problem(value: &str, schemes: &[&str]) -> Option<String> {
    let shown = value.escape_debug();
    if value.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Some(format!(
            "`{shown}` holds whitespace or a control character, which no URL has"
        ));
    }
    let url = match reqwest::Url::parse(value) {
        Ok(u) => u,
        Err(e) => return Some(format!("`{shown}` is not a URL ({e})")),
    };
    if !schemes.contains(&url.scheme()) {
        let names: Vec<String> = schemes.iter().map(|s| format!("{s}:")).collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.concat(),
        };
        return Some(format!("`{shown}` is not an {list} URL"));
    }
    if url.scheme() == "file" {
        if url.to_file_path().is_err() {
            return Some(format!(
                "`{shown}` is not a file: URL of a path on this machine"
            ));
        }
    } else if url.host_str().is_none_or(str::is_empty) {
        return Some(format!("`{shown}` names no host"));
    }
    None
}

/// An error at a dotted path of the recipe (`system.users[0].name`).
fn at_path(file: &Path, text: &str, path: &str, message: &str) -> Located {
    let at = nasforge_engine::spec::locate(text, path);
    let (line, col) = at.map_or((1, 1), |l| (l.line, l.column));
    Located::at(file, text, line, col, format!("{path}: {message}"))
}

impl Recipe {
    /// What only a base of this kind refuses (a first user Raspberry Pi
    /// OS's userconf would not create), located like every other error.
    pub fn check_for(&self, vendor: crate::system::Vendor) -> Result<(), LocatedErrors> {
        let errs: Vec<Located> = crate::system::problems_for(vendor, &self.system)
            .iter()
            .map(|(path, message)| at_path(&self.file, &self.text, path, message))
            .collect();
        if errs.is_empty() {
            Ok(())
        } else {
            Err(LocatedErrors(errs))
        }
    }
}

/// toml/serde's error, placed on its line, with a suggestion for a misspelt key.
fn toml_error(file: &Path, text: &str, e: &toml::de::Error) -> Located {
    let message = e.message().trim().to_string();
    let mut located = Located::new(file, text, e.span(), message.clone());
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((word, choices)) = rest.split_once('`')
    {
        let valid: Vec<&str> = choices.split('`').skip(1).step_by(2).collect();
        if let Some(s) = did_you_mean(word, valid.iter().copied()) {
            located = located.with_help(format!("did you mean `{s}`?"));
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((word, choices)) = rest.split_once('`')
    {
        let valid: Vec<&str> = choices.split('`').skip(1).step_by(2).collect();
        if let Some(s) = did_you_mean(word, valid.iter().copied()) {
            located = located.with_help(format!("did you mean `{s}`?"));
        }
    }
    located
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Recipe, String> {
        Recipe::parse(Path::new("r.toml"), text).map_err(|e| e.to_string())
    }

    const MIN: &str = "[base]\npath = \"x.img\"\n[board]\nmodel = \"pi5\"\n";

    #[test]
    fn minimal_recipe_gets_defaults() {
        let r = parse(MIN).unwrap();
        assert_eq!(r.name, "r");
        assert_eq!(r.output.path, PathBuf::from("out/r.img"));
        assert!(!r.output.compress);
        assert_eq!(r.base.source, Source::Path(PathBuf::from("x.img")));
    }

    #[test]
    fn unknown_board_names_the_line_and_the_choices() {
        let e = parse("[base]\npath = \"x.img\"\n[board]\nmodel = \"pi6\"\n").unwrap_err();
        assert!(
            e.starts_with("r.toml:4:9: unknown variant `pi6`, expected one of `pi4`, `cm4`, `pi5`"),
            "{e}"
        );
        assert!(
            e.contains("did you mean `pi5`?") || e.contains("did you mean `pi4`?"),
            "{e}"
        );
    }

    #[test]
    fn unknown_key_suggests_the_right_one() {
        let e = parse(&format!("{MIN}pcie_gne = 3\n")).unwrap_err();
        assert!(e.starts_with("r.toml:5:1: unknown field `pcie_gne`"), "{e}");
        assert!(e.contains("did you mean `pcie_gen`?"), "{e}");
    }

    #[test]
    fn wrong_type_names_the_line() {
        let e = parse(&format!("{MIN}pcie_gen = \"three\"\n")).unwrap_err();
        assert!(
            e.starts_with("r.toml:5:12: invalid type: string \"three\", expected u8"),
            "{e}"
        );
    }

    #[test]
    fn url_without_sha256_is_refused() {
        let e = parse("[base]\nurl = \"https://example.org/a.img.xz\"\n[board]\nmodel = \"pi4\"\n")
            .unwrap_err();
        assert!(
            e.contains("r.toml:2:7: a downloaded base image needs its `sha256`"),
            "{e}"
        );
    }

    #[test]
    fn semantic_errors_are_all_reported_at_once() {
        let text = "[base]\npath = \"x.img\"\nsha256 = \"abc\"\n[board]\nmodel = \"pi4\"\npcie_gen = 3\n[output]\npath = \"a.iso\"\n";
        let e = parse(text).unwrap_err();
        assert!(e.contains("r.toml:3:10: `abc` is not a sha256"), "{e}");
        assert!(
            e.contains("r.toml:6:12: board `pi4` has no configurable PCIe generation"),
            "{e}"
        );
        assert!(
            e.contains("r.toml:8:8: output `a.iso` must end in .img or .img.xz"),
            "{e}"
        );
    }

    #[test]
    fn boot_section_is_for_raspberry_pis_only() {
        let e = parse(
            "[base]\npath = \"x.img\"\n[board]\nmodel = \"rock5b\"\n[boot]\nconfig = [\"a=1\"]\n",
        )
        .unwrap_err();
        assert!(e.contains("r.toml:5:1: `[boot]` edits config.txt"), "{e}");
    }

    #[test]
    fn storage_and_shares_are_checked_with_the_boards_own_rules() {
        let text = format!(
            "{MIN}[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid5\"\ndisks = {{ transport = \"sata\", count = 3 }}\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n[[shares]]\nname = \"data\"\npath = \"/srv/data\"\nsmb = {{ users = [\"admin\"] }}\n[[system.users]]\nname = \"admin\"\npassword = \"pw\"\n"
        );
        let r = parse(&text).unwrap();
        assert_eq!(r.storage.unwrap().arrays[0].name, "data");
        assert_eq!(r.shares.len(), 1);

        let bad = text.replace("level = \"raid5\"", "level = \"raid7\"");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("r.toml:9:9: unknown variant `raid7`"), "{e}");

        let bad = text.replace("mount = \"/srv/data\"", "mount = \"srv\"");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("r.toml:12:9: storage.arrays[0].mount:"), "{e}");
    }

    #[test]
    fn kernel_build_defaults_come_from_the_board() {
        use crate::kernel::build::{Defconfig, FragmentRef, KernelSource};
        let r = parse(&format!(
            "{MIN}[kernel]\nbuild = {{ source = \"../linux\" }}\n"
        ))
        .unwrap();
        let b = r.kernel.build.unwrap();
        assert_eq!(b.source, KernelSource::Tree(PathBuf::from("../linux")));
        assert_eq!(b.defconfig, Defconfig::Target("bcm2712_defconfig".into()));
        assert_eq!(
            b.fragments,
            ["sata", "md-raid", "nas"]
                .map(|f| FragmentRef::Bundled(f.into()))
                .to_vec()
        );
        let r = parse("[base]\npath = \"x.img\"\n[board]\nmodel = \"rock3a\"\n[kernel]\nbuild = { source = \"linux.tar.xz\", defconfig = \"configs/armbian.config\", fragments = [\"sata\", \"mine.config\"] }\n").unwrap();
        let b = r.kernel.build.unwrap();
        assert_eq!(
            b.source,
            KernelSource::Tarball {
                path: PathBuf::from("linux.tar.xz"),
                sha256: None
            }
        );
        assert_eq!(
            b.defconfig,
            Defconfig::File(PathBuf::from("configs/armbian.config"))
        );
        assert_eq!(
            b.fragments[1],
            FragmentRef::File(PathBuf::from("mine.config"))
        );
    }

    #[test]
    fn kernel_build_mistakes_are_located() {
        let text = format!(
            "{MIN}[kernel]\nbuild = {{ source = \"https://github.com/raspberrypi/linux/archive/<commit>.tar.gz\", fragments = [\"sata\", \"md-riad\"], defconfig = \"bcm 2712\" }}\n"
        );
        let e = parse(&text).unwrap_err();
        assert!(e.contains("r.toml:6:20: `https://github.com/raspberrypi/linux/archive/<commit>.tar.gz` still holds a placeholder"), "{e}");
        assert!(
            e.contains("r.toml:6:20: a downloaded kernel source needs its `sha256`"),
            "{e}"
        );
        assert!(
            e.contains("no kernel fragment `md-riad`") && e.contains("did you mean `md-raid`?"),
            "{e}"
        );
        assert!(
            e.contains("`bcm 2712` is neither a defconfig target nor a config file"),
            "{e}"
        );
        let e = parse(&format!(
            "{MIN}[kernel]\nbuild = {{ source = \"linux\", sha256 = \"{}\" }}\n",
            "a".repeat(64)
        ))
        .unwrap_err();
        assert!(
            e.contains("`sha256` applies to a source tarball, not a kernel tree"),
            "{e}"
        );
        let e = parse("[base]\npath = \"x.img\"\n[board]\nmodel = \"generic-arm64\"\n[kernel]\nbuild = { source = \"linux\" }\n").unwrap_err();
        assert!(
            e.contains("r.toml:6:9: nasforge cannot install a kernel on board `generic-arm64`"),
            "{e}"
        );
        let e = parse(&format!(
            "{MIN}[kernel]\nbuild = {{ source = \"linux\", colour = 1 }}\n"
        ))
        .unwrap_err();
        assert!(e.contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn rock5b_gets_its_sata_overlay_by_default() {
        let r = parse("[base]\npath = \"x.img.xz\"\n[board]\nmodel = \"rock5b\"\n").unwrap();
        assert_eq!(
            r.overlays,
            vec![vec!["sata1".to_string(), "rock-5b-sata".to_string()]]
        );
    }

    /// Every recipe string that reaches a file, a unit or a command line on
    /// the workstation's side, with a value that would add a line, a field
    /// or a word there. (Shares and storage are checked by the board's own
    /// rules; password hashes by their own test.)
    #[test]
    fn hostile_values_are_refused_where_they_would_break_out() {
        let pi = "[base]\npath = \"x.img\"\n[board]\nmodel = \"pi5\"\n";
        let armbian = "[base]\npath = \"x.img\"\n[board]\nmodel = \"rock5b\"\n";
        let user = "[[system.users]]\nname = \"admin\"\npassword = \"pw\"\n";
        let rows: &[(&str, String, &str)] = &[
            (
                "packages.mirror",
                format!("{pi}[packages]\nmirror = \"http://127.0.0.1:8765\\nTrusted: yes\"\n"),
                "r.toml:6:10: packages.mirror: `http://127.0.0.1:8765\\nTrusted: yes` holds whitespace or a control character",
            ),
            (
                "packages.mirror",
                format!("{pi}[packages]\nmirror = \"http://m.example/debian [trusted=yes]\"\n"),
                "holds whitespace or a control character",
            ),
            (
                "packages.mirror",
                format!("{pi}[packages]\nmirror = \"ftp://m.example/debian\"\n"),
                "is not an http:, https: or file: URL",
            ),
            (
                "packages.mirror",
                format!("{pi}[packages]\nmirror = \"file://elsewhere/srv/debian\"\n"),
                "is not a file: URL of a path on this machine",
            ),
            (
                "packages.install",
                format!("{pi}[packages]\ninstall = [\"htop\\nevil\"]\n"),
                "`htop\\nevil` is not a Debian package name",
            ),
            (
                "base.url",
                format!("[base]\nurl = \"https://e.example/a.img.xz\\r\\nX: y\"\nsha256 = \"{}\"\n[board]\nmodel = \"pi5\"\n", "a".repeat(64)),
                "holds whitespace or a control character",
            ),
            (
                "base.debian.mirror",
                "[base]\ndebian = { suite = \"trixie\", arch = \"arm64\", mirror = \"http://m.example/debian\\ndeb http://evil.example/ x main\" }\n[board]\nmodel = \"pi5\"\n".into(),
                "`mirror`: `http://m.example/debian\\ndeb http://evil.example/ x main` holds whitespace",
            ),
            (
                "base.debian.packages",
                "[base]\ndebian = { suite = \"trixie\", arch = \"arm64\", packages = [\"htop,evil\"] }\n[board]\nmodel = \"pi5\"\n".into(),
                "`htop,evil` is not a Debian package name",
            ),
            (
                "board.overlays",
                armbian.replace("rock5b\"\n", "rock5b\"\noverlays = [\"sata1\\nrootdev=/dev/sdz1\"]\n"),
                "`sata1\\nrootdev=/dev/sdz1` is not a device-tree overlay name",
            ),
            (
                "board.overlays",
                armbian.replace("rock5b\"\n", "rock5b\"\noverlays = [\"sata1 pcie\"]\n"),
                "is not a device-tree overlay name",
            ),
            (
                "boot.config",
                format!("{pi}[boot]\nconfig = [\"dtparam=audio=off\\r[all]\"]\n"),
                "config line `dtparam=audio=off\\r[all]` must be a single setting",
            ),
            (
                "boot.cmdline_append",
                format!("{pi}[boot]\ncmdline_append = [\"quiet\\u0000\"]\n"),
                "cmdline entry `quiet\\0` must be one word",
            ),
            (
                "boot.cmdline_append",
                format!("{pi}[boot]\ncmdline_append = [\"dyndbg=\\\"\"]\n"),
                "cmdline entry `dyndbg=\\\"` must be one word",
            ),
            (
                "boot.cmdline_remove",
                format!("{pi}[boot]\ncmdline_remove = [\"quiet\\nsplash\"]\n"),
                "must be one word",
            ),
            (
                "kernel.build.source",
                format!("{pi}[kernel]\nbuild = {{ source = \"https://e.example/l.tar.gz\\n\", sha256 = \"{}\" }}\n", "a".repeat(64)),
                "`https://e.example/l.tar.gz\\n` holds whitespace or a control character",
            ),
            (
                "kernel.build.defconfig",
                format!("{pi}[kernel]\nbuild = {{ source = \"../linux\", defconfig = \"bcm2712_defconfig\\nCONFIG_X=y\" }}\n"),
                "is neither a defconfig target nor a config file",
            ),
            (
                "output.path",
                format!("{pi}[output]\npath = \"out/r\\n.img\"\n"),
                "output `out/r\\n.img` holds a control character",
            ),
            (
                "name",
                format!("name = \"r\\nx\"\n{pi}"),
                "cannot be used as a file name",
            ),
            (
                "system.hostname",
                format!("{pi}[system]\nhostname = \"nas\\n10.0.0.1 evil\"\n"),
                "is not a valid host name",
            ),
            (
                "system.timezone",
                format!("{pi}[system]\ntimezone = \"UTC\\n\"\n"),
                "is not a time zone name",
            ),
            (
                "system.users.name",
                format!("{pi}{}", user.replace("\"admin\"", "\"admin:x:0:0::/root:/bin/sh\\nm\"")),
                "is not a valid user name",
            ),
            (
                "system.users.ssh_authorized_keys",
                format!("{pi}{user}ssh_authorized_keys = [\"ssh-ed25519 AAAA k\\nssh-rsa AAAA evil\"]\n"),
                "not an SSH public key line",
            ),
        ];
        for (key, text, want) in rows {
            let e = parse(text).expect_err(key);
            assert!(e.contains(want), "{key}: expected `{want}` in:\n{e}");
        }
    }

    #[test]
    fn mirrors_of_every_accepted_kind_pass() {
        for m in [
            "http://127.0.0.1:8765/debian",
            "https://m.example/debian/",
            "file:///srv/mirror/debian",
        ] {
            let r = parse(&format!("{MIN}[packages]\nmirror = \"{m}\"\n")).unwrap();
            assert_eq!(r.mirror.as_deref(), Some(m));
        }
    }
}
