//! Replacing and growing arrays after setup, on the pi5 board with a
//! finished setup's journal and md's sysfs: what the survey says, every
//! plan and refusal, following a rebuild, and resuming after a power cut.

use nasforge_testkit::board as common;
use nasforge_testkit::care as care_support;
use nasforge_testkit::finished;

use care_support::{adopt_whole_disks, fail, pull, resize, set, set_up};
use nasforge_engine::care::{
    self, CareError, Fit, GrowRequest, Layout, MemberState, ReplaceRequest, Survey, survey_of,
};
use nasforge_engine::executor;
use nasforge_engine::journal::Journal;
use nasforge_engine::machine::disks::Host;
use nasforge_engine::machine::md::{MdState, md_dir, sync_progress};
use nasforge_engine::machine::resync::follow_sync;
use nasforge_engine::operation;
use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::storage::mdadm::merge_array_lines;
use nasforge_testkit::old_nas::OMV_UUID;

const SDC_SERIAL: &str = "WD-WCC7K0000003";
const SDD_PART: &str = "/dev/disk/by-id/wwn-0x50014ee2b0000004-part1";

fn survey(board: &common::Board, journal: &Journal) -> Survey {
    care::survey(&board.host, journal).unwrap()
}

fn replace(
    board: &common::Board,
    journal: &Journal,
    req: ReplaceRequest,
) -> Result<care::CarePlan, CareError> {
    let s = survey(board, journal);
    care::replace(&board.host, journal, &s, &board.inventory(), &req)
}

/// `replace --disk DISK` with `--erase` for each of `erase`.
fn onto(disk: &str, erase: &[&str]) -> ReplaceRequest {
    ReplaceRequest {
        disk: Some(disk.into()),
        erase: erase.iter().map(|d| d.to_string()).collect(),
        ..Default::default()
    }
}

fn grow(
    board: &common::Board,
    journal: &Journal,
    disks: &[&str],
    erase: &[&str],
) -> Result<care::CarePlan, CareError> {
    let s = survey(board, journal);
    let req = GrowRequest {
        array: "data".into(),
        disks: disks.iter().map(|d| d.to_string()).collect(),
        erase: erase.iter().map(|d| d.to_string()).collect(),
    };
    care::grow(&board.host, journal, &s, &board.inventory(), &req)
}

fn ids(plan: &care::CarePlan) -> Vec<&str> {
    plan.steps.iter().map(|s| s.id.as_str()).collect()
}

fn refusal(result: Result<care::CarePlan, CareError>) -> String {
    match result {
        Err(e @ CareError::Refused(_)) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn the_survey_names_a_missing_member_by_model_and_serial_and_which_disks_could_replace_it() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    pull(&board, "sdc");
    let s = survey(&board, &journal);
    let a = &s.arrays[0];
    assert_eq!((a.expected, a.working, a.degraded), (3, 2, true));
    assert_eq!(a.kernel.as_deref(), Some("md127"));
    let states: Vec<MemberState> = a.members.iter().map(|m| m.state).collect();
    assert_eq!(
        states,
        [
            MemberState::Working,
            MemberState::Working,
            MemberState::Missing
        ]
    );
    assert_eq!(a.members[2].serial.as_deref(), Some(SDC_SERIAL));
    let fits: Vec<(&str, &Fit)> = a
        .candidates
        .iter()
        .map(|c| (c.disk.as_str(), &c.fit))
        .collect();
    assert_eq!(fits[0], ("sdd", &Fit::Fits), "{fits:?}");
    assert!(
        matches!(fits[1], ("mmcblk0", Fit::InUse { .. })),
        "{fits:?}"
    );
    let text = s.to_string();
    assert!(
        text.contains("Array 'data' (raid5, /dev/md/data = md127, ext4 at /srv/data): DEGRADED, 2 of 3 disks working")
            && text.contains(&format!("was sdc  WDC WD40EFRX-68N32N0 ({SDC_SERIAL}), 4 TB: MISSING"))
            && text.contains("sdd      WDC WD40EFRX-68N32N0 (WD-WCC7K0000004), 4 TB sata HDD: blank, fits"),
        "{text}"
    );
    // The TUI renders the same data as JSON.
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["arrays"][0]["members"][2]["state"], "missing");
}

