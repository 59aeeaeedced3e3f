//! `[kernel] build`: a kernel cross-compiled for arm64 from a source tarball
//! (downloaded and sha256-checked, or local) or a local tree, configured from
//! a defconfig plus `kernel-configs/` fragments, verified, and cached.
//!
//! Steps, each logged to `build.log`: extract the source (once per source
//! digest) → `make <defconfig>` → merge the fragments (as merge_config.sh
//! does) → `make olddefconfig` → verify that every fragment value survived
//! (else stop, naming each dropped option and its unmet dependency) →
//! `make Image modules dtbs` → `modules_install` + `depmod -b` and
//! `dtbs_install` into a staging directory. The build never touches the
//! source tree: objects go to `O=` in the cache.
//!
//! The result is cached in `<cache>/kernels/builds/<key>`, keyed by the
//! source digest, the defconfig and the fragments' settings; a second run
//! with the same inputs does not compile.

mod built;
mod cache;
mod configure;
mod digest;
mod make;
mod progress;
mod remedy;
mod source;
mod spec;
mod staging;

pub use built::{BuildInfo, Built};
pub use cache::{cache_key, cached_dir};
pub use configure::{Configured, check_config};
pub use remedy::remedy;
pub use spec::{BuildSpec, Defconfig, FragmentRef, KernelSource};

use crate::io::lock::Lock;
use crate::kernel::fragments::{self, Fragment};
use crate::kernel::kconfig::Config;
use anyhow::Result;
use cache::locate;
use configure::configure;
pub(crate) use make::tool;
use make::{Make, check_tools};
pub(crate) use progress::Progress;
use source::prepare_source;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Appended to the kernel release (`6.6.51-v8-16k-nasforge`), so the
/// build's modules never land in the stock kernel's /lib/modules directory.
pub const LOCALVERSION: &str = "-nasforge";
const ARCH: &str = "arm64";
/// Bumped when the cached layout or the build steps change.
const FORMAT: &str = "nasforge-kernel-build 2";

fn say(label: &str, msg: impl AsRef<str>) {
    eprintln!("{label:>10}  {}", msg.as_ref());
}

/// Points a failure at the full build log.
fn with_log(log: &Path) -> impl Fn(anyhow::Error) -> anyhow::Error + '_ {
    move |e| e.context(format!("kernel build failed; full log: {}", log.display()))
}

/// Builds (or finds in the cache) the kernel `spec` describes: source,
/// configure, compile, stage, then the staging directory becomes the result.
pub fn build(spec: &BuildSpec, cache: &Path) -> Result<Built> {
    let total = Instant::now();
    let frags = spec.load_fragments()?;
    let (digest, done) = locate(spec, cache)?;
    let key = done
        .file_name()
        .expect("a key")
        .to_string_lossy()
        .into_owned();
    let _lock = Lock::take(
        &kernels_dir(cache)
            .join("builds")
            .join(format!("{key}.lock")),
    )?;
    if done.join("result.json").is_file() {
        let mut b = Built::open(&done)?;
        b.timings.push(("kernel (cached)", total.elapsed()));
        say(
            "kernel",
            format!("{} from the cache ({})", b.info.release, done.display()),
        );
        return Ok(b);
    }
    check_tools()?;
    let mut timings = Vec::new();
    let t = Instant::now();
    let src = prepare_source(spec, cache, Some(&digest))?;
    timings.push(("kernel source", t.elapsed()));

    let (staging, obj) = work_dirs(cache, &key)?;
    let log_path = staging.join("build.log");
    let log = fs::File::create(&log_path)?;
    let mut make = Make {
        src: &src.tree,
        obj: &obj,
        log,
    };

    let t = Instant::now();
    let configured = configure_checked(spec, &mut make, &frags, &log_path)?;
    timings.push(("kernel configure", t.elapsed()));
    let release = make
        .output(&["-s", "kernelrelease"])
        .map_err(with_log(&log_path))?;
    let modules = Config::parse(&configured.config).get("MODULES") == "y";

    let compile = compile(&mut make, &release, modules, &log_path)?;
    timings.push(("kernel compile", compile));

    let t = Instant::now();
    staging::stage(&mut make, &staging, &release, modules, &log_path)?;
    timings.push(("kernel install", t.elapsed()));

    let info = BuildInfo {
        release,
        source: src.describe.clone(),
        source_digest: src.digest.clone(),
        defconfig: spec.defconfig.to_string(),
        fragments: frags.iter().map(|f| f.name.clone()).collect(),
        modules,
        compile_seconds: compile.as_secs_f64(),
        source_tree: src.tree.clone(),
    };
    drop(make);
    let built = finish(info, &staging, &obj, done, timings)?;
    say(
        "kernel",
        format!(
            "built {} in {:.0}s ({})",
            built.info.release,
            total.elapsed().as_secs_f64(),
            built.dir.display()
        ),
    );
    Ok(built)
}

