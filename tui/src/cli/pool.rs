//! `nasforge-setup pool`: what a pool's systemd units run. `mount` joins
//! the disks that are mounted (a lost disk's empty mount point on the
//! system disk must never take files), `sync` brings the parity up to date
//! unless many files were removed, `scrub` checks a part of it; failures
//! and a held-back sync are alerts.

use super::alert;
use clap::Subcommand;
use nasforge_engine::alerts::Kind;
use nasforge_engine::care::parity::{self, Conf, DELETE_THRESHOLD, SyncOutcome};
use nasforge_engine::command::System;
use nasforge_engine::machine::disks::Host;
use nasforge_engine::storage::pool;

#[derive(Subcommand)]
pub enum PoolCommand {
    /// Join the pool's mounted disks with mergerfs at its mount (its
    /// service runs this at boot); a disk that is not mounted is left out
    /// and named.
    Mount {
        /// mergerfs's options (-o).
        #[arg(long)]
        options: String,
        /// The pool's mount point.
        mount: String,
        /// The data disks' mount points.
        #[arg(required = true)]
        branches: Vec<String>,
    },
    /// Bring the parity up to date (`snapraid diff`, then `snapraid sync`);
    /// the nightly timer runs this. More removed files than the threshold
    /// hold it back with an alert, until you check them and say so.
    Sync {
        /// Sync although many files were removed: their parity, which could
        /// still bring them back, is dropped.
        #[arg(long)]
        allow_deletes: bool,
        /// SnapRAID's configuration [default: /etc/snapraid.conf, setup's]
        #[arg(long, value_name = "FILE")]
        config: Option<String>,
    },
    /// Check a part of the pool's files against their parity (`snapraid
    /// scrub`: about 8% each run, none scrubbed in the last 10 days); the
    /// weekly timer runs this.
    /// Add a mounted disk to the running pool (`replace` runs this once the
    /// disk's files are restored); nothing when it is in the pool already.
    Join {
        /// The pool's mount point.
        mount: String,
        /// The disk's mount point.
        branch: String,
    },
    Scrub {
        /// SnapRAID's configuration [default: /etc/snapraid.conf, setup's]
        #[arg(long, value_name = "FILE")]
        config: Option<String>,
    },
}

pub fn run(host: &Host, command: &PoolCommand) -> anyhow::Result<()> {
    match command {
        PoolCommand::Mount {
            options,
            mount,
            branches,
        } => mount_pool(host, options, mount, branches),
        PoolCommand::Sync {
            allow_deletes,
            config,
        } => sync(host, Conf(config.as_deref()), *allow_deletes),
        PoolCommand::Scrub { config } => scrub(host, Conf(config.as_deref())),
        PoolCommand::Join { mount, branch } => join(host, mount, branch),
    }
}

fn mount_pool(host: &Host, options: &str, mount: &str, branches: &[String]) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let mounts = nasforge_engine::machine::mounts::Mounts::read(&host.root);
    let joining = pool::joining(&mounts, branches);
    for missing in &joining.missing {
        eprintln!(
            "{missing} is not mounted (its disk is missing or failed to mount): {mount} serves the other disks without its files; `nasforge-setup status` names the disk"
        );
    }
    if joining.present.is_empty() {
        anyhow::bail!(
            "none of the pool's disks is mounted ({}), so {mount} is not mounted; check the disks' cables and power and `nasforge-setup status`",
            branches.join(", ")
        );
    }
    let argv = pool::mergerfs_argv(options, &joining.present, mount);
    let error = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    anyhow::bail!("cannot run mergerfs: {error}; is the mergerfs package installed?")
}

/// mergerfs's runtime configuration: the `user.mergerfs.branches` xattr
/// of `<mount>/.mergerfs`, where `+>PATH` appends a branch (mergerfs(1),
/// "RUNTIME CONFIG", in 2.33 and 2.40 alike).
fn join(host: &Host, mount: &str, branch: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let control = host.path(mount).join(".mergerfs");
    let current = xattr_get(&control, "user.mergerfs.branches").with_context(|| {
        format!(
            "cannot read {}'s branches; is the pool mounted?",
            control.display()
        )
    })?;
    if current
        .split(':')
        .any(|b| b.split('=').next() == Some(branch))
    {
        println!("{branch} is in the pool at {mount} already.");
        return Ok(());
    }
    xattr_set(&control, "user.mergerfs.branches", &format!("+>{branch}"))
        .with_context(|| format!("cannot add {branch} to the pool at {mount}"))?;
    println!("{branch} joined the pool at {mount}.");
    Ok(())
}

fn xattr_get(path: &std::path::Path, name: &str) -> std::io::Result<String> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let n = std::ffi::CString::new(name)?;
    let mut buf = vec![0u8; 64 * 1024];
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if len < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(len as usize);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn xattr_set(path: &std::path::Path, name: &str, value: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let n = std::ffi::CString::new(name)?;
    let rc = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn sync(host: &Host, conf: Conf, allow_deletes: bool) -> anyhow::Result<()> {
    match parity::sync(host, &mut System, conf, allow_deletes) {
        Ok(SyncOutcome::UpToDate) => {
            println!("The pool's parity is up to date: nothing changed since the last sync.");
            Ok(())
        }
        Ok(SyncOutcome::Synced(diff)) => {
            println!("The pool's parity is up to date ({diff}).");
            Ok(())
        }
        Ok(SyncOutcome::Held(diff)) => {
            let message = format!(
                "The pool's parity was not updated: {} files were removed since the last sync (more than {DELETE_THRESHOLD}), and their parity is what could still bring them back. If they were removed on purpose, run `sudo nasforge-setup pool sync --allow-deletes`; if not, see `sudo snapraid diff` and restore them with `sudo snapraid -m fix` before any sync. ({diff})",
                diff.removed
            );
            alert::notify(host, Kind::ParityStale, &message);
            anyhow::bail!(message)
        }
        Err(e) => {
            let message = format!(
                "The pool's parity was not updated: {e}. A disk that is missing or not mounted stops the sync on purpose; `nasforge-setup status` names it"
            );
            alert::notify(host, Kind::ParityStale, &message);
            anyhow::bail!(message)
        }
    }
}

fn scrub(host: &Host, conf: Conf) -> anyhow::Result<()> {
    match parity::scrub(host, &mut System, conf) {
        Ok(()) => {
            println!("The scrub found no error.");
            Ok(())
        }
        Err(e) => {
            let message = format!(
                "The pool's scrub reported a problem: {e}. `sudo snapraid status` lists the blocks with errors; `sudo snapraid -e fix` repairs them from parity"
            );
            alert::notify(host, Kind::DataErrors, &message);
            anyhow::bail!(message)
        }
    }
}