#[test]
fn a_missing_member_is_replaced_by_the_only_blank_disk_that_fits_and_the_journal_records_it() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    pull(&board, "sdc");
    let plan = replace(&board, &journal, ReplaceRequest::default()).unwrap();
    assert_eq!(
        ids(&plan),
        [
            "partition:sdd",
            "add:sdd",
            "follow:data",
            "mdadm-conf",
            "record-members:data"
        ]
    );
    assert!(
        plan.title.starts_with(
            "Replace the missing member of 'data' (WDC WD40EFRX-68N32N0 (WD-WCC7K0000003)) with sdd"
        ),
        "{}",
        plan.title
    );
    assert!(
        plan.text.contains("sdd is the only blank disk that fits"),
        "{}",
        plan.text
    );
    let dry = executor::dry_run(&plan.steps);
    assert!(
        dry.contains(&format!("mdadm /dev/md/data --add {SDD_PART}")),
        "{dry}"
    );
    assert!(
        dry.contains("partition 1 'nasforge-data' (Linux RAID)"),
        "{dry}"
    );
    assert!(
        dry.contains("# follow the rebuild or reshape of /dev/md/data"),
        "{dry}"
    );
    let recorded = match &plan.steps[4].actions[0] {
        nasforge_engine::steps::Action::WriteFile { contents, .. } => contents.clone(),
        other => panic!("{other:?}"),
    };
    let recorded: Journal = serde_json::from_str(&recorded).unwrap();
    let serials: Vec<_> = recorded.plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.serial.clone().unwrap())
        .collect();
    assert_eq!(
        serials,
        ["WD-WCC7K0000001", "WD-WCC7K0000002", "WD-WCC7K0000004"]
    );

    let mut runner = RecordingRunner::default();
    let done =
        operation::start(&board.host, plan.into_operation(), &mut runner, &mut |_| {}).unwrap();
    assert!(done.is_complete());
    assert!(operation::pending(&board.host).unwrap().is_none());
}

#[test]
fn a_failed_member_still_attached_is_failed_and_removed_first() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    fail(&board, "sdb1");
    let s = survey(&board, &journal);
    assert_eq!(s.arrays[0].members[1].state, MemberState::Failed);
    let plan = replace(
        &board,
        &journal,
        ReplaceRequest {
            disk: Some("/dev/sdd".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(ids(&plan)[..3], ["remove:sdb", "partition:sdd", "add:sdd"]);
    let part = "/dev/disk/by-id/wwn-0x50014ee2b0000002-part1";
    assert!(
        executor::dry_run(&plan.steps)
            .contains(&format!("mdadm /dev/md/data --fail {part} --remove {part}")),
    );
    assert!(
        plan.title.starts_with("Replace the failed member"),
        "{}",
        plan.title
    );
}

#[test]
fn a_disk_too_small_is_refused_saying_by_how_much() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    pull(&board, "sdc");
    resize(&board, "sdd", 7_814_037_168 - 4_000_000);
    let err = refusal(replace(&board, &journal, onto("sdd", &[])));
    assert!(
        err.contains("sdd (4 TB) is too small for 'data': its partition would be 2 GB smaller"),
        "{err}"
    );
    assert!(err.ends_with("nothing was changed"), "{err}");
    let err = refusal(replace(&board, &journal, ReplaceRequest::default()));
    assert!(
        err.contains("no attached blank disk fits 'data'")
            && err.contains("sdd: too small by 2 GB"),
        "{err}"
    );
}

#[test]
fn a_disk_with_data_is_used_only_when_named_with_erase() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev-with-data.txt");
    pull(&board, "sdc");
    let err = refusal(replace(&board, &journal, onto("sdd", &[])));
    assert!(
        err.contains("sdd holds an ext4 filesystem labelled 'photos'")
            && err.contains("--disk sdd --erase sdd"),
        "{err}"
    );
    let err = refusal(replace(&board, &journal, onto("sdd", &["sda"])));
    assert!(
        err.contains("--erase sda names a disk this command does not use"),
        "{err}"
    );
    let plan = replace(&board, &journal, onto("sdd", &["/dev/sdd"])).unwrap();
    assert_eq!(ids(&plan)[..3], ["wipe:sdd", "partition:sdd", "add:sdd"]);
    assert!(
        plan.text
            .contains("sdd holds an ext4 filesystem labelled 'photos': it is ERASED"),
        "{}",
        plan.text
    );
}

