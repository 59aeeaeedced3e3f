//! The ZFS modules compiled on this machine for the board's kernel, the way
//! DKMS would on the board (`configure --with-config=kernel`, then `make -C
//! module`), cross-compiled and cached by (kernel, ZFS version): the same
//! inputs never compile twice.
//!
//! Against a kernel nasforge built (`[kernel] build`) the compile runs here
//! with the toolchain that built it. Against a distribution kernel's
//! headers it runs in a throwaway root of the kernel's own Debian release,
//! made with mmdebstrap as the base images are: that release's compiler is
//! the one the kernel was built with (trixie's 6.12 asks for gcc-14, which
//! bookworm has not), and the headers' kbuild tools (fixdep, modpost,
//! genksyms) are programs of that release. They are programs for the
//! board's architecture, replaced by the same package built for this
//! machine where the sources have it (`sources::native_tools`), else run
//! through qemu-user as mmdebstrap runs the base's maintainer scripts.

use super::sources::ZfsSource;
use crate::io::lock::Lock;
use crate::kernel::build::Progress;
use crate::packages::Deb;
use anyhow::{Context, Result, bail};
use nasforge_engine::steps::shell_quote;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Changes whenever the way modules are built changes, so old results are
/// not reused.
const FORMAT: &str = "nasforge-zfs-build 2";

/// The board's architecture as Debian, the kernel, GNU and Rust spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    debian: &'static str,
    kernel: &'static str,
    triplet: &'static str,
    rust: &'static str,
}

impl Target {
    pub const ARM64: Target = Target {
        debian: "arm64",
        kernel: "arm64",
        triplet: "aarch64-linux-gnu",
        rust: "aarch64",
    };
    pub const AMD64: Target = Target {
        debian: "amd64",
        kernel: "x86",
        triplet: "x86_64-linux-gnu",
        rust: "x86_64",
    };

    /// The target for an image's dpkg architecture.
    pub fn of(debian_arch: &str) -> Result<Target> {
        [Target::ARM64, Target::AMD64]
            .into_iter()
            .find(|t| t.debian == debian_arch)
            .with_context(|| {
                format!("nasforge builds ZFS modules for arm64 and amd64 images; this image is {debian_arch}")
            })
    }

    fn native(self) -> bool {
        std::env::consts::ARCH == self.rust
    }

    /// The prefix of the cross compiler's programs; none when this machine
    /// is of the board's architecture.
    fn cross_compile(self) -> String {
        if self.native() {
            String::new()
        } else {
            format!("{}-", self.triplet)
        }
    }
}

fn say(msg: impl AsRef<str>) {
    eprintln!("{:>10}  {}", "zfs", msg.as_ref());
}

/// The kernel tree the modules are built against.
pub enum Kernel<'a> {
    /// A distribution kernel: its headers packages, unpacked for the build
    /// in a root of `suite` (a Debian release) from `mirror`.
    Headers {
        release: &'a str,
        debs: &'a [Deb],
        suite: &'a str,
        mirror: &'a str,
    },
    /// A kernel nasforge built (`[kernel] build`): its source and the
    /// prepared object tree it kept for module builds.
    Tree {
        release: &'a str,
        source: &'a Path,
        objects: &'a Path,
        /// The kernel build's cache key.
        key: &'a str,
    },
}

impl Kernel<'_> {
    fn release(&self) -> &str {
        match self {
            Kernel::Headers { release, .. } | Kernel::Tree { release, .. } => release,
        }
    }
}

/// A finished build in the cache.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Modules {
    pub release: String,
    /// The modules' own version (`modinfo -F version zfs.ko`).
    pub version: String,
    /// The zfs-dkms package they were built from.
    pub source_version: String,
    /// File names under `dir/modules`.
    pub files: Vec<String>,
    /// OpenZFS's configure against the kernel, then the compile.
    #[serde(default)]
    pub configure_seconds: f64,
    pub compile_seconds: f64,
    #[serde(skip)]
    pub dir: PathBuf,
    #[serde(skip)]
    pub cached: bool,
}

impl Modules {
    pub fn module_dir(&self) -> PathBuf {
        self.dir.join("modules")
    }
}

