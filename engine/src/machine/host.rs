//! Where the machine is read from (the real root, or a fake tree in tests)
//! and what a device path names: the ground every reader in `machine`
//! stands on.

use std::fs;
use std::path::{Path, PathBuf};

/// Where the system's state is read from: `/` on the board, a fake tree in
/// tests. Device nodes are read from `dev` (default `<root>/dev`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub root: PathBuf,
    pub dev: PathBuf,
}

impl Host {
    pub fn new(root: impl Into<PathBuf>) -> Host {
        let root = root.into();
        Host {
            dev: root.join("dev"),
            root,
        }
    }

    pub fn with_dev(mut self, dev: impl Into<PathBuf>) -> Host {
        self.dev = dev.into();
        self
    }

    /// An absolute system path, moved under the root.
    pub fn path(&self, absolute: &str) -> PathBuf {
        self.root.join(absolute.trim_start_matches('/'))
    }

    /// A device path such as `/dev/md/data` or `/dev/disk/by-id/...`, moved
    /// under the device directory.
    pub fn dev_path(&self, device: &str) -> PathBuf {
        self.dev.join(device.trim_start_matches("/dev/"))
    }
}

/// The kernel name of the device a path under /dev leads to:
/// `/dev/disk/by-id/wwn-...-part1` → `sdb1`, `/dev/md/data` → `md127`. Links
/// are followed only while they stay in the device directory (a test tree
/// may point a node at a real loop device). None when nothing is there.
pub fn kernel_name(host: &Host, device: &str) -> Option<String> {
    let mut path = host.dev_path(device);
    // udev's links are one or two hops; the bound only stops a loop.
    for _ in 0..8 {
        let Ok(target) = fs::read_link(&path) else {
            break;
        };
        let next = lexical_join(path.parent()?, &target);
        if !next.starts_with(&host.dev) {
            break;
        }
        path = next;
    }
    path.exists()
        .then(|| path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .flatten()
}

/// `dir` joined with `rel`, `..` resolved without touching the filesystem.
fn lexical_join(dir: &Path, rel: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in dir.join(rel).components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