#[test]
fn a_label_cannot_fake_a_line_in_the_erase_plan() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev-with-data.txt");
    // ext4's s_volume_name, 16 bytes at 0x78 of the superblock: a newline,
    // a line of its own and a terminal escape that clears the screen.
    let label = b"a\n+ keep sda\x1b[2J";
    assert_eq!(label.len(), 16);
    let node = std::fs::OpenOptions::new()
        .write(true)
        .open(board.node("sdd"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&node, label, 1024 + 0x78).unwrap();
    pull(&board, "sdc");
    let plan = replace(&board, &journal, onto("sdd", &["sdd"])).unwrap();
    assert!(
        plan.text
            .contains("labelled 'a\\n+ keep sda\\u{1b}[2J': it is ERASED"),
        "{}",
        plan.text
    );
    assert!(
        !plan.text.contains('\x1b') && !plan.text.lines().any(|l| l.starts_with("+ keep")),
        "{}",
        plan.text
    );
}

#[test]
fn a_kept_disk_is_never_offered_nor_taken_even_named_with_erase() {
    let text = care_support::recipe("raid5", 3, "ext4")
        + "[[storage.disks]]\nname = \"photos\"\nmatch = { serial = \"WD-WCC7K0000004\" }\nkeep = true\nmount = \"/srv/photos\"\n";
    let (board, journal) = care_support::set_up_from(&text, "raid5", 3, "dev-with-data.txt");
    assert_eq!(journal.plan.kept[0].disk.name, "sdd");
    let kept = "sdd is the disk the recipe keeps as 'photos', with its files: it never joins an array, even named with --erase";
    assert!(
        refusal(grow(&board, &journal, &["sdd"], &["sdd"])).contains(kept),
        "grow"
    );
    pull(&board, "sdc");
    let s = survey(&board, &journal);
    let sdd = s.arrays[0]
        .candidates
        .iter()
        .find(|c| c.disk == "sdd")
        .unwrap();
    assert_eq!(
        sdd.fit.to_string(),
        "kept as 'photos' by the recipe: never used"
    );
    let err = refusal(replace(&board, &journal, onto("sdd", &["sdd"])));
    assert!(err.contains(kept), "{err}");
    let err = refusal(replace(&board, &journal, ReplaceRequest::default()));
    assert!(err.contains("no attached blank disk fits"), "{err}");
}

#[test]
fn a_disk_in_use_or_already_a_member_is_refused() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    pull(&board, "sdc");
    let err = refusal(replace(&board, &journal, onto("mmcblk0", &[])));
    assert!(
        err.contains("mmcblk0 is in use (") && err.contains("never written"),
        "{err}"
    );
    let err = refusal(replace(&board, &journal, onto("sda", &[])));
    assert!(err.contains("sda is a member of an array already"), "{err}");
    let err = refusal(replace(&board, &journal, onto("sdx", &[])));
    assert!(err.contains("no disk `sdx` is attached"), "{err}");
}

#[test]
fn a_healthy_array_has_nothing_to_replace_and_raid0_cannot_be_rebuilt() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    let err = refusal(replace(&board, &journal, ReplaceRequest::default()));
    assert!(err.contains("no array lacks a member"), "{err}");
    let (board, journal) = set_up("raid0", 2, "ext4", "dev.txt");
    pull(&board, "sdb");
    let err = refusal(replace(&board, &journal, ReplaceRequest::default()));
    assert!(
        err.contains("'data' is raid0, which keeps no second copy"),
        "{err}"
    );
}

#[test]
fn raid1_grows_by_more_mirrors_without_a_filesystem_resize() {
    let (board, journal) = set_up("raid1", 2, "ext4", "dev.txt");
    let plan = grow(&board, &journal, &["sdc"], &[]).unwrap();
    assert_eq!(
        ids(&plan),
        [
            "partition:sdc",
            "add:sdc",
            "grow:data",
            "follow:data",
            "mdadm-conf",
            "record-members:data"
        ]
    );
    assert!(executor::dry_run(&plan.steps).contains("mdadm --grow /dev/md/data --raid-devices=3"));
    assert!(
        plan.text.contains("the capacity stays the same"),
        "{}",
        plan.text
    );
}

#[test]
fn raid5_is_reshaped_onto_a_new_disk_and_ext4_grown() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    let plan = grow(&board, &journal, &["sdd"], &[]).unwrap();
    assert_eq!(
        ids(&plan),
        [
            "partition:sdd",
            "add:sdd",
            "grow:data",
            "follow:data",
            "grow-filesystem:data",
            "mdadm-conf",
            "record-members:data"
        ]
    );
    let dry = executor::dry_run(&plan.steps);
    assert!(
        dry.contains("mdadm --grow /dev/md/data --raid-devices=4")
            && dry.find("systemctl start srv-data.mount") < dry.find("resize2fs /dev/md/data")
            && dry.contains("systemctl start srv-data.mount"),
        "the filesystem grows mounted, as after a power cut it may not be yet:\n{dry}"
    );
    assert_eq!(plan.title, "Grow 'data' (raid5) from 3 to 4 disks with sdd");
}

