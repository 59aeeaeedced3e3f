//! The ext4 root filesystem, read and written with e2fsprogs' debugfs on the
//! partition inside the image (`image.img?offset=BYTES`): no mount, no root.
//! No Rust crate writes ext4 reliably.
//!
//! Its fsyncs are skipped (see `seccomp`): whoever writes through this
//! fsyncs the image afterwards, as the build does before it publishes.
//!
//! debugfs exits 0 even when a command fails, so every run's stderr is
//! checked: anything but its version banner is an error.

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

#[derive(Debug, Clone)]
pub struct Ext4 {
    image: PathBuf,
    offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub size: u64,
}

/// One change to the filesystem. Parents must exist (use `Mkdir` first).
#[derive(Debug, Clone)]
pub enum Op {
    Write {
        path: String,
        data: Vec<u8>,
        mode: u32,
        uid: u32,
        gid: u32,
    },
    /// A host file copied in without loading it into memory.
    Copy {
        path: String,
        from: PathBuf,
        mode: u32,
        uid: u32,
        gid: u32,
    },
    Mkdir {
        path: String,
        mode: u32,
        uid: u32,
        gid: u32,
    },
    Symlink {
        path: String,
        target: String,
    },
    /// Within the filesystem, keeping the inode (debugfs `ln` + `unlink`).
    Rename {
        from: String,
        to: String,
    },
    Remove {
        path: String,
    },
}

impl Op {
    /// A file owned by root, as nearly everything the builder writes is.
    pub fn root_file(path: impl Into<String>, data: impl Into<Vec<u8>>, mode: u32) -> Op {
        Op::Write {
            path: path.into(),
            data: data.into(),
            mode,
            uid: 0,
            gid: 0,
        }
    }
}

impl Op {
    /// The debugfs commands that make this change; `staged` is where a
    /// `Write`'s data is put on the host for debugfs to copy in.
    fn debugfs_commands(&self, staged: &Path) -> Result<String> {
        Ok(match self {
            Op::Write {
                path,
                data,
                mode,
                uid,
                gid,
            } => {
                check_path(path)?;
                std::fs::write(staged, data)?;
                format!("write \"{}\" \"{path}\"\n", staged.display())
                    + &set_inode(path, 0o100000 | mode, *uid, *gid)
            }
            Op::Copy {
                path,
                from,
                mode,
                uid,
                gid,
            } => {
                check_path(path)?;
                if from.to_string_lossy().contains(['"', '\n']) {
                    bail!(
                        "internal: host path {} cannot be passed to debugfs",
                        from.display()
                    );
                }
                format!("write \"{}\" \"{path}\"\n", from.display())
                    + &set_inode(path, 0o100000 | mode, *uid, *gid)
            }
            Op::Mkdir {
                path,
                mode,
                uid,
                gid,
            } => {
                check_path(path)?;
                format!("mkdir \"{path}\"\n") + &set_inode(path, 0o040000 | mode, *uid, *gid)
            }
            Op::Rename { from, to } => {
                check_path(from)?;
                check_path(to)?;
                format!("ln \"{from}\" \"{to}\"\nunlink \"{from}\"\n")
            }
            Op::Symlink { path, target } => {
                check_path(path)?;
                if target.is_empty()
                    || target.contains(|c: char| c.is_whitespace() || c == '"' || c.is_control())
                {
                    bail!("internal: symlink target `{target}` cannot be passed to debugfs");
                }
                format!("symlink \"{path}\" \"{target}\"\n")
            }
            Op::Remove { path } => {
                check_path(path)?;
                format!("rm \"{path}\"\n")
            }
        })
    }
}

/// `sif` commands giving `path` its mode (file type bits included) and owner.
fn set_inode(path: &str, mode: u32, uid: u32, gid: u32) -> String {
    format!("sif \"{path}\" mode 0{mode:o}\nsif \"{path}\" uid {uid}\nsif \"{path}\" gid {gid}\n")
}