/// The cross compiler's own version line: a new compiler is a new build.
fn compiler_version(target: Target) -> Result<String> {
    let cc = format!("{}gcc", target.cross_compile());
    let out = Command::new(&cc).arg("--version").output().with_context(|| {
        format!("{cc} not found: building ZFS's modules needs the kernel's compiler (scripts/setup installs gcc and gcc-aarch64-linux-gnu)")
    })?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string())
}

/// Against headers the compiler is the one their release has for the
/// compiler the kernel names, so the headers decide it; a kernel nasforge
/// built is compiled for with this machine's.
pub fn cache_key(kernel: &Kernel, target: Target, zfs: &ZfsSource) -> Result<String> {
    let mut h = Sha256::new();
    h.update(format!(
        "{FORMAT}\nrelease {}\nzfs {}\n",
        kernel.release(),
        zfs.deb.sha256,
    ));
    match kernel {
        Kernel::Headers { debs, suite, .. } => {
            h.update(format!("suite {suite}\n"));
            for d in *debs {
                h.update(format!("headers {}\n", d.sha256));
            }
        }
        Kernel::Tree { key, .. } => {
            h.update(format!(
                "kernel-build {key}\ncc {}\n",
                compiler_version(target)?
            ));
        }
    }
    Ok(hex::encode(h.finalize()))
}

fn zfs_dir(cache: &Path) -> PathBuf {
    cache.join("zfs")
}

/// The modules for `kernel` from `zfs`, from the cache or compiled now.
/// `native_tools` is asked only for a compile against headers: their kbuild
/// package built for this machine (see `sources::native_tools`), unpacked
/// over the board's. The tools do not change what is built, so they are
/// not in the cache key.
pub fn build(
    kernel: &Kernel,
    target: Target,
    zfs: &ZfsSource,
    cache: &Path,
    native_tools: &dyn Fn() -> Option<Deb>,
) -> Result<Modules> {
    let key = cache_key(kernel, target, zfs)?;
    let builds = zfs_dir(cache).join("builds");
    let done = builds.join(&key);
    let _lock = Lock::take(&builds.join(format!("{key}.lock")))?;
    if let Some(m) = open(&done)? {
        return Ok(m);
    }
    let tools = match kernel {
        Kernel::Headers { .. } => native_tools(),
        Kernel::Tree { .. } => None,
    };
    match &tools {
        Some(t) => say(format!(
            "kbuild tools from {} {} for {} (this machine), not the board's through qemu-user",
            t.package, t.version, t.architecture
        )),
        None if matches!(kernel, Kernel::Headers { .. }) => check_foreign_tools(target)?,
        None => {}
    }
    let start = Instant::now();
    let work = zfs_dir(cache).join("work").join(&key);
    if work.exists() {
        fs::remove_dir_all(&work)?;
    }
    fs::create_dir_all(&work)?;
    let staging = builds.join(format!("{key}.partial"));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(staging.join("modules"))?;
    let log_path = staging.join("build.log");
    let mut log = Log {
        file: fs::File::create(&log_path)?,
        path: log_path.clone(),
    };
    let src = unpack_zfs(zfs, &work)?;
    say(format!(
        "building OpenZFS {} modules for {} (once per kernel and version; log: {})",
        zfs.upstream,
        kernel.release(),
        log_path.display()
    ));
    let jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let (configured, files) = match kernel {
        Kernel::Tree {
            source, objects, ..
        } => compile_here(target, source, objects, &src, &staging, &mut log, jobs)?,
        Kernel::Headers {
            release,
            debs,
            suite,
            mirror,
        } => {
            let build = ReleaseBuild {
                release,
                target,
                headers: debs,
                native_tools: tools.as_ref(),
                suite,
                mirror,
                work: &work,
                jobs,
            };
            build.compile(&src, &staging.join("modules"), &mut log)?
        }
    };
    let configured = configured.unwrap_or_default();
    let (version, vermagic) = modinfo(&staging.join("modules/zfs.ko"))?;
    if !vermagic.starts_with(&format!("{} ", kernel.release())) {
        bail!(
            "the built zfs.ko is for kernel `{vermagic}`, not {}: the headers do not match the kernel (log: {})",
            kernel.release(),
            log_path.display()
        );
    }
    let modules = Modules {
        release: kernel.release().to_string(),
        version,
        source_version: zfs.deb.version.clone(),
        files,
        configure_seconds: configured.as_secs_f64(),
        compile_seconds: (start.elapsed().saturating_sub(configured)).as_secs_f64(),
        dir: done.clone(),
        cached: false,
    };
    fs::write(
        staging.join("result.json"),
        serde_json::to_string_pretty(&modules)?,
    )?;
    drop(log);
    fs::rename(&staging, &done)?;
    // The unpacked headers and the objects are hundreds of megabytes and
    // are not needed once the modules are in the cache.
    let _ = fs::remove_dir_all(&work);
    say(format!(
        "built {} modules for {} in {:.0}s (configure {:.0}s, compile {:.0}s)",
        modules.version,
        modules.release,
        modules.configure_seconds + modules.compile_seconds,
        modules.configure_seconds,
        modules.compile_seconds
    ));
    Ok(Modules {
        dir: done,
        ..modules
    })
}