#[test]
fn raid6_is_reshaped_and_xfs_grown_at_its_mount() {
    let (board, journal) = set_up("raid6", 4, "xfs", "dev.txt");
    // A fifth disk like the others, attached since setup.
    let mut inventory = board.inventory();
    let mut fifth = inventory
        .disks
        .iter()
        .find(|d| d.name == "sdd")
        .unwrap()
        .clone();
    (
        fifth.name,
        fifth.serial,
        fifth.wwn,
        fifth.by_id,
        fifth.in_use,
    ) = (
        "sde".into(),
        Some("WD-WCC7K0000005".into()),
        None,
        None,
        vec![],
    );
    fifth.partitions.clear();
    inventory.disks.push(fifth);
    let host: &Host = &board.host;
    let s = survey_of(
        &journal.plan,
        &inventory,
        &|d| MdState::read(host, d),
        &|_| None,
    );
    let req = GrowRequest {
        array: "data".into(),
        disks: vec!["sde".into()],
        erase: vec![],
    };
    let plan = care::grow(host, &journal, &s, &inventory, &req).unwrap();
    let dry = executor::dry_run(&plan.steps);
    assert!(
        dry.contains("mdadm /dev/md/data --add /dev/sde1")
            && dry.contains("--raid-devices=5")
            && dry.contains("xfs_growfs /srv/data"),
        "{dry}"
    );
}

#[test]
fn levels_that_cannot_grow_and_busy_or_degraded_arrays_are_refused() {
    for (level, count, why) in [
        ("raid0", 2, "md grows raid0 only by converting it"),
        (
            "raid10",
            2,
            "whether md can reshape a raid10 depends on its layout",
        ),
        ("single", 1, "a single disk has no md array to add disks to"),
    ] {
        let (board, journal) = set_up(level, count, "ext4", "dev.txt");
        let err = refusal(grow(&board, &journal, &["sdc"], &[]));
        assert!(err.contains(&format!("'data' is {level}: {why}")), "{err}");
    }
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    set(&board, "sync_action", "check");
    set(&board, "sync_completed", "100 / 1000");
    assert!(
        refusal(grow(&board, &journal, &["sdd"], &[]))
            .contains("'data' is busy, scrubbing 10%: wait")
    );
    set(&board, "sync_action", "idle");
    fail(&board, "sda1");
    assert!(
        refusal(grow(&board, &journal, &["sdd"], &[])).contains("replace the missing member first")
    );
}

#[test]
fn grow_refuses_a_disk_with_data_unless_erased() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev-with-data.txt");
    assert!(refusal(grow(&board, &journal, &["sdd"], &[])).contains("holds an ext4 filesystem"));
    let plan = grow(&board, &journal, &["sdd"], &["sdd"]).unwrap();
    assert_eq!(ids(&plan)[0], "wipe:sdd");
}

#[test]
fn a_replace_cut_after_mdadm_added_the_disk_resumes_without_adding_it_again() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    pull(&board, "sdc");
    let plan = replace(&board, &journal, ReplaceRequest::default()).unwrap();
    // Actions 0-3 partition sdd, 4 settles, 5 is `mdadm --add`: the power
    // goes as it runs.
    let mut cut = RecordingRunner::interrupting_at(5);
    operation::start(&board.host, plan.into_operation(), &mut cut, &mut |_| {}).unwrap_err();
    let pending = operation::pending(&board.host).unwrap().unwrap();
    assert_eq!(pending.done.len(), 1);
    // mdadm had added it before the power went.
    care_support::add_member(&board, "sdd", 3, "in_sync");
    set(&board, "degraded", "0");
    let mut runner = RecordingRunner::default();
    let mut skipped = Vec::new();
    let op = operation::resume(&board.host, &mut runner, &mut |e| {
        if let executor::Event::AlreadyDone { reason, .. } = e {
            skipped.push(reason.to_string());
        }
    })
    .unwrap()
    .unwrap();
    assert!(op.is_complete());
    assert_eq!(skipped, [format!("{SDD_PART} is in /dev/md/data")]);
    assert!(
        !runner.lines.iter().any(|l| l.contains("--add")),
        "{:?}",
        runner.lines
    );
}

