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

use super::fragments::{self, Fragment};
use super::kconfig::{Config, Kconfig};
use super::{Capability, KernelFiles, KernelReport};
use crate::board::Model;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Appended to the kernel release (`6.6.51-v8-16k-nasforge`), so the
/// build's modules never land in the stock kernel's /lib/modules directory.
pub const LOCALVERSION: &str = "-nasforge";
const ARCH: &str = "arm64";
/// Bumped when the cached layout or the build steps change.
const FORMAT: &str = "nasforge-kernel-build 1";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// A tarball to download; always with its sha256.
    Url { url: String, sha256: String },
    /// A tarball on this machine; checked when a sha256 is given.
    Tarball {
        path: PathBuf,
        sha256: Option<String>,
    },
    /// An unpacked kernel tree on this machine (built out of tree, unchanged).
    Tree(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Defconfig {
    /// A `make` target: `bcm2712_defconfig`, `defconfig`, `allnoconfig`.
    Target(String),
    /// A full `.config` file (Armbian's `linux-rockchip64-current.config`).
    File(PathBuf),
}

impl std::fmt::Display for Defconfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Defconfig::Target(t) => f.write_str(t),
            Defconfig::File(p) => write!(f, "{}", p.display()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FragmentRef {
    /// One of `kernel-configs/` by name (`sata`), built into nasforge.
    Bundled(String),
    /// A fragment file of the user's, relative to the recipe.
    File(PathBuf),
}

impl FragmentRef {
    pub fn load(&self) -> Result<Fragment> {
        match self {
            FragmentRef::Bundled(n) => {
                let text = fragments::bundled(n)
                    .with_context(|| format!("no bundled kernel fragment `{n}`"))?;
                Fragment::parse(&format!("{n}.config"), text)
            }
            FragmentRef::File(p) => {
                let text = fs::read_to_string(p)
                    .with_context(|| format!("reading kernel fragment {}", p.display()))?;
                Fragment::parse(&p.display().to_string(), &text)
            }
        }
    }
}

/// A validated `[kernel] build = { ... }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSpec {
    pub source: KernelSource,
    pub defconfig: Defconfig,
    pub fragments: Vec<FragmentRef>,
}

/// Per-board defaults from kernel-configs/boards.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoardKernel {
    pub defconfig: Option<String>,
    /// Why there is no defconfig for this board.
    pub unverified: Option<String>,
    #[serde(default)]
    pub fragments: Vec<String>,
    /// A source URL pattern for the remedy text.
    pub source: Option<String>,
    /// Which tree that is, in words.
    pub tree: Option<String>,
}

pub fn board_kernel(board: Model) -> BoardKernel {
    let all: std::collections::BTreeMap<String, BoardKernel> =
        toml::from_str(include_str!("../../kernel-configs/boards.toml"))
            .unwrap_or_else(|e| panic!("kernel-configs/boards.toml is invalid: {e}"));
    all.get(board.name()).cloned().unwrap_or_default()
}

/// The `[kernel]` lines that would fix a kernel lacking SATA or md on
/// `board`, for the error that reports it.
pub fn remedy(board: Model, require: &[Capability]) -> String {
    let b = board_kernel(board);
    let Some(defconfig) = &b.defconfig else {
        return format!(
            "nasforge cannot build a kernel for {board}: {}",
            b.unverified
                .as_deref()
                .unwrap_or("no defconfig is known for it")
        );
    };
    let frags: Vec<String> = b.fragments.iter().map(|f| format!("\"{f}\"")).collect();
    let req: Vec<String> = require.iter().map(|c| format!("\"{c}\"")).collect();
    let source = b.source.as_deref().unwrap_or("path/to/linux");
    format!(
        "To build a kernel that has them, add to the recipe:\n\n[kernel]\nrequire = [{}]\nbuild = {{ source = \"{source}\", sha256 = \"<sha256 of that file>\", defconfig = \"{defconfig}\", fragments = [{}] }}\n\nwhere the source is {}; or `source = \"path/to/linux\"` for a kernel tree on this machine (no sha256). Then `nasforge kernel build RECIPE` builds it (cached) and `nasforge build RECIPE` installs it beside the stock kernel.",
        req.join(", "),
        frags.join(", "),
        b.tree
            .as_deref()
            .unwrap_or("the kernel tree for this board"),
    )
}

