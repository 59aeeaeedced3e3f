//! The board's parsers of untrusted input, fed arbitrary and mutated inputs:
//! the recipe copy on the boot partition, sizes, and the GPT of a disk
//! someone plugged in. Each returns a value or an error, and never panics.
//!
//! CI runs one to two thousand cases per property (seconds); a longer run:
//! `PROPTEST_CASES=100000 cargo test -p nasforge-engine --test proptest_board`.

use nasforge_testkit::proptest_support;

use nasforge_engine::size::Size;
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::storage::partition::{
    GptReadError, PartitionKind, is_ours, read_gpt, write_single,
};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest_support::{RECIPES, config, gpt};
use std::io::Cursor;
use std::path::Path;
use std::sync::OnceLock;

/// Flips, inserts and deletes at positions in `bytes[from..]`.
fn mutate(base: &[u8], from: usize, ops: &[(u8, Index, u8)]) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for (kind, i, b) in ops {
        if bytes.len() <= from {
            break;
        }
        let at = from + i.index(bytes.len() - from);
        match kind % 6 {
            0 => {
                bytes.remove(at);
            }
            1 => bytes.insert(at, *b),
            _ => bytes[at] ^= b.max(&1),
        }
    }
    bytes
}

fn ops() -> impl Strategy<Value = Vec<(u8, Index, u8)>> {
    prop::collection::vec(any::<(u8, Index, u8)>(), 1..8)
}

fn parse_recipe(text: &str) {
    if let Err(e) = DeviceRecipe::parse(text, Path::new("/boot/firmware/nasforge.toml")) {
        let _ = e.to_string();
    }
}

/// The table nasforge-setup itself writes, as the base to mutate.
fn our_table() -> &'static [u8] {
    static IMG: OnceLock<Vec<u8>> = OnceLock::new();
    IMG.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("disk.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(4 << 20)
            .unwrap();
        write_single(&img, 512, "nasforge-data", PartitionKind::LinuxRaid).unwrap();
        std::fs::read(&img).unwrap()
    })
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn recipe_reader_survives_arbitrary_text(text in "\\PC{0,400}") {
        parse_recipe(&text);
    }

    #[test]
    fn recipe_reader_survives_mutated_recipes(which in 0..RECIPES.len(), ops in ops()) {
        parse_recipe(&String::from_utf8_lossy(&mutate(RECIPES[which].as_bytes(), 0, &ops)));
    }

    #[test]
    fn size_parser_survives_arbitrary_text(text in "[0-9.]{0,200}[ KMGTPiBkmgtpib]{0,4}|\\PC{0,40}") {
        let _ = text.parse::<Size>();
    }

    #[test]
    fn gpt_reader_survives_mutated_tables(ops in ops(), block in prop_oneof![Just(512u64), Just(4096)]) {
        // Only the first 34 blocks hold the header and the entries.
        let mut disk = mutate(&our_table()[..34 * 512], 0, &ops);
        disk.extend_from_slice(&our_table()[34 * 512..]);
        let _ = read_gpt(&mut Cursor::new(disk), block);
    }

    #[test]
    fn gpt_reader_survives_arbitrary_blocks(mut bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        if bytes.len() >= 520 {
            bytes[512..520].copy_from_slice(b"EFI PART");
        }
        let _ = read_gpt(&mut Cursor::new(bytes), 512);
    }
}

#[test]
fn the_mutation_base_is_read_back() {
    let table = read_gpt(&mut Cursor::new(our_table().to_vec()), 512).unwrap();
    assert_eq!(table.partitions.len(), 1);
    assert_eq!(table.partitions[0].name, "nasforge-data");
    assert_eq!(table.partitions[0].first_lba, 2048);
}

#[test]
fn a_gpt_with_256_byte_entries_is_not_ours_and_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("wide.img");
    std::fs::write(&img, gpt::gpt_image(256, &[(2048, 4095)])).unwrap();
    assert!(!is_ours(&img, 512, "data1", PartitionKind::LinuxFilesystem));
    let err = read_gpt(&mut std::fs::File::open(&img).unwrap(), 512).unwrap_err();
    assert!(matches!(err, GptReadError::EntrySize(256)), "{err}");
    // The same table with standard entries is read, so the refusal is about
    // the entry size alone.
    std::fs::write(&img, gpt::gpt_image(128, &[(2048, 4095)])).unwrap();
    assert!(is_ours(&img, 512, "data1", PartitionKind::LinuxFilesystem));
}

#[test]
fn a_size_with_130_decimals_is_a_recipe_error() {
    let zeros = "0".repeat(130);
    let text = RECIPES[1].replace(
        "transport = \"sata\", count = 3",
        &format!("transport = \"sata\", min_size = \"0.{zeros}1MiB\", count = 3"),
    );
    assert_ne!(text, RECIPES[1]);
    let err = DeviceRecipe::parse(&text, Path::new("nasforge.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("more decimals"), "{err}");
    assert!(
        DeviceRecipe::parse(RECIPES[1], Path::new("nasforge.toml")).is_ok(),
        "the unmodified recipe is accepted"
    );
}
