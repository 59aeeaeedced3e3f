//! Every parser of untrusted bytes or text on the workstation, fed arbitrary
//! and mutated inputs: it returns a value or an error, and never panics.
//! Mutations start from real inputs (the shipped recipes, a config.txt from
//! the fixtures, tables written by sfdisk, an .xz written by the host's xz).
//!
//! CI runs one to two thousand cases per property (seconds); a longer run:
//! `PROPTEST_CASES=100000 cargo test --test proptest_parsers`.

mod common;
use nasforge_testkit::proptest_support;

use common::{nasforge, run, spawn_with_stdin, write_recipe};
use nasforge::boot::config_txt::ConfigTxt;
use nasforge::image::Layout;
use nasforge::io::decompress::xz_uncompressed_size;
use nasforge::recipe::Recipe;
use nasforge::size::Size;
use nasforge_engine::machine::armbian_env::ArmbianEnv;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest_support::{RECIPES, config, gpt};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

#[derive(Debug, Clone)]
enum Mutation {
    Flip(Index, u8),
    Insert(Index, u8),
    Delete(Index),
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(
        prop_oneof![
            4 => (any::<Index>(), 1..=255u8).prop_map(|(i, x)| Mutation::Flip(i, x)),
            1 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
            1 => any::<Index>().prop_map(Mutation::Delete),
        ],
        1..8,
    )
}

/// `base` with the mutations applied to its bytes within `region` (clamped).
fn mutate(base: &[u8], region: std::ops::Range<usize>, ops: &[Mutation]) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for op in ops {
        let end = region.end.min(bytes.len());
        let span = end.saturating_sub(region.start);
        if span == 0 {
            break;
        }
        let at = |i: &Index| region.start + i.index(span);
        match op {
            Mutation::Flip(i, x) => {
                let at = at(i);
                bytes[at] ^= x;
            }
            Mutation::Insert(i, b) => bytes.insert(at(i), *b),
            Mutation::Delete(i) => {
                bytes.remove(at(i));
            }
        }
    }
    bytes
}

fn mutate_text(base: &str, ops: &[Mutation]) -> String {
    String::from_utf8_lossy(&mutate(base.as_bytes(), 0..base.len(), ops)).into_owned()
}

const CONFIG_TXT: &str = include_str!("../engine/tests/data/pi5-jmb585/boot/firmware/config.txt");

fn parse_recipe(text: &str) {
    if let Err(e) = Recipe::parse(Path::new("/nonexistent/r.toml"), text) {
        // The diagnostic (line, caret, masking) is parser output too.
        let _ = e.to_string();
    }
}

fn layout_of(bytes: &[u8]) -> anyhow::Result<Layout> {
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(bytes).unwrap();
    Layout::read(&mut f)
}

fn xz_size_of(bytes: &[u8]) -> std::io::Result<u64> {
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(bytes).unwrap();
    xz_uncompressed_size(&f)
}

/// A 256 KiB image partitioned by sfdisk from `script`.
fn sfdisk_image(script: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("t.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(256 << 10)
        .unwrap();
    let mut sfdisk = spawn_with_stdin(
        Command::new("sfdisk")
            .args(["-q", "--no-reread", "--wipe", "never"])
            .arg(&img),
        script,
    );
    assert!(
        sfdisk.wait().unwrap().success(),
        "sfdisk refused:\n{script}"
    );
    std::fs::read(&img).unwrap()
}

/// Two primary partitions and an extended one holding two logical ones, so
/// the EBR chain is there to be mutated.
fn mbr_image() -> &'static [u8] {
    static IMG: OnceLock<Vec<u8>> = OnceLock::new();
    IMG.get_or_init(|| {
        sfdisk_image(
            "label: dos\nunit: sectors\n\nstart=8, size=64, type=c\nstart=72, size=64, type=83\nstart=136, size=300, type=5\nstart=144, size=100, type=83\nstart=252, size=100, type=83\n",
        )
    })
}

fn gpt_image() -> &'static [u8] {
    static IMG: OnceLock<Vec<u8>> = OnceLock::new();
    IMG.get_or_init(|| {
        sfdisk_image(
            "label: gpt\nunit: sectors\n\nstart=40, size=100, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=root\nstart=140, size=100, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B\n",
        )
    })
}

/// Writes the header CRC and entry-array CRC back after a mutation, so the
/// reader goes past its checksums into the fields themselves.
fn reseal_gpt(bytes: &mut [u8]) {
    let array = 1024..1024 + 128 * 128;
    let crc = crc32fast::hash(&bytes[array]);
    bytes[512 + 88..512 + 92].copy_from_slice(&crc.to_le_bytes());
    bytes[512 + 16..512 + 20].fill(0);
    let crc = crc32fast::hash(&bytes[512..512 + 92]);
    bytes[512 + 16..512 + 20].copy_from_slice(&crc.to_le_bytes());
}

