//! The "newc" cpio format the kernel unpacks an initramfs from
//! (Documentation/driver-api/early-userspace/buffer-format.rst). The kernel
//! unpacks archives placed one after another, compressed or not, each over
//! the last: appending one adds or replaces files without unpacking, or even
//! decompressing, the initramfs before it.

/// One member of an archive: a directory or a regular file, owned by root.
pub struct Entry<'a> {
    name: &'a str,
    mode: u32,
    data: &'a [u8],
}

impl<'a> Entry<'a> {
    pub fn dir(name: &'a str) -> Entry<'a> {
        Entry {
            name,
            mode: 0o040755,
            data: &[],
        }
    }

    pub fn file(name: &'a str, data: &'a [u8], permissions: u32) -> Entry<'a> {
        Entry {
            name,
            mode: 0o100000 | (permissions & 0o7777),
            data,
        }
    }
}

/// An uncompressed archive of `entries` (parents before children), with the
/// trailer the kernel looks for, padded to a multiple of four bytes.
pub fn newc(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    let trailer = Entry {
        name: "TRAILER!!!",
        mode: 0,
        data: &[],
    };
    for (ino, e) in entries.iter().chain([&trailer]).enumerate() {
        let nlink = if e.mode & 0o040000 != 0 { 2 } else { 1 };
        let fields = [
            if e.mode == 0 { 0 } else { ino as u32 + 1 },
            e.mode,
            0,
            0,
            if e.mode == 0 { 0 } else { nlink },
            0,
            e.data.len() as u32,
            0,
            0,
            0,
            0,
            e.name.len() as u32 + 1,
            0,
        ];
        out.extend_from_slice(b"070701");
        for f in fields {
            out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        out.extend_from_slice(e.name.as_bytes());
        out.push(0);
        pad(&mut out);
        out.extend_from_slice(e.data);
        pad(&mut out);
    }
    out
}

fn pad(out: &mut Vec<u8>) {
    out.resize(out.len().next_multiple_of(4), 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// GNU cpio, the reference reader, lists and extracts what was written.
    #[test]
    fn gnu_cpio_reads_the_archive_back() {
        let archive = newc(&[
            Entry::dir("scripts"),
            Entry::dir("scripts/local-bottom"),
            Entry::file("scripts/local-bottom/ORDER", b"three", 0o644),
            Entry::file("scripts/local-bottom/run", b"#!/bin/sh\nexit 0\n", 0o755),
        ]);
        assert_eq!(archive.len() % 4, 0);
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new("cpio")
            .args(["-idm", "--quiet"])
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&archive).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let order = dir.path().join("scripts/local-bottom/ORDER");
        assert_eq!(std::fs::read(&order).unwrap(), b"three");
        use std::os::unix::fs::PermissionsExt;
        let run = dir.path().join("scripts/local-bottom/run");
        assert_eq!(
            std::fs::metadata(&run).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(std::fs::read(run).unwrap(), b"#!/bin/sh\nexit 0\n");
    }
}
