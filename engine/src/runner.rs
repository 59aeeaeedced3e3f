//! The seam between steps and the machine. `SystemRunner` performs actions
//! for real and logs every command's output; `RecordingRunner` only writes
//! them down, for `plan --dry-run` and for tests.

use crate::command::{Ask, Query, SpawnError, System};
use crate::machine::disks::Host;
use crate::steps::{Action, Cmd};
use crate::storage::partition::{self, PartitionError};
use crate::storage::zpool;
use crate::{atomic_file, machine::signature, managed, share_dir};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

/// Asks (the ground floor's [`Ask`]) and changes the machine.
pub trait Runner: Ask {
    /// Performs one action of a step.
    fn apply(&mut self, action: &Action) -> Result<(), RunError>;
    /// Lets time pass (waiting for late disks); a recorder only notes it,
    /// so tests do not sleep.
    fn wait(&mut self, duration: Duration);
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("`{cmd}` failed with exit status {status}{}", tail(stderr))]
    Failed {
        cmd: String,
        status: i32,
        stderr: String,
    },
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("`{cmd}` reported a failure: {}", stdout.trim())]
    ReportedFailure { cmd: String, stdout: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Partition(#[from] PartitionError),
    #[error(transparent)]
    ShareDir(#[from] crate::share_dir::ShareDirError),
    #[error(
        "{device} holds {found}, not the {wanted} filesystem the recipe says; it was assembled read-only to look, and stopped again: nothing on it was written. If it is the array you mean, set filesystem to what it holds"
    )]
    NotTheFilesystem {
        device: String,
        found: String,
        wanted: String,
    },
    #[error("interrupted before `{0}` (simulated power cut)")]
    Interrupted(String),
}

fn tail(stderr: &str) -> String {
    let last: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let shown = &last[last.len().saturating_sub(5)..];
    if shown.is_empty() {
        String::new()
    } else {
        format!(": {}", shown.join(" / "))
    }
}

/// The runner for `host`, the one place the choice is made: commands run
/// for real on the real root only. A fake tree (a rehearsal, a test) cannot
/// have commands moved under it, so there they are recorded. `log` is
/// setup's log file, when the commands should go there; `echo` prints each
/// one on stderr (not while a screen is drawn).
pub fn for_host(host: &Host, log: Option<&Path>, echo: bool) -> std::io::Result<Box<dyn Runner>> {
    if host.root != Path::new("/") {
        return Ok(Box::new(RecordingRunner::default()));
    }
    let mut runner = SystemRunner::new(host.clone(), log)?;
    runner.echo = echo;
    Ok(Box::new(runner))
}

/// Performs actions on the machine described by `host`: files under its
/// root, device nodes under its device directory. Commands run as they are.
pub struct SystemRunner {
    host: Host,
    log: Option<File>,
    /// Echo each command to stderr (the console at first boot).
    pub echo: bool,
}