fn open(done: &Path) -> Result<Option<Modules>> {
    let Ok(text) = fs::read_to_string(done.join("result.json")) else {
        return Ok(None);
    };
    let mut m: Modules = serde_json::from_str(&text)
        .with_context(|| format!("reading {}", done.join("result.json").display()))?;
    m.dir = done.to_path_buf();
    m.cached = true;
    Ok(Some(m))
}

/// `program` in `dir` with the kernel's make variables for a module build
/// for the board, and no debug info: the board does not debug ZFS with gdb,
/// and without `-g` the compile is faster and zfs.ko a tenth of the size.
fn kernel_command(target: Target, program: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir)
        .env("ARCH", target.kernel)
        .env("CROSS_COMPILE", target.cross_compile())
        .env("KCFLAGS", "-g0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    cmd
}

/// The kbuild programs in a headers package are built for the board:
/// here they run only through qemu-user's binfmt_misc registration.
fn check_foreign_tools(target: Target) -> Result<()> {
    if target.native() {
        return Ok(());
    }
    let entry = Path::new("/proc/sys/fs/binfmt_misc").join(format!("qemu-{}", target.rust));
    let enabled = fs::read_to_string(&entry).is_ok_and(|t| t.starts_with("enabled"));
    if !enabled {
        bail!(
            "building ZFS against the board's kernel headers runs their {} build tools (fixdep, modpost) through qemu-user, but {} is not registered: install qemu-user-static and register it (scripts/setup does both)",
            target.debian,
            entry.display()
        );
    }
    Ok(())
}

/// `configure` and `make` here, against a kernel tree nasforge built with
/// this machine's cross compiler; the modules stripped into `staging`.
fn compile_here(
    target: Target,
    source: &Path,
    objects: &Path,
    src: &Path,
    staging: &Path,
    log: &mut Log,
    jobs: usize,
) -> Result<(Option<Duration>, Vec<String>)> {
    let start = Instant::now();
    let mut configure = kernel_command(target, "./configure", src);
    configure
        .arg("--with-config=kernel")
        .arg(format!("--with-linux={}", source.display()))
        .arg(format!("--with-linux-obj={}", objects.display()))
        .env("TEST_JOBS", jobs.to_string());
    if !target.native() {
        configure.arg(format!("--host={}", target.triplet));
    }
    log.run("configuring against the kernel", configure, None)?;
    let configured = start.elapsed();
    let mut make = kernel_command(target, "make", src);
    make.args(["-C", "module", &format!("-j{jobs}")]);
    log.run("compiling", make, None)?;
    let files = collect(target, &src.join("module"), &staging.join("modules"))?;
    Ok((Some(configured), files))
}

/// The compile against a distribution kernel's headers, in a throwaway
/// root of its Debian release.
struct ReleaseBuild<'a> {
    release: &'a str,
    target: Target,
    /// Unpacked into the root at the paths the board has them.
    headers: &'a [Deb],
    /// The headers' kbuild package for this machine, installed in the root
    /// with what it needs; without it, the board's (among the headers) runs
    /// through qemu-user, with what it needs for the board's architecture.
    native_tools: Option<&'a Deb>,
    suite: &'a str,
    mirror: &'a str,
    work: &'a Path,
    jobs: usize,
}

/// Printed by the compile's script between configure and make.
const CONFIGURED: &str = "nasforge-zfs: configured";

