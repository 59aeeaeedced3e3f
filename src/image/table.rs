//! Partition tables: MBR (Raspberry Pi OS, Debian raspi) through mbrman and
//! GPT (Armbian's Rockchip images) through gpt. Boot and root partitions are
//! recognised by type, filesystem magic and label, never by their index.

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
            read_mbr(file, disk_size)?
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

fn read_mbr(file: &mut File, disk_size: u64) -> Result<Layout> {
    file.seek(SeekFrom::Start(0))?;
    let mbr = mbrman::MBR::read_from(file, SECTOR as u32)
        .map_err(|e| anyhow::anyhow!("corrupt MBR partition table: {e}"))?;
    let partitions: Vec<Partition> = mbr
        .iter()
        .filter(|(_, p)| p.is_used() && !p.is_extended())
        .map(|(i, p)| Partition {
            number: i as u32,
            start: p.starting_lba as u64 * SECTOR,
            size: p.sectors as u64 * SECTOR,
            type_id: format!("0x{:02x}", p.sys),
            name: None,
            fs: Fs::Unknown,
            label: None,
        })
        .collect();
    if partitions.is_empty() {
        bail!("the MBR partition table is empty: no partitions to customise");
    }
    let sig = mbr.header.disk_signature;
    Ok(Layout {
        kind: TableKind::Mbr,
        disk_id: format!("{:08x}", u32::from_le_bytes(sig)),
        disk_size,
        partitions,
    })
}

fn read_gpt(file: &mut File, disk_size: u64) -> Result<Layout> {
    let disk = gpt::GptConfig::new()
        .writable(false)
        .open_from_device(file as &mut File)
        .map_err(|e| anyhow::anyhow!("corrupt GPT partition table: {e}"))?;
    if disk.primary_header().is_err() {
        bail!(
            "corrupt GPT partition table: the primary header is damaged (only the backup is readable); repair it with `sgdisk -e` first"
        );
    }
    let partitions = disk
        .partitions()
        .iter()
        .filter(|(_, p)| p.is_used())
        .map(|(n, p)| Partition {
            number: *n,
            start: p.first_lba * SECTOR,
            size: (p.last_lba + 1 - p.first_lba) * SECTOR,
            type_id: p.part_type_guid.guid.to_string().to_uppercase(),
            name: Some(p.name.clone()).filter(|n| !n.is_empty()),
            fs: Fs::Unknown,
            label: None,
        })
        .collect();
    Ok(Layout {
        kind: TableKind::Gpt,
        disk_id: disk.guid().to_string(),
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