impl SystemRunner {
    pub fn new(host: Host, log_path: Option<&Path>) -> std::io::Result<SystemRunner> {
        let log = match log_path {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                Some(OpenOptions::new().create(true).append(true).open(path)?)
            }
            None => None,
        };
        Ok(SystemRunner {
            host,
            log,
            echo: true,
        })
    }

    fn log(&mut self, text: &str) {
        if let Some(log) = &mut self.log {
            let _ = log.write_all(text.as_bytes());
        }
    }

    /// A line that is no command's output, on the terminal (when echoing)
    /// and in the log.
    fn note(&mut self, note: &str) {
        if self.echo {
            eprint!("{note}");
        }
        self.log(note);
    }

    fn exec(&mut self, cmd: &Cmd) -> Result<String, RunError> {
        let shown = cmd.to_string();
        if self.echo {
            eprintln!("$ {shown}");
        }
        let (status, stdout, stderr) = self.spawn(cmd)?;
        if status != 0 {
            return Err(RunError::Failed {
                cmd: shown,
                status,
                stderr,
            });
        }
        if let Some(marker) = &cmd.fails_if_stdout_has
            && stdout.contains(marker.as_str())
        {
            return Err(RunError::ReportedFailure { cmd: shown, stdout });
        }
        Ok(stdout)
    }

    /// Runs `cmd` as [`Ask::query`] does, logged, its answer as a tuple.
    fn spawn(&mut self, cmd: &Cmd) -> Result<(i32, String, String), RunError> {
        let Query {
            status,
            stdout,
            stderr,
        } = self.query(cmd)?;
        Ok((status, stdout, stderr))
    }

    fn write(&mut self, path: &str, contents: &str, mode: u32) -> Result<(), RunError> {
        self.log(&format!("# write {path}\n"));
        atomic_file::write(&self.host.path(path), contents.as_bytes(), mode).map_err(|source| {
            RunError::Io {
                what: format!("writing {path}"),
                source,
            }
        })
    }

    fn share_dir(
        &mut self,
        action: &Action,
        mount: &str,
        path: &str,
        owner: Option<&str>,
        mode: Option<u32>,
    ) -> Result<(), RunError> {
        let shown = action.to_string();
        if self.echo {
            eprintln!("$ {shown}");
        }
        self.log(&format!("{shown}\n"));
        let owner = owner.map(share_dir::owner_of).transpose()?;
        let fd = share_dir::open_mount(&self.host.root, mount)?;
        share_dir::make_below(&fd, mount, path, owner, mode)?;
        Ok(())
    }

    /// A command on a device an interrupted run already removed is noted,
    /// not run.
    fn skip_absent(&mut self, path: &str, cmd: &Cmd) {
        let note = format!("# skipped, {path} no longer exists: {cmd}\n");
        self.note(&note);
    }

    fn replace_managed_block(&mut self, path: &str, contents: &str) -> Result<(), RunError> {
        let existing = match std::fs::read_to_string(self.host.path(path)) {
            Ok(text) => text,
            // Only a file that is not there yet starts empty: any
            // other failure would replace the system's file with
            // just nasforge's block.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => {
                return Err(RunError::Io {
                    what: format!(
                        "reading {path} to update nasforge's block in it (the file was left as it is; fix or move it, then start setup again)"
                    ),
                    source,
                });
            }
        };
        self.write(path, &managed::merge(&existing, contents), 0o644)
    }

    fn capture_to_file(
        &mut self,
        path: &str,
        header: &str,
        cmd: &Cmd,
        drop: &[String],
        first: &[crate::storage::mdadm::ScanLine],
    ) -> Result<(), RunError> {
        let output = self.exec(cmd)?;
        let kept: String = crate::storage::mdadm::scan_lines(&output, drop, first)
            .into_iter()
            .map(|l| l + "\n")
            .collect();
        self.write(path, &format!("{header}{kept}"), 0o644)
    }

    fn remove_file(&mut self, path: &str) -> Result<(), RunError> {
        match std::fs::remove_file(self.host.path(path)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(RunError::Io {
                what: format!("removing {path}"),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    fn reread_partitions(&mut self, action: &Action, device: &str) -> Result<(), RunError> {
        self.log(&format!("{action}\n"));
        let path = self.host.dev_path(device);
        let reread = partition::reread(&path);
        if reread.is_ok() && partition::kernel_has_partition(&self.host.path("/sys"), &path, 1) {
            return Ok(());
        }
        self.log(&format!(
            "BLKRRPART: {reread:?} and no partition 1 in sysfs; trying partx\n"
        ));
        self.exec(&Cmd::new(&["partx", "-u", device])).map(drop)
    }

    fn zero_ends(&mut self, action: &Action, device: &str) -> Result<(), RunError> {
        self.log(&format!("{action}\n"));
        let path = self.host.dev_path(device);
        let io = |source| RunError::Io {
            what: format!("zeroing {device}"),
            source,
        };
        let file = OpenOptions::new().write(true).open(&path).map_err(io)?;
        let size = signature::device_size(&file).map_err(io)?;
        let len = signature::WINDOW.min(size);
        let zeros = vec![0u8; len as usize];
        file.write_all_at(&zeros, 0).map_err(io)?;
        file.write_all_at(&zeros, size - len).map_err(io)?;
        file.sync_all().map_err(io)
    }
}

/// Set while mdadm.conf is newer than the initramfs, so a power cut
/// between the two does not leave the initramfs with the old lines.
const INITRAMFS_STALE: &str = "/var/lib/nasforge/initramfs-stale";

impl SystemRunner {
    fn follow_sync(&mut self, action: &Action, device: &str) -> Result<(), RunError> {
        self.log(&format!("{action}\n"));
        let echo = self.echo;
        let log = &mut self.log;
        let mut say = |line: &str| progress_line(echo, log, line);
        crate::machine::resync::follow_sync(&self.host, device, &mut std::thread::sleep, &mut say)
            .map_err(|why| RunError::Io {
                what: format!("following {device}"),
                source: std::io::Error::other(why),
            })
    }

    fn follow_resilver(&mut self, action: &Action, pool: &str) -> Result<(), RunError> {
        self.log(&format!("{action}\n"));
        let echo = self.echo;
        let host = &self.host;
        let log = &mut self.log;
        let mut say = |line: &str| progress_line(echo, log, line);
        let mut status =
            || match crate::machine::zfs::read(host, "zpool", &["status", "-P", "-p", pool]) {
                Ok(Some(text)) => Ok(text),
                Ok(None) => Err("zpool is not installed (zfsutils-linux)".to_string()),
                Err(why) => Err(why),
            };
        crate::machine::resilver::follow_resilver(
            pool,
            &mut status,
            &mut std::thread::sleep,
            &mut say,
        )
        .map_err(|why| RunError::Io {
            what: format!("following the resilver of {pool}"),
            source: std::io::Error::other(why),
        })
    }

    /// mdadm.conf with the ARRAY lines of the arrays running now, when
    /// they differ from the file's (see `merge_array_lines`).
    fn merged_mdadm_conf(&mut self) -> Result<Option<String>, RunError> {
        let scan = self.exec(&Cmd::new(&["mdadm", "--detail", "--scan"]))?;
        let existing = std::fs::read_to_string(self.host.path(crate::storage::mdadm::CONF))
            .unwrap_or_default();
        Ok(crate::storage::mdadm::merge_array_lines(&existing, &scan))
    }

    fn refresh_mdadm_conf(&mut self) -> Result<(), RunError> {
        if let Some(text) = self.merged_mdadm_conf()? {
            self.write(INITRAMFS_STALE, "", 0o644)?;
            self.write(crate::storage::mdadm::CONF, &text, 0o644)?;
        }
        if self.host.path(INITRAMFS_STALE).exists() {
            self.rebuild_initramfs()?;
            self.remove_file(INITRAMFS_STALE)?;
        }
        Ok(())
    }

    /// See [`Action::RebuildInitramfs`]. An initramfs lsinitramfs cannot
    /// read is rebuilt, as is every one when any carries mdadm.
    fn rebuild_initramfs(&mut self) -> Result<(), RunError> {
        let mut images: Vec<String> = std::fs::read_dir(self.host.path("/boot"))
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|name| name.starts_with("initrd.img-"))
                    .collect()
            })
            .unwrap_or_default();
        images.sort();
        for name in &images {
            let path = self.host.path(&format!("/boot/{name}"));
            let path = path.to_string_lossy();
            let (status, listing, _) = self.spawn(&Cmd::new(&["lsinitramfs", &path]))?;
            if status != 0 || listing.lines().any(|l| l.ends_with("sbin/mdadm")) {
                return self
                    .exec(&Cmd::new(&["update-initramfs", "-u", "-k", "all"]))
                    .map(drop);
            }
        }
        let note = format!(
            "# no initramfs in /boot carries mdadm ({}): none assembles an array before the root filesystem, where udev assembles them from mdadm.conf; not rebuilt\n",
            if images.is_empty() {
                "there is none".to_string()
            } else {
                images.join(", ")
            }
        );
        self.note(&note);
        Ok(())
    }
}

