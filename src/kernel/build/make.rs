//! The make runner: `make` against the source tree with objects in `O=`,
//! its output streamed into the build log, and the host tools a build needs.

use super::progress::Progress;
use super::{ARCH, LOCALVERSION};
use anyhow::{Context, Result, bail};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
pub(crate) fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn in_path(name: &str) -> bool {
    tool(name).is_some()
}

pub(super) fn check_tools() -> Result<()> {
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

/// Streams a child's output into the log and a progress display.
pub(super) struct Make<'a> {
    pub(super) src: &'a Path,
    pub(super) obj: &'a Path,
    pub(super) log: fs::File,
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
    pub(super) fn run(&mut self, what: &str, args: &[&str], progress: bool) -> Result<()> {
        writeln!(self.log, "\n### make {}", args.join(" "))?;
        let (reader, writer) = std::io::pipe()?;
        let mut cmd = self.command(args);
        cmd.stdout(writer.try_clone()?).stderr(writer);
        let mut child = cmd
            .spawn()
            .context("running make (is it installed? scripts/setup installs it)")?;
        drop(cmd);
        let bar = if progress {
            Some(Progress::new("kernel", what))
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

    pub(super) fn output(&self, args: &[&str]) -> Result<String> {
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