fn xz_file() -> &'static [u8] {
    static XZ: OnceLock<Vec<u8>> = OnceLock::new();
    XZ.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&data, text).unwrap();
        // Small blocks make an index with several records.
        run(Command::new("xz")
            .args(["-k", "-1", "--block-size=16KiB"])
            .arg(&data));
        std::fs::read(dir.path().join("data.xz")).unwrap()
    })
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn recipe_parser_survives_arbitrary_text(text in "\\PC{0,400}") {
        parse_recipe(&text);
    }

    #[test]
    fn recipe_parser_survives_mutated_recipes(which in 0..RECIPES.len(), ops in mutations()) {
        parse_recipe(&mutate_text(RECIPES[which], &ops));
    }

    #[test]
    fn size_parser_survives_arbitrary_text(text in "[0-9.]{0,200}[ KMGTPiBkmgtpib]{0,4}|\\PC{0,40}") {
        let _ = text.parse::<Size>();
    }

    #[test]
    fn config_txt_editor_survives_mutated_files(
        ops in mutations(),
        wanted in "(dtparam|dtoverlay|[a-z_]{1,12})=[a-z0-9_,=]{0,20}|\\PC{0,30}",
        section in "[a-z0-9]{0,6}|\\PC{0,8}",
        filters in prop::collection::vec("\\PC{0,12}", 0..3),
    ) {
        let mut config = ConfigTxt::parse(&mutate_text(CONFIG_TXT, &ops));
        config.set(&wanted, &filters, &section);
        let _ = config.render();
        let _ = config.long_lines();
        let _ = config.effective("dtparam:pciex1", &filters);
    }

    #[test]
    fn armbian_env_editor_survives_mutated_files(
        ops in mutations(),
        wanted in prop::collection::vec("\\PC{0,20}", 0..4),
    ) {
        let mut env = ArmbianEnv::parse(&mutate_text(common::ARMBIAN_ENV, &ops));
        env.add_overlays(&wanted);
        let _ = env.get("overlays");
        let _ = env.render();
    }

    #[test]
    fn xz_index_reader_survives_mutated_files(ops in mutations(), tail in 0..64usize) {
        let xz = xz_file();
        // Most of a real .xz is compressed data; the index and footer are
        // in the last bytes, where the mutations go.
        let from = xz.len().saturating_sub(tail.max(12) * 4);
        let _ = xz_size_of(&mutate(xz, from..xz.len(), &ops));
    }
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn table_reader_survives_arbitrary_sectors(
        mut bytes in prop::collection::vec(any::<u8>(), 1024..8192),
        protective in any::<bool>(),
    ) {
        bytes[510] = 0x55;
        bytes[511] = 0xaa;
        if protective {
            bytes[446 + 4] = 0xee;
        }
        let _ = layout_of(&bytes);
    }

    #[test]
    fn mbr_reader_survives_mutated_tables(ops in mutations()) {
        // The MBR and the EBRs, wherever sfdisk put them.
        let img = mbr_image();
        let records = img.chunks(512).enumerate().filter(|(_, s)| s[510..] == [0x55, 0xaa]);
        for (sector, _) in records {
            let _ = layout_of(&mutate(img, sector * 512..(sector + 1) * 512, &ops));
        }
    }

    #[test]
    fn gpt_reader_survives_mutated_tables(ops in mutations(), reseal in any::<bool>()) {
        // Header and entry array; flips only when resealing, so the offsets
        // the CRCs cover stay where they were.
        let img = gpt_image();
        if reseal {
            let flips: Vec<_> = ops.into_iter().filter(|m| matches!(m, Mutation::Flip(..))).collect();
            let mut bytes = mutate(img, 512..1024 + 128 * 128, &flips);
            reseal_gpt(&mut bytes);
            let _ = layout_of(&bytes);
        } else {
            let _ = layout_of(&mutate(img, 0..34 * 512, &ops));
        }
    }
}