impl SystemRunner {
    fn zfs_dataset(
        &mut self,
        dataset: &str,
        quota: Option<crate::size::Size>,
    ) -> Result<(), RunError> {
        let (status, _, _) =
            self.spawn(&Cmd::new(&["zfs", "list", "-H", "-o", "name", dataset]))?;
        let argv = if status == 0 {
            zpool::set_quota(dataset, quota)
        } else {
            zpool::create_dataset(dataset, quota)
        };
        self.exec(&Cmd::new(&argv)).map(drop)
    }

    fn adopt_array(
        &mut self,
        device: &str,
        uuid: &str,
        devices: &[String],
        run: bool,
        filesystem: &str,
    ) -> Result<(), RunError> {
        use crate::machine::existing::{assemble_readonly, probe_type};
        // udev may have started the array under a name of its own (an old
        // nasforge's disks carry this board's home host): stopped, so that
        // it can be assembled under the recipe's name.
        let mut running: Vec<String> = devices
            .iter()
            .filter_map(|d| crate::machine::disks::kernel_name(&self.host, d))
            .flat_map(|k| {
                crate::machine::mounts::holders(&self.host.path(&format!("/sys/class/block/{k}")))
            })
            .filter(|h| h.starts_with("md"))
            .collect();
        running.sort();
        running.dedup();
        for md in running {
            self.exec(&Cmd::new(&["mdadm", "--stop", &format!("/dev/{md}")]))?;
        }
        self.exec(&assemble_readonly(device, uuid, devices, run))?;
        let (_, found, _) = self.spawn(&probe_type(device))?;
        let found = found.trim();
        if found != filesystem {
            self.exec(&Cmd::new(&["mdadm", "--stop", device]))?;
            return Err(RunError::NotTheFilesystem {
                device: device.to_string(),
                found: if found.is_empty() {
                    "no filesystem libblkid knows".to_string()
                } else {
                    format!(
                        "{} {found} filesystem",
                        crate::machine::signature::a_or_an(found)
                    )
                },
                wanted: filesystem.to_string(),
            });
        }
        self.exec(&Cmd::new(&["mdadm", "--readwrite", device]))?;
        // Listed in mdadm.conf at once: it carries another machine's home
        // host, so until the conf names it no boot starts it, and a power
        // cut before setup's own mdadm.conf step would leave it stopped for
        // good behind this step, which the journal records as done.
        if let Some(text) = self.merged_mdadm_conf()? {
            self.write(crate::storage::mdadm::CONF, &text, 0o644)?;
        }
        Ok(())
    }