/// A finished build in the cache.
#[derive(Debug, Clone)]
pub struct Built {
    pub dir: PathBuf,
    pub info: BuildInfo,
    /// True when it came from the cache without compiling.
    pub cached: bool,
    pub timings: Vec<(&'static str, Duration)>,
}

/// `result.json` of a cached build.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildInfo {
    /// `make kernelrelease`: the /lib/modules directory name.
    pub release: String,
    pub source: String,
    pub source_digest: String,
    pub defconfig: String,
    pub fragments: Vec<String>,
    pub modules: bool,
    pub compile_seconds: f64,
}

impl Built {
    /// The arm64 `Image` (uncompressed).
    pub fn image(&self) -> PathBuf {
        self.dir.join("Image")
    }
    /// `dtbs_install` output: `broadcom/*.dtb`, `overlays/*.dtbo`, `rockchip/*.dtb`, ...
    pub fn dtbs(&self) -> PathBuf {
        self.dir.join("dtbs")
    }
    /// `lib/modules/<release>` after modules_install and depmod.
    pub fn modules(&self) -> PathBuf {
        self.dir
            .join("modules/lib/modules")
            .join(&self.info.release)
    }
    pub fn config(&self) -> PathBuf {
        self.dir.join("config")
    }
    pub fn system_map(&self) -> PathBuf {
        self.dir.join("System.map")
    }
    pub fn log(&self) -> PathBuf {
        self.dir.join("build.log")
    }

    /// What the capability check reads, from the built files.
    pub fn files(&self) -> KernelFiles {
        let read = |p: PathBuf| fs::read_to_string(p).ok();
        KernelFiles {
            version: self.info.release.clone(),
            modules_builtin: read(self.modules().join("modules.builtin")),
            modules_dep: read(self.modules().join("modules.dep")),
            config: read(self.config()),
        }
    }

    /// Opens a cached build.
    pub fn open(dir: &Path) -> Result<Built> {
        let text = fs::read_to_string(dir.join("result.json"))
            .with_context(|| format!("reading {}/result.json", dir.display()))?;
        let info: BuildInfo = serde_json::from_str(&text).with_context(|| {
            format!(
                "{}/result.json is damaged; delete the directory",
                dir.display()
            )
        })?;
        Ok(Built {
            dir: dir.to_path_buf(),
            info,
            cached: true,
            timings: vec![],
        })
    }

    /// The capability report of this kernel, failing like the image check
    /// does when a required capability is missing (a fragment list without
    /// md-raid, say), before anything is installed.
    pub fn check(&self, board: Model, required: &[Capability]) -> Result<KernelReport> {
        let extras = super::board_extras(board);
        let report = self.files().report(&extras);
        let missing = report.missing(required);
        if !missing.is_empty() {
            bail!(
                "the kernel built by `[kernel] build` ({}) lacks {}; add the fragments that provide them (bundled: {})",
                self.info.release,
                missing.join(" and "),
                fragments::BUNDLED
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(report)
    }
}

fn say(label: &str, msg: impl AsRef<str>) {
    eprintln!("{label:>10}  {}", msg.as_ref());
}

/// The cross compiler prefix: none on an arm64 host.
fn cross_compile() -> &'static str {
    if std::env::consts::ARCH == "aarch64" {
        ""
    } else {
        "aarch64-linux-gnu-"
    }
}

/// Where a tool is: in PATH, or in the sbin directories a non-root PATH
/// on Debian leaves out (depmod).
fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn in_path(name: &str) -> bool {
    tool(name).is_some()
}

fn check_tools() -> Result<()> {
    let cc = format!("{}gcc", cross_compile());
    let needed = [
        "make",
        "gcc",
        cc.as_str(),
        "bc",
        "bison",
        "flex",
        "tar",
        "depmod",
    ];
    let missing: Vec<&str> = needed.iter().copied().filter(|t| !in_path(t)).collect();
    if !missing.is_empty() {
        bail!(
            "building a kernel needs {} on this machine; scripts/setup installs them (gcc-aarch64-linux-gnu, bc, bison, flex, libssl-dev, libelf-dev, kmod)",
            missing.join(", ")
        );
    }
    Ok(())
}

fn sha256_file(path: &Path) -> Result<String> {
    let f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(crate::io::hash::hash_file(&f, |_| {})?)
}

/// Digest of a kernel tree: every regular file's path and content, and
/// symlinks' targets, in sorted order; `.git` is skipped.
fn tree_digest(root: &Path) -> Result<String> {
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel))
            .with_context(|| format!("reading {}", root.join(&rel).display()))?
        {
            let e = e?;
            let name = e.file_name();
            if rel.as_os_str().is_empty() && name == ".git" {
                continue;
            }
            let r = rel.join(&name);
            let t = e.file_type()?;
            if t.is_dir() {
                stack.push(r);
            } else {
                files.push((r, t.is_symlink()));
            }
        }
    }
    files.sort();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for (r, link) in files {
        h.update(r.to_string_lossy().as_bytes());
        h.update([0]);
        let p = root.join(&r);
        if link {
            h.update(fs::read_link(&p)?.to_string_lossy().as_bytes());
        } else {
            let mut f = fs::File::open(&p)?;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
        }
        h.update([0]);
    }
    Ok(hex::encode(h.finalize()))
}

