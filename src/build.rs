//! `nasforge build`: from a recipe to a finished image, in order:
//! source → working copy → checks → changes → output. The working copy lives
//! beside the output under a temporary name; nothing appears under the
//! output's name unless every step succeeded.

use crate::board::Model;
use crate::image::Image;
use crate::kernel;
use crate::manifest::{self, Change, Manifest};
use crate::output::{self, Paths};
use crate::recipe::{BaseSource, Recipe};
use crate::size::human;
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    fn lap(&mut self, name: &'static str) {
        let now = Instant::now();
        self.phases.push((name, now - self.start));
        self.start = now;
    }
}

fn say(label: &str, msg: impl AsRef<str>) {
    eprintln!("{label:>10}  {}", msg.as_ref());
}

pub fn build(recipe: &Recipe, opts: &Options) -> Result<Report> {
    let mut timer = Timer {
        start: Instant::now(),
        phases: vec![],
    };
    let board = recipe.board;
    let info = board.info();
    say(
        "recipe",
        format!(
            "{} ({}) for {}",
            recipe.name,
            recipe.file.display(),
            info.description
        ),
    );

    let (source_path, location) = match &recipe.base.source {
        BaseSource::Url(url) => {
            let sha = recipe
                .base
                .sha256
                .as_deref()
                .expect("recipe checks that URLs have a sha256");
            let cached = crate::fetch::cached_path(&opts.cache, url, sha).is_file();
            let p = crate::fetch::fetch(url, sha, &opts.cache)?;
            say(
                "base",
                format!("{url}{}", if cached { " (cached)" } else { "" }),
            );
            (p, url.clone())
        }
        BaseSource::Debian(d) => {
            let p = d.image(&opts.cache)?;
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
    };
    timer.lap("fetch");

    let paths = Paths::for_image(opts.output.as_deref().unwrap_or(&recipe.output.path));
    // Publishing removes the old output first: it must never be the base.
    if let (Ok(a), Ok(b)) = (
        std::fs::canonicalize(&source_path),
        std::fs::canonicalize(&paths.image),
    ) && a == b
    {
        bail!(
            "the output {} is the base image itself; write the output elsewhere (`[output] path` or -o)",
            paths.image.display()
        );
    }
    output::check_replaceable(&paths, opts.force)?;
    let work = output::temp_beside(&paths, "work")?;
    let format = crate::io::unpack(&source_path, work.as_file(), recipe.base.sha256.as_deref())?;
    timer.lap("decompress");

    let mut image = Image::open(work.path()).context("the base image")?;
    describe_layout(&image);
    crate::boot::check_family(&image, board)?;
    if let Some(root) = image.ext4() {
        recipe.check_for(crate::system::Vendor::detect(&root)?)?;
    }

    let kernels = kernel::installed(&image)?;
    let versions: Vec<String> = kernels.iter().map(|k| k.version.clone()).collect();
    let mut booted = kernel::booted(&image, board, &versions)?;
    // `[kernel] build`: the kernel to be installed is what gets checked.
    let built_kernel = recipe
        .kernel
        .build
        .as_ref()
        .map(|spec| kernel::build::build(spec, &opts.cache))
        .transpose()?;
    if let Some(b) = &built_kernel {
        let report = b.check(board, &recipe.kernel.require)?;
        let caps = describe_required(&report, board, &recipe.kernel.require);
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
    } else if recipe.kernel.require.is_empty() {
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
        let report = kernel::require(board, &booted, &kernels, &recipe.kernel.require)?;
        let caps = describe_required(&report, board, &recipe.kernel.require);
        say(
            "kernel",
            format!("{board} boots {}: {}", report.version, caps.join(", ")),
        );
    }
    timer.lap("kernel check");

    let prepared = crate::rootfs::prepare(&image, recipe, &opts.cache, opts.refresh)?;
    if let Some(r) = &prepared.resolved {
        say("packages", r.summary());
    }
    timer.lap("packages");

    // Room for the staged packages is made automatically, on top of what
    // `[output] grow` asks for.
    let needed = prepared.space_needed();
    let free = match image.ext4() {
        Some(root) if needed > 0 => root.free_bytes()?,
        _ => u64::MAX,
    };
    let extra = recipe.output.grow.unwrap_or(0) + needed.saturating_sub(free);
    let mut changes: Vec<Change> = Vec::new();
    if extra > 0 {
        let before = image.root().map(|p| p.size).unwrap_or(0);
        image.layout = crate::image::grow::grow_root(work.path(), &image.layout, extra)?;
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
        changes.push(Change {
            file: "partition table".into(),
            before_sha256: None,
            after_sha256: None,
            why,
            details: vec![format!(
                "root partition and filesystem grown from {} to {}",
                human(before),
                human(after)
            )],
        });
        timer.lap("grow");
    }

    let applied = crate::boot::apply(&image, recipe)?;
    for c in &applied.changes {
        say("changed", format!("{}: {}", c.file, c.details.join("; ")));
    }
    if applied.changes.is_empty() {
        say("boot", "settings already as the recipe wants them");
    }
    for w in &applied.warnings {
        eprintln!("warning: {w}");
    }
    let mut warnings = applied.warnings;
    changes.extend(applied.changes);
    if let Some(b) = &built_kernel {
        let (installed, now, summary) =
            kernel::install::install_checked(&image, board, b, &recipe.kernel.require)?;
        for c in &installed.changes {
            say(
                "changed",
                format!(
                    "{}{}",
                    c.file,
                    if c.details.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", c.details.join("; "))
                    }
                ),
            );
        }
        installed
            .warnings
            .iter()
            .for_each(|w| eprintln!("warning: {w}"));
        warnings.extend(installed.warnings);
        say("kernel", summary);
        changes.extend(installed.changes);
        booted = now;
    }
    let (rootfs_changes, rootfs_warnings) = crate::rootfs::apply(&image, recipe, prepared)?;
    for c in &rootfs_changes {
        say("changed", &c.file);
    }
    for w in &rootfs_warnings {
        eprintln!("warning: {w}");
    }
    warnings.extend(rootfs_warnings);
    changes.extend(rootfs_changes);
    image.reload().context("re-reading the customised image")?;
    let secrets = crate::system::secrets::scan(&image)?;
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
    timer.lap("customise");

    let written =
        output::finish_image(work, &paths, recipe.output.compress, recipe.output.xz_level)?;
    let manifest = Manifest {
        nasforge: env!("CARGO_PKG_VERSION"),
        recipe: recipe.file.display().to_string(),
        name: recipe.name.clone(),
        board: board.name().into(),
        base: manifest::Base {
            location,
            sha256: recipe.base.sha256.clone(),
            format: format.name().into(),
        },
        output: manifest::Output {
            path: paths.image.display().to_string(),
            sha256: written.file_sha256.clone(),
            image_sha256: written.image_sha256.clone(),
            image_size: written.image_size,
        },
        kernel: Some(booted),
        changes,
        secrets,
        warnings,
    };
    let json = serde_json::to_string_pretty(&manifest)?;
    output::publish(
        written,
        &paths,
        &json,
        !manifest.secrets.is_empty(),
        opts.force,
    )?;
    timer.lap("output");
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
    Ok(Report {
        paths,
        manifest,
        timings: timer.phases,
    })
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
