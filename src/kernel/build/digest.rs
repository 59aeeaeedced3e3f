//! Digests that identify a kernel source: a tarball's sha256, and a tree's
//! digest over every file's name and content.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

pub(super) fn sha256_file(path: &Path) -> Result<String> {
    let f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(crate::io::hash::hash_file(&f, |_| {})?)
}

/// Digest of a kernel tree: every regular file's path and content, and
/// symlinks' targets, in sorted order; `.git` is skipped.
pub(super) fn tree_digest(root: &Path) -> Result<String> {
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel))
            .with_context(|| format!("reading {}", root.join(&rel).display()))?
        {
            let e = e?;
            let name = e.file_name();
            if rel.as_os_str().is_empty() && name == ".git" {
                continue;
            }
            let r = rel.join(&name);
            let t = e.file_type()?;
            if t.is_dir() {
                stack.push(r);
            } else {
                files.push((r, t.is_symlink()));
            }
        }
    }
    files.sort();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for (r, link) in files {
        h.update(r.to_string_lossy().as_bytes());
        h.update([0]);
        let p = root.join(&r);
        if link {
            h.update(fs::read_link(&p)?.to_string_lossy().as_bytes());
        } else {
            let mut f = fs::File::open(&p)?;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
        }
        h.update([0]);
    }
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_digest_sees_content_and_names() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("a/.git")).unwrap();
        fs::write(d.path().join("a/x"), "1").unwrap();
        let one = tree_digest(d.path()).unwrap();
        fs::write(d.path().join("a/x"), "2").unwrap();
        let two = tree_digest(d.path()).unwrap();
        assert_ne!(one, two);
        fs::create_dir_all(d.path().join(".git")).unwrap();
        fs::write(d.path().join(".git/HEAD"), "x").unwrap();
        assert_eq!(
            tree_digest(d.path()).unwrap(),
            two,
            "top-level .git is not part of the source"
        );
    }
}
