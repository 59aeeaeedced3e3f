//! What a disk or partition already holds, read from its first and last
//! bytes: partition tables, filesystems, md superblocks, ZFS labels and the
//! like. This is the data-safety gate, so it errs towards finding something.
//!
//! For a whole disk, util-linux's own probe (`wipefs`, libblkid's full list
//! of signatures) is the reference: whatever it names counts, beside what
//! the probe here finds. Bytes neither recognises count too: a disk is blank
//! only when both its first and last MiB are zeros. Nothing is treated as
//! safe to overwrite: a disk fresh from the factory reads as zeros, and
//! anything else was written by someone, for a reason this gate cannot
//! know; erasing it costs the user one `wipe = true`, losing it costs more.

use crate::command::{Ask, Cmd, System};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes read from each end: covers ZFS's two 256 KiB labels at each end,
/// btrfs's superblock at 64 KiB and every md superblock position.
pub const WINDOW: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Signature {
    PartitionTable {
        scheme: String,
    },
    Filesystem {
        fstype: String,
        label: Option<String>,
        uuid: Option<String>,
    },
    MdMember {
        version: String,
        name: Option<String>,
    },
    ZfsMember,
    LvmMember,
    Luks,
    Swap,
    /// Something util-linux names that has no words of its own here: a
    /// fake-RAID member (`isw_raid_member`, `ddf_raid_member`), a bcache
    /// backing device, ...: libblkid's TYPE and USAGE for it.
    Probed {
        blkid_type: String,
        usage: Option<String>,
    },
    /// Non-zero bytes at an end of the disk that no probe recognises.
    Unrecognised {
        first_mib: bool,
        last_mib: bool,
    },
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signature::PartitionTable { scheme } => write!(f, "a {scheme} partition table"),
            Signature::Filesystem {
                fstype,
                label: Some(l),
                ..
            } => write!(f, "{} {fstype} filesystem labelled '{l}'", a_or_an(fstype)),
            Signature::Filesystem { fstype, .. } => {
                write!(f, "{} {fstype} filesystem", a_or_an(fstype))
            }
            Signature::MdMember { name: Some(n), .. } => write!(f, "an md RAID member of '{n}'"),
            Signature::MdMember { version, .. } => {
                write!(f, "an md RAID member (metadata {version})")
            }
            Signature::ZfsMember => f.write_str("a ZFS pool label"),
            Signature::LvmMember => f.write_str("an LVM physical volume"),
            Signature::Luks => f.write_str("a LUKS encrypted volume"),
            Signature::Swap => f.write_str("swap space"),
            Signature::Probed { blkid_type, usage } => {
                match (blkid_type.as_str(), usage.as_deref()) {
                    ("isw_raid_member", _) => {
                        f.write_str("an Intel RST (IMSM) fake-RAID member (isw_raid_member)")
                    }
                    ("ddf_raid_member", _) => {
                        f.write_str("a DDF fake-RAID member (ddf_raid_member)")
                    }
                    ("bcache", _) => f.write_str("a bcache device"),
                    (_, Some("raid")) => write!(f, "a RAID member ({blkid_type})"),
                    (_, Some("crypto")) => write!(f, "an encrypted volume ({blkid_type})"),
                    (kind, _) => write!(f, "{} {kind} signature", a_or_an(kind)),
                }
            }
            Signature::Unrecognised {
                first_mib,
                last_mib,
            } => {
                let at = match (first_mib, last_mib) {
                    (true, true) => "first and last MiB",
                    (true, false) => "first MiB",
                    _ => "last MiB",
                };
                write!(f, "data no probe recognises in its {at}")
            }
        }
    }
}

