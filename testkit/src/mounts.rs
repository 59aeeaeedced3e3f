//! Mounts for the tests that run as root (scripts/test runs them so, as CI
//! does): each test takes a mount namespace of its own, so what it mounts
//! is seen by no other process and goes when the test's process ends
//! (nextest runs each test in a process of its own).

use std::ffi::CString;
use std::path::Path;

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn last_error(what: &str, at: &Path) -> String {
    format!(
        "{what} {}: {}",
        at.display(),
        std::io::Error::last_os_error()
    )
}

/// Moves this process into a mount namespace of its own whose mounts do
/// not propagate back to the host's.
pub fn private_namespace() {
    assert!(
        unsafe { libc::geteuid() } == 0,
        "needs root to mount: scripts/test runs it as root, as CI does"
    );
    unsafe {
        assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0, "unshare");
        assert_eq!(
            libc::mount(
                std::ptr::null(),
                c("/").as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ),
            0,
            "{}",
            last_error("make private", Path::new("/"))
        );
    }
}

/// A tmpfs at `at` (made if missing), of `mib` MiB where a test needs a
/// disk that fills up, else of tmpfs's default size.
pub fn tmpfs(at: &Path, mib: Option<u64>) {
    std::fs::create_dir_all(at).unwrap();
    let opts = mib.map(|m| c(&format!("size={m}m")));
    let rc = unsafe {
        libc::mount(
            c("nasforge-test").as_ptr(),
            c(at.to_str().unwrap()).as_ptr(),
            c("tmpfs").as_ptr(),
            0,
            opts.as_ref()
                .map_or(std::ptr::null(), |o| o.as_ptr().cast()),
        )
    };
    assert_eq!(rc, 0, "{}", last_error("mount", at));
}

pub fn umount(at: &Path) {
    let rc = unsafe { libc::umount(c(at.to_str().unwrap()).as_ptr()) };
    assert_eq!(rc, 0, "{}", last_error("umount", at));
}
