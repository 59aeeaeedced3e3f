//! Clients on the host that keep a NAS busy while something goes wrong
//! (issue 36): SMB clients that put files of their own and get a known one
//! back, an NFS client that gets it (bookworm's libnfs creates a file over
//! NFSv4 but its WRITE is refused, as anyone's), each copy recorded as the
//! client saw it; and the power cut while they write. Shared by the
//! emulated board's faults (tests/faults) and the emulated PC's power cut.
#![allow(dead_code)]

use super::Board;
use super::PASSWORD;
use super::common::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub const FILE: usize = 4 << 20;
pub const SMB_CLIENTS: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Way {
    Put,
    Get,
}

/// One copy as its client saw it.
pub struct Copy {
    pub client: String,
    pub way: Way,
    /// The name on the share.
    pub name: String,
    /// The source's sha256: the local file put, or the file on the share got.
    pub sha: String,
    /// The client said it succeeded; for a get, its bytes are also checked.
    pub ok: bool,
    /// A get the client called successful whose bytes differ: data read
    /// wrong, which must never happen.
    pub wrong: bool,
    /// When it ended, from the start of the load.
    pub ended: Duration,
}

/// A share the clients copy to and from, and where it is on the board.
#[derive(Clone, Copy)]
pub struct Share {
    pub name: &'static str,
    pub path: &'static str,
}

pub fn smb(board: &Board, share: Share, args: &str) -> bool {
    Command::new("smbclient")
        .arg(format!("//127.0.0.1/{}", share.name))
        .args(["-p", &board.smb.to_string()])
        .args(["-U", &format!("admin%{PASSWORD}")])
        .args(["-t", "60", "-c", args])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn nfs_url(board: &Board, share: Share, name: &str) -> String {
    // As the share's user (uid 1000): root is squashed.
    format!(
        "nfs://127.0.0.1{}/{name}?version=4&nfsport={}&uid=1000&gid=1000",
        share.path, board.nfs
    )
}

fn nfs_cp(from: &str, to: &str) -> bool {
    Command::new("nfs-cp")
        .args([from, to])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What one client does until `until` after `start`: put a file of its own
/// under a new name, then (with a seed file) get that back, again and again.
pub fn client(
    board: &Board,
    dir: &Path,
    share: Share,
    who: &str,
    seed: Option<&(String, String)>,
    start: Instant,
    until: Duration,
) -> Vec<Copy> {
    let src = dir.join(format!("load-{who}.src"));
    let back = dir.join(format!("load-{who}.back"));
    let mut copies = Vec::new();
    let mut n = 0;
    while start.elapsed() < until {
        // The NFS client only reads: bookworm's libnfs (4.0) creates a file
        // over NFSv4 but its WRITE is refused, as anyone's.
        if who != "nfs" {
            let data = source(who, n);
            std::fs::write(&src, &data).unwrap();
            let name = format!("load-{who}-{n}.bin");
            let ok = smb(board, share, &format!("put {} {name}", src.display()));
            copies.push(Copy {
                client: who.into(),
                way: Way::Put,
                name,
                sha: sha256_bytes(&data),
                ok,
                wrong: false,
                ended: start.elapsed(),
            });
        }
        n += 1;
        let Some(seed) = seed else {
            continue;
        };
        let _ = std::fs::remove_file(&back);
        let ok = if who == "nfs" {
            nfs_cp(&nfs_url(board, share, &seed.0), back.to_str().unwrap())
        } else {
            smb(board, share, &format!("get {} {}", seed.0, back.display()))
        };
        let wrong = ok && sha256_file(&back) != seed.1;
        copies.push(Copy {
            client: who.into(),
            way: Way::Get,
            name: seed.0.clone(),
            sha: seed.1.clone(),
            ok,
            wrong,
            ended: start.elapsed(),
        });
    }
    copies
}

/// The bytes of a client's `n`th put: each differs, so a copy can only
/// match its own source.
pub fn source(who: &str, n: usize) -> Vec<u8> {
    let mut data = vec![0u8; FILE];
    let mut x = ((n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        ^ who
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    for c in data.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
    }
    data
}

/// The clients' names: four SMB clients and one NFS client.
pub fn clients() -> Vec<String> {
    (0..SMB_CLIENTS)
        .map(|i| format!("smb{i}"))
        .chain(["nfs".to_string()])
        .collect()
}

/// The copies of `puts` whose file on the share does not hold its
/// source's bytes (or is not there), read with sha256sum on the board.
pub fn not_intact<'a>(board: &Board, key: &Path, share: Share, puts: &[&'a Copy]) -> Vec<&'a str> {
    let (ok, sums) = board.ssh(
        key,
        &format!(
            "cd {} && sha256sum load-*-*.bin 2>/dev/null; true",
            share.path
        ),
    );
    assert!(ok, "{sums}");
    puts.iter()
        .filter(|c| !sums.lines().any(|l| l == format!("{}  {}", c.sha, c.name)))
        .map(|c| c.name.as_str())
        .collect()
}