fn check_path(p: &str) -> Result<()> {
    if !p.starts_with('/')
        || p.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c.is_control())
    {
        bail!(
            "internal: path `{p}` cannot be passed to debugfs (must be absolute, without spaces or quotes)"
        );
    }
    Ok(())
}

impl Ext4 {
    pub fn new(image: &Path, offset: u64) -> Ext4 {
        Ext4 {
            image: image.to_path_buf(),
            offset,
        }
    }

    /// The name e2fsprogs tools accept for a filesystem inside an image.
    pub fn device(&self) -> String {
        format!("{}?offset={}", self.image.display(), self.offset)
    }

    fn run(&self, args: &[&str], script: Option<&str>) -> Result<(Vec<u8>, String)> {
        let script_file = match script {
            Some(s) => {
                let mut f = tempfile::NamedTempFile::new()?;
                f.write_all(s.as_bytes())?;
                Some(f)
            }
            None => None,
        };
        let mut cmd = super::seccomp::e2fsprogs("debugfs");
        cmd.args(args);
        if let Some(f) = &script_file {
            cmd.arg("-f").arg(f.path());
        }
        cmd.arg(self.device())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = cmd.output().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                anyhow::anyhow!("debugfs not found: install e2fsprogs (scripts/setup does)")
            } else {
                anyhow::anyhow!("cannot run debugfs: {e}")
            }
        })?;
        drop(script_file);
        let stderr: String = String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| !l.starts_with("debugfs ") && !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        if !out.status.success() {
            bail!("debugfs failed on {}: {stderr}", self.device());
        }
        Ok((out.stdout, stderr))
    }

    /// One debugfs request about `path` (`cat`, `stat`, `ls -p`, ...): its
    /// output, or None when the path does not exist; any other complaint is
    /// an error.
    fn query(&self, request: &str, path: &str, extra: &str) -> Result<Option<Vec<u8>>> {
        check_path(path)?;
        let (out, err) = self.run(&["-R", &format!("{request} \"{path}\"{extra}")], None)?;
        if err.contains("File not found") {
            return Ok(None);
        }
        if !err.is_empty() {
            bail!("debugfs `{request}` of {path} in the root filesystem: {err}");
        }
        Ok(Some(out))
    }

    /// A file's bytes, or None when it does not exist.
    pub fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        self.query("cat", path, "")
    }

    /// Several files in one debugfs run (each run opens the whole filesystem).
    pub fn read_many(&self, paths: &[String]) -> Result<Vec<Option<Vec<u8>>>> {
        if paths.is_empty() {
            return Ok(vec![]);
        }
        let dir = tempfile::tempdir()?;
        let mut script = String::new();
        for (i, p) in paths.iter().enumerate() {
            check_path(p)?;
            script.push_str(&format!(
                "dump \"{p}\" \"{}\"\n",
                dir.path().join(i.to_string()).display()
            ));
        }
        let (_, err) = self.run(&[], Some(&script))?;
        let real_errors: Vec<&str> = err
            .lines()
            .filter(|l| !l.contains("File not found"))
            .collect();
        if !real_errors.is_empty() {
            bail!(
                "reading from the root filesystem: {}",
                real_errors.join("; ")
            );
        }
        paths
            .iter()
            .enumerate()
            .map(|(i, _)| {
                let f = dir.path().join(i.to_string());
                if f.exists() {
                    Ok(Some(std::fs::read(f)?))
                } else {
                    Ok(None)
                }
            })
            .collect()
    }

    /// Copies a file out to `dest` without holding it in memory; false when
    /// it does not exist.
    pub fn dump(&self, path: &str, dest: &Path) -> Result<bool> {
        Ok(self
            .query("dump", path, &format!(" \"{}\"", dest.display()))?
            .is_some())
    }

    /// Copies a directory tree out into `dest` (as `dest/<its name>`).
    pub fn rdump(&self, path: &str, dest: &Path) -> Result<()> {
        check_path(path)?;
        let (_, err) = self.run(
            &["-R", &format!("rdump \"{path}\" \"{}\"", dest.display())],
            None,
        )?;
        // Not root, debugfs cannot give the copies the filesystem's owners,
        // and says so for each; the bytes and modes are what is wanted.
        let err: Vec<&str> = err
            .lines()
            .filter(|l| !l.contains("while changing ownership"))
            .collect();
        if !err.is_empty() {
            let err = err.join("; ");
            bail!("copying {path} out of the root filesystem: {err}");
        }
        Ok(())
    }

    /// A directory's entries (without `.` and `..`), or None when it does not exist.
    pub fn list(&self, dir: &str) -> Result<Option<Vec<Entry>>> {
        let Some(out) = self.query("ls -p", dir, "")? else {
            return Ok(None);
        };
        // `/inode/mode/uid/gid/name/size/`; mode is octal with the type bits.
        let text = String::from_utf8_lossy(&out);
        let mut entries = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.trim().trim_matches('/').split('/').collect();
            if f.len() < 5 || f[4] == "." || f[4] == ".." || f[0] == "0" {
                continue;
            }
            let mode = u32::from_str_radix(f[1], 8).unwrap_or(0);
            let kind = match mode & 0o170000 {
                0o100000 => Kind::File,
                0o040000 => Kind::Dir,
                0o120000 => Kind::Symlink,
                _ => Kind::Other,
            };
            entries.push(Entry {
                name: f[4].to_string(),
                kind,
                size: f.get(5).and_then(|s| s.parse().ok()).unwrap_or(0),
            });
        }
        Ok(Some(entries))
    }

    /// A symlink's target, or None when `path` is not a symlink.
    pub fn readlink(&self, path: &str) -> Result<Option<String>> {
        let Some(out) = self.query("stat", path, "")? else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&out);
        if !text.contains("Type: symlink") {
            return Ok(None);
        }
        if let Some(rest) = text.split("Fast link dest: \"").nth(1) {
            return Ok(rest.split('"').next().map(String::from));
        }
        // A target longer than 60 bytes lives in a data block; `cat` prints it.
        Ok(self
            .query("cat", path, "")?
            .map(|t| String::from_utf8_lossy(&t).into_owned()))
    }

    /// Applies changes in one debugfs run. A directory several parts of a
    /// build need is created once, where it is first asked for.
    pub fn apply(&self, ops: &[Op]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut made: Vec<&str> = Vec::new();
        let ops: Vec<&Op> = ops
            .iter()
            .filter(|op| match op {
                Op::Mkdir { path, .. } if made.contains(&path.as_str()) => false,
                Op::Mkdir { path, .. } => {
                    made.push(path);
                    true
                }
                _ => true,
            })
            .collect();
        let dir = tempfile::tempdir()?;
        let mut script = String::new();
        for (i, op) in ops.iter().enumerate() {
            script.push_str(&op.debugfs_commands(&dir.path().join(i.to_string()))?);
        }
        let (_, err) = self
            .run(&["-w"], Some(&script))
            .context("writing to the root filesystem")?;
        if !err.is_empty() {
            bail!(
                "writing to the root filesystem in {} failed: {err}",
                self.image.display()
            );
        }
        Ok(())
    }

    /// Replaces a file's content, keeping its mode and owner when it exists
    /// (a new file's directory is created when missing).
    pub fn replace(&self, path: &str, data: &[u8], default_mode: u32) -> Result<()> {
        let (mode, uid, gid) = self.owner(path)?.unwrap_or((default_mode, 0, 0));
        let parent = path
            .rsplit_once('/')
            .map(|(d, _)| d)
            .filter(|d| !d.is_empty());
        let mut ops = match parent {
            Some(dir) => self.missing_dirs(&[dir])?,
            None => Vec::new(),
        };
        if self.read(path)?.is_some() {
            ops.push(Op::Remove { path: path.into() });
        }
        ops.push(Op::Write {
            path: path.into(),
            data: data.to_vec(),
            mode,
            uid,
            gid,
        });
        self.apply(&ops)
    }

    /// Permission bits, uid and gid of a path.
    pub fn owner(&self, path: &str) -> Result<Option<(u32, u32, u32)>> {
        let Some(out) = self.query("stat", path, "")? else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&out);
        let field = |name: &str| -> Option<u32> {
            let rest = text.split(name).nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        };
        let mode = text
            .split("Mode:")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|m| u32::from_str_radix(m, 8).ok())
            .map(|m| m & 0o7777);
        Ok(mode.map(|m| (m, field("User:").unwrap_or(0), field("Group:").unwrap_or(0))))
    }

    /// `Mkdir`s for the directories (and their parents) that do not exist yet,
    /// parents first.
    pub fn missing_dirs(&self, dirs: &[&str]) -> Result<Vec<Op>> {
        let mut ops = Vec::new();
        let mut planned: Vec<String> = Vec::new();
        for dir in dirs {
            let mut prefix = String::new();
            for part in dir.trim_start_matches('/').split('/') {
                prefix.push('/');
                prefix.push_str(part);
                if planned.contains(&prefix) {
                    continue;
                }
                if self.list(&prefix)?.is_none() {
                    ops.push(Op::Mkdir {
                        path: prefix.clone(),
                        mode: 0o755,
                        uid: 0,
                        gid: 0,
                    });
                    planned.push(prefix.clone());
                }
            }
        }
        Ok(ops)
    }

    /// An e2fsprogs tool run on this filesystem, its status left to the caller.
    fn tool(&self, name: &str, args: &[&str]) -> Result<std::process::Output> {
        super::seccomp::e2fsprogs(name)
            .args(args)
            .arg(self.device())
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {name}"))
    }

    /// The superblock as `dumpe2fs -h` prints it.
    fn superblock(&self) -> Result<String> {
        let out = self.tool("dumpe2fs", &["-h"])?;
        if !out.status.success() {
            bail!(
                "dumpe2fs failed on {}: {}",
                self.device(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Free space, from the superblock.
    pub fn free_bytes(&self) -> Result<u64> {
        let text = self.superblock()?;
        let field = |name: &str| -> Result<u64> {
            superblock_field(&text, name)?
                .parse()
                .with_context(|| format!("dumpe2fs printed no number for `{name}`"))
        };
        Ok(field("Free blocks:")? * field("Block size:")?)
    }

    /// The filesystem's UUID.
    pub fn uuid(&self) -> Result<String> {
        Ok(superblock_field(&self.superblock()?, "Filesystem UUID:")?.to_string())
    }

    /// `e2fsck -fp`: what resize2fs and tune2fs -U need before they change a
    /// filesystem that was mounted since its last check, and what makes
    /// their change safe.
    pub fn check(&self) -> Result<()> {
        let out = self.tool("e2fsck", &["-fp"])?;
        // 0: clean, 1: errors corrected. Anything else means the image is damaged.
        if !matches!(out.status.code(), Some(0 | 1)) {
            bail!(
                "the root filesystem has errors e2fsck cannot fix unattended; check the base image:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// A new random UUID for the filesystem (`tune2fs -U random`, which
    /// also rewrites the metadata checksums that depend on it). Returns the
    /// old and the new one.
    pub fn renew_uuid(&self) -> Result<(String, String)> {
        self.check()?;
        let old = self.uuid()?;
        let out = self.tool("tune2fs", &["-U", "random"])?;
        if !out.status.success() {
            bail!(
                "tune2fs -U random failed on {}: {}{}",
                self.device(),
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let new = self.uuid()?;
        if new == old {
            bail!("tune2fs left the root filesystem's UUID {old} as it was");
        }
        Ok((old, new))
    }
}

fn superblock_field<'a>(text: &'a str, name: &str) -> Result<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .with_context(|| format!("dumpe2fs printed no `{name}`"))
}