impl Signature {
    /// The signature with the text the disk chose escaped by
    /// [`super::printable`].
    pub fn printable(self) -> Signature {
        let text = |s: Option<String>| s.map(|s| super::printable(&s));
        match self {
            Signature::PartitionTable { scheme } => Signature::PartitionTable {
                scheme: super::printable(&scheme),
            },
            Signature::Filesystem {
                fstype,
                label,
                uuid,
            } => Signature::Filesystem {
                fstype: super::printable(&fstype),
                label: text(label),
                uuid: text(uuid),
            },
            Signature::MdMember { version, name } => Signature::MdMember {
                version: super::printable(&version),
                name: text(name),
            },
            Signature::Probed { blkid_type, usage } => Signature::Probed {
                blkid_type: super::printable(&blkid_type),
                usage: text(usage),
            },
            other => other,
        }
    }

    /// What libblkid (through wipefs, or udev's ID_FS_* properties) reports,
    /// in this module's terms: `kind` is its TYPE, `usage` its USAGE.
    pub fn from_blkid(
        kind: &str,
        usage: Option<&str>,
        label: Option<String>,
        uuid: Option<String>,
        version: Option<&str>,
    ) -> Signature {
        match (kind, usage) {
            // A protective MBR exists only for a GPT: what is left of one.
            ("PMBR", _) => Signature::PartitionTable {
                scheme: "gpt".into(),
            },
            (_, Some("partition-table" | "partition table")) => Signature::PartitionTable {
                scheme: kind.into(),
            },
            ("linux_raid_member", _) => Signature::MdMember {
                version: version.unwrap_or("unknown").into(),
                name: label,
            },
            ("zfs_member", _) => Signature::ZfsMember,
            ("LVM2_member", _) => Signature::LvmMember,
            ("crypto_LUKS", _) => Signature::Luks,
            ("swap", _) => Signature::Swap,
            (_, Some("filesystem")) => Signature::Filesystem {
                fstype: kind.into(),
                label,
                uuid,
            },
            _ => Signature::Probed {
                blkid_type: kind.into(),
                usage: usage.map(str::to_string),
            },
        }
    }

    /// Whether two findings name the same thing, as two probes describe it
    /// (they may differ on an ext filesystem's generation or an md label).
    fn same_thing(&self, other: &Signature) -> bool {
        use Signature as S;
        let ext = |t: &str| matches!(t, "ext2" | "ext3" | "ext4" | "ext4dev" | "jbd");
        match (self, other) {
            (S::PartitionTable { scheme: a }, S::PartitionTable { scheme: b }) => a == b,
            (S::Filesystem { fstype: a, .. }, S::Filesystem { fstype: b, .. }) => {
                a == b || ext(a) && ext(b)
            }
            (S::Probed { blkid_type: a, .. }, S::Probed { blkid_type: b, .. }) => a == b,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

/// Adds to `found` each of `more` that it does not already name.
fn merge(found: &mut Vec<Signature>, more: impl IntoIterator<Item = Signature>) {
    for s in more {
        if !found.iter().any(|f| f.same_thing(&s)) {
            found.push(s);
        }
    }
}

/// The article for a filesystem type as it is read aloud: "an ext4", "an
/// xfs" (ex-eff-ess), "a btrfs" (butter-eff-ess), "a vfat".
pub fn a_or_an(fstype: &str) -> &'static str {
    const SPELLED_WITH_A_VOWEL_SOUND: &[&str] = &["xfs", "f2fs", "ntfs", "ntfs3", "hfs", "hfsplus"];
    if fstype.starts_with(['a', 'e', 'i', 'o']) || SPELLED_WITH_A_VOWEL_SOUND.contains(&fstype) {
        "an"
    } else {
        "a"
    }
}

/// The ends of a device: `head` starts at byte 0, `tail` ends at `size`.
pub struct Ends<'a> {
    pub head: &'a [u8],
    pub tail: &'a [u8],
    pub size: u64,
}

impl Ends<'_> {
    fn at(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len as u64)?;
        if end <= self.head.len() as u64 {
            return Some(&self.head[offset as usize..end as usize]);
        }
        let tail_start = self.size - self.tail.len() as u64;
        (offset >= tail_start && end <= self.size)
            .then(|| &self.tail[(offset - tail_start) as usize..(end - tail_start) as usize])
    }

    fn is(&self, offset: u64, magic: &[u8]) -> bool {
        self.at(offset, magic.len()) == Some(magic)
    }

    fn u32_le(&self, offset: u64) -> Option<u32> {
        self.at(offset, 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    }
}