/// A fresh staging directory for the result, and the object directory.
fn work_dirs(cache: &Path, key: &str) -> Result<(PathBuf, PathBuf)> {
    let staging = kernels_dir(cache)
        .join("builds")
        .join(format!("{key}.partial"));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(&staging)?;
    // Objects survive a failed or interrupted build, so the next attempt
    // continues where this one stopped.
    let obj = kernels_dir(cache).join("work").join(key);
    fs::create_dir_all(&obj)?;
    Ok((staging, obj))
}

/// Configures, and stops the build when Kconfig dropped a fragment value.
fn configure_checked(
    spec: &BuildSpec,
    make: &mut Make,
    frags: &[Fragment],
    log: &Path,
) -> Result<Configured> {
    say(
        "kernel",
        format!(
            "configuring {} + {}",
            spec.defconfig,
            frags
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(" + ")
        ),
    );
    let configured = configure(spec, make, frags).map_err(with_log(log))?;
    if !configured.dropped.is_empty() {
        return Err(with_log(log)(anyhow::anyhow!(
            "{}\n(the merged configuration is {}/.config)",
            fragments::report(&configured.dropped),
            make.obj.display()
        )));
    }
    Ok(configured)
}

/// `make Image [modules] dtbs` on every core; returns how long it took.
fn compile(make: &mut Make, release: &str, modules: bool, log: &Path) -> Result<Duration> {
    let jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let j = format!("-j{jobs}");
    let mut targets = vec![j.as_str(), "Image"];
    if modules {
        targets.push("modules");
    }
    targets.push("dtbs");
    let t = Instant::now();
    say(
        "kernel",
        format!(
            "compiling {release}: make {} (log: {})",
            targets.join(" "),
            log.display()
        ),
    );
    make.run("compiling", &targets, true)
        .map_err(with_log(log))?;
    let compile = t.elapsed();
    say(
        "kernel",
        format!("compiled in {:.0}s", compile.as_secs_f64()),
    );
    Ok(compile)
}

/// What of the object tree an out-of-tree module build reads (kbuild's own
/// list for `make modules_prepare`, and the symbols modpost checks against):
/// megabytes, where the objects are gigabytes for a full defconfig.
const MODULE_TREE: &[&str] = &[
    "Makefile",
    ".config",
    "Module.symvers",
    "include",
    "arch/arm64/include",
    "scripts",
    "source",
];

/// Writes `result.json`, keeps the module-build part of the objects and
/// moves the staging directory into place; the rest of the objects go.
fn finish(
    info: BuildInfo,
    staging: &Path,
    obj: &Path,
    done: PathBuf,
    timings: Vec<(&'static str, Duration)>,
) -> Result<Built> {
    if info.modules {
        let tree = staging.join("build");
        for part in MODULE_TREE {
            let from = obj.join(part);
            if from.symlink_metadata().is_ok() {
                let to = tree.join(part);
                fs::create_dir_all(to.parent().expect("under the tree"))?;
                fs::rename(&from, &to)?;
            }
        }
    }
    fs::write(
        staging.join("result.json"),
        serde_json::to_string_pretty(&info)?,
    )?;
    fs::rename(staging, &done)?;
    let _ = fs::remove_dir_all(obj);
    Ok(Built {
        dir: done,
        info,
        cached: false,
        timings,
    })
}

/// Everything nasforge keeps for kernels: sources, builds, work trees.
fn kernels_dir(cache: &Path) -> PathBuf {
    cache.join("kernels")
}