    fn adopt_pool(
        &mut self,
        pool: &str,
        id: &str,
        force: bool,
        mount: &str,
    ) -> Result<(), RunError> {
        // A run cut short after the import finds the pool imported: the
        // guard checked it is this one.
        let listed = self.spawn(&Cmd::new(&["zpool", "list", "-H", "-o", "name", pool]))?;
        if listed.0 != 0 {
            self.exec(&crate::steps::adopt_import(id, force))?;
        }
        let (_, found, _) = self.spawn(&Cmd::new(&[
            "zfs",
            "get",
            "-H",
            "-o",
            "value",
            "mountpoint",
            pool,
        ]))?;
        if found.trim() != mount {
            self.exec(&Cmd::new(&[
                "zfs",
                "set",
                &format!("mountpoint={mount}"),
                pool,
            ]))?;
        }
        Ok(())
    }

    fn create_pool(&mut self, argv: &[String]) -> Result<(), RunError> {
        match self.exec(&Cmd::new(argv)) {
            Err(RunError::Failed { stderr, .. }) if zpool::create_raced_udev(&stderr) => {
                let note = "# a disk zpool had just partitioned was briefly gone: once more, after udev settles\n";
                self.note(note);
                self.exec(&Cmd::new(&["udevadm", "settle"]))?;
                self.exec(&Cmd::new(&zpool::create_forced(argv))).map(drop)
            }
            done => done.map(drop),
        }
    }

    fn hold_kernel(&mut self) -> Result<(), RunError> {
        let packages = crate::machine::updates::installed_kernel_packages(&self.host);
        if packages.is_empty() {
            let note =
                "# no kernel package is installed (the kernel is not dpkg's): nothing to hold\n";
            self.note(note);
            return Ok(());
        }
        let mut argv = vec!["apt-mark", "hold"];
        argv.extend(packages.iter().map(|p| p.name.as_str()));
        self.exec(&Cmd::new(&argv)).map(drop)
    }
}

/// A line of a long step's progress, on the terminal (when echoing) and
/// in the log.
fn progress_line(echo: bool, log: &mut Option<File>, line: &str) {
    if echo {
        eprintln!("nasforge-setup:   {line}");
    }
    if let Some(log) = log {
        let _ = writeln!(log, "{line}");
    }
}

