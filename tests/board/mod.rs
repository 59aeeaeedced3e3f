//! A machine booted with `nasforge emulate`, reached the way a user reaches
//! a NAS: the serial console, SSH as the recipe's user, smbclient. Shared by
//! the emulated-board test (e2e) and the emulated PC's (e2e_pc).
#![allow(dead_code)]

use crate::common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The recipe's user's password in every emulated test.
pub const PASSWORD: &str = "e2e-password-not-in-image";
pub const GIB: u64 = 1 << 30;

pub struct Phases {
    start: Instant,
    last: Instant,
    done: Vec<(String, Duration)>,
}

impl Phases {
    pub fn new() -> Self {
        Phases {
            start: Instant::now(),
            last: Instant::now(),
            done: vec![],
        }
    }
    pub fn lap(&mut self, name: &str) {
        let now = Instant::now();
        eprintln!("e2e: {name}: {:.0}s", (now - self.last).as_secs_f64());
        self.done.push((name.to_string(), now - self.last));
        self.last = now;
    }
}

impl Drop for Phases {
    fn drop(&mut self) {
        eprintln!("\ne2e timing summary:");
        for (name, d) in &self.done {
            eprintln!("  {:>6.0}s  {name}", d.as_secs_f64());
        }
        eprintln!("  {:>6.0}s  total", self.start.elapsed().as_secs_f64());
    }
}

/// A running `nasforge emulate`, killed (qemu included) when dropped.
pub struct Board {
    pub child: Child,
    pub log: PathBuf,
    /// qemu's control socket (`emulate --qmp`), for `nasforge fault`.
    pub qmp: PathBuf,
    pub ssh: u16,
    pub smb: u16,
    pub nfs: u16,
}

impl Board {
    pub fn boot(dir: &Path, image: &Path, disks: &[PathBuf], log_name: &str) -> Board {
        Board::boot_with(dir, image, disks, log_name, &[])
    }

    /// A PC booted with the image's own disk pulled: it boots from an
    /// `ssd-*` disk (`--without-image-disk`).
    pub fn boot_without_image_disk(
        dir: &Path,
        image: &Path,
        disks: &[PathBuf],
        log_name: &str,
    ) -> Board {
        Board::boot_with(dir, image, disks, log_name, &["--without-image-disk"])
    }

    fn boot_with(
        dir: &Path,
        image: &Path,
        disks: &[PathBuf],
        log_name: &str,
        extra: &[&str],
    ) -> Board {
        let log = dir.join(log_name);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nasforge"));
        // The tests' own cache, where the Debian base they built is: the
        // stand-in kernel of a Pi or Armbian image comes from such a base,
        // and without it `emulate` would build another one (minutes under
        // qemu-user on a fresh machine) into ~/.cache.
        cmd.env(
            "NASFORGE_CACHE",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("nasforge-cache"),
        );
        cmd.arg("emulate")
            .arg(image)
            .arg("--headless")
            .arg("--exit-on-reboot")
            .arg("--serial-log")
            .arg(&log);
        let qmp = dir.join("qmp.sock");
        cmd.arg("--workdir")
            .arg(dir.join("emulate"))
            .arg("--qmp")
            .arg(&qmp)
            .args(extra);
        // The file name says the bus: usb-* on usb-storage, uas-* on
        // usb-uas (tests/usb), sas-* behind the PC's SAS HBAs, ssd-* an
        // NVMe SSD the PC may boot from, anything else on a SATA port.
        for d in disks {
            let name = d.file_name().unwrap().to_string_lossy();
            let flag = if name.starts_with("usb-") {
                "--usb-disk"
            } else if name.starts_with("uas-") {
                "--uas-disk"
            } else if name.starts_with("sas-") {
                "--sas-disk"
            } else if name.starts_with("ssd-") {
                "--ssd"
            } else {
                "--disk"
            };
            cmd.arg(flag).arg(d);
        }
        use std::os::unix::process::CommandExt;
        cmd.process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap();
        let mut out = String::new();
        let stdout = child.stdout.take().unwrap();
        let mut reader = std::io::BufReader::new(stdout);
        loop {
            let mut line = String::new();
            if std::io::BufRead::read_line(&mut reader, &mut line).unwrap() == 0 {
                panic!("nasforge emulate ended before printing its ports:\n{out}");
            }
            out.push_str(&line);
            if line.trim_start().starts_with("nfs:") {
                break;
            }
        }
        eprintln!("{out}");
        // "ssh -p PORT", "smbclient ... -p PORT", "nfs://127.0.0.1:PORT/".
        let number_after = |marker: &str| -> u16 {
            let line = out
                .lines()
                .find(|l| l.contains(marker))
                .unwrap_or_else(|| panic!("no `{marker}` in:\n{out}"));
            let rest = line.split(marker).nth(1).unwrap();
            rest.split(|c: char| !c.is_ascii_digit())
                .find(|s| !s.is_empty())
                .unwrap()
                .parse()
                .unwrap()
        };
        let (ssh, smb, nfs) = (
            number_after("ssh -p "),
            number_after("/<share> -p "),
            number_after("nfsport="),
        );
        Board {
            child,
            log,
            qmp,
            ssh,
            smb,
            nfs,
        }
    }