/// Both ends of a device, read once.
struct Read {
    head: Vec<u8>,
    tail: Vec<u8>,
    size: u64,
}

impl Read {
    fn from(path: &Path, offset: u64, len: Option<u64>) -> std::io::Result<Read> {
        let file = File::open(path)?;
        let size = match len {
            Some(len) => len,
            None => device_size(&file)?,
        };
        let window = WINDOW.min(size);
        let mut head = vec![0; window as usize];
        let mut tail = vec![0; window as usize];
        file.read_exact_at(&mut head, offset)?;
        file.read_exact_at(&mut tail, offset + size - window)?;
        Ok(Read { head, tail, size })
    }

    fn ends(&self) -> Ends<'_> {
        Ends {
            head: &self.head,
            tail: &self.tail,
            size: self.size,
        }
    }
}

/// Reads both ends of `path` (a block device, or a file standing in for one)
/// starting `offset` bytes in, over `len` bytes (None: to the end).
pub fn read(path: &Path, offset: u64, len: Option<u64>) -> std::io::Result<Vec<Signature>> {
    Ok(probe(&Read::from(path, offset, len)?.ends()))
}

/// Everything a whole disk holds, as the data-safety gate judges it: this
/// module's probe, util-linux's (`wipefs`), what udev reported (`udev`),
/// and, when none of them names anything, any non-zero byte in the first or
/// last MiB. An error means what the disk holds is unknown.
pub fn whole_disk(path: &Path, udev: Vec<Signature>) -> Result<Vec<Signature>, String> {
    let read = Read::from(path, 0, None).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut found = probe(&read.ends());
    merge(&mut found, util_linux(path)?);
    merge(&mut found, udev);
    if found.is_empty() {
        found.extend(unrecognised(&read.head, &read.tail));
    }
    Ok(found)
}

/// The ends hold something when any byte there is not zero.
fn unrecognised(head: &[u8], tail: &[u8]) -> Option<Signature> {
    let first_mib = head.iter().any(|&b| b != 0);
    let last_mib = tail.iter().any(|&b| b != 0);
    (first_mib || last_mib).then_some(Signature::Unrecognised {
        first_mib,
        last_mib,
    })
}

/// What `wipefs` lists on `path`, without erasing anything: every
/// signature libblkid knows (filesystems, RAID and fake-RAID members,
/// bcache, partition tables), where `blkid -p` reports one or gives up as
/// "ambivalent". wipefs is in util-linux, on every Debian-based board.
pub fn util_linux(path: &Path) -> Result<Vec<Signature>, String> {
    let path_text = path.to_string_lossy();
    let answer = System
        .query(&Cmd::new(&[
            "wipefs",
            "--no-act",
            "--json",
            "--output",
            "TYPE,USAGE,UUID,LABEL",
            &path_text,
        ]))
        .map_err(|e| {
            format!(
                "{}: wipefs (util-linux) could not be started: {}",
                path.display(),
                e.source
            )
        })?;
    if answer.status != 0 {
        return Err(format!(
            "{}: `wipefs --no-act` failed: {}",
            path.display(),
            answer.stderr.trim()
        ));
    }
    parse_wipefs(&answer.stdout)
        .map_err(|e| format!("{}: unexpected output from wipefs: {e}", path.display()))
}

/// `wipefs --json` output. util-linux 2.38 prints an empty list when it
/// finds nothing; no output at all is read the same way.
fn parse_wipefs(json: &str) -> Result<Vec<Signature>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Listing {
        signatures: Vec<Found>,
    }
    #[derive(Deserialize)]
    struct Found {
        #[serde(rename = "type")]
        kind: String,
        usage: Option<String>,
        uuid: Option<String>,
        label: Option<String>,
    }
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    let listing: Listing = serde_json::from_str(json)?;
    let mut found = Vec::new();
    merge(
        &mut found,
        listing.signatures.into_iter().map(|s| {
            let named = |v: Option<String>| v.filter(|v| !v.is_empty());
            Signature::from_blkid(
                &s.kind,
                s.usage.as_deref(),
                named(s.label),
                named(s.uuid),
                None,
            )
        }),
    );
    Ok(found)
}

