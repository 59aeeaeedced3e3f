//! The recipe's [storage] and [[shares]] sections: parsing, errors with
//! file:line:col, and the cross-field checks.

use nasforge_engine::size::Size;
use nasforge_engine::spec::{Count, DeviceRecipe, Level, Mode, RecipeError, Transport};
use std::path::Path;

const ISSUE_EXAMPLE: &str = r#"
[base]
image = "raspios-bookworm-arm64-lite"

[board]
model = "pi5"

[storage]
mode = "unattended"                 # or "wizard"

[[storage.arrays]]
name = "data"                       # -> /dev/md/data
level = "raid5"
disks = { transport = "sata", min_size = "1TB", count = 3 }
filesystem = "ext4"
mount = "/srv/data"
wipe = false

[[shares]]
name = "data"
path = "/srv/data"
smb = { users = ["admin"], timemachine = false }
nfs = { clients = "192.168.1.0/24", readonly = false }

[packages]
extra = ["htop"]
"#;

fn parse(text: &str) -> Result<DeviceRecipe, RecipeError> {
    DeviceRecipe::parse(text, Path::new("recipe.toml"))
}

#[test]
fn the_issue_example_parses_and_foreign_sections_are_ignored() {
    let r = parse(ISSUE_EXAMPLE).unwrap();
    let s = r.storage.unwrap();
    assert_eq!(s.mode, Mode::Unattended);
    let a = &s.arrays[0];
    assert_eq!(
        (a.name.as_str(), a.level, a.wipe),
        ("data", Level::Raid5, false)
    );
    assert_eq!(a.disks().transport, Some(Transport::Sata));
    assert_eq!(a.disks().min_size, Some(Size(1_000_000_000_000)));
    assert_eq!(a.disks().count, Count::Exactly(3));
    assert_eq!(
        r.shares[0].nfs.as_ref().unwrap().clients.0,
        ["192.168.1.0/24"]
    );
}