#[test]
fn a_grow_cut_after_the_reshape_started_does_not_start_it_again() {
    let (board, journal) = set_up("raid5", 3, "ext4", "dev.txt");
    let plan = grow(&board, &journal, &["sdd"], &[]).unwrap();
    let mut op = plan.into_operation();
    op.done = common::done_before(&op.steps, 2);
    let path = operation::path(&board.host);
    op.save(&path).unwrap();
    care_support::add_member(&board, "sdd", 3, "in_sync");
    // What md shows while the reshape it recorded goes on: new (old).
    set(&board, "raid_disks", "4 (3)");
    let mut runner = RecordingRunner::default();
    operation::resume(&board.host, &mut runner, &mut |_| {})
        .unwrap()
        .unwrap();
    assert!(
        !runner.lines.iter().any(|l| l.contains("--raid-devices")),
        "{:?}",
        runner.lines
    );
    assert!(
        runner
            .lines
            .iter()
            .any(|l| l.contains("resize2fs /dev/md/data"))
    );
}

#[test]
fn a_rebuild_is_followed_with_progress_and_an_estimate_until_it_ends() {
    let (board, _journal) = set_up("raid5", 3, "ext4", "dev.txt");
    set(&board, "degraded", "1");
    set(&board, "sync_action", "recover");
    set(&board, "sync_completed", "3680000 / 8000000");
    set(&board, "sync_speed", "12000");
    let mut said = Vec::new();
    let mut polls = 0;
    follow_sync(
        &board.host,
        "/dev/md/data",
        &mut |_| {
            polls += 1;
            if polls == 1 {
                set(&board, "sync_action", "idle");
                set(&board, "degraded", "0");
            }
        },
        &mut |line| said.push(line.to_string()),
    )
    .unwrap();
    assert_eq!(
        said,
        ["rebuilding 46% (about 3 min left)", "rebuild finished"]
    );
}

#[test]
fn mdadm_conf_is_rewritten_only_when_its_array_lines_change() {
    let conf =
        "HOMEHOST nas\nMAILADDR root\nARRAY /dev/md/data metadata=1.2 name=nas:data UUID=a\n";
    assert_eq!(
        merge_array_lines(
            conf,
            "ARRAY /dev/md/data metadata=1.2 spares=1 name=nas:data UUID=a\n"
        ),
        None
    );
    assert_eq!(
        merge_array_lines(
            conf,
            "ARRAY /dev/md/data metadata=1.2 name=nas:data UUID=b\n"
        )
        .unwrap(),
        "HOMEHOST nas\nMAILADDR root\nARRAY /dev/md/data metadata=1.2 name=nas:data UUID=b\n"
    );
}

#[test]
fn mdadm_conf_keeps_the_legs_first_and_their_spare_group_after_a_replace() {
    // As setup wrote it: the legs first, with their spare group.
    let conf = "HOMEHOST pcnas\nPROGRAM /usr/lib/nasforge/mdadm-event\nARRAY /dev/md/data-0 metadata=1.2 name=pcnas:data-0 UUID=a spare-group=data\nARRAY /dev/md/data-1 metadata=1.2 name=pcnas:data-1 UUID=b spare-group=data\nARRAY /dev/md/data metadata=1.2 name=pcnas:data UUID=c\n";
    // mdadm lists the newest array first, and a spare where it is now.
    let scan = "ARRAY /dev/md/data metadata=1.2 name=pcnas:data UUID=c\nARRAY /dev/md/data-1 metadata=1.2 name=pcnas:data-1 UUID=b\nARRAY /dev/md/data-0 metadata=1.2 spares=1 name=pcnas:data-0 UUID=a\n";
    assert_eq!(merge_array_lines(conf, scan), None, "nothing changed");
    let grown = format!("{scan}ARRAY /dev/md/backup metadata=1.2 name=pcnas:backup UUID=d\n");
    assert_eq!(
        merge_array_lines(conf, &grown).unwrap(),
        format!(
            "{}ARRAY /dev/md/backup metadata=1.2 name=pcnas:backup UUID=d\n",
            conf
        )
    );
}