#[test]
fn the_mutation_bases_are_read_as_real_tools_wrote_them() {
    // A property test over inputs the reader refuses outright proves little.
    let mbr = layout_of(mbr_image()).unwrap();
    let found: Vec<_> = mbr
        .partitions
        .iter()
        .map(|p| (p.number, p.start / 512, p.size / 512))
        .collect();
    assert_eq!(
        found,
        [(1, 8, 64), (2, 72, 64), (5, 144, 100), (6, 252, 100)]
    );
    let records = mbr_image()
        .chunks(512)
        .filter(|s| s[510..] == [0x55, 0xaa])
        .count();
    assert_eq!(records, 3, "the MBR and two EBRs");
    let gpt = layout_of(gpt_image()).unwrap();
    assert_eq!(gpt.partitions.len(), 2);
    assert_eq!(gpt.partitions[0].name.as_deref(), Some("root"));
    let mut resealed = gpt_image().to_vec();
    reseal_gpt(&mut resealed);
    assert!(layout_of(&resealed).is_ok());
    let text_len: usize = (0..20_000).map(|i| format!("line {i}\n").len()).sum();
    assert_eq!(xz_size_of(xz_file()).unwrap(), text_len as u64);
}

#[test]
fn inspect_refuses_a_gpt_with_256_byte_entries() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("wide.img");
    std::fs::write(&img, gpt::gpt_image(256, &[(2048, 4095)])).unwrap();
    // util-linux reads it: a valid GPT, just not the common entry size.
    let dump = common::stdout(Command::new("sfdisk").arg("--dump").arg(&img));
    assert!(
        dump.contains("start=        2048, size=        2048"),
        "{dump}"
    );
    let before = std::fs::read(&img).unwrap();
    let r = nasforge(&["inspect", "wide.img"], dir.path(), dir.path());
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("entries are 256 bytes") && r.stderr.contains("wide.img"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(&img).unwrap(), before, "nothing written");
}

#[test]
fn a_first_sector_past_any_disk_does_not_wrap_onto_the_image() {
    // 2^55 sectors are 2^64 bytes: wrapping, this partition would start at
    // 1 MiB and pass every bounds check.
    let first = (1u64 << 55) + 2048;
    let err = layout_of(&gpt::gpt_image(128, &[(first, first + 2047)])).unwrap_err();
    assert!(err.to_string().contains("beyond any disk"), "{err}");
    // A partition over every sector there could be: its length overflows.
    let err = layout_of(&gpt::gpt_image(128, &[(0, u64::MAX)])).unwrap_err();
    assert!(err.to_string().contains("beyond any disk"), "{err}");
    assert!(layout_of(&gpt::gpt_image(128, &[(2048, 4095)])).is_ok());
}

#[test]
fn check_reports_a_size_with_130_decimals_as_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let zeros = "0".repeat(130);
    let recipe = RECIPES[1].replace(
        "transport = \"sata\", count = 3",
        &format!("transport = \"sata\", min_size = \"0.{zeros}1MiB\", count = 3"),
    );
    assert_ne!(recipe, RECIPES[1]);
    write_recipe(dir.path(), "r.toml", &recipe);
    let r = nasforge(&["check", "r.toml"], dir.path(), dir.path());
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(r.stderr.contains("more decimals"), "{}", r.stderr);
}

#[test]
fn a_crafted_xz_index_is_an_error() {
    // Two records whose padded block sizes sum to 2^64 - 8: adding the
    // 12-byte stream header to that used to overflow.
    let real = xz_file();
    let footer = &real[real.len() - 12..];
    let backward = (u32::from_le_bytes(footer[4..8].try_into().unwrap()) as usize + 1) * 4;
    let index_start = real.len() - 12 - backward;
    let varint = |mut v: u64, out: &mut Vec<u8>| {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    };
    let mut index = vec![0u8];
    for v in [2, (1 << 63) - 1, 1, (1 << 63) - 8, 1] {
        varint(v, &mut index);
    }
    while index.len() % 4 != 0 {
        index.push(0);
    }
    index.extend_from_slice(&crc32fast::hash(&index).to_le_bytes());
    let mut crafted = real[..index_start].to_vec();
    crafted.extend_from_slice(&index);
    let mut new_footer = footer.to_vec();
    new_footer[4..8].copy_from_slice(&(index.len() as u32 / 4 - 1).to_le_bytes());
    let crc = crc32fast::hash(&new_footer[4..10]);
    new_footer[..4].copy_from_slice(&crc.to_le_bytes());
    crafted.extend_from_slice(&new_footer);
    let err = xz_size_of(&crafted).unwrap_err();
    assert!(err.to_string().contains("not a complete xz file"), "{err}");
    // xz itself refuses it too: the index is corrupt, not merely unusual.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crafted.xz");
    std::fs::write(&path, &crafted).unwrap();
    let xz = Command::new("xz").arg("-l").arg(&path).output().unwrap();
    assert!(!xz.status.success());
}
