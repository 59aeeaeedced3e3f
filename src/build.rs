//! `nasforge build`: from a recipe to a finished image, in order:
//! source → working copy → checks → changes → output. The working copy lives
//! beside the output under a temporary name; nothing appears under the
//! output's name unless every step succeeded.

use crate::board::{Family, Model};
use crate::image::Image;
use crate::io::decompress::Format;
use crate::kernel::{self, Booted, build::Built};
use crate::manifest::Secret;
use crate::manifest::{self, Change, Manifest};
use crate::output::{self, Paths};
use crate::recipe::{BaseSource, Recipe};
use crate::rootfs::Prepared;
use crate::size::human;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::NamedTempFile;

pub struct Options {
    pub cache: PathBuf,
    /// Overrides the recipe's `[output] path`.
    pub output: Option<PathBuf>,
    /// Ask the package mirrors again even when the cached lists are fresh.
    pub refresh: bool,
    /// Replace files at the output path that no earlier build wrote.
    pub force: bool,
}

pub struct Report {
    pub paths: Paths,
    pub manifest: Manifest,
    pub timings: Vec<(&'static str, Duration)>,
}

struct Timer {
    start: Instant,
    phases: Vec<(&'static str, Duration)>,
}

impl Timer {
    fn start() -> Self {
        Timer {
            start: Instant::now(),
            phases: vec![],
        }
    }

