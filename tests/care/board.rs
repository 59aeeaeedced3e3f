//! Waiting on the board with a bound, and failing with what it says: the
//! care chain's commands run for minutes, and a failure in CI must explain
//! itself without a rerun.

use super::super::{Board, PASSWORD, tail};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The board's journal of this boot, the lines matching `pattern`.
fn board_says(board: &Board, key: &Path, pattern: &str) -> String {
    let (_, out) = board.ssh(
        key,
        &format!("sudo -S journalctl -b --no-pager | grep -iE '{pattern}' | tail -80"),
    );
    out
}

/// Panics with `what`, the board's journal lines matching `pattern` and
/// the end of the console.
pub fn fail(board: &Board, key: &Path, what: &str, pattern: &str) -> ! {
    panic!(
        "{what}\n--- the board's journal (/{pattern}/):\n{}\n--- console:\n{}",
        board_says(board, key, pattern),
        tail(&board.log(), 60)
    )
}

/// Polls `ready` every `every` until it answers Ok; when the board stops or
/// `limit` passes, panics with what `ready` last saw, the journal lines
/// matching `pattern`, and the console.
pub fn poll(
    board: &mut Board,
    key: &Path,
    what: &str,
    limit: Duration,
    every: Duration,
    pattern: &str,
    mut ready: impl FnMut(&Board) -> Result<(), String>,
) {
    let start = Instant::now();
    loop {
        let last = match ready(board) {
            Ok(()) => return,
            Err(seen) => seen,
        };
        if let Some(status) = board.child.try_wait().unwrap() {
            panic!(
                "the board stopped ({status}) before {what}; last seen:\n{last}\n--- console:\n{}",
                tail(&board.log(), 80)
            );
        }
        if start.elapsed() >= limit {
            fail(
                board,
                key,
                &format!("not within {limit:?}: {what}; last seen:\n{last}"),
                pattern,
            );
        }
        std::thread::sleep(every);
    }
}

/// Runs `command` over SSH as Board::ssh does (the password on stdin for
/// sudo -S), but gives up after `limit` with what it printed so far.
pub fn ssh_run(board: &Board, key: &Path, command: &str, limit: Duration) -> (bool, String) {
    let mut out = tempfile::tempfile().unwrap();
    let mut child = Command::new("ssh")
        .args(board.ssh_args(key))
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(out.try_clone().unwrap())
        .stderr(out.try_clone().unwrap())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{PASSWORD}\n").as_bytes())
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_secs(2));
    };
    let mut bytes = Vec::new();
    out.rewind().unwrap();
    out.read_to_end(&mut bytes).unwrap();
    let printed = String::from_utf8_lossy(&bytes).into_owned();
    match status {
        Some(status) => (status.success(), printed),
        None => fail(
            board,
            key,
            &format!("`{command}` did not finish within {limit:?}; it printed:\n{printed}"),
            "nasforge",
        ),
    }
}

/// The board's path for the disk with `serial` (emulate gives a disk its
/// file's name as serial): udev's /dev/disk/by-id link for an ATA disk.
pub fn by_id(board: &Board, key: &Path, serial: &str) -> String {
    let path = format!("/dev/disk/by-id/ata-QEMU_HARDDISK_{serial}");
    let (ok, _) = board.ssh(key, &format!("test -b {path}"));
    if !ok {
        let (_, seen) = board.ssh(
            key,
            "ls -l /dev/disk/by-id; lsblk -o NAME,SIZE,SERIAL,MODEL",
        );
        panic!("no {path} on the board:\n{seen}");
    }
    path
}
