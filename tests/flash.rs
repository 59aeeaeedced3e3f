//! `nasforge flash` against real loop devices and files, run as a user
//! would, checked with tools that are not nasforge's (sha256sum, stat,
//! wipefs, losetup, mount). Loop devices need root: without it each test
//! prints why it is skipped. The question is only asked on a terminal, so
//! the tests that answer it give nasforge a pseudo-terminal as stdin.

mod common;

use common::*;
use std::fs;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Loop devices need root: the tests that use them are `#[ignore]`d, so a
/// run without root reports them skipped; scripts/test includes them when
/// it runs as root, as CI does. Run anyway without root, they fail saying
/// why instead of passing untested.
const NEEDS_ROOT: &str = "needs root for loop devices: scripts/test runs it as root, as CI does";

macro_rules! need_root {
    () => {
        assert!(is_root(), "{NEEDS_ROOT}");
    };
}

/// A loop device over a backing file, detached on drop.
struct Loop {
    dev: String,
    backing: PathBuf,
}

impl Loop {
    fn attach(backing: &Path) -> Loop {
        let dev = stdout(Command::new("losetup").args(["-f", "--show"]).arg(backing))
            .trim()
            .to_string();
        Loop {
            dev,
            backing: backing.to_path_buf(),
        }
    }

    /// A fresh sparse backing file of `size` bytes.
    fn sparse(dir: &Path, name: &str, size: u64) -> Loop {
        let p = dir.join(name);
        fs::File::create(&p).unwrap().set_len(size).unwrap();
        Loop::attach(&p)
    }

