//! Whole-file replacement that survives a power cut: a reader sees the old
//! file or the new one, never half of either.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `contents` to a temporary file beside `path`, fsyncs it, renames
/// it over `path` and fsyncs the directory so the rename itself is durable.
/// `mode` applies when the file is created (no chmod: the boot partition is
/// FAT, which refuses it).
pub fn write(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.nasforge-tmp"));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)?;
    // On FAT (the boot partition) a rename puts the file at a new directory
    // entry that holds its size and first cluster only once the file's inode
    // is written; syncing the directory does not do that. Seen on an
    // emulated board cut off minutes after setup: the status file read back
    // as 0 bytes, its data in an orphaned cluster.
    File::open(path)?.sync_all()?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("etc/thing.conf");
        super::write(&path, b"one", 0o600).unwrap();
        super::write(&path, b"two", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }
}