impl ReleaseBuild<'_> {
    /// Builds into `modules` (stripped .ko files); how long configure took.
    fn compile(
        &self,
        src: &Path,
        modules: &Path,
        log: &mut Log,
    ) -> Result<(Option<Duration>, Vec<String>)> {
        let root = self.work.join("root");
        // The board's kbuild programs only where this machine's are not
        // installed in their place.
        let unpacked: Vec<&Deb> = self
            .headers
            .iter()
            .filter(|d| self.native_tools.is_none() || !d.package.starts_with("linux-kbuild"))
            .collect();
        for d in &unpacked {
            unpack(&d.local, &root)?;
        }
        let (source, objects) = headers_dirs(&root, self.release)?;
        // As paths of the root, without the links' `..` steps.
        let root = fs::canonicalize(&root)?;
        let inside = |p: &Path| -> Result<String> {
            Ok(format!(
                "/{}",
                fs::canonicalize(p)?
                    .strip_prefix(&root)
                    .context("the headers point outside their packages")?
                    .display()
            ))
        };
        let config = fs::read_to_string(objects.join(".config")).with_context(|| {
            format!(
                "the headers of {} have no .config, so the compiler their kernel was built with is unknown",
                self.release
            )
        })?;
        let compiler = kernel_compiler(&config).with_context(|| {
            format!(
                "the headers of {} name no compiler (CONFIG_CC_VERSION_TEXT)",
                self.release
            )
        })?;
        let (package, prefix) = compiler_package(self.target, &compiler);
        let arch = self.target.debian;
        say(format!(
            "compiling with {package} of Debian {}, as kernel {} was (in a throwaway root made with mmdebstrap)",
            self.suite, self.release
        ));
        let mut include = vec!["make".to_string(), package];
        let mut architectures = vec![];
        // configure's first check links a program: the C library's headers
        // and startup files, of the board's architecture.
        include.push(if prefix.is_empty() {
            "libc6-dev".to_string()
        } else {
            format!("libc6-dev-{arch}-cross")
        });
        match self.native_tools {
            Some(tools) => include.push(tools.package.clone()),
            None => {
                // The board's kbuild programs (modpost, pahole) need the
                // board's libraries beside them.
                for d in self
                    .headers
                    .iter()
                    .filter(|d| d.package.starts_with("linux-kbuild"))
                {
                    include.extend(
                        depends(&d.stanza)
                            .into_iter()
                            .map(|p| format!("{p}:{arch}")),
                    );
                }
                if !prefix.is_empty() {
                    architectures.push(format!("--architectures=native,{arch}"));
                }
            }
        }
        let host = if prefix.is_empty() {
            String::new()
        } else {
            format!(" --host={}", self.target.triplet)
        };
        let debs: Vec<String> = unpacked
            .iter()
            .map(|d| shell_quote(&d.local.display().to_string()))
            .collect();
        let inner = format!(
            "cd /nasforge/zfs && ./configure --with-config=kernel --with-linux={} --with-linux-obj={}{host} && echo {} && make -C module -j{} && find module -name '*.ko' -exec {prefix}strip --strip-debug {{}} +",
            shell_quote(&inside(&source)?),
            shell_quote(&inside(&objects)?),
            shell_quote(CONFIGURED),
            self.jobs
        );
        // The headers go in as tar files through the root's /lib and /bin
        // links: bookworm's headers ship ./lib/modules, which `dpkg-deb -x`
        // would make a directory in place of merged /usr's `lib` link,
        // leaving the root's programs without their libraries.
        // With debug info, unlike a build against nasforge's own kernel:
        // Debian's kernels give every module BTF (DEBUG_INFO_BTF_MODULES),
        // which pahole makes from it; the strip afterwards keeps the BTF.
        let hook = format!(
            "set -eu\nroot=\"$1\"\nfor deb in {}; do dpkg-deb --fsys-tarfile \"$deb\" | tar -x --keep-directory-symlink -C \"$root\"; done\nmkdir -p \"$root/nasforge\"\ncp -a {} \"$root/nasforge/zfs\"\nif ! chroot \"$root\" env ARCH={} CROSS_COMPILE={prefix} CC={} LC_ALL=C TEST_JOBS={} sh -c {}; then for f in config.log build/build.log; do [ -f \"$root/nasforge/zfs/$f\" ] && echo \"### $f\" && tail -n 40 \"$root/nasforge/zfs/$f\"; done; exit 1; fi\nfind \"$root/nasforge/zfs/module\" -name '*.ko' -exec cp {{}} {} \\;\n",
            debs.join(" "),
            shell_quote(&src.display().to_string()),
            self.target.kernel,
            shell_quote(&compiler),
            self.jobs,
            shell_quote(&inner),
            shell_quote(&modules.display().to_string()),
        );
        let mut cmd = Command::new("mmdebstrap");
        cmd.arg("--variant=minbase")
            .args(&architectures)
            .arg(format!("--include={}", include.join(",")))
            .arg(format!("--customize-hook={hook}"))
            .arg(self.suite)
            .arg("/dev/null")
            .arg(self.mirror)
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        let configured = log.run(
            &format!("building in a Debian {} root", self.suite),
            cmd,
            Some(CONFIGURED),
        )?;
        let mut files: Vec<String> = fs::read_dir(modules)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".ko"))
            .collect();
        files.sort();
        if !files.iter().any(|f| f == "zfs.ko") {
            bail!("the build made no zfs.ko (log: {})", log.path.display());
        }
        Ok((configured, files))
    }
}