/// A block device's size is not in its metadata: seek to the end instead.
pub fn device_size(file: &File) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::End(0))
}

/// Every signature found; empty means the bytes look unused.
pub fn probe(d: &Ends) -> Vec<Signature> {
    let mut found = Vec::new();
    found.extend(partition_table(d));
    found.extend(filesystem(d));
    found.extend(md(d));
    if zfs(d) {
        found.push(Signature::ZfsMember);
    }
    if (0..4).any(|s| d.is(s * 512, b"LABELONE") && d.is(s * 512 + 24, b"LVM2 001")) {
        found.push(Signature::LvmMember);
    }
    if d.is(0, b"LUKS\xba\xbe") || d.is(0, b"SKUL\xba\xbe") {
        found.push(Signature::Luks);
    }
    if [4096u64, 8192, 16384, 65536]
        .iter()
        .any(|page| d.is(page - 10, b"SWAPSPACE2") || d.is(page - 10, b"SWAP-SPACE"))
    {
        found.push(Signature::Swap);
    }
    found
}

fn partition_table(d: &Ends) -> Option<Signature> {
    // 4Kn disks put the GPT header at byte 4096; the backup is in the last sector.
    let gpt = [512u64, 4096].iter().any(|&s| d.is(s, b"EFI PART"))
        || [512u64, 4096]
            .iter()
            .any(|&s| d.size >= s && d.is(d.size - s, b"EFI PART"));
    if gpt {
        return Some(Signature::PartitionTable {
            scheme: "gpt".into(),
        });
    }
    let boot_sector = d.is(510, &[0x55, 0xaa]);
    let is_fs_boot_sector =
        d.is(3, b"NTFS    ") || d.is(3, b"EXFAT   ") || d.is(82, b"FAT32   ") || d.is(54, b"FAT1");
    let has_entries = (0..4).any(|i| {
        let e = d.at(446 + i * 16, 16).unwrap_or(&[0; 16]);
        (e[0] == 0 || e[0] == 0x80) && e[4] != 0
    });
    (boot_sector && !is_fs_boot_sector && has_entries).then(|| Signature::PartitionTable {
        scheme: "dos".into(),
    })
}