/// An exclusive lock on a file in the cache, held while it lives, so two
/// nasforge runs do not extract or build into the same directory.
struct Lock(#[allow(dead_code)] fs::File);

impl Lock {
    fn take(path: &Path) -> Result<Lock> {
        if let Some(d) = path.parent() {
            fs::create_dir_all(d)?;
        }
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this struct owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            say(
                "kernel",
                format!("waiting for another nasforge using {}", path.display()),
            );
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
                bail!(
                    "cannot lock {}: {}",
                    path.display(),
                    std::io::Error::last_os_error()
                );
            }
        }
        Ok(Lock(f))
    }
}

/// The source, ready to build from.
struct Source {
    tree: PathBuf,
    digest: String,
    describe: String,
    _lock: Option<Lock>,
}

fn kernels_dir(cache: &Path) -> PathBuf {
    cache.join("kernels")
}

fn source_digest(spec: &BuildSpec, cache: &Path) -> Result<(String, Option<PathBuf>)> {
    Ok(match &spec.source {
        KernelSource::Url { url, sha256 } => {
            // A tarball is unpacked only once per digest, so a cached copy
            // is hashed again like base images and packages are.
            let (p, cached) = crate::fetch::fetch_rehashed(url, sha256, cache)?;
            say(
                "kernel",
                format!("source {url}{}", if cached { " (cached)" } else { "" }),
            );
            (sha256.clone(), Some(p))
        }
        KernelSource::Tarball { path, sha256 } => {
            if !path.is_file() {
                bail!(
                    "kernel source {} does not exist (`[kernel] build` source is relative to the recipe)",
                    path.display()
                );
            }
            let got = sha256_file(path)?;
            if let Some(want) = sha256
                && *want != got
            {
                bail!(
                    "sha256 mismatch for kernel source {}:\n  expected {want} (from the recipe)\n       got {got}",
                    path.display()
                );
            }
            (got, Some(path.clone()))
        }
        KernelSource::Tree(dir) => {
            if !dir.join("Makefile").is_file() || !dir.join("Kconfig").is_file() {
                bail!(
                    "{} is not a kernel source tree (no Makefile and Kconfig at its top)",
                    dir.display()
                );
            }
            let t = Instant::now();
            let d = tree_digest(dir)?;
            say(
                "kernel",
                format!(
                    "source tree {} (digest {} in {:.1}s)",
                    dir.display(),
                    &d[..12],
                    t.elapsed().as_secs_f64()
                ),
            );
            (d, None)
        }
    })
}