/// The PC's 15-disk raid60 with a spare (sdp) as setup recorded it, and the
/// board's disks with the member partitions md lists.
fn pc_raid60() -> (
    common::Board,
    Journal,
    nasforge_engine::machine::disks::Inventory,
) {
    use nasforge_engine::machine::disks::Partition;
    use nasforge_engine::size::Size;
    let board = common::board("x86-sas-16");
    let recipe = nasforge_engine::spec::DeviceRecipe::parse(
        "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid6\"\nvdevs = 2\nspares = 1\ndisks = { transport = \"sas\", count = 15 }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n",
        std::path::Path::new("nasforge.toml"),
    )
    .unwrap();
    let mut inventory = board.inventory();
    let plan = nasforge_engine::planner::plan(
        recipe.storage.as_ref().unwrap(),
        &recipe.shares,
        &inventory,
    )
    .unwrap();
    for d in inventory.disks.iter_mut().filter(|d| d.name != "sda") {
        if plan.arrays[0].members.iter().any(|m| m.disk.name == d.name) {
            d.partitions = vec![Partition {
                name: format!("{}1", d.name),
                number: 1,
                start: 1 << 20,
                size: Size(d.size.0 - (2 << 20)),
                contents: vec![],
            }];
        }
    }
    let context = nasforge_engine::steps::Context {
        hostname: "pcnas".into(),
        system_uuid: None,
        fs_uuids: vec!["1b4e28ba-2fa1-11d2-883f-0016d3cca427".into()],
    };
    (
        board,
        finished::mark(Journal::new(recipe, context, plan, vec![])),
        inventory,
    )
}

/// md's view of a raid6 leg of 7: each of `members` (disk, md's state,
/// whether md gave it a slot).
fn leg(kernel: &str, members: &[(&str, &str, bool)]) -> MdState {
    MdState {
        kernel: kernel.into(),
        level: Some("raid6".into()),
        raid_disks: 7,
        degraded: 0,
        sync: None,
        reshape_pending: false,
        members: members
            .iter()
            .map(
                |(disk, state, slot)| nasforge_engine::machine::md::MdMember {
                    device: format!("{disk}1"),
                    state: state.split(',').map(str::to_string).collect(),
                    unassigned: !slot,
                },
            )
            .collect(),
    }
}