fn text(bytes: Option<&[u8]>) -> Option<String> {
    let bytes = bytes?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let s = String::from_utf8_lossy(&bytes[..end]).trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn uuid(bytes: Option<&[u8]>) -> Option<String> {
    let b = bytes?;
    if b.iter().all(|&x| x == 0) {
        return None;
    }
    Some(uuid::Uuid::from_slice(b).ok()?.hyphenated().to_string())
}

fn filesystem(d: &Ends) -> Option<Signature> {
    let fs = |fstype: &str, label: Option<String>, uuid: Option<String>| {
        Some(Signature::Filesystem {
            fstype: fstype.to_string(),
            label,
            uuid,
        })
    };
    if d.is(1024 + 0x38, &[0x53, 0xef]) {
        let compat = d.u32_le(1024 + 0x5c).unwrap_or(0);
        let incompat = d.u32_le(1024 + 0x60).unwrap_or(0);
        // extents / 64bit / flex_bg make it ext4; a journal alone, ext3.
        let fstype = if incompat & (0x40 | 0x80 | 0x200) != 0 {
            "ext4"
        } else if compat & 0x4 != 0 {
            "ext3"
        } else {
            "ext2"
        };
        return fs(
            fstype,
            text(d.at(1024 + 0x78, 16)),
            uuid(d.at(1024 + 0x68, 16)),
        );
    }
    if d.is(0, b"XFSB") {
        return fs("xfs", text(d.at(108, 12)), uuid(d.at(32, 16)));
    }
    if d.is(65536 + 0x40, b"_BHRfS_M") {
        return fs(
            "btrfs",
            text(d.at(65536 + 0x12b, 256)),
            uuid(d.at(65536 + 0x20, 16)),
        );
    }
    // Their UUIDs as libblkid (and so fstab's UUID=) spells them: NTFS's
    // 64-bit volume serial at 0x48, exFAT's 32-bit one at 100, in hex.
    if d.is(3, b"NTFS    ") {
        let serial = d
            .at(0x48, 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            .filter(|&s| s != 0)
            .map(|s| format!("{s:016X}"));
        return fs("ntfs", None, serial);
    }
    if d.is(3, b"EXFAT   ") {
        let serial = d
            .u32_le(100)
            .filter(|&s| s != 0)
            .map(|s| format!("{:04X}-{:04X}", s >> 16, s & 0xffff));
        return fs("exfat", None, serial);
    }
    if d.is(510, &[0x55, 0xaa]) && (d.is(82, b"FAT32   ") || d.is(54, b"FAT1")) {
        let label_at = if d.is(82, b"FAT32   ") { 71 } else { 43 };
        return fs(
            "vfat",
            text(d.at(label_at, 11)).filter(|l| l != "NO NAME"),
            None,
        );
    }
    if d.is(32769, b"CD001") {
        return fs("iso9660", None, None);
    }
    None
}

const MD_MAGIC: u32 = 0xa92b_4efc;

fn md(d: &Ends) -> Option<Signature> {
    let sectors = d.size / 512;
    // v1.2 at 4 KiB, v1.1 at 0, v1.0 near the end, v0.90 in the last 64 KiB-aligned block.
    let v1 = [
        ("1.2", Some(4096)),
        ("1.1", Some(0)),
        ("1.0", sectors.checked_sub(16).map(|s| (s & !7) * 512)),
    ];
    for (version, at) in v1 {
        let Some(at) = at else { continue };
        if d.u32_le(at) == Some(MD_MAGIC) && d.u32_le(at + 4) == Some(1) {
            let name = text(d.at(at + 32, 32));
            return Some(Signature::MdMember {
                version: version.into(),
                name,
            });
        }
    }
    let v090 = (sectors & !127).checked_sub(128).map(|s| s * 512);
    if let Some(at) = v090
        && d.u32_le(at) == Some(MD_MAGIC)
    {
        return Some(Signature::MdMember {
            version: "0.90".into(),
            name: None,
        });
    }
    None
}

fn zfs(d: &Ends) -> bool {
    const LABEL: u64 = 256 * 1024;
    let labels = [
        Some(0),
        Some(LABEL),
        d.size.checked_sub(2 * LABEL),
        d.size.checked_sub(LABEL),
    ];
    let magic = 0x00ba_b10c_u64;
    labels.into_iter().flatten().any(|label| {
        (0..128).any(|k| {
            d.at(label + 128 * 1024 + k * 1024, 8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                .is_some_and(|v| v == magic || v.swap_bytes() == magic)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(size: usize, writes: &[(usize, &[u8])]) -> Vec<u8> {
        let mut d = vec![0u8; size];
        for (at, bytes) in writes {
            d[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        d
    }

    fn probe_all(d: &[u8]) -> Vec<Signature> {
        probe(&Ends {
            head: d,
            tail: d,
            size: d.len() as u64,
        })
    }

    #[test]
    fn filesystems_get_the_article_they_are_read_aloud_with() {
        let said = |fstype: &str, label: Option<&str>| {
            Signature::Filesystem {
                fstype: fstype.into(),
                label: label.map(str::to_string),
                uuid: None,
            }
            .to_string()
        };
        assert_eq!(
            said("btrfs", Some("pool")),
            "a btrfs filesystem labelled 'pool'"
        );
        assert_eq!(said("vfat", None), "a vfat filesystem");
        assert_eq!(said("ext4", None), "an ext4 filesystem");
        assert_eq!(said("xfs", None), "an xfs filesystem");
        assert_eq!(said("ntfs", None), "an ntfs filesystem");
        assert_eq!(said("exfat", None), "an exfat filesystem");
        assert_eq!(said("iso9660", None), "an iso9660 filesystem");
    }

    #[test]
    fn reads_wipefs_listings_as_one_finding_per_thing() {
        // As wipefs 2.38 prints them: a GPT disk, a nilfs2 with its backup
        // superblock, an Intel RST member.
        let gpt = r#"{"signatures": [
            {"type": "gpt", "usage": "partition-table", "uuid": null, "label": null},
            {"type": "gpt", "usage": "partition-table", "uuid": null, "label": null},
            {"type": "PMBR", "usage": "partition-table", "uuid": null, "label": null}]}"#;
        assert_eq!(
            parse_wipefs(gpt).unwrap(),
            [Signature::PartitionTable {
                scheme: "gpt".into()
            }]
        );
        let nilfs2 = r#"{"signatures": [
            {"type": "nilfs2", "usage": "filesystem", "uuid": "421bbfd9-6818-408d-ab69-632a74337e21", "label": "data"},
            {"type": "nilfs2", "usage": "filesystem", "uuid": "421bbfd9-6818-408d-ab69-632a74337e21", "label": "data"}]}"#;
        assert_eq!(
            parse_wipefs(nilfs2).unwrap(),
            [Signature::Filesystem {
                fstype: "nilfs2".into(),
                label: Some("data".into()),
                uuid: Some("421bbfd9-6818-408d-ab69-632a74337e21".into())
            }]
        );
        let isw = r#"{"signatures": [{"type": "isw_raid_member", "usage": "raid", "uuid": null, "label": ""}]}"#;
        let found = parse_wipefs(isw).unwrap();
        assert_eq!(
            found,
            [Signature::Probed {
                blkid_type: "isw_raid_member".into(),
                usage: Some("raid".into())
            }]
        );
        assert_eq!(
            found[0].to_string(),
            "an Intel RST (IMSM) fake-RAID member (isw_raid_member)"
        );
        let nothing = "{\n   \"signatures\": [\n\n   ]\n}\n";
        assert_eq!(parse_wipefs(nothing).unwrap(), []);
        assert_eq!(parse_wipefs("").unwrap(), []);
        assert!(parse_wipefs("{\"signatures\": [{\"offset\": 1}]}").is_err());
        assert!(parse_wipefs("DEVICE OFFSET TYPE").is_err());
    }

    #[test]
    fn names_what_only_blkid_knows_by_its_usage() {
        let said = |kind: &str, usage: &str| {
            Signature::from_blkid(kind, Some(usage), None, None, None).to_string()
        };
        assert_eq!(
            said("ddf_raid_member", "raid"),
            "a DDF fake-RAID member (ddf_raid_member)"
        );
        assert_eq!(said("bcache", "other"), "a bcache device");
        assert_eq!(
            said("promise_fasttrack_raid_member", "raid"),
            "a RAID member (promise_fasttrack_raid_member)"
        );
        assert_eq!(
            said("BitLocker", "crypto"),
            "an encrypted volume (BitLocker)"
        );
        assert_eq!(
            said("VMFS_volume_member", "other"),
            "a VMFS_volume_member signature"
        );
        assert_eq!(said("jfs", "filesystem"), "a jfs filesystem");
        assert_eq!(said("crypto_LUKS", "crypto"), "a LUKS encrypted volume");
        assert_eq!(
            Signature::from_blkid(
                "linux_raid_member",
                Some("raid"),
                Some("nas:data".into()),
                None,
                Some("1.2")
            ),
            Signature::MdMember {
                version: "1.2".into(),
                name: Some("nas:data".into())
            }
        );
    }

    #[test]
    fn merging_keeps_the_first_name_for_one_thing() {
        let fs = |fstype: &str| Signature::Filesystem {
            fstype: fstype.into(),
            label: None,
            uuid: None,
        };
        let mut found = vec![fs("ext4")];
        merge(
            &mut found,
            [
                fs("ext3"),
                Signature::Probed {
                    blkid_type: "bcache".into(),
                    usage: None,
                },
                fs("f2fs"),
            ],
        );
        assert_eq!(
            found,
            [
                fs("ext4"),
                Signature::Probed {
                    blkid_type: "bcache".into(),
                    usage: None
                },
                fs("f2fs")
            ],
            "two probes disagreeing on an ext generation name one filesystem"
        );
    }

    #[test]
    fn any_non_zero_byte_at_an_end_is_data() {
        let zeros = vec![0u8; 4096];
        let mut dirty = zeros.clone();
        assert_eq!(unrecognised(&zeros, &zeros), None);
        dirty[4095] = 1;
        assert_eq!(
            unrecognised(&zeros, &dirty),
            Some(Signature::Unrecognised {
                first_mib: false,
                last_mib: true
            })
        );
        assert_eq!(
            unrecognised(&dirty, &dirty).unwrap().to_string(),
            "data no probe recognises in its first and last MiB"
        );
    }

    #[test]
    fn blank_is_blank() {
        assert!(probe_all(&device(4 << 20, &[])).is_empty());
    }

    #[test]
    fn finds_a_backup_gpt_when_the_primary_is_gone() {
        let size = 4 << 20;
        let d = device(size, &[(size - 512, b"EFI PART")]);
        assert_eq!(
            probe_all(&d),
            vec![Signature::PartitionTable {
                scheme: "gpt".into()
            }]
        );
    }

    #[test]
    fn finds_md_superblocks_at_every_version_position() {
        let size: usize = 4 << 20;
        let magic = MD_MAGIC.to_le_bytes();
        let v10 = ((size / 512 - 16) & !7) * 512;
        for (at, version) in [(4096, "1.2"), (0, "1.1"), (v10, "1.0")] {
            let mut d = device(
                size,
                &[
                    (at, &magic),
                    (at + 4, &1u32.to_le_bytes()),
                    (at + 32, b"nas:data"),
                ],
            );
            let found = probe_all(&d);
            assert_eq!(
                found,
                vec![Signature::MdMember {
                    version: version.into(),
                    name: Some("nas:data".into())
                }]
            );
            d[at] = 0;
            assert!(probe_all(&d).is_empty());
        }
        let v090 = ((size / 512) & !127) * 512 - 65536;
        let d = device(size, &[(v090, &magic)]);
        assert!(matches!(probe_all(&d)[..], [Signature::MdMember { .. }]));
    }

    #[test]
    fn finds_zfs_labels_at_either_end() {
        let size: usize = 4 << 20;
        let magic = 0x00bab10cu64.to_le_bytes();
        let at_end = size - 256 * 1024 + 128 * 1024 + 5 * 1024;
        assert_eq!(
            probe_all(&device(size, &[(at_end, &magic)])),
            vec![Signature::ZfsMember]
        );
    }

    #[test]
    fn reads_only_the_ends_it_is_given() {
        let size: u64 = 10 << 30;
        let head = device(
            WINDOW as usize,
            &[(4096, &MD_MAGIC.to_le_bytes()), (4100, &1u32.to_le_bytes())],
        );
        let tail = vec![0; WINDOW as usize];
        let ends = Ends {
            head: &head,
            tail: &tail,
            size,
        };
        assert!(matches!(probe(&ends)[..], [Signature::MdMember { .. }]));
        assert_eq!(ends.at(size / 2, 8), None, "the middle was never read");
    }

    #[test]
    fn tells_an_mbr_from_a_fat_boot_sector() {
        let mut entry = [0u8; 16];
        entry[4] = 0x83;
        let mbr = device(1 << 20, &[(446, &entry), (510, &[0x55, 0xaa])]);
        assert_eq!(
            probe_all(&mbr),
            vec![Signature::PartitionTable {
                scheme: "dos".into()
            }]
        );
        let fat = device(
            1 << 20,
            &[
                (446, &entry),
                (510, &[0x55, 0xaa]),
                (82, b"FAT32   "),
                (71, b"BOOTFS     "),
            ],
        );
        assert_eq!(
            probe_all(&fat),
            vec![Signature::Filesystem {
                fstype: "vfat".into(),
                label: Some("BOOTFS".into()),
                uuid: None
            }]
        );
    }
}