    /// The console so far, read lossily: a PC's GRUB draws its menu's box
    /// on the serial port in code page 437, which is not UTF-8.
    pub fn log(&self) -> String {
        std::fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Polls `ready` until it holds; fails when the board stops first or
    /// `limit` passes, with the end of the console.
    pub fn wait_until(
        &mut self,
        what: &str,
        limit: Duration,
        every: Duration,
        mut ready: impl FnMut(&mut Board) -> bool,
    ) {
        let start = Instant::now();
        loop {
            if ready(self) {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the board stopped ({status}) before {what}:\n{}",
                    tail(&self.log(), 80)
                );
            }
            assert!(
                start.elapsed() < limit,
                "not within {limit:?}: {what}:\n{}",
                tail(&self.log(), 80)
            );
            std::thread::sleep(every);
        }
    }

    /// Waits for `marker` on the serial console.
    /// Waits for `marker` on the console. A first boot that gave up
    /// (firstboot's "FAILED:" line) fails the wait at once with what setup
    /// said: nothing more comes on that boot, and the limit is long.
    pub fn wait_for(&mut self, marker: &str, limit: Duration) {
        self.wait_until(
            &format!("`{marker}` on the console"),
            limit,
            Duration::from_secs(2),
            |b| {
                let log = b.log();
                if !log.contains(marker)
                    && let Some(line) = log
                        .lines()
                        .find(|l| l.contains("nasforge-firstboot: FAILED:"))
                {
                    let said: Vec<&str> = log
                        .lines()
                        .filter(|l| l.contains("nasforge-setup:") && l.contains("failed"))
                        .collect();
                    panic!(
                        "the first boot failed before `{marker}`: {line}\n{}\n{}",
                        said.join("\n"),
                        tail(&log, 80)
                    );
                }
                log.contains(marker)
            },
        );
    }

    pub fn ssh_args(&self, key: &Path) -> Vec<String> {
        vec![
            "-i".into(),
            key.display().to_string(),
            "-p".into(),
            self.ssh.to_string(),
            "-o".into(),
            "StrictHostKeyChecking=no".into(),
            "-o".into(),
            "UserKnownHostsFile=/dev/null".into(),
            "-o".into(),
            "LogLevel=ERROR".into(),
            "-o".into(),
            "ConnectTimeout=10".into(),
            "-o".into(),
            "BatchMode=yes".into(),
            "admin@127.0.0.1".into(),
        ]
    }

    /// Runs a command on the board as admin (with sudo when asked).
    pub fn ssh(&self, key: &Path, command: &str) -> (bool, String) {
        let mut c = Command::new("ssh");
        c.args(self.ssh_args(key))
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{PASSWORD}\n").as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status.success(), printed(&out))
    }

    /// Waits until SSH lets the recipe's user in; each new way it refuses
    /// is printed, so a failure says more than the console does.
    pub fn wait_for_ssh(&mut self, key: &Path, limit: Duration) {
        let mut last = String::new();
        self.wait_until("SSH answered", limit, Duration::from_secs(3), |b| {
            let (ok, said) = b.ssh(key, "true");
            if !ok && said != last {
                eprintln!("e2e: ssh not yet: {}", said.trim());
                last = said;
            }
            ok
        });
    }

