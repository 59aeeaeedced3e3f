//! Reading sysfs attributes: one value per file, a trailing newline, and
//! absent or empty where a driver does not report it.

use std::fs;
use std::path::{Path, PathBuf};

/// The attribute's text, or None where it is missing or empty.
pub fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

pub fn read_u64(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

/// A `dev` attribute ("8:16") as (major, minor).
pub fn parse_devnum(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The sysfs directory of block device `devnum` under `root` (canonical,
/// under `sys/devices`), if the device exists.
pub fn block_dir(root: &Path, devnum: (u32, u32)) -> Option<PathBuf> {
    fs::canonicalize(root.join(format!("sys/dev/block/{}:{}", devnum.0, devnum.1))).ok()
}

/// The kernel name a sysfs directory stands for: its last component.
pub fn name_of(sys: &Path) -> String {
    sys.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dev_attribute_is_a_major_and_minor() {
        assert_eq!(parse_devnum("259:3\n"), Some((259, 3)));
        assert_eq!(parse_devnum("8"), None);
        assert_eq!(parse_devnum("a:b"), None);
    }

    #[test]
    fn an_empty_attribute_reads_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("serial"), "  \n").unwrap();
        fs::write(dir.path().join("size"), "2048\n").unwrap();
        assert_eq!(read_trimmed(&dir.path().join("serial")), None);
        assert_eq!(read_trimmed(&dir.path().join("missing")), None);
        assert_eq!(read_u64(&dir.path().join("size")), Some(2048));
    }
}