    /// A fully allocated backing file full of `byte`: a used card.
    fn filled(dir: &Path, name: &str, size: u64, byte: u8) -> Loop {
        let p = dir.join(name);
        let mut f = fs::File::create(&p).unwrap();
        let chunk = vec![byte; MIB as usize];
        for _ in 0..size / MIB {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
        Loop::attach(&p)
    }

    fn path(&self) -> &Path {
        Path::new(&self.dev)
    }

    fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        fs::File::open(&self.dev)
            .unwrap()
            .read_exact_at(&mut buf, offset)
            .unwrap();
        buf
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        // Partitions added with partx outlive a detach on some kernels.
        let _ = Command::new("partx")
            .arg("-d")
            .arg(&self.dev)
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

/// A mount, unmounted on drop.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn flash(args: &[&str], cwd: &Path) -> Cli {
    let mut full = vec!["flash"];
    full.extend_from_slice(args);
    let out = Command::new(env!("CARGO_BIN_EXE_nasforge"))
        .args(&full)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Cli {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A pseudo-terminal: (master, slave).
fn pty() -> (fs::File, fs::File) {
    // SAFETY: posix_openpt returns a new descriptor (checked), which the
    // File then owns; ptsname_r writes a NUL-terminated name into `name`.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        let master = fs::File::from_raw_fd(fd);
        assert_eq!(libc::grantpt(fd), 0);
        assert_eq!(libc::unlockpt(fd), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
        let path = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_str()
            .unwrap()
            .to_string();
        let slave = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&path)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        (master, slave)
    }
}

/// `nasforge flash` run with a terminal as stdin, so it asks; the test
/// answers (or does not) through the terminal's other end.
struct Asking {
    child: Child,
    terminal: fs::File,
    stderr: String,
}

impl Asking {
    fn start(args: &[&str], cwd: &Path) -> Asking {
        let (terminal, slave) = pty();
        let child = Command::new(env!("CARGO_BIN_EXE_nasforge"))
            .arg("flash")
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Asking {
            child,
            terminal,
            stderr: String::new(),
        }
    }

    /// Reads stderr until the question is on it; panics with what was
    /// printed if nasforge ends first.
    fn wait_for_question(&mut self) {
        let err = self.child.stderr.as_mut().unwrap();
        let mut buf = [0u8; 4096];
        while !self.stderr.contains("to continue: ") {
            let n = err.read(&mut buf).unwrap();
            assert!(n > 0, "nasforge ended without asking:\n{}", self.stderr);
            self.stderr += &String::from_utf8_lossy(&buf[..n]);
        }
    }

    /// Types `answer` (nothing: leaves the question open) and waits for
    /// nasforge to end, two minutes at most: a question that never expires
    /// fails the test instead of hanging it.
    fn answer(mut self, answer: &str) -> Cli {
        self.terminal.write_all(answer.as_bytes()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                self.child.kill().unwrap();
                self.child.wait().unwrap();
                panic!(
                    "nasforge still runs two minutes after the answer:\n{}",
                    self.stderr
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let mut rest = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut rest)
            .unwrap();
        Cli {
            status: status.code().unwrap_or(-1),
            stdout: out,
            stderr: self.stderr + &rest,
        }
    }
}

fn ok(c: &Cli) {
    assert_eq!(
        c.status, 0,
        "nasforge flash failed:\nstdout:\n{}\nstderr:\n{}",
        c.stdout, c.stderr
    );
}

fn failed(c: &Cli) -> String {
    assert_ne!(
        c.status, 0,
        "nasforge flash should have failed:\nstdout:\n{}\nstderr:\n{}",
        c.stdout, c.stderr
    );
    c.stderr.clone()
}

/// `c` failed saying each of `says`, and `card` still hashes to `before`.
fn refused_untouched(c: &Cli, says: &[&str], card: &Loop, before: &str) {
    let err = failed(c);
    for said in says {
        assert!(err.contains(said), "{err}");
    }
    assert_eq!(sha256_file(&card.backing), before, "nothing was written");
}

/// sha256 of the first `len` bytes of a device or file, by sha256sum.
fn sha256_prefix(path: &Path, len: u64) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("head -c {len} '{}' | sha256sum", path.display()))
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn allocated(path: &Path) -> u64 {
    fs::metadata(path).unwrap().blocks() * 512
}

/// The Raspberry Pi OS-shaped fixture (164 MiB, sparse) and its .xz.
fn fixture(dir: &Path) -> (PathBuf, PathBuf) {
    let img = RpiFixture {
        payload: 8 * MIB,
        ..Default::default()
    }
    .build(dir);
    run(Command::new("xz").args(["-T2", "-1", "-k"]).arg(&img));
    let xz = img.with_extension("img.xz");
    (img, xz)
}

/// In a new directory, the raw fixture, a 200 MiB card filled with 0x3c in
/// a backing file `name`, and the card's sha256 before anything could
/// write to it.
fn image_and_card(name: &str) -> (tempfile::TempDir, PathBuf, Loop, String) {
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    let card = Loop::filled(dir.path(), name, 200 * MIB, 0x3c);
    let before = sha256_file(&card.backing);
    (dir, img, card, before)
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn raw_and_xz_images_flash_to_a_loop_device_and_read_back_equal() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let (img, xz) = fixture(dir.path());
    let size = fs::metadata(&img).unwrap().len();
    let want = sha256_file(&img);

    // A blank card: a fresh sparse backing file stays sparse.
    let blank = Loop::sparse(dir.path(), "blank.bin", 256 * MIB);
    let c = flash(&[img.to_str().unwrap(), &blank.dev, "--yes"], dir.path());
    ok(&c);
    assert!(c.stdout.contains("verified"), "{}", c.stdout);
    assert_eq!(sha256_prefix(blank.path(), size), want);
    let slack = 3 * MIB; // the two table areas, and the wiped last MiB of the disk
    assert!(
        allocated(&blank.backing) <= allocated(&img) + slack,
        "backing file {} bytes allocated, image {}: holes were written",
        allocated(&blank.backing),
        allocated(&img)
    );

    // A used card, every byte 0xA5: the image's zero ranges must read as
    // zeros afterwards (punched through the loop device), not as old bytes.
    let used = Loop::filled(dir.path(), "used.bin", 256 * MIB, 0xa5);
    let before = allocated(&used.backing);
    let c = flash(&[xz.to_str().unwrap(), &used.dev, "--yes"], dir.path());
    ok(&c);
    assert_eq!(
        sha256_prefix(used.path(), size),
        want,
        "readback of the .img.xz flash"
    );
    assert!(
        allocated(&used.backing) < before / 2,
        "the image's holes were punched in the backing file: {} of {before}",
        allocated(&used.backing)
    );
    assert!(c.stdout.contains("holes punched"), "{}", c.stdout);
}

#[test]
fn images_flash_to_files_dd_style_leaving_holes_where_the_image_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let (img, xz) = fixture(dir.path());
    let size = fs::metadata(&img).unwrap().len();
    let want = sha256_file(&img);

    let out = dir.path().join("card.img");
    let c = flash(&[img.to_str().unwrap(), out.to_str().unwrap()], dir.path());
    ok(&c);
    assert_eq!(sha256_file(&out), want);
    assert!(
        allocated(&out) <= allocated(&img) + 2 * MIB,
        "target {} allocated, image {}",
        allocated(&out),
        allocated(&img)
    );

    // Over an existing, larger file of junk: truncated to the image, holes
    // punched, so it equals the image byte for byte. It asks first.
    let junk = dir.path().join("junk.img");
    fs::write(&junk, vec![0x5au8; (size + 10 * MIB) as usize]).unwrap();
    let c = flash(&[xz.to_str().unwrap(), junk.to_str().unwrap()], dir.path());
    assert!(failed(&c).contains("--yes"), "{}", c.stderr);
    let c = flash(
        &[xz.to_str().unwrap(), junk.to_str().unwrap(), "--yes"],
        dir.path(),
    );
    ok(&c);
    assert_eq!(fs::metadata(&junk).unwrap().len(), size);
    assert_eq!(sha256_file(&junk), want);
    assert!(allocated(&junk) <= allocated(&img) + 2 * MIB);
}

#[test]
fn a_gpt_image_keeps_its_own_backup_table() {
    let dir = tempfile::tempdir().unwrap();
    let img = armbian_image(dir.path(), &[]);
    let out = dir.path().join("card.img");
    ok(&flash(
        &[img.to_str().unwrap(), out.to_str().unwrap()],
        dir.path(),
    ));
    assert_eq!(sha256_file(&out), sha256_file(&img));
    let v = stdout(Command::new("sgdisk").arg("-v").arg(&out));
    assert!(v.contains("No problems found"), "{v}");
}

/// The disk holding `/`, as findmnt and lsblk see it.
fn system_disk() -> Option<String> {
    let src = String::from_utf8(
        Command::new("findmnt")
            .args(["-n", "-o", "SOURCE", "/"])
            .output()
            .ok()?
            .stdout,
    )
    .ok()?;
    let src = src.trim().split('[').next()?.to_string();
    if !src.starts_with("/dev/") {
        return None;
    }
    let parent = String::from_utf8(
        Command::new("lsblk")
            .args(["-n", "-d", "-o", "PKNAME"])
            .arg(&src)
            .output()
            .ok()?
            .stdout,
    )
    .ok()?;
    let parent = parent.trim();
    Some(if parent.is_empty() {
        src
    } else {
        format!("/dev/{parent}")
    })
}

#[test]
#[ignore = "needs `/` on a block device: scripts/test runs it as root, as CI does"]
fn the_system_disk_is_refused() {
    let disk =
        system_disk().expect("`/` is on a /dev block device (not an overlay or network root)");
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    // --dry-run: should the refusal ever break, this test still writes nothing.
    let c = flash(
        &[
            img.to_str().unwrap(),
            &disk,
            "--yes",
            "--dry-run",
            "--force-large",
        ],
        dir.path(),
    );
    let err = failed(&c);
    assert!(
        err.contains(&format!("refusing to write {disk}"))
            && err.contains("running system's root filesystem"),
        "{err}"
    );
    let list = flash(&["--list", "--all"], dir.path());
    ok(&list);
    assert!(
        list.stdout.contains(&disk) && list.stdout.contains("refused: it holds the running system"),
        "{}",
        list.stdout
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_mounted_disk_is_refused() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    let lo = Loop::sparse(dir.path(), "mounted.bin", 64 * MIB);
    run(Command::new("mkfs.ext4")
        .args(["-q", "-L", "inuse"])
        .arg(&lo.dev));
    let at = dir.path().join("mnt");
    fs::create_dir(&at).unwrap();
    run(Command::new("mount").arg(&lo.dev).arg(&at));
    let _m = Mount(at.clone());
    fs::write(at.join("keep.txt"), "precious").unwrap();

    let err = failed(&flash(
        &[img.to_str().unwrap(), &lo.dev, "--yes"],
        dir.path(),
    ));
    assert!(
        err.contains(&format!("{} is mounted at {}", lo.dev, at.display())),
        "{err}"
    );
    assert!(
        err.contains("unmount it first") && err.contains("O_EXCL: EBUSY"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(at.join("keep.txt")).unwrap(), "precious");

    let list = flash(&["--list", "--all"], dir.path());
    assert!(
        list.stdout.contains(&lo.dev) && list.stdout.contains("ext4 filesystem labelled 'inuse'"),
        "{}",
        list.stdout
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_disk_larger_than_max_size_needs_force_large() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    let lo = Loop::sparse(dir.path(), "big.bin", 256 * MIB);
    let err = failed(&flash(
        &[
            img.to_str().unwrap(),
            &lo.dev,
            "--yes",
            "--max-size",
            "200MiB",
        ],
        dir.path(),
    ));
    assert!(
        err.contains("larger than --max-size") && err.contains("--force-large"),
        "{err}"
    );
    assert_eq!(lo.read(0, 512), vec![0u8; 512], "nothing was written");
    ok(&flash(
        &[
            img.to_str().unwrap(),
            &lo.dev,
            "--yes",
            "--max-size",
            "200MiB",
            "--force-large",
        ],
        dir.path(),
    ));
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn without_a_terminal_it_needs_yes() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    let lo = Loop::filled(dir.path(), "card.bin", 200 * MIB, 0x3c);
    let err = failed(&flash(&[img.to_str().unwrap(), &lo.dev], dir.path()));
    assert!(
        err.contains(&format!("About to overwrite {}", lo.dev)),
        "{err}"
    );
    assert!(
        err.contains("standard input is not a terminal; pass --yes"),
        "{err}"
    );
    assert!(
        lo.read(0, MIB as usize).iter().all(|&b| b == 0x3c),
        "nothing was written"
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_partition_is_refused_with_its_disk_named() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    let copy = dir.path().join("parted.img");
    fs::copy(&img, &copy).unwrap();
    let lo = Loop::attach(&copy);
    // partx adds the partitions (BLKPG) where loop partition scanning is off.
    let _ = Command::new("partx")
        .arg("-d")
        .arg(&lo.dev)
        .stderr(Stdio::null())
        .status();
    run(Command::new("partx").arg("-a").arg(&lo.dev));
    let name = lo.dev.trim_start_matches("/dev/").to_string();
    let sys = format!("/sys/block/{name}/{name}p1/dev");
    let mut part = format!("{}p1", lo.dev);
    for _ in 0..50 {
        if Path::new(&part).exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if !Path::new(&part).exists() {
        // No devtmpfs node (a container's /dev): make one from sysfs.
        let devnum = fs::read_to_string(&sys).unwrap_or_else(|e| panic!("{sys}: {e}"));
        let (maj, min) = devnum.trim().split_once(':').unwrap();
        part = dir.path().join("p1").display().to_string();
        run(Command::new("mknod").arg(&part).arg("b").arg(maj).arg(min));
    }
    let err = failed(&flash(&[img.to_str().unwrap(), &part, "--yes"], dir.path()));
    assert!(
        err.contains("it is a partition") && err.contains(&format!("name {}", lo.dev)),
        "{err}"
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_too_small_target_fails_with_the_offset_and_its_first_mib_untouched() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    let size = fs::metadata(&img).unwrap().len();
    run(Command::new("gzip").args(["-1", "-k"]).arg(&img));
    let gz = img.with_extension("img.gz");
    let lo = Loop::filled(dir.path(), "small.bin", 128 * MIB, 0x5a);
    let pattern = sha256_file(&lo.backing);

    // Size known up front (raw, xz): refused before anything is written.
    let err = failed(&flash(
        &[img.to_str().unwrap(), &lo.dev, "--yes"],
        dir.path(),
    ));
    assert!(
        err.contains(&format!("the image is {size} bytes")) && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(
        sha256_file(&lo.backing),
        pattern,
        "the target was not touched"
    );

    // gzip does not record the size: found mid-stream, at the target's end.
    let err = failed(&flash(
        &[gz.to_str().unwrap(), &lo.dev, "--yes"],
        dir.path(),
    ));
    assert!(err.contains(&format!("at byte {}", 128 * MIB)), "{err}");
    assert!(
        err.contains("nothing of the first MiB was written"),
        "{err}"
    );
    assert!(
        lo.read(0, MIB as usize).iter().all(|&b| b == 0x5a),
        "the first MiB still holds the old pattern"
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_stale_backup_gpt_at_the_end_of_a_larger_disk_is_wiped() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    let lo = Loop::sparse(dir.path(), "wasgpt.bin", 300 * MIB);
    run(Command::new("sgdisk")
        .args(["-o", "-n", "1:2048:0"])
        .arg(&lo.dev));
    let end = 300 * MIB;
    assert_eq!(
        &lo.read(end - 512, 8),
        b"EFI PART",
        "control: sgdisk put a backup GPT header in the last sector"
    );
    ok(&flash(
        &[img.to_str().unwrap(), &lo.dev, "--yes"],
        dir.path(),
    ));
    assert!(
        lo.read(end - MIB, MIB as usize).iter().all(|&b| b == 0),
        "the disk's last MiB is zeroed"
    );
    let sigs = stdout(Command::new("wipefs").arg("--no-act").arg(&lo.dev));
    assert!(
        !sigs.contains("gpt") && sigs.contains("dos"),
        "wipefs still sees:\n{sigs}"
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn list_shows_what_a_disk_holds() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    let lo = Loop::sparse(dir.path(), "listed.bin", 200 * MIB);
    ok(&flash(
        &[img.to_str().unwrap(), &lo.dev, "--yes"],
        dir.path(),
    ));
    let c = flash(&["--list", "--all"], dir.path());
    ok(&c);
    let line = c
        .stdout
        .lines()
        .position(|l| l.starts_with(&lo.dev))
        .unwrap_or_else(|| panic!("{} not listed:\n{}", lo.dev, c.stdout));
    let lines: Vec<&str> = c.stdout.lines().collect();
    assert!(
        lines[line].contains("loop") && lines[line].contains("a dos partition table"),
        "{}",
        lines[line]
    );
    assert!(lines[line].contains("(200.0 MiB)"), "{}", lines[line]);
    assert!(
        lines[line + 1].contains("can be flashed"),
        "{}",
        lines[line + 1]
    );
}

/// A 200 MiB card filled with 0x3c in a backing file `name`, and `img`
/// flashed to it from a terminal, stopped at the question.
fn asked_about_a_card(dir: &Path, img: &str, name: &str) -> (Loop, Asking) {
    let card = Loop::filled(dir, name, 200 * MIB, 0x3c);
    let mut q = Asking::start(&[img, &card.dev], dir);
    q.wait_for_question();
    (card, q)
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_card_swapped_at_the_question_is_not_written() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = fixture(dir.path());
    let size = fs::metadata(&img).unwrap().len();
    let img = img.to_str().unwrap();

    // Control: answered on a terminal with nothing changed, it writes.
    let (card, q) = asked_about_a_card(dir.path(), img, "same.bin");
    assert!(
        q.stderr.contains("Type yes within 5 minutes to continue"),
        "{}",
        q.stderr
    );
    let c = q.answer("yes\n");
    ok(&c);
    assert_eq!(
        sha256_prefix(card.path(), size),
        sha256_file(Path::new(img))
    );
    assert!(
        c.stdout.contains("verified: read back") && c.stdout.contains(", O_DIRECT), every"),
        "the readback bypassed the page cache: {}",
        c.stdout
    );

    // Another card of the same size under the same name: its first MiB
    // holds other bytes than the ones checked before the question.
    let (card, q) = asked_about_a_card(dir.path(), img, "swapped.bin");
    fs::OpenOptions::new()
        .write(true)
        .open(&card.backing)
        .unwrap()
        .write_all_at(&vec![0x99u8; MIB as usize], 0)
        .unwrap();
    let before = sha256_file(&card.backing);
    refused_untouched(
        &q.answer("yes\n"),
        &[
            &format!("{} changed while the question was open", card.dev),
            "first or last MiB holds other bytes",
            "nothing was written",
        ],
        &card,
        &before,
    );

    // Another size: the loop device grows under the open descriptor, as a
    // larger card in the same reader would.
    let (card, q) = asked_about_a_card(dir.path(), img, "grown.bin");
    fs::OpenOptions::new()
        .write(true)
        .open(&card.backing)
        .unwrap()
        .set_len(264 * MIB)
        .unwrap();
    run(Command::new("losetup").arg("--set-capacity").arg(&card.dev));
    let before = sha256_file(&card.backing);
    refused_untouched(
        &q.answer("yes\n"),
        &[
            &format!(
                "the size was {} bytes, is now {} bytes",
                200 * MIB,
                264 * MIB
            ),
            "nothing was written",
        ],
        &card,
        &before,
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn an_unanswered_question_expires_and_nothing_is_written() {
    need_root!();
    let (dir, img, card, before) = image_and_card("card.bin");
    let mut q = Asking::start(
        &[img.to_str().unwrap(), &card.dev, "--confirm-timeout", "2"],
        dir.path(),
    );
    q.wait_for_question();
    let asked = Instant::now();
    let answered = q.answer("");
    assert!(
        asked.elapsed() >= Duration::from_millis(1500),
        "it waited {:?}",
        asked.elapsed()
    );
    refused_untouched(
        &answered,
        &["no answer within 2 s", "nothing was written"],
        &card,
        &before,
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_disk_held_open_exclusively_is_refused_with_ebusy_explained() {
    need_root!();
    let (dir, img, card, before) = image_and_card("held.bin");
    let held = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&card.dev)
        .unwrap();
    refused_untouched(
        &flash(&[img.to_str().unwrap(), &card.dev, "--yes"], dir.path()),
        &[
            &format!("refusing to write {}", card.dev),
            "O_EXCL: EBUSY",
            "another program holds it open exclusively",
            "close it and try again",
        ],
        &card,
        &before,
    );
    drop(held);
    ok(&flash(
        &[img.to_str().unwrap(), &card.dev, "--yes"],
        dir.path(),
    ));
}

#[test]
fn help_teaches_the_checks_and_force() {
    let dir = tempfile::tempdir().unwrap();
    let c = flash(&["--help"], dir.path());
    ok(&c);
    for taught in [
        "O_EXCL",
        "EBUSY",
        "internal (non-removable SATA, NVMe, SAS/SCSI or virtio) disk without",
        "expires after 5 minutes",
        "a card swapped at the prompt",
        "non-removable on a SATA, NVMe, SAS/SCSI or virtio bus",
    ] {
        assert!(c.stdout.contains(taught), "{taught}:\n{}", c.stdout);
    }
    for flag in ["--force", "--force-large"] {
        assert!(
            c.stdout.lines().any(|l| l.trim() == flag),
            "{flag}:\n{}",
            c.stdout
        );
    }
    assert!(!c.stdout.contains("confirm-timeout"), "{}", c.stdout);
}