#[test]
fn a_nested_array_is_surveyed_per_leg_wherever_md_moved_the_spare() {
    let (board, journal, inventory) = pc_raid60();
    let ok = |d: &'static str| (d, "in_sync", true);
    // As setup made it: the spare waits on the second leg.
    let md = |device: &str| match device {
        "/dev/md/data-0" => Some(leg(
            "md127",
            &["sdb", "sdc", "sdd", "sde", "sdf", "sdg", "sdh"].map(ok),
        )),
        "/dev/md/data-1" => {
            let mut m: Vec<(&str, &str, bool)> = ["sdi", "sdj", "sdk", "sdl", "sdm", "sdn", "sdo"]
                .map(ok)
                .to_vec();
            m.push(("sdp", "spare", false));
            Some(leg("md126", &m))
        }
        _ => None,
    };
    let s = survey_of(&journal.plan, &inventory, &md, &|_| None);
    let legs: Vec<(&str, Option<&str>, &str, usize)> = s
        .arrays
        .iter()
        .map(|a| {
            (
                a.name.as_str(),
                a.leg_of.as_deref(),
                a.device.as_str(),
                a.members.len(),
            )
        })
        .collect();
    assert_eq!(
        legs,
        [
            ("data-0", Some("data"), "/dev/md/data-0", 7),
            ("data-1", Some("data"), "/dev/md/data-1", 8)
        ]
    );
    assert_eq!(s.arrays[1].members[7].state, MemberState::Spare);
    assert!(
        s.to_string().starts_with("Array 'data-0' (raid6 leg of 'data', /dev/md/data-0 = md127, ext4 at /srv/data): healthy\n"),
        "{s}"
    );
    assert!(
        s.to_string()
            .contains("  sdp      ST4000VN008-2DR166 (ZDH1A007), 4 TB: spare\n"),
        "{s}"
    );

    // sdc failed; mdadm's monitor moved the spare to its leg, and md
    // rebuilt onto it.
    let md = |device: &str| match device {
        "/dev/md/data-0" => Some(leg(
            "md127",
            &[
                ok("sdb"),
                ("sdc", "faulty", false),
                ok("sdd"),
                ok("sde"),
                ok("sdf"),
                ok("sdg"),
                ok("sdh"),
                ok("sdp"),
            ],
        )),
        "/dev/md/data-1" => Some(leg(
            "md126",
            &["sdi", "sdj", "sdk", "sdl", "sdm", "sdn", "sdo"].map(ok),
        )),
        _ => None,
    };
    let s = survey_of(&journal.plan, &inventory, &md, &|_| None);
    let states = |i: usize| -> Vec<(Option<&str>, MemberState)> {
        s.arrays[i]
            .members
            .iter()
            .map(|m| (m.disk.as_deref(), m.state))
            .collect()
    };
    assert_eq!(states(0)[1], (Some("sdc"), MemberState::Failed));
    assert_eq!(states(0)[7], (Some("sdp"), MemberState::Working));
    assert_eq!(
        states(1).len(),
        7,
        "the spare is no longer the second leg's"
    );
    assert!(states(1).iter().all(|(_, st)| *st == MemberState::Working));

    // Replacing in 'data' is replacing in the leg that lacks a member; the
    // new disk is partitioned for 'data' and joins that leg.
    let plan = care::replace(
        &board.host,
        &journal,
        &s,
        &inventory,
        &ReplaceRequest {
            array: Some("data".into()),
            ..ReplaceRequest::default()
        },
    )
    .unwrap();
    assert_eq!(
        ids(&plan),
        [
            "remove:sdc",
            "partition:sdq",
            "add:sdq",
            "follow:data-0",
            "mdadm-conf",
            "record-members:data-0"
        ]
    );
    let lines = |id: &str| -> Vec<String> {
        plan.steps
            .iter()
            .find(|s| s.id == id)
            .unwrap()
            .actions
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(
        lines("remove:sdc"),
        [
            "mdadm /dev/md/data-0 --fail /dev/disk/by-id/wwn-0x50014ee2c0000002-part1 --remove /dev/disk/by-id/wwn-0x50014ee2c0000002-part1"
        ]
    );
    assert!(lines("partition:sdq")[0].contains("partition 1 'nasforge-data'"));
    assert_eq!(
        lines("add:sdq")[1],
        "mdadm /dev/md/data-0 --add /dev/disk/by-id/wwn-0x5000c500b0000008-part1"
    );

    // Growing it, by its name or a leg's, is refused.
    for array in ["data", "data-0"] {
        let err = care::grow(
            &board.host,
            &journal,
            &s,
            &inventory,
            &GrowRequest {
                array: array.into(),
                disks: vec!["sdq".into()],
                erase: vec![],
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("'data' is made of legs striped by a raid0")
                && err.contains("nasforge does not do that; back up the data and set 'data' up again with more disks")
                && err.ends_with("; nothing was changed"),
            "{array}: {err}"
        );
    }
    assert!(
        s.arrays[0]
            .cannot_grow()
            .unwrap()
            .starts_with("'data' is made of legs"),
        "the manage view says why too"
    );
}

#[test]
fn a_spare_is_a_spare_while_md_resyncs_the_array() {
    let (_, journal, inventory) = pc_raid60();
    let mut single = journal.plan.clone();
    single.arrays[0].spec.vdevs = None;
    let md = |device: &str| {
        (device == "/dev/md/data").then(|| {
            let mut m = leg(
                "md127",
                &[
                    "sdb", "sdc", "sdd", "sde", "sdf", "sdg", "sdh", "sdi", "sdj", "sdk", "sdl",
                    "sdm", "sdn", "sdo",
                ]
                .map(|d| (d, "in_sync", true)),
            );
            m.members.push(nasforge_engine::machine::md::MdMember {
                device: "sdp1".into(),
                state: vec!["spare".into()],
                unassigned: true,
            });
            m.raid_disks = 14;
            m.sync = Some(nasforge_engine::machine::md::SyncProgress {
                action: "resync".into(),
                percent: 3.0,
                minutes_left: None,
            });
            m
        })
    };
    let s = survey_of(&single, &inventory, &md, &|_| None);
    assert_eq!(s.arrays.len(), 1);
    assert_eq!(s.arrays[0].members[14].state, MemberState::Spare);
    assert!(s.arrays[0].to_replace().is_empty());
}

#[test]
fn a_lost_member_of_an_adopted_array_of_whole_disks_is_replaced_by_a_whole_disk() {
    let (board, mut journal) = set_up("raid5", 3, "ext4", "dev.txt");
    adopt_whole_disks(&board, &mut journal);
    pull(&board, "sdc");
    let s = survey(&board, &journal);
    let data = &s.arrays[0];
    assert_eq!(data.layout, Layout::WholeDisks);
    let states: Vec<MemberState> = data.members.iter().map(|m| m.state).collect();
    assert_eq!(
        states,
        [
            MemberState::Working,
            MemberState::Working,
            MemberState::Missing
        ]
    );
    assert_eq!(
        data.members[0].partition.as_deref(),
        Some("/dev/disk/by-id/wwn-0x50014ee2b0000001")
    );
    // The smallest member disk, not its partition: the new one joins whole.
    assert_eq!(data.member_size, data.members[0].size);

    let plan = replace(&board, &journal, ReplaceRequest::default()).unwrap();
    assert_eq!(
        ids(&plan),
        [
            "add:sdd",
            "follow:data",
            "mdadm-conf",
            "record-members:data"
        ]
    );
    let dry = executor::dry_run(&plan.steps);
    let sdd = SDD_PART.trim_end_matches("-part1");
    assert!(
        dry.contains(&format!("mdadm /dev/md/data --add {sdd}\n")) && !dry.contains("-part1"),
        "{dry}"
    );
    let recorded = match &plan.steps[3].actions[0] {
        nasforge_engine::steps::Action::WriteFile { contents, .. } => contents.clone(),
        other => panic!("{other:?}"),
    };
    let recorded: Journal = serde_json::from_str(&recorded).unwrap();
    let imported = recorded.plan.arrays[0].imported.clone().unwrap();
    assert_eq!(
        imported.partitions,
        [
            ("sda".to_string(), None),
            ("sdb".to_string(), None),
            ("sdd".to_string(), None)
        ]
    );
    assert_eq!(imported.uuid, OMV_UUID, "the array keeps its UUID");

    // A failed member is failed and removed as the whole disk md knows.
    let (board, mut journal) = set_up("raid5", 3, "ext4", "dev.txt");
    adopt_whole_disks(&board, &mut journal);
    fail(&board, "sdb");
    let plan = replace(&board, &journal, onto("/dev/sdd", &[])).unwrap();
    assert_eq!(ids(&plan)[..2], ["remove:sdb", "add:sdd"]);
    let sdb = "/dev/disk/by-id/wwn-0x50014ee2b0000002";
    assert!(
        executor::dry_run(&plan.steps)
            .contains(&format!("mdadm /dev/md/data --fail {sdb} --remove {sdb}")),
        "{}",
        executor::dry_run(&plan.steps)
    );
}

#[test]
fn a_disk_smaller_than_an_adopted_arrays_member_disks_is_refused() {
    let (board, mut journal) = set_up("raid5", 3, "ext4", "dev.txt");
    adopt_whole_disks(&board, &mut journal);
    pull(&board, "sdc");
    // One sector short: as a partition would be, and md gives a new
    // member the others' data offset and size.
    let sectors = survey(&board, &journal).arrays[0].member_size.0 / 512 - 1;
    resize(&board, "sdd", sectors);
    let why = refusal(replace(&board, &journal, onto("/dev/sdd", &[])));
    assert!(
        why.contains("sdd")
            && why.contains(
                "is too small for 'data': it is 512 B smaller than its smallest member disk"
            )
            && why.contains("a new member joins whole"),
        "{why}"
    );
}

#[test]
fn an_adopted_array_on_another_systems_partitions_or_pool_is_not_replaced_and_none_is_grown() {
    let (board, mut journal) = set_up("raid5", 3, "ext4", "dev.txt");
    adopt_whole_disks(&board, &mut journal);
    let why = refusal(grow(&board, &journal, &["sdd"], &[]));
    assert!(
        why.contains(&format!("'data' was adopted as another machine made it (UUID {OMV_UUID}); nasforge replaces a lost member of it but does not reshape it: grow it with mdadm itself"))
            && why.ends_with("nothing was changed"),
        "{why}"
    );
    // A Synology's data array: its members are the disks' fifth partitions.
    let imported = journal.plan.arrays[0].imported.as_mut().unwrap();
    for (_, n) in imported.partitions.iter_mut() {
        *n = Some(5);
    }
    pull(&board, "sdc");
    let why = refusal(replace(&board, &journal, ReplaceRequest::default()));
    assert!(
        why.contains("on partitions that machine made (sda5, sdb5, sdc5); nasforge does not copy that layout onto a new disk")
            && why.contains("sudo mdadm /dev/md/data --add /dev/<partition>"),
        "{why}"
    );
}

#[test]
fn no_time_left_is_guessed_before_one_percent_of_a_rebuild_is_done() {
    let (board, _) = set_up("raid5", 3, "ext4", "dev.txt");
    let progress = |done, total, speed| {
        common::md_at_work(&board.host, "md9", "recover", done, total, speed);
        sync_progress(&md_dir(&board.host, "md9"))
            .unwrap()
            .to_string()
    };
    assert_eq!(progress(5_000, 524_288, 7), "rebuilding 0%");
    // 1% of 100 GiB done, 99 GiB left at 100 MiB/s: about 17 min.
    assert_eq!(
        progress(2_097_152, 209_715_200, 102_400),
        "rebuilding 1% (about 17 min left)"
    );
}
