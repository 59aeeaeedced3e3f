//! GPT disk images built byte by byte, for headers no partitioning tool
//! writes (256-byte entries, sector numbers past any disk). For the
//! workstation's and the board's property tests.

pub const SECTORS: u64 = 8192;
const ENTRIES: u64 = 128;
/// Linux filesystem data, 0FC63DAF-8483-4772-8E79-3D69D8477DE4, as GPT stores it.
const LINUX_FS: [u8; 16] = [
    0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4,
];

/// A 4 MiB image with a protective MBR, primary and backup GPT whose entries
/// are `entry_size` bytes, and one Linux partition per (first, last) sector
/// pair named `data<n>`. Every CRC is correct.
pub fn gpt_image(entry_size: u32, parts: &[(u64, u64)]) -> Vec<u8> {
    let mut img = vec![0u8; (SECTORS * 512) as usize];
    let entry = entry_size as usize;
    let array_sectors = ENTRIES * u64::from(entry_size) / 512;
    let mut array = vec![0u8; ENTRIES as usize * entry];
    for (i, &(first, last)) in parts.iter().enumerate() {
        let e = &mut array[i * entry..(i + 1) * entry];
        e[..16].copy_from_slice(&LINUX_FS);
        e[16..32].copy_from_slice(&[i as u8 + 1; 16]);
        e[32..40].copy_from_slice(&first.to_le_bytes());
        e[40..48].copy_from_slice(&last.to_le_bytes());
        for (k, unit) in format!("data{}", i + 1).encode_utf16().enumerate() {
            e[56 + 2 * k..58 + 2 * k].copy_from_slice(&unit.to_le_bytes());
        }
    }
    let array_crc = crc32fast::hash(&array);
    let header = |current: u64, backup: u64, array_lba: u64| {
        let mut h = vec![0u8; 92];
        h[..8].copy_from_slice(b"EFI PART");
        h[8..12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
        h[12..16].copy_from_slice(&92u32.to_le_bytes());
        h[24..32].copy_from_slice(&current.to_le_bytes());
        h[32..40].copy_from_slice(&backup.to_le_bytes());
        h[40..48].copy_from_slice(&(2 + array_sectors).to_le_bytes());
        h[48..56].copy_from_slice(&(SECTORS - 2 - array_sectors).to_le_bytes());
        h[56..72].copy_from_slice(&[0x42; 16]);
        h[72..80].copy_from_slice(&array_lba.to_le_bytes());
        h[80..84].copy_from_slice(&(ENTRIES as u32).to_le_bytes());
        h[84..88].copy_from_slice(&entry_size.to_le_bytes());
        h[88..92].copy_from_slice(&array_crc.to_le_bytes());
        let crc = crc32fast::hash(&h);
        h[16..20].copy_from_slice(&crc.to_le_bytes());
        h
    };
    let last = SECTORS - 1;
    let backup_array = last - array_sectors;
    let at = |lba: u64| (lba * 512) as usize;
    img[at(1)..at(1) + 92].copy_from_slice(&header(1, last, 2));
    img[at(2)..at(2) + array.len()].copy_from_slice(&array);
    img[at(backup_array)..at(backup_array) + array.len()].copy_from_slice(&array);
    img[at(last)..at(last) + 92].copy_from_slice(&header(last, 1, backup_array));
    // The protective MBR: one 0xee partition over the whole disk.
    img[446 + 4] = 0xee;
    img[446 + 8..446 + 12].copy_from_slice(&1u32.to_le_bytes());
    img[446 + 12..446 + 16].copy_from_slice(&((SECTORS - 1) as u32).to_le_bytes());
    img[510] = 0x55;
    img[511] = 0xaa;
    img
}
