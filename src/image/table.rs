//! Partition tables: MBR (Raspberry Pi OS, Debian raspi) and GPT (Armbian's
//! Rockchip images), both read by hand with checked arithmetic because an
//! image is untrusted input. Boot and root partitions are recognised by type,
//! filesystem magic and label, never by their index.

use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

pub const SECTOR: u64 = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TableKind {
    Mbr,
    Gpt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fs {
    Fat,
    Ext4,
    Unknown,
}

impl std::fmt::Display for TableKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TableKind::Mbr => "MBR",
            TableKind::Gpt => "GPT",
        })
    }
}

impl std::fmt::Display for Fs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fs::Fat => "FAT",
            Fs::Ext4 => "ext4",
            Fs::Unknown => "unknown filesystem",
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Partition {
    pub number: u32,
    /// Byte offset of the first sector.
    pub start: u64,
    pub size: u64,
    /// MBR type byte as `0x0c`, or the GPT type GUID.
    pub type_id: String,
    /// GPT partition name.
    pub name: Option<String>,
    pub fs: Fs,
    pub label: Option<String>,
}

impl Partition {
    pub fn end(&self) -> u64 {
        self.start + self.size
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Layout {
    pub kind: TableKind,
    /// The MBR disk signature or the GPT disk GUID.
    pub disk_id: String,
    pub disk_size: u64,
    pub partitions: Vec<Partition>,
}

/// MBR types that hold FAT (the Raspberry Pi firmware reads 0x0c and 0x0b).
const MBR_FAT: [u8; 4] = [0x0b, 0x0c, 0x0e, 0x06];
const GPT_ESP: &str = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B";
const GPT_BASIC_DATA: &str = "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7";

impl Layout {
    pub fn read(file: &mut File) -> Result<Layout> {
        let disk_size = file.seek(SeekFrom::End(0))?;
        if disk_size < 2 * SECTOR {
            bail!("the image is {disk_size} bytes: too small to hold a partition table");
        }
        let mut mbr = [0u8; 512];
        file.seek(SeekFrom::Start(0))?;
        file.read_exact(&mut mbr)?;
        if mbr[510..512] != [0x55, 0xaa] {
            bail!(
                "no partition table: the first sector has no MBR boot signature (55 aa); is this a disk image?"
            );
        }
        let protective = (0..4).any(|i| mbr[446 + i * 16 + 4] == 0xee);
        let mut layout = if protective {
            read_gpt(file, disk_size)?
        } else {
            read_mbr(file, &mbr, disk_size)?
        };
        layout.partitions.sort_by_key(|p| p.start);
        for w in layout.partitions.windows(2) {
            if w[0].end() > w[1].start {
                bail!(
                    "corrupt partition table: partitions {} and {} overlap",
                    w[0].number,
                    w[1].number
                );
            }
        }
        for p in &mut layout.partitions {
            if p.end() > disk_size {
                bail!(
                    "corrupt partition table: partition {} ends at byte {} but the image is only {} bytes (truncated image?)",
                    p.number,
                    p.end(),
                    disk_size
                );
            }
            let (fs, label) = probe(file, p.start, p.size)?;
            p.fs = fs;
            p.label = label;
        }
        Ok(layout)
    }

    /// The FAT partition the firmware boots from: FAT by type and by magic,
    /// preferring the label `bootfs` (Raspberry Pi OS) or `RASPIFIRM` (Debian).
    pub fn boot(&self) -> Option<&Partition> {
        let fat = self.partitions.iter().filter(|p| {
            p.fs == Fs::Fat
                && (p
                    .type_id
                    .parse::<TypeByte>()
                    .is_ok_and(|t| MBR_FAT.contains(&t.0))
                    || p.type_id.eq_ignore_ascii_case(GPT_ESP)
                    || p.type_id.eq_ignore_ascii_case(GPT_BASIC_DATA))
        });
        let fat: Vec<_> = fat.collect();
        fat.iter()
            .find(|p| {
                p.label.as_deref().is_some_and(|l| {
                    l.eq_ignore_ascii_case("bootfs") || l.eq_ignore_ascii_case("raspifirm")
                })
            })
            .or(fat.first())
            .copied()
    }

    /// The ext4 root: the labels Raspberry Pi OS, Debian and Armbian use first,
    /// else the largest ext4 partition.
    pub fn root(&self) -> Option<&Partition> {
        let ext: Vec<_> = self
            .partitions
            .iter()
            .filter(|p| p.fs == Fs::Ext4)
            .collect();
        ext.iter()
            .find(|p| {
                p.label
                    .as_deref()
                    .is_some_and(|l| ["rootfs", "armbi_root", "RASPIROOT"].contains(&l))
            })
            .or(ext.iter().max_by_key(|p| p.size))
            .copied()
    }
}

struct TypeByte(u8);

impl std::str::FromStr for TypeByte {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        s.strip_prefix("0x")
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .map(TypeByte)
            .ok_or(())
    }
}

/// MBR types that chain logical partitions through extended boot records.
const MBR_EXTENDED: [u8; 4] = [0x05, 0x0f, 0x85, 0xc5];
/// More logical partitions than any tool makes; a longer chain is a crafted loop.
const MBR_MAX_LOGICAL: u32 = 128;

/// One MBR or EBR entry: (type byte, first sector, sectors).
fn mbr_entry(sector: &[u8; 512], i: usize) -> (u8, u64, u64) {
    let e = 446 + i * 16;
    let u32_at = |at: usize| {
        u64::from(u32::from_le_bytes([
            sector[at],
            sector[at + 1],
            sector[at + 2],
            sector[at + 3],
        ]))
    };
    (sector[e + 4], u32_at(e + 8), u32_at(e + 12))
}

fn mbr_partition(number: u32, sys: u8, first: u64, sectors: u64) -> Partition {
    Partition {
        number,
        start: first * SECTOR,
        size: sectors * SECTOR,
        type_id: format!("0x{sys:02x}"),
        name: None,
        fs: Fs::Unknown,
        label: None,
    }
}

/// Read by hand: every field is a u32 of sectors, so with u64 sums nothing
/// can overflow, and the logical chain is bounded and must move forward.
fn read_mbr(file: &mut File, mbr: &[u8; 512], disk_size: u64) -> Result<Layout> {
    let mut partitions = Vec::new();
    let mut number = 4;
    for i in 0..4 {
        let (sys, first, sectors) = mbr_entry(mbr, i);
        if sys == 0 {
            continue;
        }
        if !MBR_EXTENDED.contains(&sys) {
            partitions.push(mbr_partition(i as u32 + 1, sys, first, sectors));
            continue;
        }
        let mut next = 0;
        loop {
            number += 1;
            if number > 4 + MBR_MAX_LOGICAL {
                bail!(
                    "corrupt MBR partition table: more than {MBR_MAX_LOGICAL} logical partitions"
                );
            }
            let ebr_at = (first + next) * SECTOR;
            if ebr_at + SECTOR > disk_size {
                bail!(
                    "corrupt MBR partition table: the extended boot record of partition {number} lies beyond the end of the image"
                );
            }
            let ebr: [u8; 512] = read_at(file, ebr_at, 512)?.try_into().expect("512 bytes");
            if ebr[510..512] != [0x55, 0xaa] {
                bail!(
                    "corrupt MBR partition table: the extended boot record of partition {number} has no 55 aa signature"
                );
            }
            let (sys, start, sectors) = mbr_entry(&ebr, 0);
            if sys != 0 {
                partitions.push(mbr_partition(number, sys, first + next + start, sectors));
            }
            match mbr_entry(&ebr, 1).1 {
                0 => break,
                link if link <= next => bail!(
                    "corrupt MBR partition table: the extended boot records after partition {number} loop back"
                ),
                link => next = link,
            }
        }
    }
    if partitions.is_empty() {
        bail!("the MBR partition table is empty: no partitions to customise");
    }
    Ok(Layout {
        kind: TableKind::Mbr,
        disk_id: format!(
            "{:08x}",
            u32::from_le_bytes([mbr[440], mbr[441], mbr[442], mbr[443]])
        ),
        disk_size,
        partitions,
    })
}

fn read_gpt(file: &mut File, disk_size: u64) -> Result<Layout> {
    use nasforge_engine::storage::partition::{GptReadError, read_gpt};
    let table = read_gpt(file, SECTOR).map_err(|e| match e {
        GptReadError::Header(_) => {
            anyhow::anyhow!("corrupt GPT partition table: {e}; repair it with `sgdisk -e` first")
        }
        GptReadError::EntrySize(_) => anyhow::anyhow!(
            "unsupported GPT partition table: {e}; use an image whose GPT has standard entries"
        ),
        e => anyhow::anyhow!("corrupt GPT partition table: {e}"),
    })?;
    let partitions = table
        .partitions
        .into_iter()
        .map(|p| {
            // The sector numbers are the image's word; in bytes they must stay
            // in range rather than wrap onto some other part of the image.
            let bytes = |sectors: u64| sectors.checked_mul(SECTOR);
            let (start, size) = bytes(p.first_lba)
                .zip((p.last_lba - p.first_lba).checked_add(1).and_then(bytes))
                .filter(|(start, size)| start.checked_add(*size).is_some())
                .with_context(|| {
                    format!(
                        "corrupt partition table: partition {} spans sectors {}..={}, beyond any disk",
                        p.number, p.first_lba, p.last_lba
                    )
                })?;
            Ok(Partition {
                number: p.number,
                start,
                size,
                type_id: p.type_guid.to_string().to_uppercase(),
                name: Some(p.name).filter(|n| !n.is_empty()),
                fs: Fs::Unknown,
                label: None,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Layout {
        kind: TableKind::Gpt,
        disk_id: table.disk_guid.to_string(),
        disk_size,
        partitions,
    })
}

fn read_at(file: &mut File, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(&mut buf)
        .with_context(|| format!("reading {len} bytes at offset {offset}"))?;
    Ok(buf)
}

fn text_field(bytes: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(bytes)
        .trim_end_matches(['\0', ' '])
        .to_string();
    (!s.is_empty() && s != "NO NAME").then_some(s)
}

/// The filesystem a partition holds, by its magic numbers.
fn probe(file: &mut File, start: u64, size: u64) -> Result<(Fs, Option<String>)> {
    if size >= 2048 {
        let sb = read_at(file, start + 1024, 136)?;
        if sb[56..58] == [0x53, 0xef] {
            return Ok((Fs::Ext4, text_field(&sb[120..136])));
        }
    }
    let bs = read_at(file, start, 512)?;
    if bs[510..512] == [0x55, 0xaa] {
        if &bs[0x52..0x57] == b"FAT32" {
            return Ok((Fs::Fat, text_field(&bs[0x47..0x52])));
        }
        if &bs[0x36..0x39] == b"FAT" {
            return Ok((Fs::Fat, text_field(&bs[0x2b..0x36])));
        }
    }
    Ok((Fs::Unknown, None))
}