    fn lap(&mut self, name: &'static str) {
        let now = Instant::now();
        self.phases.push((name, now - self.start));
        self.start = now;
    }
}

fn say(label: &str, msg: impl AsRef<str>) {
    eprintln!("{label:>10}  {}", msg.as_ref());
}

/// What the customisation did, for the manifest: the kernel the board now
/// boots, the changes and the warnings, in order.
struct Edits {
    booted: Booted,
    changes: Vec<Change>,
    warnings: Vec<String>,
}

impl Edits {
    fn warn(&mut self, warnings: Vec<String>) {
        for w in &warnings {
            eprintln!("warning: {w}");
        }
        self.warnings.extend(warnings);
    }
}

pub fn build(recipe: &Recipe, opts: &Options) -> Result<Report> {
    let mut timer = Timer::start();
    say(
        "recipe",
        format!(
            "{} ({}) for {}",
            recipe.name,
            recipe.file.display(),
            recipe.board.info().description
        ),
    );

    let (source_path, location) = fetch_base(recipe, &opts.cache)?;
    timer.lap("fetch");

    let paths = Paths::for_image(opts.output.as_deref().unwrap_or(&recipe.output.path));
    let (work, format) = working_copy(recipe, &source_path, &paths, opts.force)?;
    timer.lap("decompress");

    let mut image = Image::open(work.path()).context("the base image")?;
    describe_layout(&image);
    crate::boot::check_family(&image, recipe.board)?;
    if let Some(root) = image.ext4() {
        recipe.check_for(crate::system::Vendor::detect(&root)?)?;
    }
    let (built_kernel, booted) = check_kernel(&image, recipe, &opts.cache)?;
    timer.lap("kernel check");

    let zfs = if crate::zfs::wanted(recipe) {
        let release = built_kernel
            .as_ref()
            .map(|b| b.info.release.as_str())
            .or(booted.version.as_deref());
        let staged = crate::zfs::prepare(
            &image,
            recipe,
            release,
            built_kernel.as_ref(),
            &opts.cache,
            opts.refresh,
        )?;
        say("zfs", staged.describe());
        timer.lap("zfs modules");
        Some(staged)
    } else {
        None
    };

    let helpers = kept_filesystem_helpers(&image, recipe, built_kernel.as_ref(), &booted)?;
    let prepared = crate::rootfs::prepare(
        &image,
        recipe,
        &helpers,
        &opts.cache,
        opts.refresh,
        zfs.as_ref(),
    )?;
    if let Some(r) = &prepared.resolved {
        say("packages", r.summary());
    }
    timer.lap("packages");

    let mut edits = Edits {
        booted,
        changes: vec![],
        warnings: vec![],
    };
    if let Some(change) = grow(&mut image, work.path(), recipe, &prepared)? {
        edits.changes.push(change);
        timer.lap("grow");
    }

    edit_boot(&image, recipe, &mut edits)?;
    if let Some(b) = &built_kernel {
        install_kernel(&image, recipe, b, &mut edits)?;
    }
    edit_rootfs(&image, recipe, prepared, &mut edits)?;
    for c in crate::root_uuid::renew(&image)? {
        say_changed(&c);
        edits.changes.push(c);
    }
    image.reload().context("re-reading the customised image")?;
    let secrets = scan_secrets(&image, &paths)?;
    timer.lap("customise");

    let base = manifest::Base {
        location,
        sha256: recipe.base.sha256.clone(),
        format: format.name().into(),
    };
    let manifest = write_output(work, &paths, recipe, opts.force, base, edits, secrets)?;
    timer.lap("output");
    say_written(&paths, &manifest);
    Ok(Report {
        paths,
        manifest,
        timings: timer.phases,
    })
}

/// The base image on this machine (downloaded, built from Debian's packages
/// or the recipe's local file), and how the manifest names where it came from.
fn fetch_base(recipe: &Recipe, cache: &Path) -> Result<(PathBuf, String)> {
    Ok(match &recipe.base.source {
        BaseSource::Url(url) => {
            let sha = recipe
                .base
                .sha256
                .as_deref()
                .expect("recipe checks that URLs have a sha256");
            let cached = crate::fetch::cached_path(cache, url, sha).is_file();
            let p = crate::fetch::fetch(url, sha, cache)?;
            say(
                "base",
                format!("{url}{}", if cached { " (cached)" } else { "" }),
            );
            (p, url.clone())
        }
        BaseSource::Debian(d) => {
            let p = d.image(cache)?;
            say(
                "base",
                format!(
                    "Debian {} {} built from packages ({})",
                    d.suite,
                    d.arch,
                    p.display()
                ),
            );
            (p.clone(), format!("debian:{}/{}", d.suite, d.arch))
        }
        BaseSource::Path(p) => {
            if !p.is_file() {
                bail!(
                    "base image {} does not exist (recipe {}: `[base] path` is relative to the recipe's directory)",
                    p.display(),
                    recipe.file.display()
                );
            }
            say("base", p.display().to_string());
            (p.clone(), p.display().to_string())
        }
    })
}

/// The base image unpacked (and its digest checked) into a temporary file
/// beside the output, once the output may be replaced.
fn working_copy(
    recipe: &Recipe,
    source_path: &Path,
    paths: &Paths,
    force: bool,
) -> Result<(NamedTempFile, Format)> {
    // Publishing removes the old output first: it must never be the base.
    if let (Ok(a), Ok(b)) = (
        std::fs::canonicalize(source_path),
        std::fs::canonicalize(&paths.image),
    ) && a == b
    {
        bail!(
            "the output {} is the base image itself; write the output elsewhere (`[output] path` or -o)",
            paths.image.display()
        );
    }
    output::check_replaceable(paths, force)?;
    let work = output::temp_beside(paths, "work")?;
    let format = crate::io::unpack(source_path, work.as_file(), recipe.base.sha256.as_deref())?;
    Ok((work, format))
}

/// Which kernel the board boots and, with `[kernel] build`, the kernel built
/// to replace it: the recipe's requirements are checked on the one that will
/// boot.
fn check_kernel(image: &Image, recipe: &Recipe, cache: &Path) -> Result<(Option<Built>, Booted)> {
    let board = recipe.board;
    // No stock kernel carries ZFS: `crate::zfs` builds its modules after
    // this check, for whichever kernel it settles on.
    let required: Vec<kernel::Capability> = recipe
        .kernel
        .require
        .iter()
        .copied()
        .filter(|c| *c != kernel::Capability::Zfs)
        .collect();
    let kernels = kernel::installed(image)?;
    let versions: Vec<String> = kernels.iter().map(|k| k.version.clone()).collect();
    let booted = kernel::booted(image, board, &versions)?;
    if recipe.kernel.build.is_none() {
        refuse_unbootable(
            recipe,
            &kernel::firmware::problems(image, board, &booted, &kernels)?,
        )?;
    }
    let built_kernel = recipe
        .kernel
        .build
        .as_ref()
        .map(|spec| kernel::build::build(spec, cache))
        .transpose()?;
    if let Some(b) = &built_kernel {
        let report = b.check(board, &required)?;
        let caps = describe_required(&report, board, &required);
        say(
            "kernel",
            format!(
                "{board} boots {} now; it gets the built kernel {}{}",
                booted.version.as_deref().unwrap_or("an unknown kernel"),
                b.info.release,
                if caps.is_empty() {
                    String::new()
                } else {
                    format!(": {}", caps.join(", "))
                }
            ),
        );
    } else if required.is_empty() {
        say(
            "kernel",
            format!(
                "{} boots {} ({})",
                board,
                booted.version.as_deref().unwrap_or("an unknown kernel"),
                booted.reason
            ),
        );
    } else {
        let report = kernel::require(board, &booted, &kernels, &required)?;
        let caps = describe_required(&report, board, &required);
        say(
            "kernel",
            format!("{board} boots {}: {}", report.version, caps.join(", ")),
        );
    }
    Ok((built_kernel, booted))
}

/// The FUSE helpers the board needs for a kept disk whose filesystem the
/// recipe leaves open (or the wizard's), judged against the kernel it will
/// boot; each is said with why.
fn kept_filesystem_helpers(
    image: &Image,
    recipe: &Recipe,
    built: Option<&Built>,
    booted: &Booted,
) -> Result<Vec<String>> {
    let kernel = match (built, &booted.version) {
        (Some(b), _) => Some(b.files()),
        (None, Some(version)) => kernel::installed(image)?
            .into_iter()
            .find(|k| &k.version == version),
        (None, None) => None,
    };
    let Some(kernel) = kernel else {
        return Ok(vec![]);
    };
    let helpers = kernel::filesystems::fuse_helpers(recipe.storage.as_ref(), &kernel);
    for (package, why) in &helpers {
        say("packages", format!("{package} staged: {why}"));
    }
    Ok(helpers.into_iter().map(|(p, _)| p.to_string()).collect())
}

/// Whether the recipe's board can boot the base image's own kernel as a NAS
/// (`nasforge check` of a local image; a `[kernel] build` is checked once
/// built).
pub fn check_boots(image: &Image, recipe: &Recipe) -> Result<()> {
    if recipe.kernel.build.is_some() {
        return Ok(());
    }
    let kernels = kernel::installed(image)?;
    let versions: Vec<String> = kernels.iter().map(|k| k.version.clone()).collect();
    let booted = kernel::booted(image, recipe.board, &versions)?;
    refuse_unbootable(
        recipe,
        &kernel::firmware::problems(image, recipe.board, &booted, &kernels)?,
    )
}

/// Stops the build, at the recipe's `[board] model`, when the board's
/// firmware could not boot the image as a NAS (`kernel::firmware`).
fn refuse_unbootable(recipe: &Recipe, problems: &[String]) -> Result<()> {
    if problems.is_empty() {
        return Ok(());
    }
    let board = recipe.board;
    let info = board.info();
    let base = match info.family {
        Family::Armbian => "an Armbian image for this board",
        _ => {
            "a Raspberry Pi OS image (its kernels carry every Raspberry Pi's device trees and drivers)"
        }
    };
    let build = match (&info.kernel.defconfig, &info.kernel.tree) {
        (Some(d), Some(t)) => format!("a `[kernel] build` of {t} ({d})"),
        _ => "a `[kernel] build`".into(),
    };
    let at = crate::section::RecipeText {
        file: &recipe.file,
        text: &recipe.text,
    };
    Err(crate::diag::LocatedErrors(vec![
        at.at_path(
            "board.model",
            &format!(
                "the {} cannot boot this image: {}",
                info.description,
                problems.join("; ")
            ),
        )
        .with_help(format!(
            "build from {base}, add {build}, or set the model of the board this image is for"
        )),
    ])
    .into())
}

/// Grows the root partition by `[output] grow` plus whatever room the staged
/// packages need beyond the free space; the change, when there is one.
fn grow(
    image: &mut Image,
    work: &Path,
    recipe: &Recipe,
    prepared: &Prepared,
) -> Result<Option<Change>> {
    let needed = prepared.space_needed();
    let free = match image.ext4() {
        Some(root) if needed > 0 => root.free_bytes()?,
        _ => u64::MAX,
    };
    let extra = recipe.output.grow.unwrap_or(0) + needed.saturating_sub(free);
    if extra == 0 {
        return Ok(None);
    }
    let before = image.root().map(|p| p.size).unwrap_or(0);
    image.layout = crate::image::grow::grow_root(work, &image.layout, extra)?;
    let after = image.root().map(|p| p.size).unwrap_or(0);
    say(
        "grow",
        format!("root partition {} -> {}", human(before), human(after)),
    );
    let why = match recipe.output.grow {
        Some(g) if g == extra => format!("[output] grow = {}", human(g)),
        _ => format!(
            "room for the staged packages ({} needed, {} free)",
            human(needed),
            human(free)
        ),
    };
    Ok(Some(Change {
        file: "partition table".into(),
        before_sha256: None,
        after_sha256: None,
        why,
        details: vec![format!(
            "root partition and filesystem grown from {} to {}",
            human(before),
            human(after)
        )],
    }))
}

fn edit_boot(image: &Image, recipe: &Recipe, edits: &mut Edits) -> Result<()> {
    let applied = crate::boot::apply(image, &recipe.boot_asked())?;
    for c in &applied.changes {
        say("changed", format!("{}: {}", c.file, c.details.join("; ")));
    }
    if applied.changes.is_empty() {
        say("boot", "settings already as the recipe wants them");
    }
    edits.warn(applied.warnings);
    edits.changes.extend(applied.changes);
    Ok(())
}

/// A change as the build prints it: the file, then what changed in it.
fn say_changed(c: &Change) {
    if c.details.is_empty() {
        say("changed", &c.file);
    } else {
        say("changed", format!("{}: {}", c.file, c.details.join("; ")));
    }
}

/// Installs the `[kernel] build` kernel, which then is the one the board boots.
fn install_kernel(image: &Image, recipe: &Recipe, built: &Built, edits: &mut Edits) -> Result<()> {
    let (installed, now, summary) =
        kernel::install::install_checked(image, recipe.board, built, &recipe.kernel.require)?;
    for c in &installed.changes {
        say_changed(c);
    }
    edits.warn(installed.warnings);
    let kernels = kernel::installed(image)?;
    refuse_unbootable(
        recipe,
        &kernel::firmware::problems(image, recipe.board, &now, &kernels)?,
    )?;
    say("kernel", summary);
    edits.changes.extend(installed.changes);
    edits.booted = now;
    Ok(())
}

fn edit_rootfs(
    image: &Image,
    recipe: &Recipe,
    prepared: Prepared,
    edits: &mut Edits,
) -> Result<()> {
    let (changes, warnings) = crate::rootfs::apply(image, recipe, prepared)?;
    for c in &changes {
        say("changed", &c.file);
    }
    edits.warn(warnings);
    edits.changes.extend(changes);
    Ok(())
}

/// Password equivalents in the finished image: the output is then written
/// readable only by its owner, which is said here.
fn scan_secrets(image: &Image, paths: &Paths) -> Result<Vec<Secret>> {
    let secrets = crate::system::secrets::scan(image)?;
    if !secrets.is_empty() {
        let mut kinds: Vec<&str> = secrets.iter().map(|s| s.kind.describe()).collect();
        kinds.dedup();
        say(
            "private",
            format!(
                "{} is written readable only by you (mode 0600): it holds {}; the manifest lists where",
                paths.image.display(),
                kinds.join(" and ")
            ),
        );
    }
    Ok(secrets)
}

/// Compresses the working copy if asked, then publishes it with its .sha256
/// and manifest under the output's name.
fn write_output(
    work: NamedTempFile,
    paths: &Paths,
    recipe: &Recipe,
    force: bool,
    base: manifest::Base,
    edits: Edits,
    secrets: Vec<Secret>,
) -> Result<Manifest> {
    let written =
        output::finish_image(work, paths, recipe.output.compress, recipe.output.xz_level)?;
    let manifest = Manifest {
        nasforge: env!("CARGO_PKG_VERSION"),
        recipe: recipe.file.display().to_string(),
        name: recipe.name.clone(),
        board: recipe.board.name().into(),
        base,
        output: manifest::Output {
            path: paths.image.display().to_string(),
            sha256: written.file_sha256.clone(),
            image_sha256: written.image_sha256.clone(),
            image_size: written.image_size,
        },
        kernel: Some(edits.booted),
        changes: edits.changes,
        secrets,
        warnings: edits.warnings,
    };
    let json = serde_json::to_string_pretty(&manifest)?;
    output::publish(written, paths, &json, !manifest.secrets.is_empty(), force)?;
    Ok(manifest)
}

fn say_written(paths: &Paths, manifest: &Manifest) {
    say(
        "wrote",
        format!(
            "{} (sha256 {})",
            paths.image.display(),
            manifest.output.sha256
        ),
    );
    say(
        "",
        format!(
            "{} and {}",
            paths.sha256.display(),
            paths.manifest.display()
        ),
    );
}

fn describe_layout(image: &Image) {
    let l = &image.layout;
    let parts: Vec<String> = l
        .partitions
        .iter()
        .map(|p| {
            format!(
                "{} ({}, {})",
                p.label
                    .as_deref()
                    .or(p.name.as_deref())
                    .unwrap_or("unlabelled"),
                p.fs,
                human(p.size)
            )
        })
        .collect();
    say(
        "image",
        format!("{}, {}: {}", human(l.disk_size), l.kind, parts.join(", ")),
    );
}

/// `sata ✓ (ahci=m, libata=m)` for each capability the recipe requires.
fn describe_required(
    report: &kernel::KernelReport,
    board: Model,
    required: &[kernel::Capability],
) -> Vec<String> {
    let extras = kernel::board_extras(board);
    required
        .iter()
        .map(|c| report.describe(*c, &extras))
        .collect()
}