impl SystemRunner {
    fn enable_units(&mut self, units: &[String], now: bool) -> Result<(), RunError> {
        use crate::steps::{enable_argv, needs_no_enabling, start_argv};
        let mut missing = Vec::new();
        for unit in units {
            let (_, said, _) = self.spawn(&Cmd::new(&["systemctl", "is-enabled", unit]))?;
            if !needs_no_enabling(&said) {
                missing.push(unit.as_str());
            }
        }
        if missing.is_empty() {
            let note = format!("# enabled already: {}\n", units.join(" "));
            self.note(&note);
        } else {
            self.exec(&Cmd::new(&enable_argv(&missing)))?;
        }
        if now {
            self.exec(&Cmd::new(&start_argv(units)))?;
        }
        Ok(())
    }
}

impl Runner for SystemRunner {
    fn apply(&mut self, action: &Action) -> Result<(), RunError> {
        match action {
            Action::Run(
                cmd @ Cmd {
                    only_if_present: Some(path),
                    ..
                },
            ) if !self.host.dev_path(path).exists() => {
                self.skip_absent(path, cmd);
                Ok(())
            }
            Action::Run(cmd) => self.exec(cmd).map(drop),
            Action::WriteFile {
                path,
                contents,
                mode,
            } => self.write(path, contents, *mode),
            Action::ManagedBlock { path, contents } => self.replace_managed_block(path, contents),
            Action::CaptureToFile {
                path,
                header,
                cmd,
                drop,
                first,
            } => self.capture_to_file(path, header, cmd, drop, first),
            Action::RemoveFile { path } => self.remove_file(path),
            Action::WriteGpt {
                device,
                block_size,
                name,
                kind,
            } => {
                self.log(&format!("{action}\n"));
                partition::write_single(&self.host.dev_path(device), *block_size, name, *kind)
                    .map(drop)?;
                Ok(())
            }
            Action::RereadPartitions { device } => self.reread_partitions(action, device),
            Action::ZeroEnds { device } => self.zero_ends(action, device),
            Action::FollowSync { device } => self.follow_sync(action, device),
            Action::FollowResilver { pool } => self.follow_resilver(action, pool),
            Action::RefreshMdadmConf => self.refresh_mdadm_conf(),
            Action::RebuildInitramfs => self.rebuild_initramfs(),
            Action::Reboot => self.exec(&crate::steps::reboot_cmd()).map(drop),
            Action::EnableUnits { units, now } => self.enable_units(units, *now),
            Action::ShareDir {
                mount,
                path,
                owner,
                mode,
            } => self.share_dir(action, mount, path, owner.as_deref(), *mode),
            Action::ZfsDataset { dataset, quota } => self.zfs_dataset(dataset, *quota),
            Action::CreatePool { argv } => self.create_pool(argv),
            Action::HoldKernel => self.hold_kernel(),
            Action::AdoptArray {
                device,
                uuid,
                devices,
                run,
                filesystem,
            } => self.adopt_array(device, uuid, devices, *run, filesystem),
            Action::AdoptPool {
                pool,
                id,
                force,
                mount,
            } => self.adopt_pool(pool, id, *force, mount),
        }
    }