/// Unpacks a tarball into `<cache>/kernels/src/<digest>` once.
fn unpack(tarball: &Path, digest: &str, cache: &Path) -> Result<(PathBuf, Lock)> {
    let base = kernels_dir(cache).join("src");
    let lock = Lock::take(&base.join(format!("{digest}.lock")))?;
    let done = base.join(digest);
    let find_top = |dir: &Path| -> Result<PathBuf> {
        if dir.join("Makefile").is_file() && dir.join("Kconfig").is_file() {
            return Ok(dir.to_path_buf());
        }
        for e in fs::read_dir(dir)? {
            let p = e?.path();
            if p.join("Makefile").is_file() && p.join("Kconfig").is_file() {
                return Ok(p);
            }
        }
        bail!(
            "{} does not hold a kernel source tree (no directory with a Makefile and Kconfig)",
            tarball.display()
        )
    };
    if done.is_dir() {
        return Ok((find_top(&done)?, lock));
    }
    let partial = base.join(format!("{digest}.partial"));
    if partial.exists() {
        fs::remove_dir_all(&partial)?;
    }
    fs::create_dir_all(&partial)?;
    let t = Instant::now();
    say("kernel", format!("unpacking {}", tarball.display()));
    let out = Command::new("tar")
        .arg("-xf")
        .arg(tarball)
        .arg("-C")
        .arg(&partial)
        .arg("--no-same-owner")
        .output()
        .context("running tar")?;
    if !out.status.success() {
        let _ = fs::remove_dir_all(&partial);
        bail!(
            "unpacking {} failed: {}",
            tarball.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    find_top(&partial)?;
    fs::rename(&partial, &done)?;
    say(
        "kernel",
        format!("unpacked in {:.1}s", t.elapsed().as_secs_f64()),
    );
    Ok((find_top(&done)?, lock))
}

fn prepare_source(spec: &BuildSpec, cache: &Path, known: Option<&str>) -> Result<Source> {
    let (digest, tarball) = match (known, &spec.source) {
        (Some(d), KernelSource::Tarball { path, .. }) => (d.to_string(), Some(path.clone())),
        (Some(d), KernelSource::Tree(_)) => (d.to_string(), None),
        _ => source_digest(spec, cache)?,
    };
    let describe = match &spec.source {
        KernelSource::Url { url, .. } => url.clone(),
        KernelSource::Tarball { path, .. } => path.display().to_string(),
        KernelSource::Tree(d) => d.display().to_string(),
    };
    match tarball {
        Some(t) => {
            let (tree, lock) = unpack(&t, &digest, cache)?;
            Ok(Source {
                tree,
                digest,
                describe,
                _lock: Some(lock),
            })
        }
        None => {
            let KernelSource::Tree(tree) = &spec.source else {
                unreachable!()
            };
            Ok(Source {
                tree: tree.clone(),
                digest,
                describe,
                _lock: None,
            })
        }
    }
}

/// The cache key of a build: source digest, defconfig (its content for a
/// file) and every fragment's settings, in order. Comments in fragments
/// do not change it.
pub fn cache_key(source_digest: &str, spec: &BuildSpec) -> Result<String> {
    let mut h = Sha256::new();
    h.update(format!(
        "{FORMAT}\nsource {source_digest}\narch {ARCH}\nlocalversion {LOCALVERSION}\n"
    ));
    match &spec.defconfig {
        Defconfig::Target(t) => h.update(format!("defconfig {t}\n")),
        Defconfig::File(p) => h.update(format!("defconfig-file {}\n", sha256_file(p)?)),
    }
    for f in &spec.fragments {
        let frag = f.load()?;
        h.update(format!(
            "fragment {}\n",
            frag.name.rsplit('/').next().unwrap_or(&frag.name)
        ));
        for s in &frag.settings {
            h.update(s.render());
            h.update("\n");
        }
    }
    Ok(hex::encode(h.finalize()))
}

fn result_dir(cache: &Path, key: &str) -> PathBuf {
    kernels_dir(cache).join("builds").join(key)
}

/// The directory a build of `spec` is cached in, whether or not it exists
/// yet. A download is not needed for this (its sha256 is its digest); a
/// local tarball or tree is hashed.
pub fn cached_dir(spec: &BuildSpec, cache: &Path) -> Result<PathBuf> {
    Ok(locate(spec, cache)?.1)
}

fn locate(spec: &BuildSpec, cache: &Path) -> Result<(String, PathBuf)> {
    let digest = match &spec.source {
        KernelSource::Url { sha256, .. } => sha256.clone(),
        _ => source_digest(spec, cache)?.0,
    };
    let dir = result_dir(cache, &cache_key(&digest, spec)?);
    Ok((digest, dir))
}

/// Streams a child's output into the log and a progress display.
struct Make<'a> {
    src: &'a Path,
    obj: &'a Path,
    log: fs::File,
}

impl Make<'_> {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("make");
        c.arg("-C")
            .arg(self.src)
            .arg(format!("O={}", self.obj.display()))
            .arg(format!("ARCH={ARCH}"))
            .arg(format!("CROSS_COMPILE={}", cross_compile()))
            .arg(format!("LOCALVERSION={LOCALVERSION}"))
            .args(args)
            .env("KBUILD_BUILD_USER", "nasforge")
            .env("KBUILD_BUILD_HOST", "nasforge")
            .stdin(Stdio::null());
        c
    }

    /// Runs make; its stdout and stderr go to the log, and lines that name
    /// a build step count on the progress display.
    fn run(&mut self, what: &str, args: &[&str], progress: bool) -> Result<()> {
        writeln!(self.log, "\n### make {}", args.join(" "))?;
        let (reader, writer) = std::io::pipe()?;
        let mut cmd = self.command(args);
        cmd.stdout(writer.try_clone()?).stderr(writer);
        let mut child = cmd
            .spawn()
            .context("running make (is it installed? scripts/setup installs it)")?;
        drop(cmd);
        let bar = if progress {
            Some(Progress::new(what))
        } else {
            None
        };
        let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        for line in BufReader::new(reader).lines() {
            let line = line.unwrap_or_default();
            writeln!(self.log, "{line}")?;
            if let Some(b) = &bar {
                b.line(&line);
            }
            tail.push_back(line);
            if tail.len() > 40 {
                tail.pop_front();
            }
        }
        let status = child.wait()?;
        if let Some(b) = bar {
            b.finish();
        }
        self.log.flush()?;
        if !status.success() {
            bail!(
                "`make {}` failed ({what}); the last lines:\n{}",
                args.join(" "),
                tail.into_iter().collect::<Vec<_>>().join("\n")
            );
        }
        Ok(())
    }

    fn output(&self, args: &[&str]) -> Result<String> {
        let out = self.command(args).output().context("running make")?;
        if !out.status.success() {
            bail!(
                "`make {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

/// A spinner with a step count on a terminal; a line a minute otherwise.
struct Progress {
    bar: indicatif::ProgressBar,
    tty: bool,
    start: Instant,
    last_print: std::cell::Cell<Instant>,
    steps: std::cell::Cell<u64>,
    what: String,
}

impl Progress {
    fn new(what: &str) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .expect("valid template"),
        );
        if tty {
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        Progress {
            bar,
            tty,
            start: Instant::now(),
            last_print: std::cell::Cell::new(Instant::now()),
            steps: std::cell::Cell::new(0),
            what: what.to_string(),
        }
    }

    fn line(&self, line: &str) {
        // kbuild's quiet lines: "  CC      drivers/ata/ahci.o"
        let t = line.trim_start();
        let verb = t.split_whitespace().next().unwrap_or("");
        let is_step = line.starts_with("  ")
            && !verb.is_empty()
            && verb.len() <= 8
            && verb.chars().all(|c| {
                c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '[' || c == ']'
            });
        if !is_step {
            return;
        }
        self.steps.set(self.steps.get() + 1);
        let msg = format!(
            "{}: {} steps, {}",
            self.what,
            self.steps.get(),
            t.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        if self.tty {
            self.bar.set_message(msg);
        } else if self.last_print.get().elapsed() >= Duration::from_secs(60) {
            self.last_print.set(Instant::now());
            say(
                "kernel",
                format!("{msg} ({}s)", self.start.elapsed().as_secs()),
            );
        }
    }

    fn finish(self) {
        self.bar.finish_and_clear();
    }
}

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

/// `make <defconfig>`, merge, `make olddefconfig`, verify. The `.config`
/// ends up in `obj`.
fn configure(spec: &BuildSpec, make: &mut Make, frags: &[Fragment]) -> Result<Configured> {
    let obj_config = make.obj.join(".config");
    let base = match &spec.defconfig {
        Defconfig::Target(t) => {
            if !defconfig_name_ok(t) {
                bail!(
                    "`{t}` is not a defconfig make target (expected a name like bcm2712_defconfig)"
                );
            }
            if t.ends_with("_defconfig")
                && !make
                    .src
                    .join("arch")
                    .join(ARCH)
                    .join("configs")
                    .join(t)
                    .is_file()
            {
                let mut have: Vec<String> =
                    fs::read_dir(make.src.join("arch").join(ARCH).join("configs"))
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
            fs::read_to_string(&obj_config).context("reading the defconfig's .config")?
        }
        Defconfig::File(p) => {
            fs::read_to_string(p).with_context(|| format!("reading config file {}", p.display()))?
        }
    };
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
    let frags = spec
        .fragments
        .iter()
        .map(FragmentRef::load)
        .collect::<Result<Vec<_>>>()?;
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

/// Builds (or finds in the cache) the kernel `spec` describes.
pub fn build(spec: &BuildSpec, cache: &Path) -> Result<Built> {
    let total = Instant::now();
    let frags = spec
        .fragments
        .iter()
        .map(FragmentRef::load)
        .collect::<Result<Vec<_>>>()?;
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

    let staging = kernels_dir(cache)
        .join("builds")
        .join(format!("{key}.partial"));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(&staging)?;
    // Objects survive a failed or interrupted build, so the next attempt
    // continues where this one stopped.
    let obj = kernels_dir(cache).join("work").join(&key);
    fs::create_dir_all(&obj)?;
    let log_path = staging.join("build.log");
    let log = fs::File::create(&log_path)?;
    let mut make = Make {
        src: &src.tree,
        obj: &obj,
        log,
    };
    let with_log = |e: anyhow::Error| {
        e.context(format!(
            "kernel build failed; full log: {}",
            log_path.display()
        ))
    };

    let t = Instant::now();
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
    let configured = configure(spec, &mut make, &frags).map_err(with_log)?;
    if !configured.dropped.is_empty() {
        return Err(with_log(anyhow::anyhow!(
            "{}\n(the merged configuration is {}/.config)",
            fragments::report(&configured.dropped),
            obj.display()
        )));
    }
    timings.push(("kernel configure", t.elapsed()));
    let release = make.output(&["-s", "kernelrelease"]).map_err(with_log)?;
    let final_config = Config::parse(&configured.config);
    let modules = final_config.get("MODULES") == "y";

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
            log_path.display()
        ),
    );
    make.run("compiling", &targets, true).map_err(with_log)?;
    let compile = t.elapsed();
    timings.push(("kernel compile", compile));
    say(
        "kernel",
        format!("compiled in {:.0}s", compile.as_secs_f64()),
    );

    let t = Instant::now();
    let mod_root = staging.join("modules");
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
        .map_err(with_log)?;
    }
    let mod_dir = mod_root.join("lib/modules").join(&release);
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
        .arg(&mod_root)
        .arg("-F")
        .arg(obj.join("System.map"))
        .arg(&release)
        .output()
        .context("running depmod")?;
    if !out.status.success() {
        return Err(with_log(anyhow::anyhow!(
            "depmod -b {} {release} failed: {}",
            mod_root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let dtbs = staging.join("dtbs");
    let path = format!("INSTALL_DTBS_PATH={}", dtbs.display());
    make.run("dtbs_install", &[&path, "dtbs_install"], false)
        .map_err(with_log)?;
    fs::create_dir_all(&dtbs)?;
    let readme = src
        .tree
        .join("arch")
        .join(ARCH)
        .join("boot/dts/overlays/README");
    if readme.is_file() && dtbs.join("overlays").is_dir() {
        fs::copy(&readme, dtbs.join("overlays/README"))?;
    }
    fs::copy(
        obj.join("arch").join(ARCH).join("boot/Image"),
        staging.join("Image"),
    )
    .context("copying the built Image")?;
    fs::copy(obj.join(".config"), staging.join("config"))?;
    fs::copy(obj.join("System.map"), staging.join("System.map"))?;
    timings.push(("kernel install", t.elapsed()));

    let info = BuildInfo {
        release,
        source: src.describe.clone(),
        source_digest: src.digest.clone(),
        defconfig: spec.defconfig.to_string(),
        fragments: frags.iter().map(|f| f.name.clone()).collect(),
        modules,
        compile_seconds: compile.as_secs_f64(),
    };
    fs::write(
        staging.join("result.json"),
        serde_json::to_string_pretty(&info)?,
    )?;
    drop(make);
    fs::rename(&staging, &done)?;
    // The objects are gigabytes for a full defconfig; the result is all
    // that is needed from here on.
    let _ = fs::remove_dir_all(&obj);
    say(
        "kernel",
        format!(
            "built {} in {:.0}s ({})",
            info.release,
            total.elapsed().as_secs_f64(),
            done.display()
        ),
    );
    Ok(Built {
        dir: done,
        info,
        cached: false,
        timings,
    })
}

/// `nasforge kernel build RECIPE [--config-only]`: the report it prints.
pub fn command(recipe: &crate::recipe::Recipe, cache: &Path, config_only: bool) -> Result<String> {
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
        let c = check_config(spec, cache)?;
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
    let built = build(spec, cache)?;
    let required: Vec<Capability> = if recipe.kernel.require.is_empty() {
        Capability::ALL.to_vec()
    } else {
        recipe.kernel.require.clone()
    };
    let extras = super::board_extras(recipe.board);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_board_has_kernel_data_and_named_fragments_exist() {
        for m in Model::ALL {
            let b = board_kernel(m);
            assert!(
                b.defconfig.is_some() != b.unverified.is_some(),
                "{m}: exactly one of defconfig/unverified"
            );
            for f in &b.fragments {
                assert!(fragments::bundled(f).is_some(), "{m}: unknown fragment {f}");
            }
        }
        assert_eq!(
            board_kernel(Model::Pi5).defconfig.as_deref(),
            Some("bcm2712_defconfig")
        );
        assert_eq!(
            board_kernel(Model::Cm4).defconfig.as_deref(),
            Some("bcm2711_defconfig")
        );
    }

    #[test]
    fn remedy_gives_the_recipe_lines_for_the_board() {
        let r = remedy(Model::Pi5, &[Capability::Sata, Capability::Md]);
        assert!(r.contains("[kernel]\nrequire = [\"sata\", \"md\"]\nbuild = { source = \"https://github.com/raspberrypi/linux/archive/<commit>.tar.gz\", sha256 = \"<sha256 of that file>\", defconfig = \"bcm2712_defconfig\", fragments = [\"sata\", \"md-raid\", \"nas\"] }"), "{r}");
        let r = remedy(Model::Rock5b, &[Capability::Sata]);
        assert!(r.contains("defconfig = \"defconfig\", fragments = [\"sata\", \"md-raid\", \"nas\", \"rockchip-sata\"]"), "{r}");
        assert!(
            remedy(Model::GenericArm64, &[])
                .starts_with("nasforge cannot build a kernel for generic-arm64")
        );
    }

    #[test]
    fn cache_key_follows_settings_not_comments() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.config");
        let spec = |defconfig: &str| BuildSpec {
            source: KernelSource::Tree(dir.path().into()),
            defconfig: Defconfig::Target(defconfig.into()),
            fragments: vec![
                FragmentRef::Bundled("sata".into()),
                FragmentRef::File(f.clone()),
            ],
        };
        fs::write(&f, "# why\nCONFIG_A=y\n").unwrap();
        let k1 = cache_key("abc", &spec("defconfig")).unwrap();
        fs::write(&f, "# a different reason\nCONFIG_A=y\n").unwrap();
        assert_eq!(cache_key("abc", &spec("defconfig")).unwrap(), k1);
        fs::write(&f, "CONFIG_A=m\n").unwrap();
        assert_ne!(cache_key("abc", &spec("defconfig")).unwrap(), k1);
        fs::write(&f, "CONFIG_A=y\n").unwrap();
        assert_ne!(cache_key("abd", &spec("defconfig")).unwrap(), k1);
        assert_ne!(cache_key("abc", &spec("allnoconfig")).unwrap(), k1);
    }

    #[test]
    fn tree_digest_sees_content_and_names() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("a/.git")).unwrap();
        fs::write(d.path().join("a/x"), "1").unwrap();
        let one = tree_digest(d.path()).unwrap();
        fs::write(d.path().join("a/x"), "2").unwrap();
        let two = tree_digest(d.path()).unwrap();
        assert_ne!(one, two);
        fs::create_dir_all(d.path().join(".git")).unwrap();
        fs::write(d.path().join(".git/HEAD"), "x").unwrap();
        assert_eq!(
            tree_digest(d.path()).unwrap(),
            two,
            "top-level .git is not part of the source"
        );
    }
}