/// The packages a Packages stanza's `Depends` names, the first of each
/// alternative, without versions; libc is the root's own.
fn depends(stanza: &str) -> Vec<String> {
    stanza
        .lines()
        .find_map(|l| l.strip_prefix("Depends:"))
        .unwrap_or("")
        .split(',')
        .filter_map(|d| d.split('|').next())
        .filter_map(|d| d.split_whitespace().next())
        .map(|d| d.split(':').next().unwrap_or(d).to_string())
        .filter(|d| !d.is_empty() && d != "libc6")
        .collect()
}

/// The program that compiled the kernel, from its configuration:
/// `aarch64-linux-gnu-gcc-14` of `CONFIG_CC_VERSION_TEXT="aarch64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0"`.
fn kernel_compiler(config: &str) -> Option<String> {
    let text = config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_CC_VERSION_TEXT="))?;
    text.trim_matches('"')
        .split_whitespace()
        .next()
        .filter(|c| c.contains("gcc"))
        .map(String::from)
}

/// The Debian package with that compiler for this machine, and the prefix
/// its programs carry: for an arm64 board `gcc-14-aarch64-linux-gnu` and
/// `aarch64-linux-gnu-` on another architecture, `gcc-14` and none on arm64.
fn compiler_package(target: Target, compiler: &str) -> (String, String) {
    let name = compiler
        .strip_prefix(&format!("{}-", target.triplet))
        .unwrap_or(compiler);
    let prefix = target.cross_compile();
    if prefix.is_empty() {
        (name.to_string(), prefix)
    } else {
        // Debian's cross compilers spell the triplet with `-` for `_`:
        // gcc-12-x86-64-linux-gnu.
        (
            format!("{name}-{}", target.triplet.replace('_', "-")),
            prefix,
        )
    }
}

/// Where the unpacked headers of `release` are: the `build` and `source`
/// links of its module directory, which point at absolute paths on the
/// board, read inside `root`.
pub fn headers_dirs(root: &Path, release: &str) -> Result<(PathBuf, PathBuf)> {
    let inside = |link: &Path| -> Option<PathBuf> {
        let target = fs::read_link(link).ok()?;
        let target = if target.is_absolute() {
            root.join(target.strip_prefix("/").ok()?)
        } else {
            link.parent()?.join(target)
        };
        target.is_dir().then_some(target)
    };
    let moddir = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|m| root.join(m).join(release))
        .find(|d| d.join("build").symlink_metadata().is_ok())
        .with_context(|| {
            format!("the headers packages have no /lib/modules/{release}/build: they are not the headers of kernel {release}")
        })?;
    let objects = inside(&moddir.join("build")).with_context(|| {
        format!("/lib/modules/{release}/build in the headers packages points nowhere inside them")
    })?;
    let source = inside(&moddir.join("source")).unwrap_or_else(|| objects.clone());
    relocate_includes(&objects.join("Makefile"), root)?;
    Ok((source, objects))
}