    fn wait(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

impl Ask for SystemRunner {
    fn query(&mut self, cmd: &Cmd) -> Result<Query, SpawnError> {
        self.log(&format!("$ {cmd}\n"));
        let answer = System.query(cmd)?;
        self.log(&format!(
            "{}{}[exit status {}]\n",
            answer.stdout, answer.stderr, answer.status
        ));
        Ok(answer)
    }
}

/// Writes actions down instead of performing them.
#[derive(Debug, Default)]
pub struct RecordingRunner {
    /// Each applied action as `plan --dry-run` prints it.
    pub lines: Vec<String>,
    /// Standard output for queries, by the command's first words.
    pub responses: Vec<(String, String)>,
    /// Queries that fail (exit status 1), by the command's first words,
    /// with the standard error they print: a tool refusing, as a real one
    /// can.
    pub failures: Vec<(String, String)>,
    /// Fail the action with this index (counted over all `apply` calls),
    /// as a power cut would.
    pub interrupt_at: Option<usize>,
    applied: usize,
}

impl RecordingRunner {
    /// A recorder whose queries are answered by the first of `responses`
    /// (command's first words, standard output) that fits.
    pub fn answering(responses: Vec<(String, String)>) -> RecordingRunner {
        RecordingRunner {
            responses,
            ..RecordingRunner::default()
        }
    }

    /// A recorder that fails the `index`-th action, as a power cut would.
    pub fn interrupting_at(index: usize) -> RecordingRunner {
        RecordingRunner {
            interrupt_at: Some(index),
            ..RecordingRunner::default()
        }
    }
}

impl Runner for RecordingRunner {
    fn apply(&mut self, action: &Action) -> Result<(), RunError> {
        let index = self.applied;
        self.applied += 1;
        if self.interrupt_at == Some(index) {
            return Err(RunError::Interrupted(action.to_string()));
        }
        self.lines.push(action.to_string());
        Ok(())
    }

    fn wait(&mut self, duration: Duration) {
        self.lines.push(format!("# wait {} s", duration.as_secs()));
    }
}

impl Ask for RecordingRunner {
    fn query(&mut self, cmd: &Cmd) -> Result<Query, SpawnError> {
        let shown = cmd.to_string();
        self.lines.push(shown.clone());
        if let Some((_, stderr)) = self
            .failures
            .iter()
            .find(|(prefix, _)| shown.starts_with(prefix.as_str()))
        {
            return Ok(Query {
                status: 1,
                stderr: stderr.clone(),
                ..Query::default()
            });
        }
        let stdout = self
            .responses
            .iter()
            .find(|(prefix, _)| shown.starts_with(prefix.as_str()))
            .map(|(_, out)| out.clone())
            .unwrap_or_default();
        Ok(Query {
            stdout,
            ..Query::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner_in(dir: &Path) -> SystemRunner {
        let mut runner = SystemRunner::new(Host::new(dir), None).unwrap();
        runner.echo = false;
        runner
    }

    fn block(path: &str) -> Action {
        Action::ManagedBlock {
            path: path.into(),
            contents: "UUID=x /srv/data ext4 defaults,nofail 0 2".into(),
        }
    }

    #[test]
    fn a_managed_file_that_cannot_be_read_is_left_alone_and_the_step_fails() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/samba")).unwrap();
        // Latin-1 in a comment: not UTF-8, but every line of it matters.
        let fstab = b"# Ger\xe4te\nPARTUUID=abcd-02 / ext4 defaults 0 1\n".to_vec();
        std::fs::write(dir.path().join("etc/fstab"), &fstab).unwrap();
        let err = runner_in(dir.path())
            .apply(&block("/etc/fstab"))
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "reading /etc/fstab to update nasforge's block in it (the file was left as it is"
            ),
            "{err}"
        );
        assert_eq!(std::fs::read(dir.path().join("etc/fstab")).unwrap(), fstab);

        // Not a file at all.
        std::fs::create_dir_all(dir.path().join("etc/samba/smb.conf")).unwrap();
        let err = runner_in(dir.path())
            .apply(&block("/etc/samba/smb.conf"))
            .unwrap_err();
        assert!(err.to_string().contains("smb.conf"), "{err}");
        assert!(dir.path().join("etc/samba/smb.conf").is_dir());
    }

    #[test]
    fn a_managed_file_that_is_not_there_gets_just_the_block() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        runner_in(dir.path()).apply(&block("/etc/fstab")).unwrap();
        let text = std::fs::read_to_string(dir.path().join("etc/fstab")).unwrap();
        assert!(text.contains("UUID=x /srv/data"), "{text}");
    }

    #[test]
    fn mdadm_conf_keeps_the_scan_but_not_a_rebuilding_disk_as_a_spare() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/mdadm")).unwrap();
        let scan = "ARRAY /dev/md/data metadata=1.2 spares=1 name=nas:data UUID=46ccf33a:43245f8d:53ec8dad:ec1a0100\n";
        let action = Action::CaptureToFile {
            path: "/etc/mdadm/mdadm.conf".into(),
            header: "HOMEHOST nas\n".into(),
            cmd: Cmd::new(&["printf", scan]),
            drop: vec!["spares=".into()],
            first: vec![],
        };
        runner_in(dir.path()).apply(&action).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("etc/mdadm/mdadm.conf")).unwrap(),
            "HOMEHOST nas\nARRAY /dev/md/data metadata=1.2 name=nas:data UUID=46ccf33a:43245f8d:53ec8dad:ec1a0100\n"
        );
    }
}