fn error_text(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn an_unknown_level_names_the_choices_and_the_line() {
    let text = ISSUE_EXAMPLE.replace(r#"level = "raid5""#, r#"level = "raid7""#);
    let e = error_text(&text);
    assert!(
        e.starts_with("recipe.toml:13:9: unknown variant `raid7`, expected one of `raid0`, `raid1`, `raid5`, `raid6`, `raid10`, `single`"),
        "{e}"
    );
}

#[test]
fn unknown_keys_inside_storage_are_errors_with_a_location() {
    let text = ISSUE_EXAMPLE.replace("wipe = false", "wipe = false\nspare = 1");
    let e = error_text(&text);
    assert!(
        e.starts_with("recipe.toml:18:1: unknown field `spare`, expected one of"),
        "{e}"
    );
    let text = ISSUE_EXAMPLE.replace("count = 3", "count = 3, colour = \"red\"");
    assert!(error_text(&text).contains("unknown field `colour`"));
}

#[test]
fn bad_sizes_and_counts_explain_the_format() {
    let e = error_text(&ISSUE_EXAMPLE.replace(r#""1TB""#, r#""1T""#));
    assert!(
        e.starts_with("recipe.toml:14:42: invalid size `1T`: unknown unit"),
        "{e}"
    );
    let e = error_text(&ISSUE_EXAMPLE.replace("count = 3", "count = \"many\""));
    assert!(
        e.contains("invalid count `many`: write a number of disks (count = 3) or \"all\""),
        "{e}"
    );
    let ok = parse(&ISSUE_EXAMPLE.replace("count = 3", "count = \"all\"")).unwrap();
    assert_eq!(ok.storage.unwrap().arrays[0].disks().count, Count::All);
}

#[test]
fn cross_field_problems_carry_a_dotted_path_a_fix_and_a_location() {
    let text = r#"
[storage]
mode = "unattended"

[[storage.arrays]]
name = "data"
level = "raid6"
disks = { transport = "sata", count = 3 }
filesystem = "xfs"
mount = "srv/data"

[[storage.arrays]]
name = "data"
level = "raid1"
disks = { min_size = "2TB", max_size = "1TB", model = "WDC[" }
filesystem = "ext4"
mount = "/etc/nas"

[[shares]]
name = "photos"
path = "/home/photos"
smb = { users = ["Admin"], timemachine = true, readonly = true }

[[shares]]
name = "PHOTOS"
path = "/srv/data/x"
"#;
    let Err(RecipeError::Invalid { problems, .. }) = parse(text) else {
        panic!("expected problems")
    };
    let got: Vec<(String, Option<(usize, usize)>)> = problems
        .iter()
        .map(|(p, at)| (p.path.clone(), at.map(|l| (l.line, l.column))))
        .collect();
    let expected: Vec<(&str, Option<(usize, usize)>)> = vec![
        ("storage.arrays[0].mount", Some((10, 9))),
        ("storage.arrays[0].disks.count", Some((8, 39))),
        ("storage.arrays[1].mount", Some((17, 9))),
        ("storage.arrays[1].disks.min_size", Some((15, 22))),
        ("storage.arrays[1].disks.model", Some((15, 55))),
        ("storage.arrays[1].name", Some((13, 8))),
        ("shares[0].smb.users[0]", Some((22, 18))),
        ("shares[0].smb.timemachine", Some((22, 42))),
        ("shares[0].path", Some((21, 8))),
        ("shares[1]", Some((24, 1))),
        ("shares[1].path", Some((26, 8))),
        ("shares[1].name", Some((25, 8))),
    ];
    let expected: Vec<(String, Option<(usize, usize)>)> = expected
        .into_iter()
        .map(|(p, l)| (p.to_string(), l))
        .collect();
    assert_eq!(got, expected);
    let msg = |path: &str| {
        problems
            .iter()
            .find(|(p, _)| p.path == path)
            .unwrap()
            .0
            .message
            .clone()
    };
    assert!(
        msg("storage.arrays[0].disks.count").contains("raid6 needs at least 4 disks but count = 3")
    );
    assert!(msg("storage.arrays[1].mount").contains("would cover the system directory /etc"));
    assert!(msg("storage.arrays[1].name").contains("already used by storage.arrays[0]"));
    assert!(msg("shares[0].path").contains("not on any array"));
    assert!(msg("shares[1].name").contains("Samba ignores case"));
    assert!(msg("shares[1]").contains("neither smb nor nfs"));
}

#[test]
fn the_board_ignores_recipes_without_storage_but_not_orphan_shares() {
    assert_eq!(
        parse("[base]\nimage = \"x\"\n").unwrap(),
        DeviceRecipe::default()
    );
    let e = error_text("[[shares]]\nname = \"a\"\npath = \"/srv/a\"\nnfs = { clients = \"*\" }\n");
    assert!(e.contains("shares: shares need an array to live on"), "{e}");
}

#[test]
fn wizard_mode_may_leave_arrays_to_the_wizard() {
    let r = parse("[storage]\nmode = \"wizard\"\n[[shares]]\nname = \"a\"\npath = \"/srv/a\"\nnfs = { clients = [\"10.0.0.0/8\", \"nas.lan\"] }\n").unwrap();
    assert_eq!(
        r.shares[0].nfs.as_ref().unwrap().clients.0,
        ["10.0.0.0/8", "nas.lan"]
    );
    assert!(
        error_text("[storage]\nmode = \"unattended\"\n")
            .contains("storage.arrays: unattended mode needs at least one")
    );
}

#[test]
fn a_spec_survives_the_journal_round_trip() {
    let r = parse(ISSUE_EXAMPLE).unwrap();
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<DeviceRecipe>(&json).unwrap(), r);
}

/// One case of data/hostile-values.toml: the recipe with the hostile value,
/// the dotted key that must be refused, the line the value is on, and the
/// words the error must contain.
struct Hostile {
    recipe: String,
    key: String,
    line: usize,
    error: String,
}

fn hostile_cases() -> (String, Vec<Hostile>) {
    let table: toml::Table = toml::from_str(include_str!("data/hostile-values.toml")).unwrap();
    let template = table["template"].as_str().unwrap().to_string();
    let text = |case: &toml::Value, key: &str| case[key].as_str().unwrap().to_string();
    let cases = table["case"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let (replace, with) = (text(case, "replace"), text(case, "with"));
            assert_eq!(template.matches(&replace).count(), 1, "{replace}");
            let at = template.find(&replace).unwrap();
            Hostile {
                recipe: template.replacen(&replace, &with, 1),
                key: text(case, "key"),
                line: template[..at].matches('\n').count() + 1,
                error: text(case, "error"),
            }
        })
        .collect();
    (template, cases)
}

#[test]
fn every_board_bound_string_refuses_hostile_values() {
    let (template, cases) = hostile_cases();
    let good = parse(&template).unwrap();
    assert_eq!(good.shares.len(), 2);
    assert!(cases.len() >= 40, "{}", cases.len());
    for case in cases {
        let found = match parse(&case.recipe) {
            Ok(_) => panic!("{}: accepted {}", case.key, case.recipe),
            Err(RecipeError::Invalid { problems, .. }) => problems
                .into_iter()
                .find(|(p, _)| p.path == case.key)
                .map(|(p, at)| (p.message, at.map(|at| at.line))),
            Err(RecipeError::Syntax { at, message, .. }) => Some((message, Some(at.line))),
            Err(e) => panic!("{}: {e}", case.key),
        };
        let Some((message, line)) = found else {
            panic!("{}: no problem at this key in {}", case.key, case.recipe)
        };
        assert!(message.contains(&case.error), "{}: {message}", case.key);
        assert!(!message.contains(['\n', '\r', '\x1b']), "{message:?}");
        assert_eq!(line, Some(case.line), "{}: {message}", case.key);
    }
}

#[test]
fn spares_and_legs_parse_and_their_problems_point_at_the_key() {
    let text = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "raid6"
vdevs = 2
spares = 1
disks = { transport = "sas", count = 15 }
filesystem = "xfs"
mount = "/srv/data"
"#;
    let a = &parse(text).unwrap().storage.unwrap().arrays[0];
    assert_eq!((a.vdevs, a.spares, a.is_nested()), (Some(2), 1, true));
    let e = error_text(&text.replace("level = \"raid6\"\nvdevs = 2", "level = \"raid0\""));
    assert!(
        e.starts_with("recipe.toml:7:10: storage.arrays[0].spares: raid0 keeps no second copy"),
        "{e}"
    );
    let e = error_text(&text.replace("count = 15", "count = 16"));
    assert!(
        e.starts_with("recipe.toml:9:38: storage.arrays[0].disks.count: 15 active disks (count = 16 minus spares = 1) do not split into 2 legs"),
        "{e}"
    );
    let e = error_text(&text.replace("spares = 1", "spare = 1"));
    assert!(
        e.starts_with("recipe.toml:8:1: unknown field `spare`, expected one of")
            && e.contains("`spares`"),
        "{e}"
    );
}

/// The tests' pool with a count of disks in place of their model: the
/// positions the errors name are those of this text.
fn pool() -> String {
    nasforge_testkit::disks::POOL_RECIPE.replace(r#"model = "Blank*""#, "count = 3")
}

#[test]
fn the_seed_pool_recipe_parses() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../recipes/pi4-usb-pool.toml"),
    )
    .unwrap();
    let a = &parse(&text).unwrap().storage.unwrap().arrays[0];
    assert_eq!((a.level, a.parity), (Level::Pool, Some(1)));
    assert_eq!(a.keep, ["photos"]);
    let r = parse(&pool()).unwrap();
    assert_eq!(r.storage.unwrap().arrays[0].keep, ["photos"]);
}

#[test]
fn a_pool_is_refused_where_it_cannot_work_with_the_line_and_the_fix() {
    let e = error_text(
        &pool()
            .replace("count = 3", "count = 1")
            .replace("keep = [\"photos\"]\n", ""),
    );
    assert!(
        e.starts_with(
            "recipe.toml:8:38: storage.arrays[0].disks.count: a pool of 1 disk joins nothing"
        ),
        "{e}"
    );
    let e = error_text(
        &pool()
            .replace("parity = 1", "parity = 2")
            .replace("count = 3", "count = 1"),
    );
    assert!(
        e.starts_with("recipe.toml:7:10: storage.arrays[0].parity: parity = 2 needs 2 blank disk(s) to hold it, but count = 1; kept disks hold files and never parity"),
        "{e}"
    );
    let e = error_text(&pool().replace("parity = 1", "parity = 3"));
    assert!(
        e.starts_with("recipe.toml:7:10: storage.arrays[0].parity: parity = 3 is more than"),
        "{e}"
    );
    let e = error_text(&pool().replace("keep = [\"photos\"]", "keep = [\"photo\"]"));
    assert!(
        e.starts_with("recipe.toml:11:9: storage.arrays[0].keep[0]: no kept disk is named `photo`; the kept disks are: photos"),
        "{e}"
    );
    let e = error_text(&pool().replace("parity = 1\n", ""));
    assert!(
        e.contains("storage.arrays[0]: a pool needs parity = 1"),
        "{e}"
    );
    let e = error_text(&pool().replace("filesystem = \"ext4\"", "filesystem = \"btrfs\""));
    assert!(
        e.starts_with("recipe.toml:9:14: storage.arrays[0].filesystem: each disk of a pool gets a filesystem of its own, ext4 or xfs"),
        "{e}"
    );
    let e = error_text(&pool().replace(
        "level = \"pool\"\nparity = 1",
        "level = \"raid5\"\nparity = 1",
    ));
    assert!(
        e.starts_with("recipe.toml:7:10: storage.arrays[0].parity: parity is a pool's setting"),
        "{e}"
    );
    let e = error_text(&pool().replace("mount = \"/srv/photos\"", "mount = \"/mnt/pool/photos\""));
    assert!(
        e.contains("storage.arrays[0].name: the pool's own disks are mounted under /mnt/pool, where /mnt/pool/photos is mounted too"),
        "{e}"
    );
}