/// Debian's per-flavour headers Makefile includes the common tree by its
/// absolute path on the board (`include /usr/src/linux-headers-…-common/Makefile`):
/// pointed into the unpacked tree instead.
fn relocate_includes(makefile: &Path, root: &Path) -> Result<()> {
    let Ok(text) = fs::read_to_string(makefile) else {
        return Ok(());
    };
    let root = root.display().to_string();
    let moved: String = text
        .lines()
        .map(|l| match l.strip_prefix("include /") {
            Some(rest) if rest.starts_with("usr/src/") => format!("include {root}/{rest}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    if moved != text {
        fs::write(makefile, moved)?;
    }
    Ok(())
}

fn unpack(deb: &Path, into: &Path) -> Result<()> {
    fs::create_dir_all(into)?;
    let out = Command::new("dpkg-deb")
        .arg("-x")
        .arg(deb)
        .arg(into)
        .output()
        .context("running dpkg-deb (scripts/setup installs dpkg)")?;
    if !out.status.success() {
        bail!(
            "cannot unpack {}: {}",
            deb.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The OpenZFS source tree out of zfs-dkms.
fn unpack_zfs(zfs: &ZfsSource, work: &Path) -> Result<PathBuf> {
    let root = work.join("zfs-dkms");
    unpack(&zfs.deb.local, &root)?;
    let src = root.join("usr/src").join(format!("zfs-{}", zfs.upstream));
    if !src.join("configure").is_file() {
        bail!(
            "{} has no usr/src/zfs-{}/configure: it is not the OpenZFS source package nasforge expects",
            zfs.deb.filename,
            zfs.upstream
        );
    }
    Ok(src)
}

/// Every .ko the build made, stripped of debug sections into `to`.
fn collect(target: Target, module: &Path, to: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut stack = vec![module.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "ko") {
                found.push(p);
            }
        }
    }
    if !found.iter().any(|p| p.ends_with("zfs.ko")) {
        bail!("the build made no zfs.ko under {}", module.display());
    }
    found.sort();
    let strip = format!("{}strip", target.cross_compile());
    let mut names = Vec::new();
    for p in found {
        let name = p
            .file_name()
            .expect("a file")
            .to_string_lossy()
            .into_owned();
        let out = Command::new(&strip)
            .arg("--strip-debug")
            .arg("-o")
            .arg(to.join(&name))
            .arg(&p)
            .output()
            .with_context(|| format!("running {strip}"))?;
        if !out.status.success() {
            bail!(
                "{strip} {}: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        names.push(name);
    }
    Ok(names)
}

/// The `version` and `vermagic` a module carries (modinfo reads modules of
/// any architecture).
pub fn modinfo(ko: &Path) -> Result<(String, String)> {
    let modinfo = crate::kernel::build::tool("modinfo")
        .context("modinfo not found (scripts/setup installs kmod)")?;
    let field = |f: &str| -> Result<String> {
        let out = Command::new(&modinfo).args(["-F", f]).arg(ko).output()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    Ok((field("version")?, field("vermagic")?))
}

/// The build log, and the commands whose output goes into it.
struct Log {
    file: fs::File,
    path: PathBuf,
}

impl Log {
    /// Runs `cmd` with its output in the log; when `marker` is given, how
    /// long after the start the line saying it came.
    fn run(
        &mut self,
        what: &str,
        mut cmd: Command,
        marker: Option<&str>,
    ) -> Result<Option<Duration>> {
        let start = Instant::now();
        let mut marked = None;
        writeln!(self.file, "\n### {what}: {cmd:?}")?;
        let (reader, writer) = std::io::pipe()?;
        cmd.stdout(writer.try_clone()?).stderr(writer);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
        // The child holds the pipe's writing end; this copy must go, or the
        // reader below never sees the end.
        drop(cmd);
        let bar = Progress::new("zfs", what);
        let mut tail = std::collections::VecDeque::new();
        for line in BufReader::new(reader).lines() {
            let line = line.unwrap_or_default();
            writeln!(self.file, "{line}")?;
            if marker.is_some_and(|m| line.trim() == m) {
                marked = Some(start.elapsed());
            }
            bar.line(&line);
            tail.push_back(line);
            if tail.len() > 30 {
                tail.pop_front();
            }
        }
        let status = child.wait()?;
        bar.finish();
        self.file.flush()?;
        if !status.success() {
            bail!(
                "building ZFS's modules failed while {what}; the last lines:\n{}\nfull log: {}",
                tail.into_iter().collect::<Vec<_>>().join("\n"),
                self.path.display()
            );
        }
        Ok(marked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_of_another_architecture_is_named_in_the_error() {
        assert_eq!(Target::of("amd64").unwrap(), Target::AMD64);
        assert_eq!(Target::of("arm64").unwrap().kernel, "arm64");
        let e = Target::of("armhf").unwrap_err().to_string();
        assert!(e.contains("arm64 and amd64") && e.contains("armhf"), "{e}");
    }

    #[test]
    fn a_stanzas_depends_are_package_names() {
        let stanza = "Package: linux-kbuild-6.12.117+deb13\nDepends: libc6 (>= 2.38), libelf1t64 (>= 0.144), libssl3t64 (>= 3.0.0) | libssl3, zlib1g:any, pahole\nDescription: x\n";
        assert_eq!(
            depends(stanza),
            ["libelf1t64", "libssl3t64", "zlib1g", "pahole"]
        );
    }

    #[test]
    fn the_kernels_compiler_names_the_package_that_compiles_its_modules() {
        let trixie = "CONFIG_CC_VERSION_TEXT=\"aarch64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0\"\nCONFIG_CC_IS_GCC=y\n";
        assert_eq!(
            kernel_compiler(trixie).as_deref(),
            Some("aarch64-linux-gnu-gcc-14")
        );
        let arm64 = compiler_package(Target::ARM64, "aarch64-linux-gnu-gcc-14");
        let amd64 = compiler_package(Target::AMD64, "x86_64-linux-gnu-gcc-12");
        let cross = |name: &str, triplet: &str| {
            (
                format!("{name}-{}", triplet.replace('_', "-")),
                format!("{triplet}-"),
            )
        };
        let native = |name: &str| (name.to_string(), String::new());
        match std::env::consts::ARCH {
            "x86_64" => {
                assert_eq!(arm64, cross("gcc-14", "aarch64-linux-gnu"));
                assert_eq!(amd64, native("gcc-12"));
            }
            "aarch64" => {
                assert_eq!(arm64, native("gcc-14"));
                assert_eq!(amd64, cross("gcc-12", "x86_64-linux-gnu"));
            }
            other => panic!("no ZFS builds on {other}"),
        }
        assert_eq!(
            kernel_compiler("CONFIG_CC_VERSION_TEXT=\"clang version 19\"\n"),
            None,
            "a kernel built with clang has no gcc to take"
        );
    }

    #[test]
    fn the_headers_links_are_followed_inside_the_unpacked_tree() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let rel = "6.1.0-57-arm64";
        let arch = root.join(format!("usr/src/linux-headers-{rel}"));
        let common = root.join("usr/src/linux-headers-6.1.0-57-common");
        fs::create_dir_all(&arch).unwrap();
        fs::create_dir_all(&common).unwrap();
        fs::create_dir_all(root.join(format!("lib/modules/{rel}"))).unwrap();
        std::os::unix::fs::symlink(
            format!("/usr/src/linux-headers-{rel}"),
            root.join(format!("lib/modules/{rel}/build")),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            "/usr/src/linux-headers-6.1.0-57-common",
            root.join(format!("lib/modules/{rel}/source")),
        )
        .unwrap();
        // Debian's flavour Makefile, as linux-headers-6.1.0-57-arm64 ships it.
        fs::write(
            arch.join("Makefile"),
            "include /usr/src/linux-headers-6.1.0-57-common/Makefile\n",
        )
        .unwrap();
        let (source, objects) = headers_dirs(root, rel).unwrap();
        assert_eq!(source, common);
        assert_eq!(objects, arch);
        assert_eq!(
            fs::read_to_string(arch.join("Makefile")).unwrap(),
            format!(
                "include {}/usr/src/linux-headers-6.1.0-57-common/Makefile\n",
                root.display()
            )
        );
        let e = headers_dirs(root, "6.6.6").unwrap_err().to_string();
        assert!(e.contains("not the headers of kernel 6.6.6"), "{e}");
    }
}