/// What the clients did before and after the power cut.
pub struct Cut {
    pub copies: Vec<Copy>,
    /// When `sync` started on the board: a copy that ended before it was
    /// flushed to the disks.
    pub synced_from: Duration,
    pub cut_at: Duration,
}

/// SMB clients write to `share` (and, given a file on it, an NFS client
/// reads it) for 25 seconds: 12 seconds in, `sync` runs on the board, the
/// last flush the clients can know of, and at 22 seconds the power goes
/// (`nasforge fault power-cut`).
pub fn power_cut_while_writing(
    board: Board,
    key: &Path,
    dir: &Path,
    share: Share,
    read: Option<&(String, String)>,
) -> Cut {
    let start = Instant::now();
    let (copies, synced_from, cut_at) = std::thread::scope(|s| {
        let clients: Vec<_> = clients()
            .into_iter()
            .filter(|who| who != "nfs" || read.is_some())
            .map(|who| {
                let board = &board;
                let seed = if who == "nfs" { read } else { None };
                s.spawn(move || {
                    client(
                        board,
                        dir,
                        share,
                        &who,
                        seed,
                        start,
                        Duration::from_secs(25),
                    )
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(12));
        let synced_from = start.elapsed();
        let (ok, out) = board.ssh(key, "sync && echo synced");
        assert!(ok && out.contains("synced"), "{out}");
        std::thread::sleep(Duration::from_secs(22).saturating_sub(start.elapsed()));
        let cut_at = start.elapsed();
        assert_eq!(
            board.fault(&["power-cut"]),
            "power cut: the machine is off\n"
        );
        let copies: Vec<Copy> = clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        (copies, synced_from, cut_at)
    });
    drop(board);
    Cut {
        copies,
        synced_from,
        cut_at,
    }
}

/// On the board booted after the cut: every copy that ended before the
/// sync holds its source's bytes; returns the words for the log line (how
/// many were checked, and what became of those after the sync, which need
/// not have reached the disks).
pub fn flushed_copies_intact(board: &Board, key: &Path, share: Share, cut: &Cut) -> String {
    let durable: Vec<&Copy> = cut
        .copies
        .iter()
        .filter(|c| c.ok && c.way == Way::Put && c.ended < cut.synced_from)
        .collect();
    let lost = not_intact(board, key, share, &durable);
    assert!(
        lost.is_empty(),
        "copies done before the sync not intact after the power cut: {lost:?}"
    );
    let later: Vec<&Copy> = cut
        .copies
        .iter()
        .filter(|c| c.ok && c.way == Way::Put && c.ended >= cut.synced_from)
        .collect();
    let later_lost = not_intact(board, key, share, &later).len();
    let (_, rm) = board.ssh(
        key,
        &format!("rm -f {}/load-*.bin && echo removed", share.path),
    );
    assert!(rm.contains("removed"), "{rm}");
    format!(
        "{SMB_CLIENTS} SMB clients writing: {} copies done before the sync on the board ({:.0}s in), all intact; {} done after it, {later_lost} of them not on the disks after the cut at {:.0}s (not yet flushed, which a client that asks for no flush must expect)",
        durable.len(),
        cut.synced_from.as_secs_f64(),
        later.len(),
        cut.cut_at.as_secs_f64(),
    )
}