    /// Shuts the board down cleanly and waits for qemu to exit.
    pub fn poweroff(mut self, key: &Path) {
        let _ = self.ssh(key, "sudo -S systemctl poweroff");
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "the board did not power off:\n{}",
                tail(&self.log(), 40)
            );
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    /// Waits for qemu to quit on its own (a guest's reboot with
    /// `--exit-on-reboot`) and returns the console.
    pub fn wait_for_exit(mut self, limit: Duration) -> String {
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < limit,
                "qemu did not quit within {limit:?}:\n{}",
                tail(&self.log(), 40)
            );
            std::thread::sleep(Duration::from_secs(2));
        }
        self.log()
    }

    /// `nasforge fault QMP ARGS...`, as a person rehearsing would run it;
    /// what it printed.
    pub fn fault(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_nasforge"))
            .arg("fault")
            .arg(&self.qmp)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nasforge fault {args:?}:\n{}",
            printed(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The power cut, through `nasforge fault`: qemu stops at once.
    pub fn power_cut(mut self) {
        self.fault(&["power-cut"]);
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "qemu still runs after the power cut"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            unsafe { libc::killpg(self.child.id() as i32, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// A command's output as root, without sudo's password prompt in it.
pub fn sudo(board: &Board, key: &Path, command: &str) -> String {
    let (ok, out) = board.ssh(key, &format!("sudo -S sh -c '{command}'"));
    assert!(ok, "{command}:\n{out}");
    out.replace("[sudo] password for admin: ", "")
}

/// A scrub of `pool` to its end, which must repair nothing and find no
/// errors with the pool in `state`; zpool's status after it.
pub fn clean_scrub(board: &Board, key: &Path, pool: &str, state: &str) -> String {
    let scrub = sudo(
        board,
        key,
        &format!("zpool wait -t resilver {pool}; zpool scrub -w {pool} && zpool status -P {pool}"),
    );
    assert!(
        scrub.contains(&format!("state: {state}"))
            && scrub.contains("scrub repaired 0B")
            && scrub.contains("with 0 errors")
            && scrub.contains("errors: No known data errors"),
        "{scrub}"
    );
    scrub
}

pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// smbclient against one of the board's shares as the recipe's user.
pub fn smbclient(board: &Board, share: &str, commands: &str) -> std::process::Output {
    Command::new("smbclient")
        .arg(format!("//127.0.0.1/{share}"))
        .args([
            "-p",
            &board.smb.to_string(),
            "-U",
            &format!("admin%{PASSWORD}"),
            "-c",
            commands,
        ])
        .output()
        .unwrap()
}

pub fn smb_roundtrip(board: &Board, dir: &Path, payload: &Path, name: &str) -> String {
    let back = dir.join(format!("{name}.back"));
    let _ = std::fs::remove_file(&back);
    let out = smbclient(
        board,
        "data",
        &format!(
            "put {} {name}; get {name} {}",
            payload.display(),
            back.display()
        ),
    );
    assert!(out.status.success(), "smbclient failed:\n{}", printed(&out));
    sha256_file(&back)
}

/// Samba starts a little after SSH answers, and the emulator's port
/// forward accepts a connection before anything listens behind it: a
/// refused or reset connection is retried for a while.
pub fn smb_get(board: &Board, dir: &Path, name: &str) -> String {
    let back = dir.join(format!("{name}.get"));
    let start = Instant::now();
    loop {
        let _ = std::fs::remove_file(&back);
        let out = smbclient(board, "data", &format!("get {name} {}", back.display()));
        let text = printed(&out);
        if out.status.success() {
            return sha256_file(&back);
        }
        let not_yet = text.contains("NT_STATUS_CONNECTION_RESET")
            || text.contains("NT_STATUS_CONNECTION_DISCONNECTED")
            || text.contains("NT_STATUS_CONNECTION_REFUSED")
            || text.contains("NT_STATUS_IO_TIMEOUT");
        assert!(
            not_yet && start.elapsed() < Duration::from_secs(180),
            "smbclient get failed:\n{text}"
        );
        std::thread::sleep(Duration::from_secs(5));
    }
}

/// A file of the board's `data` share read over NFS (libnfs's nfs-cat).
pub fn nfs_cat(board: &Board, name: &str) -> std::process::Output {
    Command::new("nfs-cat")
        .arg(format!(
            "nfs://127.0.0.1/srv/data/{name}?version=4&nfsport={}",
            board.nfs
        ))
        .output()
        .unwrap()
}

/// `len` bytes that neither compress nor repeat (xorshift64), for a round
/// trip whose checksum proves every byte came back.
pub fn write_payload(path: &Path, len: usize) {
    let mut data = vec![0u8; len];
    let mut x = 0x2545F4914F6CDD1Du64;
    for c in data.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
    }
    std::fs::write(path, data).unwrap();
}
