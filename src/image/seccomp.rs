//! What the e2fsprogs tools the build runs on its working copy may do to it:
//! a seccomp filter in the child answers chosen system calls itself, with
//! an errno (0 is success), without the kernel running them. Filters stack:
//! a call answered by any of them does not run.
//!
//! - `fsync`/`fdatasync` ([`e2fsprogs`]): libext2fs fsyncs the file it opens,
//!   even read-only (its unix I/O manager does so to throw away stale
//!   block-device errors), and the disk's cache flush behind it waits for
//!   every write in flight on that disk. Right after the copy of a base that
//!   is the whole copy: on a 2.5 GiB image the first debugfs run of a build
//!   waited 0.6–0.8 s. The build fsyncs the finished image itself before it
//!   publishes it, so these calls add nothing to what reaches the disk.
//! - `ftruncate` for resize2fs: see `grow::resize_ext4`.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// `linux/audit.h`: AUDIT_ARCH_* = EM_* | 64-bit | little-endian; libc does
/// not export them.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// fsync and fdatasync succeed without syncing.
const NO_FSYNC: [(libc::c_long, i32); 2] = [(libc::SYS_fsync, 0), (libc::SYS_fdatasync, 0)];

/// An e2fsprogs tool (debugfs, dumpe2fs, e2fsck, resize2fs) to run on the
/// build's working copy: its fsyncs are answered, not run.
pub fn e2fsprogs(tool: &str) -> Command {
    let mut cmd = Command::new(tool);
    answer(&mut cmd, &NO_FSYNC);
    cmd
}

fn op(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// Each call in `calls` returns its errno; every other call, and every call
/// made through another ABI, goes through.
fn program(calls: &[(libc::c_long, i32)]) -> Vec<libc::sock_filter> {
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let jeq = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let ret = libc::BPF_RET | libc::BPF_K;
    let n = u8::try_from(calls.len()).expect("a handful of calls");
    let mut p = vec![
        op(
            load,
            0,
            0,
            std::mem::offset_of!(libc::seccomp_data, arch) as u32,
        ),
        op(jeq, 0, n + 1, AUDIT_ARCH),
        op(
            load,
            0,
            0,
            std::mem::offset_of!(libc::seccomp_data, nr) as u32,
        ),
    ];
    // The i-th test jumps over the remaining tests and the ALLOW to its own
    // return, which sits n instructions further on whatever i is.
    p.extend(calls.iter().map(|&(nr, _)| op(jeq, n, 0, nr as u32)));
    p.push(op(ret, 0, 0, libc::SECCOMP_RET_ALLOW));
    p.extend(
        calls
            .iter()
            .map(|&(_, errno)| op(ret, 0, 0, libc::SECCOMP_RET_ERRNO | errno as u32)),
    );
    p
}

/// Installs the filter for `calls` in `cmd`'s child; spawning fails if the
/// kernel refuses it.
pub fn answer<'a>(cmd: &'a mut Command, calls: &[(libc::c_long, i32)]) -> &'a mut Command {
    // Built before the fork: the child may not allocate.
    let filter = program(calls);
    // SAFETY: between fork and exec only two prctl calls run, both
    // async-signal-safe; the filter outlives them (it is moved into the
    // closure).
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fsync of a pipe fails with EINVAL and ftruncate of one with EINVAL,
    /// so what python sees tells which calls the kernel ran.
    fn on_a_pipe(calls: &[(libc::c_long, i32)]) -> std::process::Output {
        let mut cmd = Command::new("python3");
        cmd.args([
            "-c",
            "import os
r, w = os.pipe()
os.write(w, b'x')
for name, call in (('fsync', os.fsync), ('fdatasync', os.fdatasync), ('ftruncate', lambda f: os.ftruncate(f, 0))):
    try:
        call(w)
        print(name, 'ok')
    except OSError as e:
        print(name, e.strerror)
print(os.read(r, 1))",
        ]);
        answer(&mut cmd, calls);
        let out = cmd.output().expect("python3 runs");
        assert!(out.status.success(), "{out:?}");
        out
    }

    #[test]
    fn with_nothing_to_answer_the_kernel_runs_every_call() {
        let out = on_a_pipe(&[]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "fsync Invalid argument\nfdatasync Invalid argument\nftruncate Invalid argument\nb'x'\n"
        );
    }

    #[test]
    fn answered_calls_get_their_errno_and_the_rest_go_through() {
        let mut calls = NO_FSYNC.to_vec();
        calls.push((libc::SYS_ftruncate, libc::EPERM));
        let out = on_a_pipe(&calls);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "fsync ok\nfdatasync ok\nftruncate Operation not permitted\nb'x'\n"
        );
        let out = on_a_pipe(&NO_FSYNC);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "fsync ok\nfdatasync ok\nftruncate Invalid argument\nb'x'\n"
        );
    }

    #[test]
    fn an_e2fsprogs_tool_skips_its_fsyncs_and_a_second_filter_stacks_on_that() {
        let mut cmd = e2fsprogs("python3");
        answer(&mut cmd, &[(libc::SYS_ftruncate, libc::EPERM)]);
        let out = cmd
            .args([
                "-c",
                "import os
r, w = os.pipe()
os.fsync(w)
os.fdatasync(w)
try:
    os.ftruncate(w, 0)
except OSError as e:
    print(e.strerror)",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "Operation not permitted\n"
        );
    }
}
