//! The wizard driven with keys and drawn on ratatui's TestBackend, on the
//! Pi 5 + JMB585 fixture with four WD Red disks, one of which (sdd) still
//! holds an ext4 filesystem "photos".

use nasforge_testkit::board as common;
use nasforge_testkit::finished;
use nasforge_testkit::old_nas::{
    OLDTANK_LISTING, OMV_PROBE, adopts_and_builds_nothing, labelled, omv_member,
};

use nasforge_engine::journal::{self, Journal, StepRecord};
use nasforge_engine::machine::disks::Host;
use nasforge_engine::machine::zfs::ZfsSupport;
use nasforge_engine::planner::Plan;
use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::setup::{self, SetupError};
use nasforge_engine::size::Size;
use nasforge_engine::spec::{
    Array, Clients, Count, DeviceRecipe, DiskMatch, Filesystem, Level, Mode, Nfs, Share, Smb,
    Storage,
};
use nasforge_engine::{image_files, shares::samba, shares::smbpasswd};
use nasforge_setup::ui::theme::Theme;
use nasforge_setup::wizard::choices::LevelChoice;
use nasforge_setup::wizard::screens::shares::Field;
use nasforge_setup::wizard::{
    self, Effect, Handoff, Msg, Screen, Settings, Wizard, facts, service,
};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Color;
use std::os::unix::fs::PermissionsExt;

const FS_UUID: &str = "0b6c0fb3-6d0e-4a4e-9a55-7a1d9d9b2f10";
const NOW: u64 = 1_764_460_800;
const PLAIN: Theme = Theme {
    colour: false,
    ascii: false,
};
const SMART_PASSED: &str = r#"{"smart_status":{"passed":true}}"#;
const SMART_FAILED: &str = r#"{"smart_status":{"passed":false}}"#;

fn board() -> common::Board {
    common::writable_copy_with_nodes("pi5-jmb585", "dev-with-data.txt")
}

/// The wizard on the fixture; smartctl says sdc is failing, the other WD
/// Reds pass, and the SD card cannot tell.
fn wizard_on(board: &common::Board, theme: Theme) -> Wizard {
    let (mut w, _) = wizard_answering(board, Vec::new());
    w.settings.theme = theme;
    w
}

fn key(w: &mut Wizard, code: KeyCode) -> Effect {
    w.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn keys(w: &mut Wizard, codes: &[KeyCode]) {
    for code in codes {
        let effect = key(w, *code);
        assert!(matches!(effect, Effect::None), "{code:?} gave {effect:?}");
    }
}

fn typing(w: &mut Wizard, text: &str) {
    for c in text.chars() {
        key(w, KeyCode::Char(c));
    }
}

fn ctrl(w: &mut Wizard, c: char) -> Effect {
    w.update(Msg::Key(KeyEvent::new(
        KeyCode::Char(c),
        KeyModifiers::CONTROL,
    )))
}

use KeyCode::{Down, Enter, Esc, Right, Tab, Up};
const SPACE: KeyCode = KeyCode::Char(' ');

fn render_at(w: &Wizard, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| wizard::draw(frame, w)).unwrap();
    terminal
}

fn screen(w: &Wizard) -> String {
    render_at(w, 80, 24).backend().to_string()
}

/// Welcome → Disks, choosing the named disks (in the table's order).
fn choose(w: &mut Wizard, names: &[&str]) {
    keys(w, &[Enter]);
    assert_eq!(w.screen, Screen::Disks);
    for name in names {
        let at = w
            .facts
            .inventory
            .disks
            .iter()
            .position(|d| d.name == *name)
            .unwrap();
        while w.disks.cursor < at {
            keys(w, &[Down]);
        }
        keys(w, &[SPACE]);
        // A disk SMART calls failing is asked about: the person says yes.
        if w.disks.asked_failing.as_deref() == Some(*name) {
            keys(w, &[SPACE]);
        }
    }
}

/// The default layout and share with admin's password, to the review.
fn defaults_to_review(w: &mut Wizard) {
    keys(w, &[Enter]);
    assert_eq!(w.screen, Screen::Layout);
    keys(w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
    keys(w, &[Down, Down, Down]);
    typing(w, "secret1");
    keys(w, &[Down]);
    typing(w, "secret1");
    keys(w, &[Enter, Enter]); // shares, then alerts (none)
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
}

fn start(w: &mut Wizard) -> Handoff {
    match key(w, Enter) {
        Effect::Start(handoff) => *handoff,
        other => panic!("Enter on the review gave {other:?}; notice {:?}", w.notice),
    }
}

const ALL_FOUR: [&str; 4] = ["sda", "sdb", "sdc", "sdd"];
const SERIALS: &str = "{WD-WCC7K0000001,WD-WCC7K0000002,WD-WCC7K0000003,WD-WCC7K0000004}";

#[test]
fn walks_the_whole_flow_to_the_spec_it_hands_over() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &ALL_FOUR);
    keys(&mut w, &[Enter]);
    // raid5 is recommended for four spinning disks; take raid6, xfs and
    // another mount point instead.
    assert_eq!(w.level(), Level::Raid5);
    keys(&mut w, &[Down, Tab, Right, Tab]);
    ctrl(&mut w, 'u');
    typing(&mut w, "/srv/tank");
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
    // Name (follows the array: "tank"), SMB, users, password, again,
    // guests, Time Machine, its size limit (left empty), NFS, clients.
    keys(&mut w, &[Down, Down, Down]);
    typing(&mut w, "correct horse");
    keys(&mut w, &[Down]);
    typing(&mut w, "correct horse");
    keys(
        &mut w,
        &[Down, Down, SPACE, Down, Down, SPACE, Down, Enter, Enter],
    );
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    typing(&mut w, "sdd");
    keys(&mut w, &[Enter]);
    let handoff = start(&mut w);

    let expected = DeviceRecipe {
        storage: Some(Storage {
            mode: Mode::Unattended,
            arrays: vec![Array {
                vdevs: None,
                spares: 0,
                parity: None,
                keep: Vec::new(),
                name: "tank".into(),
                level: Level::Raid6,
                disk_match: Some(DiskMatch {
                    serial: Some(SERIALS.into()),
                    count: Count::Exactly(4),
                    ..DiskMatch::default()
                }),
                filesystem: Filesystem::Xfs,
                mount: "/srv/tank".into(),
                wipe: true,
                import: false,
                uuid: None,
            }],
            mailaddr: None,
            alert_program: None,
            spin_down: nasforge_engine::spec::SpinDown::Off,
            disks: Vec::new(),
            usb_quirks: Vec::new(),
            system_mirror: None,
            // sdc, which SMART calls failing, was chosen when asked: the
            // run that builds the array accepts it by serial.
            allow_failing: vec!["WD-WCC7K0000003".into()],
        }),
        // Time Machine on a share of its own, in a folder of the array.
        shares: vec![
            Share {
                quota: None,
                name: "tank".into(),
                path: "/srv/tank".into(),
                smb: Some(Smb {
                    users: vec!["admin".into()],
                    timemachine: false,
                    timemachine_max_size: None,
                    readonly: false,
                    guest: false,
                }),
                nfs: Some(Nfs {
                    clients: Clients(vec!["192.168.1.0/24".into()]),
                    readonly: false,
                }),
            },
            Share {
                quota: None,
                name: "timemachine".into(),
                path: "/srv/tank/timemachine".into(),
                smb: Some(Smb {
                    users: vec!["admin".into()],
                    timemachine: true,
                    timemachine_max_size: None,
                    readonly: false,
                    guest: false,
                }),
                nfs: None,
            },
        ],
        alerts: None,
    };
    assert_eq!(handoff.recipe, expected);
    let members: Vec<&str> = handoff.plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(members, ALL_FOUR);
    assert_eq!(handoff.steps[0].id, "wipe:sdd");
    let mkfs = nasforge_engine::executor::dry_run(&handoff.steps);
    assert!(
        mkfs.contains(&format!("mkfs.xfs -f -L tank -m uuid={FS_UUID}")),
        "{mkfs}"
    );
    assert_eq!(
        handoff.smbpasswd,
        [smbpasswd::line(
            "admin",
            1000,
            &smbpasswd::nt_hash("correct horse"),
            NOW
        )]
    );
    assert!(!format!("{handoff:?}").contains("correct horse"));
}

#[test]
fn the_data_disk_is_not_erased_until_its_name_or_serial_is_typed() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &ALL_FOUR);
    defaults_to_review(&mut w);

    assert!(matches!(key(&mut w, Enter), Effect::None));
    assert!(w.notice.as_ref().is_some_and(|n| n.error), "{:?}", w.notice);
    typing(&mut w, "sda");
    assert!(
        matches!(key(&mut w, Enter), Effect::None),
        "another disk's name"
    );
    assert!(w.review.confirmed.is_empty());
    assert!(
        matches!(key(&mut w, Enter), Effect::None),
        "still not confirmed"
    );
    ctrl(&mut w, 'u');
    typing(&mut w, "wd-wcc7k0000004");
    assert!(
        matches!(key(&mut w, Enter), Effect::None),
        "confirms; a second Enter starts"
    );
    assert!(w.review.confirmed.contains("sdd"));
    let handoff = start(&mut w);
    assert!(handoff.recipe.storage.unwrap().arrays[0].wipe);
    assert!(handoff.plan.arrays[0].members[3].erase);
}

#[test]
fn blank_disks_need_no_typing_and_are_never_wiped() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["sda", "sdb", "sdc"]);
    defaults_to_review(&mut w);
    let handoff = start(&mut w);
    let array = &handoff.recipe.storage.as_ref().unwrap().arrays[0];
    assert_eq!(
        (array.level, array.wipe, array.disks().count),
        (Level::Raid5, false, Count::Exactly(3))
    );
    assert!(handoff.steps.iter().all(|s| !s.id.starts_with("wipe:")));
}

#[test]
fn the_system_disk_cannot_be_chosen() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["mmcblk0"]);
    assert!(w.disks.chosen.is_empty());
    let notice = w.notice.clone().unwrap();
    assert!(
        notice.error && notice.text.contains("root filesystem"),
        "{notice:?}"
    );
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Disks, "no disk, no layout");
}

#[test]
fn smart_health_is_shown_and_a_failing_disk_is_flagged() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &[]);
    while w.facts.inventory.disks[w.disks.cursor].name != "sdc" {
        keys(&mut w, &[Down]);
    }
    keys(&mut w, &[SPACE]);
    // The wizard asks: a first Space chooses nothing.
    assert!(w.disks.chosen.is_empty(), "{:?}", w.disks.chosen);
    assert!(
        w.notice
            .clone()
            .unwrap()
            .text
            .contains("Press Space again to choose it all the same"),
        "{:?}",
        w.notice
    );
    keys(&mut w, &[SPACE]);
    assert_eq!(w.disks.chosen, ["sdc"]);
    // The unattended run that builds it checks SMART again: the recipe the
    // wizard hands it accepts this disk by serial, and no other.
    assert_eq!(w.storage().allow_failing, ["WD-WCC7K0000003"]);
    let shown = screen(&w);
    assert!(shown.contains("WD-WCC7K0000003 FAILING"), "{shown}");
    assert!(shown.contains("SMART says this disk is failing"), "{shown}");
    assert!(
        w.notice.clone().unwrap().text.contains("failing"),
        "{:?}",
        w.notice
    );
    assert!(shown.contains("mmcblk0 31.9 GB SSD mmc") && shown.contains("unknown the system"));
}

#[test]
fn disks_that_report_the_same_serial_can_only_be_chosen_together() {
    // Some USB bridges report one serial for every disk behind them; the
    // spec names disks by serial, so choosing one of two twins would be
    // ambiguous.
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    let serial = w.facts.inventory.disks[0].serial.clone();
    w.facts.inventory.disks[1].serial = serial;
    choose(&mut w, &["sdb"]);
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Layout);
    let notice = w.notice.clone().unwrap();
    assert!(
        notice.text.contains("(sdb) share serial numbers with sda"),
        "{notice:?}"
    );

    keys(&mut w, &[Esc, Up, SPACE, Enter, Enter]);
    assert_eq!(w.screen, Screen::Shares, "both twins: {:?}", w.notice);
    let array = &w.plan().unwrap().arrays[0];
    assert_eq!(array.members.len(), 2);
}

#[test]
fn esc_goes_back_without_losing_any_choice() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &ALL_FOUR);
    keys(&mut w, &[Enter, Down, Tab, Right]);
    keys(&mut w, &[Enter]);
    keys(&mut w, &[Down, Down, Down]);
    typing(&mut w, "pw");
    keys(&mut w, &[Down]);
    typing(&mut w, "pw");
    keys(
        &mut w,
        &[Down, Down, SPACE, Down, Down, SPACE, Enter, Enter],
    );
    typing(&mut w, "sdd");
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let before = w.handoff().unwrap();

    for expected in [
        Screen::Alerts,
        Screen::Shares,
        Screen::Layout,
        Screen::Disks,
        Screen::Welcome,
    ] {
        keys(&mut w, &[Esc]);
        assert_eq!(w.screen, expected);
    }
    keys(&mut w, &[Enter]);
    assert_eq!(w.disks.chosen, ALL_FOUR);
    keys(&mut w, &[Enter]);
    assert_eq!(
        (w.level(), w.layout.filesystem),
        (Level::Raid6, Filesystem::Xfs)
    );
    keys(&mut w, &[Enter, Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "passwords kept: {:?}", w.notice);
    // sdd's confirmation was kept too: Enter starts straight away.
    assert_eq!(start(&mut w), before);
}

#[test]
fn a_system_directory_is_refused_as_mount_point_with_a_reason_shown_whole() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["sda", "sdb"]);
    keys(&mut w, &[Enter, Tab, Tab]);
    ctrl(&mut w, 'u');
    typing(&mut w, "/var/nas");
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Layout);
    let shown = screen(&w);
    let notice = w.notice.clone().unwrap().text;
    assert_eq!(
        notice,
        "/var/nas would cover the system directory /var; mount arrays and disks under /srv or /mnt, e.g. /srv/nas"
    );
    assert!(
        shown.contains("e.g. /srv/nas"),
        "the notice wraps instead of being cut:\n{shown}"
    );
}

#[test]
fn ctrl_c_quits_from_any_screen() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["sda"]);
    assert!(matches!(ctrl(&mut w, 'c'), Effect::Quit));
}

#[test]
fn each_screen_at_80x24() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    insta::assert_snapshot!("welcome", screen(&w));
    choose(&mut w, &ALL_FOUR);
    insta::assert_snapshot!("disks", screen(&w));
    keys(&mut w, &[Enter]);
    insta::assert_snapshot!("layout", screen(&w));
    keys(&mut w, &[Enter, Down, Down, Down]);
    typing(&mut w, "secret1");
    keys(&mut w, &[Down]);
    typing(&mut w, "secret1");
    keys(&mut w, &[Down, Down, Down, SPACE]);
    insta::assert_snapshot!("shares", screen(&w));
    keys(&mut w, &[Enter, Enter]);
    insta::assert_snapshot!("review", screen(&w));
    keys(&mut w, &[KeyCode::End]);
    insta::assert_snapshot!("review_end", screen(&w));
}

/// A setup the service is halfway through: journal, log and mdstat as the
/// board would have them, read the way the wizard reads them.
fn running_setup(board: &common::Board, done: usize) -> (Wizard, Handoff) {
    let mut w = wizard_on(board, PLAIN);
    choose(&mut w, &["sda", "sdb", "sdc"]);
    defaults_to_review(&mut w);
    let handoff = w.handoff().unwrap();
    let mut journal = Journal::new(
        handoff.recipe.clone(),
        handoff.context.clone(),
        handoff.plan.clone(),
        handoff.steps.clone(),
    );
    for step in &handoff.steps[..done] {
        journal.done.push(StepRecord {
            id: step.id.clone(),
            already_done: None,
            at: NOW,
        });
    }
    let host = &board.host;
    journal.save(&nasforge_engine::journal::path(host)).unwrap();
    std::fs::create_dir_all(host.path("/var/log")).unwrap();
    std::fs::write(
        setup::log_path(host),
        "$ udevadm control --stop-exec-queue\n[exit status 0]\n$ mdadm --create /dev/md/data --run --homehost=pinas --name=data --metadata=1.2 --level=5 --raid-devices=3 --chunk=512 --bitmap=internal /dev/disk/by-id/wwn-0x50014ee2b0000001-part1 /dev/disk/by-id/wwn-0x50014ee2b0000002-part1 /dev/disk/by-id/wwn-0x50014ee2b0000003-part1\nmdadm: array /dev/md/data started.\n[exit status 0]\n",
    )
    .unwrap();
    std::fs::write(
        host.path("/proc/mdstat"),
        "Personalities : [raid6] [raid5] [raid4]\nmd127 : active raid5 sdc1[3] sdb1[1] sda1[0]\n      7813771264 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]\n      [=>...................]  recovery =  8.5% (332085248/3906885632) finish=412.3min speed=144500K/sec\n      bitmap: 0/30 pages [0KB], 65536KB chunk\n\nunused devices: <none>\n",
    )
    .unwrap();
    // The 8.5% of the mdstat above, 412.3 min left at md's speed.
    common::md_at_work(
        host,
        "md127",
        "recover",
        664_170_496,
        7_813_771_264,
        144_500,
    );
    std::fs::create_dir_all(host.dev_path("/dev/md")).unwrap();
    std::os::unix::fs::symlink("../md127", host.dev_path("/dev/md/data")).unwrap();
    let mut runner = RecordingRunner::default();
    runner.responses.push((
        format!(
            "systemctl show -p ActiveState -p Job {}",
            image_files::SETUP_SERVICE
        ),
        "ActiveState=activating\n".into(),
    ));
    w.attach(service::snapshot(host, &mut runner));
    (w, handoff)
}

#[test]
fn progress_shows_the_steps_the_output_and_the_resync() {
    let board = board();
    let (mut w, _) = running_setup(&board, 6);
    assert_eq!(w.screen, Screen::Progress);
    let shown = screen(&w);
    insta::assert_snapshot!("progress", shown);
    assert!(shown.contains("data: [##") && shown.contains("rebuilding 8% (about 6 h 53 min left)"));
    assert!(matches!(key(&mut w, Enter), Effect::None), "not done yet");
    assert_eq!(w.screen, Screen::Progress);
    assert!(
        matches!(key(&mut w, Esc), Effect::Quit),
        "leaving leaves setup running"
    );
}

#[test]
fn a_failed_setup_can_be_retried_from_the_progress_screen() {
    let board = board();
    let (mut w, handoff) = running_setup(&board, 6);
    let mut snapshot = w.progress.clone().unwrap();
    if let Ok(Some(j)) = &mut snapshot.journal {
        j.failure = Some(journal::Failure {
            step: handoff.steps[6].id.clone(),
            index: 6,
            error: "`mdadm --create` failed with exit status 1: mdadm: cannot open /dev/sdc1: Device or resource busy".into(),
            at: NOW,
        });
    }
    snapshot.service = Some("failed".into());
    w.update(Msg::Progress(Box::new(snapshot)));
    let shown = screen(&w);
    assert!(shown.contains("Setup FAILED at step 7"), "{shown}");
    assert!(matches!(key(&mut w, KeyCode::Char('r')), Effect::Retry));
}

#[test]
fn a_plan_whose_service_did_not_start_can_be_started_again() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["sda", "sdb"]);
    defaults_to_review(&mut w);
    w.update(Msg::Launched(Err(service::StartError::NotHandedOver(
        "writing /var/lib/nasforge/wizard.toml: Read-only file system".into(),
    ))));
    assert_eq!(
        w.screen,
        Screen::Review,
        "nothing handed over: review again"
    );

    let (mut w, _) = running_setup(&board, 0);
    w.update(Msg::Launched(Err(service::StartError::NotStarted(
        "Failed to connect to bus".into(),
    ))));
    assert_eq!(w.screen, Screen::Progress);
    assert!(
        w.notice.clone().unwrap().text.contains("press r"),
        "{:?}",
        w.notice
    );
    let mut snapshot = w.progress.clone().unwrap();
    snapshot.service = Some("inactive".into());
    w.update(Msg::Progress(Box::new(snapshot)));
    assert!(
        screen(&w).contains("Setup stopped after 0 of 18 steps"),
        "{}",
        screen(&w)
    );
    assert!(matches!(key(&mut w, KeyCode::Char('r')), Effect::Retry));

    w.settings.dry_run = true;
    assert!(
        matches!(key(&mut w, KeyCode::Char('r')), Effect::None),
        "a dry run starts nothing"
    );
}

#[test]
fn done_says_how_to_connect_and_what_to_do_when_a_disk_fails() {
    let board = board();
    let (mut w, handoff) = running_setup(&board, 0);
    let mut snapshot = w.progress.clone().unwrap();
    if let Ok(Some(j)) = &mut snapshot.journal {
        j.done = handoff
            .steps
            .iter()
            .map(|s| StepRecord {
                id: s.id.clone(),
                already_done: None,
                at: NOW,
            })
            .collect();
    }
    w.update(Msg::Progress(Box::new(snapshot.clone())));
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Done);
    let shown = screen(&w);
    insta::assert_snapshot!("done", shown);
    for needle in [
        "\\\\pinas\\data",
        "smb://pinas.local/data",
        "/boot/firmware/nasforge-status.txt",
        "2. sudo nasforge-setup   (its manage view offers the disks that fit)",
    ] {
        assert!(shown.contains(needle), "{needle} missing:\n{shown}");
    }

    // Re-attaching to a finished setup opens the done screen.
    let mut again = wizard_on(&board, PLAIN);
    again.attach(snapshot);
    assert_eq!(again.screen, Screen::Done);
}

/// The wizard re-attached to the handoff's setup, every step done.
fn attach_finished(w: &mut Wizard, handoff: &Handoff) {
    let journal = finished::mark(Journal::new(
        handoff.recipe.clone(),
        handoff.context.clone(),
        handoff.plan.clone(),
        handoff.steps.clone(),
    ));
    w.attach(service::Snapshot {
        journal: Ok(Some(journal)),
        service: None,
        log: vec![],
        arrays: vec![],
    });
    assert_eq!(w.screen, Screen::Done);
}

#[test]
fn nfs_shares_are_shown_as_a_local_name_and_path() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["sda", "sdb"]);
    keys(
        &mut w,
        &[Enter, Enter, Down, SPACE, Down, SPACE, Enter, Enter],
    );
    assert_eq!(w.screen, Screen::Review, "SMB off, NFS on: {:?}", w.notice);
    let handoff = start(&mut w);
    let share = &handoff.recipe.shares[0];
    assert!(share.smb.is_none() && share.nfs.is_some());
    assert_eq!(
        handoff.recipe.storage.as_ref().unwrap().arrays[0].level,
        Level::Raid1
    );
    attach_finished(&mut w, &handoff);
    let shown = screen(&w);
    // A Linux client finds pinas.local through mDNS; a bare pinas only
    // through a DNS entry nobody made.
    assert!(
        shown.contains("pinas.local:/srv/data") && !shown.contains("smb://"),
        "{shown}"
    );
    assert!(!shown.contains("pinas:/srv/data"), "{shown}");
}

#[test]
fn shares_refuse_unknown_users_and_mismatched_passwords() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["sda"]);
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.level(), Level::Single);
    keys(&mut w, &[Down, Down]);
    typing(&mut w, " bob");
    keys(&mut w, &[Enter]);
    let notice = w.notice.clone().unwrap();
    assert!(notice.text.contains("no account 'bob'"), "{notice:?}");
    keys(
        &mut w,
        &[
            KeyCode::Backspace,
            KeyCode::Backspace,
            KeyCode::Backspace,
            Down,
        ],
    );
    typing(&mut w, "one");
    keys(&mut w, &[Down]);
    typing(&mut w, "two");
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares);
    assert!(
        w.notice.clone().unwrap().text.contains("differ"),
        "{:?}",
        w.notice
    );
}

#[test]
fn without_colour_nothing_is_coloured_and_ascii_mode_is_plain_ascii() {
    let board = board();
    let coloured = |theme: Theme| {
        let mut w = wizard_on(&board, theme);
        choose(&mut w, &ALL_FOUR);
        let terminal = render_at(&w, 80, 24);
        terminal
            .backend()
            .buffer()
            .content
            .iter()
            .filter(|c| c.fg != Color::Reset || c.bg != Color::Reset)
            .count()
    };
    assert_eq!(coloured(PLAIN), 0, "NO_COLOR: no colour at all");
    assert!(
        coloured(Theme {
            colour: true,
            ascii: false
        }) > 0
    );

    let mut w = wizard_on(
        &board,
        Theme {
            colour: false,
            ascii: true,
        },
    );
    choose(&mut w, &ALL_FOUR);
    keys(&mut w, &[Enter]);
    let terminal = render_at(&w, 80, 24);
    let shown = terminal.backend().to_string();
    assert!(
        terminal
            .backend()
            .buffer()
            .content
            .iter()
            .all(|c| c.symbol().is_ascii()),
        "{shown}"
    );
    assert!(
        shown.contains("+ nasforge setup") && shown.contains("~117 MB/s"),
        "{shown}"
    );
    assert!(shown.contains("^v move"), "{shown}");
}

#[test]
fn every_screen_draws_at_any_size() {
    let board = board();
    let (mut w, _) = running_setup(&board, 3);
    let sizes = [(80, 24), (132, 43), (40, 12), (10, 3), (1, 1)];
    for screen in [
        Screen::Welcome,
        Screen::Disks,
        Screen::Layout,
        Screen::Shares,
        Screen::Review,
        Screen::Progress,
        Screen::Done,
    ] {
        w.screen = screen;
        for (width, height) in sizes {
            render_at(&w, width, height);
        }
    }
    // A bigger terminal shows more of the review at once.
    w.screen = Screen::Review;
    let small = render_at(&w, 80, 24).backend().to_string();
    let big = render_at(&w, 132, 43).backend().to_string();
    assert!(!small.contains("[3/") && big.contains("[3/"), "{big}");
}

#[test]
fn the_service_runs_the_reviewed_journal_from_the_recipe_it_is_given() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &ALL_FOUR);
    defaults_to_review(&mut w);
    typing(&mut w, "sdd");
    keys(&mut w, &[Enter]);
    let handoff = start(&mut w);
    let host = &board.host;
    let mut runner = RecordingRunner::default();
    service::start(host, &handoff, &mut runner).unwrap();
    assert_eq!(
        runner.lines,
        [
            "systemctl enable nasforge-setup.service",
            "systemctl start --no-block nasforge-setup.service"
        ]
    );

    let staged = host.path(samba::STAGED_PASSWORDS);
    let text = std::fs::read_to_string(&staged).unwrap();
    assert_eq!(text, format!("{}\n", handoff.smbpasswd[0]));
    assert!(!text.contains("secret1"));
    assert_eq!(
        std::fs::metadata(&staged).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let recipe_file = host.path(image_files::WIZARD_RECIPE);
    assert_eq!(DeviceRecipe::load(&recipe_file).unwrap(), handoff.recipe);
    assert_eq!(
        std::fs::metadata(&recipe_file)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600,
        "its [alerts] URLs carry tokens"
    );
    let journal = Journal::load(&nasforge_engine::journal::path(host))
        .unwrap()
        .unwrap();
    assert_eq!(
        (&journal.steps, &journal.context, &journal.plan),
        (&handoff.steps, &handoff.context, &handoff.plan)
    );

    // What nasforge-setup.service runs: `--unattended --recipe wizard.toml`
    // takes the wizard's journal as its own (on a fake root it stops just
    // before the first step).
    assert_eq!(
        service_plan(host, RecordingRunner::default()).as_ref(),
        Some(&handoff.plan)
    );

    let again = service::start(host, &handoff, &mut RecordingRunner::default());
    assert!(again.unwrap_err().to_string().contains("already started"));
}

/// What nasforge-setup.service plans from the recipe the wizard handed it
/// (`--unattended --recipe wizard.toml`), with `runner` answering
/// discovery; on a fake root it stops just before the first step.
fn service_plan(host: &Host, mut runner: RecordingRunner) -> Option<Plan> {
    let mut planned = None;
    let result = setup::unattended(
        host,
        &host.path(image_files::WIZARD_RECIPE),
        &mut runner,
        &mut |_| {},
        &mut |plan| planned = Some(plan.clone()),
        &mut |_| {},
    );
    assert!(
        matches!(result, Err(SetupError::NotTheRealRoot(_))),
        "{result:?}"
    );
    planned
}

/// The screen's text with borders and line breaks taken out, so sentences
/// wrapped over several rows can be searched.
fn flat(screen: &str) -> String {
    screen
        .lines()
        .map(|l| l.trim_matches('"').trim_matches('│').trim())
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn setup_does_not_start_when_first_boot_did_not_install_the_packages() {
    let board = board();
    let host = &board.host;
    // First boot failed: its settings are still there, the marker is not.
    let env = host.path(image_files::FIRSTBOOT_ENV);
    std::fs::create_dir_all(env.parent().unwrap()).unwrap();
    std::fs::write(
        &env,
        "# Written by nasforge; read by /usr/lib/nasforge/firstboot.\nNASFORGE_PACKAGES=\"mdadm samba smartmontools\"\nNASFORGE_MODE=wizard\nNASFORGE_SSH=no\n",
    )
    .unwrap();
    let why = "Setup cannot start: first boot did not install the packages setup needs (mdadm, samba, smartmontools); nasforge-status.txt on the boot partition says why. Fix that, run `sudo /usr/lib/nasforge/firstboot packages`, then start nasforge-setup again.";
    let mut w = wizard_on(&board, PLAIN);
    assert!(flat(&screen(&w)).contains(why), "{}", screen(&w));
    choose(&mut w, &["sda", "sdb", "sdc"]);
    defaults_to_review(&mut w);
    assert!(flat(&screen(&w)).contains(why), "{}", screen(&w));

    let handoff = start(&mut w);
    let mut runner = RecordingRunner::default();
    let err = service::start(host, &handoff, &mut runner).unwrap_err();
    assert!(
        matches!(err, service::StartError::NotHandedOver(_)),
        "{err}"
    );
    assert!(
        runner.lines.is_empty(),
        "nothing started: {:?}",
        runner.lines
    );
    assert!(!nasforge_engine::journal::path(host).exists());
    assert!(!host.path(image_files::WIZARD_RECIPE).exists());
    w.update(Msg::Launched(Err(err)));
    assert_eq!(w.screen, Screen::Review);
    assert!(
        w.notice
            .as_ref()
            .unwrap()
            .text
            .contains("first boot did not install"),
        "{:?}",
        w.notice
    );

    // Fixed meanwhile (in another session): the start goes ahead.
    std::fs::write(host.path(image_files::PACKAGES_INSTALLED), "").unwrap();
    service::start(host, &handoff, &mut runner).unwrap();
    assert_eq!(runner.lines.len(), 2, "{:?}", runner.lines);
}

#[test]
fn a_first_boot_that_staged_no_packages_does_not_hold_setup_back() {
    let board = board();
    let env = board.host.path(image_files::FIRSTBOOT_ENV);
    std::fs::create_dir_all(env.parent().unwrap()).unwrap();
    std::fs::write(&env, "NASFORGE_PACKAGES=\"\"\nNASFORGE_MODE=wizard\n").unwrap();
    assert_eq!(service::packages_missing(&board.host), None);
    std::fs::remove_file(&env).unwrap();
    assert_eq!(
        service::packages_missing(&board.host),
        None,
        "first boot finished"
    );
}

/// Two blank disks in the default mirror, to the shares form.
fn to_shares(w: &mut Wizard) {
    choose(w, &["sda", "sdb"]);
    keys(w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
}

/// Walks the form with ↓ (or ↑ when it is above) to the field.
fn focus(w: &mut Wizard, field: Field) {
    for step in [Down, Up] {
        for _ in 0..20 {
            if w.shares.focus == field {
                return;
            }
            keys(w, &[step]);
        }
    }
    panic!("{field:?} is not on the form: {}", screen(w));
}

fn admin_password(w: &mut Wizard) {
    focus(w, Field::Password(0));
    typing(w, "secret1");
    keys(w, &[Down]);
    typing(w, "secret1");
}

fn smb_spec(w: &Wizard) -> Smb {
    w.share_specs()[0].smb.clone().unwrap()
}

/// Types `limit` over the focused size field and goes on to the review:
/// the limit the Time Machine share carries, and the review's text.
fn review_with_limit(w: &mut Wizard, limit: &str) -> (Option<Size>, String) {
    ctrl(w, 'u');
    typing(w, limit);
    keys(w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    (tm_spec(w).unwrap().timemachine_max_size, review_text(w))
}

/// The Time Machine share the form adds beside the array's share.
fn tm_spec(w: &Wizard) -> Option<Smb> {
    let specs = w.share_specs();
    let tm = specs.get(1)?;
    assert_eq!(tm.name, "timemachine");
    tm.smb.clone().filter(|s| s.timemachine)
}

/// The shares screen with admin's password typed and Time Machine ticked.
fn time_machine_on(board: &common::Board) -> Wizard {
    let mut w = wizard_on(board, PLAIN);
    to_shares(&mut w);
    admin_password(&mut w);
    focus(&mut w, Field::TimeMachine);
    keys(&mut w, &[SPACE]);
    w
}

/// The whole review on a screen tall enough to hold it.
fn review_text(w: &Wizard) -> String {
    render_at(w, 132, 200).backend().to_string()
}

#[test]
fn guests_and_time_machine_exclude_each_other() {
    let board = board();
    let mut w = time_machine_on(&board);
    assert!(tm_spec(&w).is_some());

    focus(&mut w, Field::Guest);
    keys(&mut w, &[SPACE]);
    let smb = smb_spec(&w);
    assert!(smb.guest && tm_spec(&w).is_none(), "{smb:?}");
    let notice = w.notice.clone().unwrap();
    assert!(
        !notice.error && notice.text.contains("Time Machine is now off"),
        "{notice:?}"
    );
    let shown = screen(&w);
    insta::assert_snapshot!("shares_guest", shown);
    assert!(
        shown.contains("[x] Guests may read without a password (read-only for them)")
            && shown.contains("[ ] Time Machine for Macs")
            && shown.contains("Guests or Time Machine, not both"),
        "{shown}"
    );

    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let handoff = w.handoff().unwrap();
    assert_eq!(
        handoff.recipe.shares[0].smb,
        Some(Smb {
            users: vec!["admin".into()],
            timemachine: false,
            timemachine_max_size: None,
            readonly: false,
            guest: true,
        })
    );
    let review = review_text(&w);
    assert!(
        review.contains("SMB: guests may read without a password; only admin may write"),
        "{review}"
    );

    keys(&mut w, &[Esc, Esc]);
    focus(&mut w, Field::TimeMachine);
    keys(&mut w, &[SPACE]);
    let smb = smb_spec(&w);
    assert!(tm_spec(&w).is_some() && !smb.guest, "{smb:?}");
    assert!(
        w.notice
            .as_ref()
            .is_some_and(|n| n.text.contains("Guest access is now off")),
        "{:?}",
        w.notice
    );
}

#[test]
fn a_guest_share_may_have_no_users_and_says_guests_need_no_password() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    to_shares(&mut w);
    focus(&mut w, Field::Users);
    ctrl(&mut w, 'u');
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares);
    assert_eq!(w.shares.focus, Field::Users);
    assert!(
        w.notice
            .as_ref()
            .is_some_and(|n| n.error && n.text.contains("Name at least one user for SMB")),
        "{:?}",
        w.notice
    );

    focus(&mut w, Field::Guest);
    keys(&mut w, &[SPACE, Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let review = review_text(&w);
    assert!(
        review.contains("SMB: guests may read without a password; nobody may write")
            && !review.contains("SMB for"),
        "{review}"
    );
    let handoff = start(&mut w);
    let smb = handoff.recipe.shares[0].smb.clone().unwrap();
    assert!(smb.guest && smb.users.is_empty(), "{smb:?}");
    assert!(handoff.smbpasswd.is_empty());

    attach_finished(&mut w, &handoff);
    let shown = screen(&w);
    for needle in [
        "\\\\pinas\\data",
        "smb://pinas.local/data",
        "Guests         connect without a password and may only read",
        "May write      nobody over SMB",
    ] {
        assert!(shown.contains(needle), "{needle} missing:\n{shown}");
    }
}

#[test]
fn the_time_machine_limit_is_a_size_of_at_least_a_gibibyte() {
    let board = board();
    let mut w = time_machine_on(&board);
    focus(&mut w, Field::TimeMachineSize);
    assert!(
        screen(&w).contains("Time Machine size limit")
            && screen(&w).contains("empty: half the array"),
        "{}",
        screen(&w)
    );

    for (typed, why) in [
        ("12 parsecs", "unknown unit"),
        ("100MiB", "less than 1 GiB"),
    ] {
        ctrl(&mut w, 'u');
        typing(&mut w, typed);
        keys(&mut w, &[Enter]);
        assert_eq!(w.screen, Screen::Shares, "{typed} is refused");
        assert_eq!(w.shares.focus, Field::TimeMachineSize);
        let notice = w.notice.clone().unwrap();
        assert!(
            notice.error
                && notice.text.starts_with("Time Machine size limit: ")
                && notice.text.contains(typed)
                && notice.text.contains(why),
            "{notice:?}"
        );
        let shown = flat(&screen(&w));
        assert!(shown.contains(&notice.text), "shown whole: {shown}");
    }
    insta::assert_snapshot!("shares_timemachine_limit_refused", screen(&w));

    let (limit, review) = review_with_limit(&mut w, "300GiB");
    assert_eq!(limit, Some(Size(300 << 30)));
    assert!(
        review.contains("Time Machine for Macs, limited to 300GiB"),
        "{review}"
    );

    // Empty: the recipe's default, half of the 4 TB mirror.
    keys(&mut w, &[Esc, Esc]);
    let (limit, review) = review_with_limit(&mut w, "");
    assert_eq!(limit, None);
    assert!(
        review.contains("Time Machine for Macs, limited to half the array, about 2 TB"),
        "{review}"
    );

    // A limit left behind when Time Machine goes off is not the recipe's.
    keys(&mut w, &[Esc, Esc]);
    ctrl(&mut w, 'u');
    typing(&mut w, "12 parsecs");
    focus(&mut w, Field::TimeMachine);
    keys(&mut w, &[SPACE, Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let specs = w.share_specs();
    assert!(
        specs.len() == 1 && specs[0].smb.as_ref().is_some_and(|s| !s.timemachine),
        "{specs:?}"
    );
}

// Disks kept as they are ("share as it is") and spin-down.

use nasforge_engine::machine::disks::Partition;
use nasforge_engine::machine::signature::Signature;
use nasforge_engine::spec::{KeptDisk, KeptFilesystem, SpinDown};
use nasforge_setup::wizard::choices;

/// The fixture with a kernel that mounts ext4 and exfat, so the planner
/// can mount the disks kept here.
fn board_that_mounts_ext4() -> common::Board {
    let board = board();
    std::fs::write(
        board.host.path("/proc/filesystems"),
        "nodev\tsysfs\n\text4\n\tvfat\n\texfat\n",
    )
    .unwrap();
    board
}

/// Moves the disks screen's cursor to `name` and presses `code`.
fn on_disk(w: &mut Wizard, name: &str, code: KeyCode) {
    let at = w
        .facts
        .inventory
        .disks
        .iter()
        .position(|d| d.name == name)
        .unwrap();
    while w.disks.cursor < at {
        keys(w, &[Down]);
    }
    while w.disks.cursor > at {
        keys(w, &[Up]);
    }
    keys(w, &[code]);
}

const KEEP: KeyCode = KeyCode::Char('k');

/// sda and sdb for a mirror, sdd's "photos" kept as it is.
fn mirror_and_photos(board: &common::Board) -> Wizard {
    let mut w = wizard_on(board, PLAIN);
    choose(&mut w, &["sda", "sdb"]);
    on_disk(&mut w, "sdd", KEEP);
    w
}

fn photos() -> KeptDisk {
    KeptDisk {
        name: "photos".into(),
        disk: DiskMatch {
            serial: Some("WD-WCC7K0000004".into()),
            count: Count::Exactly(1),
            ..DiskMatch::default()
        },
        partition: None,
        filesystem: Some(KeptFilesystem::Ext4),
        mount: "/srv/photos".into(),
        keep: true,
    }
}

#[test]
fn a_disk_marked_share_as_it_is_is_kept_and_is_no_array_member() {
    let board = board_that_mounts_ext4();
    let mut w = mirror_and_photos(&board);
    let notice = w.notice.clone().unwrap();
    assert!(
        !notice.error && notice.text.contains("nothing on it is erased"),
        "{notice:?}"
    );
    let shown = screen(&w);
    assert!(shown.contains(">[k] sdd"), "{shown}");
    assert!(
        shown.contains("Chosen: sda, sdb (8 TB raw); kept as it is: sdd"),
        "{shown}"
    );
    insta::assert_snapshot!("disks_kept", shown);

    let storage = w.storage();
    assert_eq!(storage.disks, [photos()]);
    let array = &storage.arrays[0];
    assert_eq!(
        (array.disks().count, array.wipe),
        (Count::Exactly(2), false),
        "sdd is neither counted nor erased"
    );
    let sdd = w.facts.inventory.disks.iter().find(|d| d.name == "sdd");
    assert!(
        nasforge_engine::matching::mismatch(array.disks(), sdd.unwrap()).is_some(),
        "the array's rule cannot reach sdd"
    );
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Layout);
    let plan = choices::plan(&storage, &[], &w.facts.inventory, &w.chosen()).unwrap();
    let members: Vec<&str> = plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(members, ["sda", "sdb"]);
}

#[test]
fn the_shares_screen_offers_each_kept_disk_read_only_to_guests() {
    let board = board_that_mounts_ext4();
    let mut w = mirror_and_photos(&board);
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
    admin_password(&mut w);
    focus(&mut w, Field::Kept(0));
    let shown = screen(&w);
    assert!(
        shown.contains(
            ">[x] Kept disk photos (/srv/photos): \\\\pinas\\photos, read-only for guests"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("guests read without a password; nobody writes"),
        "{shown}"
    );
    insta::assert_snapshot!("shares_kept", shown);
    let photos_share = Share {
        quota: None,
        name: "photos".into(),
        path: "/srv/photos".into(),
        smb: Some(Smb {
            users: Vec::new(),
            timemachine: false,
            timemachine_max_size: None,
            readonly: true,
            guest: true,
        }),
        nfs: None,
    };
    let specs = w.share_specs();
    assert_eq!(
        (specs.len(), &specs[0].path, &specs[1]),
        (2, &"/srv/data".to_string(), &photos_share)
    );

    keys(&mut w, &[SPACE]);
    assert!(screen(&w).contains(">[ ] Kept disk photos"));
    assert_eq!(w.share_specs().len(), 1, "turned off");
    assert_eq!(w.storage().disks, [photos()], "still kept, only not shared");
    keys(&mut w, &[SPACE]);
    assert_eq!(w.share_specs()[1], photos_share);
}

#[test]
fn the_review_says_nothing_on_a_kept_disk_is_erased() {
    let board = board_that_mounts_ext4();
    let mut w = mirror_and_photos(&board);
    keys(&mut w, &[Enter, Enter]);
    admin_password(&mut w);
    // Unshared, so the spec holds nothing the planner has to share from a
    // kept disk; what the review says of the disk is the same either way.
    focus(&mut w, Field::Kept(0));
    keys(&mut w, &[SPACE, Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let text = review_text(&w);
    assert!(
        text.contains(
            "Kept as it is: ext4 'photos' on sdd, mounted at /srv/photos, nothing erased"
        ),
        "{text}"
    );
    assert!(!text.contains("[will be erased]"), "{text}");
    assert!(!text.contains("Type sdd"), "nothing to confirm: {text}");
    let handoff = start(&mut w);
    let storage = handoff.recipe.storage.unwrap();
    assert_eq!(storage.disks, [photos()]);
    assert!(!storage.arrays[0].wipe);
    assert!(handoff.steps.iter().all(|s| !s.id.starts_with("wipe:")));
    assert!(
        handoff.plan.arrays[0]
            .members
            .iter()
            .all(|m| m.disk.name != "sdd")
    );
}

#[test]
fn erase_and_use_and_share_as_it_is_replace_each_other() {
    let board = board_that_mounts_ext4();
    let mut w = mirror_and_photos(&board);
    on_disk(&mut w, "sdd", SPACE);
    assert_eq!(w.disks.chosen, ["sda", "sdb", "sdd"]);
    assert!(w.kept().is_empty() && w.storage().disks.is_empty());
    let shown = screen(&w);
    assert!(shown.contains(">[x] sdd"), "{shown}");
    assert!(
        shown.contains("Space erase and use  k share as it is"),
        "{shown}"
    );
    let array = &w.storage().arrays[0];
    assert_eq!((array.disks().count, array.wipe), (Count::Exactly(3), true));
    // As before: erasing waits for sdd's name on the review.
    defaults_to_review(&mut w);
    assert!(matches!(key(&mut w, Enter), Effect::None));
    typing(&mut w, "sdd");
    keys(&mut w, &[Enter]);
    let handoff = start(&mut w);
    assert!(handoff.plan.arrays[0].members.iter().any(|m| m.erase));

    // k takes sdd back out of the array, and k again leaves it unused.
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["sda", "sdb", "sdd"]);
    on_disk(&mut w, "sdd", KEEP);
    assert_eq!(w.disks.chosen, ["sda", "sdb"]);
    assert_eq!(w.storage().disks, [photos()]);
    keys(&mut w, &[KEEP]);
    assert!(w.kept().is_empty() && w.storage().disks.is_empty());
    assert!(screen(&w).contains(">[ ] sdd"));
}

#[test]
fn a_disk_that_cannot_be_kept_says_why() {
    let board = board_that_mounts_ext4();
    let mut w = wizard_on(&board, PLAIN);
    keys(&mut w, &[Enter]);
    on_disk(&mut w, "sda", KEEP);
    assert_eq!(
        w.notice.clone().unwrap().text,
        "sda cannot be shared as it is: it is empty, so there is nothing to keep"
    );
    on_disk(&mut w, "mmcblk0", KEEP);
    let notice = w.notice.clone().unwrap();
    assert!(
        notice.error && notice.text.contains("the system uses it"),
        "{notice:?}"
    );

    w.facts.inventory.disks[3].contents = vec![Signature::Filesystem {
        fstype: "hfsplus".into(),
        label: Some("Old Mac".into()),
        uuid: Some("5b1e0c5a-7c35-3b5e-9d0e-1b2c3d4e5f60".into()),
    }];
    on_disk(&mut w, "sdd", KEEP);
    assert!(w.kept().is_empty());
    let expected = "it holds hfsplus; only ext4, xfs, btrfs, exfat and ntfs can be kept";
    assert_eq!(
        w.notice.clone().unwrap().text,
        format!("sdd cannot be shared as it is: {expected}")
    );
    let shown = flat(&screen(&w));
    assert!(
        shown.contains(&format!("It cannot be shared as it is: {expected}.")),
        "{shown}"
    );
    assert!(
        shown.contains("Space choose"),
        "no k where it does nothing: {shown}"
    );
}

#[test]
fn a_filesystem_on_a_partition_is_kept_with_its_partition_number() {
    // A Mac's exFAT disk: GPT, a small EFI partition, then the files.
    let board = board_that_mounts_ext4();
    let mut w = wizard_on(&board, PLAIN);
    let sdd = &mut w.facts.inventory.disks[3];
    sdd.contents = vec![Signature::PartitionTable {
        scheme: "gpt".into(),
    }];
    let part = |number: u32, start: u64, contents: Signature| Partition {
        name: format!("sdd{number}"),
        number,
        start,
        size: Size(200 << 20),
        contents: vec![contents],
    };
    sdd.partitions = vec![
        part(
            1,
            1 << 20,
            Signature::Filesystem {
                fstype: "vfat".into(),
                label: Some("EFI".into()),
                uuid: Some("67E3-17ED".into()),
            },
        ),
        part(
            2,
            201 << 20,
            Signature::Filesystem {
                fstype: "exfat".into(),
                label: Some("Family Videos".into()),
                uuid: Some("ABCD-1234".into()),
            },
        ),
    ];
    keys(&mut w, &[Enter]);
    on_disk(&mut w, "sdd", KEEP);
    assert_eq!(
        w.storage().disks,
        [KeptDisk {
            name: "FamilyVideos".into(),
            partition: Some(2),
            filesystem: Some(KeptFilesystem::Exfat),
            mount: "/srv/FamilyVideos".into(),
            ..photos()
        }]
    );
    assert!(
        flat(&screen(&w)).contains("Kept: sdd2 is shared as it is; nothing on it is erased."),
        "{}",
        screen(&w)
    );
}

#[test]
fn a_kept_disk_is_pinned_by_wwn_when_its_serial_is_not_its_own() {
    // Some USB bridges give the disks behind them one serial.
    let board = board_that_mounts_ext4();
    let mut w = wizard_on(&board, PLAIN);
    let serial = w.facts.inventory.disks[3].serial.clone();
    w.facts.inventory.disks[2].serial = serial;
    let wwn = w.facts.inventory.disks[3].wwn.clone().unwrap();
    let wwn_again = wwn.clone();
    keys(&mut w, &[Enter]);
    on_disk(&mut w, "sdd", KEEP);
    assert_eq!(
        w.storage().disks[0].disk,
        DiskMatch {
            wwn: Some(wwn),
            count: Count::Exactly(1),
            ..DiskMatch::default()
        }
    );

    // No serial at all: no array member, but kept by its WWN.
    keys(&mut w, &[KEEP]);
    w.facts.inventory.disks[3].serial = None;
    keys(&mut w, &[SPACE]);
    assert!(w.disks.chosen.is_empty(), "{:?}", w.notice);
    let shown = flat(&screen(&w));
    assert!(
        shown.contains("it reports no serial number, so setup could not be sure to find it again; k shares it as it is."),
        "{shown}"
    );
    keys(&mut w, &[KEEP]);
    assert_eq!(w.storage().disks[0].disk.wwn.as_ref(), Some(&wwn_again));

    // No serial, WWN, or model and size of its own: refused.
    keys(&mut w, &[KEEP]);
    for d in &mut w.facts.inventory.disks[2..4] {
        d.serial = Some("0123456789ABCDEF".into());
        d.wwn = None;
    }
    keys(&mut w, &[KEEP]);
    assert!(w.kept().is_empty());
    let notice = w.notice.clone().unwrap().text;
    assert!(
        notice.contains("could not be sure to find it again"),
        "{notice}"
    );
}

#[test]
fn without_an_array_no_share_password_is_staged() {
    // Passwords typed for the array's share, then the array given up.
    let board = board_that_mounts_ext4();
    let mut w = mirror_and_photos(&board);
    keys(&mut w, &[Enter, Enter]);
    admin_password(&mut w);
    assert_eq!(w.passwords_to_stage().len(), 1);
    keys(&mut w, &[Esc, Esc]);
    on_disk(&mut w, "sda", SPACE);
    on_disk(&mut w, "sdb", SPACE);
    assert!(w.disks.chosen.is_empty());
    assert!(w.storage().arrays.is_empty());
    assert!(w.passwords_to_stage().is_empty());
    let shares = w.share_specs();
    assert_eq!(
        (shares.len(), &shares[0].smb.as_ref().unwrap().users),
        (1, &Vec::<String>::new())
    );
}

#[test]
fn only_kept_disks_make_no_array() {
    let board = board_that_mounts_ext4();
    let mut w = wizard_on(&board, PLAIN);
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Disks);
    assert!(
        w.notice
            .clone()
            .unwrap()
            .text
            .contains("keep one that holds files with k"),
        "{:?}",
        w.notice
    );
    on_disk(&mut w, "sdd", KEEP);
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Layout);
    let storage = w.storage();
    assert!(storage.arrays.is_empty(), "{storage:?}");
    assert_eq!(storage.disks, [photos()]);
    let specs = w.share_specs();
    assert_eq!(
        specs.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(),
        ["/srv/photos"],
        "the kept disk's share only"
    );
    // The spin-down is the one field left.
    keys(&mut w, &[Right]);
    assert_eq!(w.storage().spin_down, SpinDown::After(20 * 60));
    let shown = screen(&w);
    assert!(
        shown.contains("No array: no disk was chosen to erase and use."),
        "{shown}"
    );
    assert!(
        shown.contains("ext4 'photos' on sdd, at /srv/photos"),
        "{shown}"
    );
    insta::assert_snapshot!("layout_kept_only", shown);
}

#[test]
fn the_spin_down_choice_lands_in_the_storage_spec() {
    let board = board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["sda", "sdb"]);
    keys(&mut w, &[Enter]);
    assert_eq!(w.storage().spin_down, SpinDown::Off, "off unless chosen");
    keys(&mut w, &[Tab, Tab, Tab]);
    let shown = screen(&w);
    assert!(shown.contains("> Spin-down   <off>  20min   1h"), "{shown}");
    assert!(
        shown.contains(
            "SSDs are never spun down; USB disks get hd-idle: many bridges ignore hdparm."
        ),
        "{shown}"
    );
    assert!(shown.contains("←→ spin-down"), "{shown}");
    keys(&mut w, &[Right, Right]);
    assert_eq!(w.storage().spin_down, SpinDown::After(60 * 60));
    keys(&mut w, &[Right]);
    assert_eq!(w.storage().spin_down, SpinDown::Off, "round to off");
    keys(&mut w, &[KeyCode::Left, KeyCode::Left]);
    assert_eq!(w.storage().spin_down, SpinDown::After(20 * 60));
    // The other fields still take their keys.
    keys(&mut w, &[Tab, Tab, Right]);
    assert_eq!(w.layout.filesystem, Filesystem::Xfs);

    keys(&mut w, &[Enter]);
    keys(&mut w, &[Down, Down, Down]);
    typing(&mut w, "secret1");
    keys(&mut w, &[Down]);
    typing(&mut w, "secret1");
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let text = review_text(&w);
    assert!(
        text.contains("Idle hard disks spin down after 20min (hd-idle); SSDs never do."),
        "{text}"
    );
    let handoff = start(&mut w);
    assert_eq!(
        handoff.recipe.storage.unwrap().spin_down,
        SpinDown::After(20 * 60)
    );
    assert!(handoff.steps.iter().any(|s| s.id == "spin-down"));
}

/// The fixture with ZFS as an image built for a pool has it: the module
/// loaded and zfsutils-linux's zpool installed.
fn zfs_board() -> common::Board {
    let board = board();
    for (path, text) in [
        ("/sys/module/zfs/version", "2.2.7-1~bpo12+1\n"),
        ("/usr/sbin/zpool", ""),
    ] {
        let file = board.host.path(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    board
}

/// Disks → layout, the filesystem turned to zfs (ext4, xfs, btrfs, zfs),
/// and the focus back on the levels.
fn to_zfs(w: &mut Wizard) {
    keys(w, &[Enter]);
    assert_eq!(w.screen, Screen::Layout, "{:?}", w.notice);
    keys(w, &[Tab, Right, Right, Right]);
    assert_eq!(w.layout.filesystem, Filesystem::Zfs);
    keys(w, &[KeyCode::BackTab]);
}

/// Three blank disks as a raidz1 pool, admin's password typed on the
/// shares form.
fn raidz1_to_shares(board: &common::Board) -> Wizard {
    let mut w = wizard_on(board, PLAIN);
    choose(&mut w, &["sda", "sdb", "sdc"]);
    to_zfs(&mut w);
    assert_eq!(w.level(), Level::Raidz1);
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
    admin_password(&mut w);
    w
}

#[test]
fn zfs_pools_are_a_filesystem_choice_with_their_own_levels_and_figures() {
    let board = zfs_board();
    let mut w = wizard_on(&board, PLAIN);
    assert_eq!(
        w.facts.zfs,
        Ok(ZfsSupport {
            version: Some("2.2.7-1~bpo12+1".into())
        })
    );
    choose(&mut w, &ALL_FOUR);
    keys(&mut w, &[Enter]);
    let shown = screen(&w);
    assert!(
        shown.contains("Or a ZFS pool (raidz1 here, checksummed): set Filesystem to zfs below."),
        "{shown}"
    );
    assert!(shown.contains("<ext4>  xfs   btrfs   zfs"), "{shown}");
    keys(&mut w, &[Esc]);
    to_zfs(&mut w);
    assert_eq!(w.level_choice(), LevelChoice::one(Level::Raidz1));
    let shown = screen(&w);
    insta::assert_snapshot!("layout_zfs", shown);
    assert!(!shown.contains("raid5"), "one list at a time:\n{shown}");
    assert!(shown.contains("ZFS pool  tank"), "{shown}");

    // Up from raidz1: two mirrors of two.
    keys(&mut w, &[Up]);
    assert_eq!(
        w.level_choice(),
        LevelChoice {
            level: Level::Mirror,
            vdevs: 2,
            parity: 0,
        }
    );
    let array = w.storage().arrays.remove(0);
    assert_eq!(
        (
            array.level,
            array.filesystem,
            array.vdevs,
            array.name.as_str()
        ),
        (Level::Mirror, Filesystem::Zfs, Some(2), "tank")
    );
    let shown = screen(&w);
    assert!(
        shown.contains("> (*) 2 × mirror    8 TB  1 (up to 2)"),
        "{shown}"
    );
    // Back to an md filesystem: md's list and its recommendation again.
    keys(&mut w, &[Tab, KeyCode::Left]);
    assert_eq!(w.layout.filesystem, Filesystem::Btrfs);
    assert_eq!(w.level_choice(), LevelChoice::one(Level::Raid5));
    assert_eq!(w.storage().arrays[0].name, "data");
}

#[test]
fn without_zfs_the_layout_says_why_and_offers_no_zfs() {
    let board = board();
    std::fs::create_dir_all(board.host.path("/sys/module/zfs")).unwrap();
    let mut w = wizard_on(&board, PLAIN);
    let why = w.facts.zfs.clone().unwrap_err();
    assert!(why.contains("zfsutils-linux"), "{why}");
    choose(&mut w, &ALL_FOUR);
    keys(&mut w, &[Enter]);
    let shown = screen(&w);
    insta::assert_snapshot!("layout_zfs_unavailable", shown);
    assert!(
        shown.contains("ZFS pools: not offered, zfsutils-linux is not installed (no zpool)."),
        "{shown}"
    );
    keys(&mut w, &[Tab, Right, Right, Right]);
    assert_eq!(w.layout.filesystem, Filesystem::Ext4, "round past btrfs");
    assert!(!screen(&w).contains(" zfs "));

    // However long the reason, it keeps to its line.
    w.facts.zfs = Err("the zfs module for this kernel could not be found anywhere on this board, nor built for it".into());
    let shown = screen(&w);
    assert!(
        shown.contains(
            "│ ZFS pools: not offered, the zfs module for this kernel could not be found a… │"
        ),
        "{shown}"
    );
}

#[test]
fn a_pool_name_zpool_refuses_is_refused_on_the_layout_screen() {
    let board = zfs_board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &["sda", "sdb"]);
    to_zfs(&mut w);
    assert_eq!(w.level(), Level::Mirror, "two disks");
    keys(&mut w, &[Tab, Tab, Tab]);
    assert_eq!(w.layout.focus, wizard::screens::layout::Focus::Pool);
    for refused in ["raidz-pool", "c0d1", "2024"] {
        ctrl(&mut w, 'u');
        typing(&mut w, refused);
        keys(&mut w, &[Tab, Enter]);
        assert_eq!(w.screen, Screen::Layout, "{refused}");
        let spec_says = nasforge_engine::spec::validate(&w.storage(), &[])
            .into_iter()
            .find(|p| p.path == "storage.arrays[0].name")
            .unwrap()
            .message;
        let notice = w.notice.clone().unwrap();
        assert!(notice.error, "{notice:?}");
        assert_eq!(notice.text, spec_says);
        assert!(spec_says.contains("cannot name a ZFS pool"), "{spec_says}");
        assert_eq!(
            w.layout.focus,
            wizard::screens::layout::Focus::Pool,
            "back on the name"
        );
    }
    ctrl(&mut w, 'u');
    typing(&mut w, "media");
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
    assert_eq!(w.storage().arrays[0].name, "media");
}

#[test]
fn a_share_on_a_pool_may_have_a_quota() {
    let board = zfs_board();
    let mut w = raidz1_to_shares(&board);
    focus(&mut w, Field::Quota);
    typing(&mut w, "100 potatoes");
    keys(&mut w, &[Down, Enter]);
    assert_eq!(w.screen, Screen::Shares);
    assert_eq!(w.shares.focus, Field::Quota, "back on the quota");
    let notice = w.notice.clone().unwrap();
    assert!(
        notice.error
            && notice
                .text
                .starts_with("Quota: invalid size `100 potatoes`"),
        "{notice:?}"
    );
    ctrl(&mut w, 'u');
    typing(&mut w, "0GiB");
    keys(&mut w, &[Enter]);
    assert!(
        w.notice
            .clone()
            .unwrap()
            .text
            .contains("would mean no limit"),
        "{:?}",
        w.notice
    );
    ctrl(&mut w, 'u');
    typing(&mut w, "100GiB");
    insta::assert_snapshot!("shares_quota", screen(&w));
    assert_eq!(w.share_specs()[0].quota, Some(Size(100 << 30)));

    // Empty is no quota; an md array has no such field.
    ctrl(&mut w, 'u');
    assert_eq!(w.share_specs()[0].quota, None);
    typing(&mut w, "100GiB");
    keys(&mut w, &[Esc, Tab, KeyCode::Left]);
    assert_eq!(w.layout.filesystem, Filesystem::Btrfs);
    keys(&mut w, &[Enter]);
    assert!(!screen(&w).contains("Quota"));
    assert_eq!(w.share_specs()[0].quota, None, "{:?}", w.share_specs());
}

#[test]
fn a_pool_is_specified_as_a_recipe_would_and_passes_its_checks() {
    let board = zfs_board();
    let mut w = raidz1_to_shares(&board);
    focus(&mut w, Field::Quota);
    typing(&mut w, "500GiB");
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let recipe = DeviceRecipe {
        storage: Some(w.storage()),
        shares: w.share_specs(),
        alerts: None,
    };
    assert_eq!(
        recipe.storage.as_ref().unwrap().arrays,
        [Array {
            vdevs: None,
            spares: 0,
            parity: None,
            keep: Vec::new(),
            name: "tank".into(),
            level: Level::Raidz1,
            disk_match: Some(DiskMatch {
                serial: Some("{WD-WCC7K0000001,WD-WCC7K0000002,WD-WCC7K0000003}".into()),
                count: Count::Exactly(3),
                ..DiskMatch::default()
            }),
            filesystem: Filesystem::Zfs,
            mount: "/srv/data".into(),
            wipe: false,
            import: false,
            uuid: None,
        }]
    );
    assert_eq!(
        recipe.shares,
        [Share {
            quota: Some(Size(500 << 30)),
            name: "data".into(),
            path: "/srv/data".into(),
            smb: Some(Smb {
                users: vec!["admin".into()],
                timemachine: false,
                timemachine_max_size: None,
                readonly: false,
                guest: false,
            }),
            nfs: None,
        }]
    );
    assert_eq!(recipe.problems(), []);
    // As the service's recipe file carries it.
    let text = toml::to_string(&recipe).unwrap();
    assert!(text.contains("filesystem = \"zfs\""), "{text}");
    assert_eq!(
        DeviceRecipe::parse(&text, std::path::Path::new("wizard.toml")).unwrap(),
        recipe
    );
}

#[test]
fn the_review_says_the_pool_in_words_and_its_commands() {
    let board = zfs_board();
    let mut w = raidz1_to_shares(&board);
    focus(&mut w, Field::Quota);
    typing(&mut w, "500GiB");
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    insta::assert_snapshot!("review_zfs", screen(&w));
    keys(&mut w, &[KeyCode::End]);
    insta::assert_snapshot!("review_zfs_end", screen(&w));
    let text = review_text(&w);
    assert!(
        text.contains(
            "Pool 'tank': ZFS, one raidz1 vdev of 3 disks, mounted at /srv/data; ashift 12"
        ),
        "{text}"
    );
    assert!(text.contains("survives: 1 failed disk(s)"), "{text}");
    assert!(
        text.contains("holds at most 500GiB (a ZFS quota)"),
        "{text}"
    );
    assert!(
        !text.contains("/dev/md/"),
        "a pool has no md device:\n{text}"
    );
    assert!(
        text.contains("zpool create -o ashift=12 -o cachefile=/etc/zfs/zpool.cache")
            && text.contains("zfs create -p -o quota="),
        "the commands:\n{text}"
    );
    for screen in [Screen::Layout, Screen::Shares, Screen::Review] {
        w.screen = screen;
        for (width, height) in [(132, 43), (40, 12), (10, 3), (1, 1)] {
            render_at(&w, width, height);
        }
    }
}

#[test]
fn two_vdevs_are_said_as_such_in_the_review() {
    let board = zfs_board();
    let mut w = wizard_on(&board, PLAIN);
    choose(&mut w, &ALL_FOUR);
    to_zfs(&mut w);
    keys(&mut w, &[Up, Enter]);
    admin_password(&mut w);
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let text = review_text(&w);
    assert!(
        text.contains(
            "Pool 'tank': ZFS, 2 mirror vdevs of 2 disks each, striped, mounted at /srv/data"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "survives: 1 failed disk(s) in each vdev, 2 in all when they fall in different vdevs"
        ),
        "{text}"
    );
}

/// The PC with sixteen disks on two LSI SAS1068s and its boot SSD on the
/// chipset's AHCI; SMART passes every disk.
fn sas_pc(board: &common::Board) -> Wizard {
    let mut runner = RecordingRunner::default();
    for disk in board.inventory().disks {
        runner.responses.push((
            format!("smartctl --json -H -A /dev/{}", disk.name),
            SMART_PASSED.to_string(),
        ));
    }
    let facts = facts::gather(&board.host, &mut runner).unwrap();
    let mut w = Wizard::new(
        facts,
        Settings {
            theme: PLAIN,
            dry_run: false,
            fs_uuid: FS_UUID.into(),
            now: NOW,
        },
    );
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Disks);
    w
}

fn cursor_disk(w: &Wizard) -> &str {
    &w.facts.inventory.disks[w.disks.cursor].name
}

/// The disks screen at 80×24, checked to fit and to show the cursor's
/// disk on its marked row.
fn disks_screen(w: &Wizard) -> String {
    let shown = screen(w);
    for line in shown.lines() {
        assert!(
            line.trim_matches('"').chars().count() <= 80,
            "wider than 80 columns: {line}\n{shown}"
        );
    }
    let name = format!(" {} ", cursor_disk(w));
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("\"│ >") && l.contains(&name)),
        "the cursor's disk{name}is not shown:\n{shown}"
    );
    shown
}

/// The line under the table that counts the disks out of sight.
fn out_of_sight(shown: &str) -> &str {
    shown
        .lines()
        .find(|l| l.ends_with(" more") || l.contains(" more "))
        .unwrap_or_default()
}

/// The table's rows as shown, the cursor's mark left out.
fn table_rows(shown: &str) -> Vec<String> {
    shown
        .lines()
        .skip_while(|l| !l.contains("Disk "))
        .skip(1)
        .take_while(|l| !l.contains(" more") && !l.contains("Chosen:"))
        .map(|l| l.replacen('>', " ", 1))
        .collect()
}

#[test]
fn sixteen_disks_on_two_hbas_are_grouped_by_controller_and_scroll_at_80x24() {
    let board = common::writable_copy("x86-sas-16");
    let mut w = sas_pc(&board);

    let top = disks_screen(&w);
    insta::assert_snapshot!("disks_sas_top", top);
    assert!(
        top.contains("Intel ICH9 AHCI · 0000:00:1f.2 · 1 disk")
            && top.contains("LSI SAS1068 · 0000:00:03.0 · 8 disks"),
        "{top}"
    );
    assert_eq!(out_of_sight(&top).trim_matches(['"', '│', ' ']), "↓ 7 more");

    keys(&mut w, &[KeyCode::End]);
    assert_eq!(cursor_disk(&w), "sdq");
    let end = disks_screen(&w);
    insta::assert_snapshot!("disks_sas_end", end);
    assert!(
        end.contains("LSI SAS1068 · 0000:00:04.0 · 8 disks"),
        "the last group's header is in view with its disks: {end}"
    );
    assert_eq!(out_of_sight(&end).trim_matches(['"', '│', ' ']), "↑ 4 more");

    keys(&mut w, &[KeyCode::Home]);
    assert_eq!(cursor_disk(&w), "sda");
    keys(&mut w, &[KeyCode::PageDown]);
    let paged = disks_screen(&w);
    insta::assert_snapshot!("disks_sas_page_down", paged);
    let moved = w.disks.cursor;
    assert!(
        moved > 8,
        "a page is more than half the disks: {}",
        cursor_disk(&w)
    );
    keys(&mut w, &[KeyCode::PageUp]);
    assert_eq!(cursor_disk(&w), "sda", "PgUp comes back");

    // One row at a time, the table moves by a row (two where a header
    // comes with its first disk), never by a page.
    let mut before = table_rows(&disks_screen(&w));
    while w.disks.cursor + 1 < w.facts.inventory.disks.len() {
        let from = cursor_disk(&w).to_string();
        keys(&mut w, &[Down]);
        assert_ne!(cursor_disk(&w), from, "Down moves over the group headers");
        let now = table_rows(&disks_screen(&w));
        let kept = now.iter().filter(|l| before.contains(l)).count();
        assert!(
            kept + 2 >= now.len(),
            "jumped from {from}:\n{before:#?}\n{now:#?}"
        );
        before = now;
    }
}

#[test]
fn a_chooses_every_usable_disk_of_the_cursor_s_controller() {
    let board = common::writable_copy("x86-sas-16");
    let mut w = sas_pc(&board);
    keys(&mut w, &[KeyCode::Char('a')]);
    let notice = w.notice.as_ref().unwrap();
    assert!(
        notice.error
            && notice.text == "No disk on the Intel ICH9 AHCI (0000:00:1f.2) can be chosen.",
        "{notice:?}"
    );
    assert!(w.disks.chosen.is_empty());

    keys(&mut w, &[Down, KeyCode::Char('a')]);
    assert_eq!(
        w.disks.chosen,
        ["sdb", "sdc", "sdd", "sde", "sdf", "sdg", "sdh", "sdi"]
    );
    assert_eq!(
        w.notice.as_ref().unwrap().text,
        "All 8 usable disks on the LSI SAS1068 (0000:00:03.0) are chosen"
    );
    keys(&mut w, &[KeyCode::End, KeyCode::Char('a')]);
    assert_eq!(w.disks.chosen.len(), 16);
    let all = disks_screen(&w);
    insta::assert_snapshot!("disks_sas_all", all);
    assert!(
        all.contains("Chosen: 16 disks on 2 controllers (64 TB raw)"),
        "the summary fits one line: {all}"
    );

    keys(&mut w, &[KeyCode::Char('a')]);
    assert_eq!(
        w.disks.chosen.len(),
        8,
        "a again unchooses that controller's"
    );
    assert!(w.disks.chosen.iter().all(|n| n.as_str() <= "sdi"));
    assert!(
        disks_screen(&w).contains("Chosen: sdb, sdc, sdd, sde, sdf, sdg, sdh, sdi (32 TB raw)"),
        "names while they fit"
    );
}

#[test]
fn the_welcome_screen_lists_the_sas_hbas_beside_the_sata_controller() {
    let board = common::writable_copy("x86-sas-16");
    let mut w = sas_pc(&board);
    w.screen = Screen::Welcome;
    let shown = screen(&w);
    insta::assert_snapshot!("welcome_sas", shown);
    for line in [
        "Board     Standard PC (Q35 + ICH9, 2009)",
        "SATA      Intel ICH9 AHCI at 0000:00:1f.2, driver ahci, 1 disk",
        "SAS       LSI SAS1068 at 0000:00:03.0, driver mptsas, 8 disks",
        "SAS       LSI SAS1068 at 0000:00:04.0, driver mptsas, 8 disks",
        "Disks     17 found, 16 can be used; the system is on sda",
    ] {
        assert!(shown.contains(line), "{line}\n{shown}");
    }
}

#[test]
fn the_grouped_disks_screen_is_plain_ascii_in_ascii_mode() {
    let board = common::writable_copy("x86-sas-16");
    let mut w = sas_pc(&board);
    w.settings.theme = Theme {
        colour: false,
        ascii: true,
    };
    let terminal = render_at(&w, 80, 24);
    let shown = terminal.backend().to_string();
    assert!(
        terminal
            .backend()
            .buffer()
            .content
            .iter()
            .all(|c| c.symbol().is_ascii()),
        "{shown}"
    );
    assert!(
        shown.contains("LSI SAS1068 - 0000:00:03.0 - 8 disks") && shown.contains("v 7 more"),
        "{shown}"
    );
}

#[test]
fn the_grouped_disks_screen_draws_at_any_size() {
    let board = common::writable_copy("x86-sas-16");
    let mut w = sas_pc(&board);
    keys(&mut w, &[KeyCode::End]);
    for (width, height) in [(132, 43), (80, 24), (40, 12), (10, 3), (1, 1)] {
        render_at(&w, width, height);
        keys(&mut w, &[KeyCode::PageUp, Down]);
    }
    let big = render_at(&w, 132, 43).backend().to_string();
    assert!(
        !big.contains(" more"),
        "43 rows hold every disk and header: {big}"
    );
}

/// The PC's disks on both HBAs but the last (sdq): 15 disks, on the
/// layout screen; an `admin` account to share them with, as the Pi's.
fn fifteen_on_the_pc(board: &common::Board) -> Wizard {
    std::fs::copy(
        common::data("pi5-jmb585/etc/passwd"),
        board.host.path("/etc/passwd"),
    )
    .unwrap();
    let mut w = sas_pc(board);
    keys(
        &mut w,
        &[
            Down,
            KeyCode::Char('a'),
            KeyCode::End,
            KeyCode::Char('a'),
            SPACE,
        ],
    );
    assert_eq!(w.disks.chosen.len(), 15);
    assert!(!w.disks.chosen.contains(&"sdq".to_string()));
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Layout, "{:?}", w.notice);
    w
}

/// The screen at 80×24, checked to fit its width.
fn fitting_screen(w: &Wizard) -> String {
    let shown = screen(w);
    for line in shown.lines() {
        assert!(
            line.trim_matches('"').chars().count() <= 80,
            "wider than 80 columns: {line}\n{shown}"
        );
    }
    shown
}

#[test]
fn fifteen_disks_get_raid6_two_legs_and_hot_spares_at_80x24() {
    let board = common::writable_copy("x86-sas-16");
    let mut w = fifteen_on_the_pc(&board);
    assert_eq!(w.level_choice(), LevelChoice::one(Level::Raid6));
    let shown = fitting_screen(&w);
    insta::assert_snapshot!("layout_15", shown);
    assert!(
        shown.contains("│    -  2 × raid6 15 disks do not split into 2 legs; set Hot spares to 1 "),
        "two legs are offered, with what makes them fit: {shown}"
    );
    assert!(
        !shown.contains("single"),
        "no room for a level that takes one disk"
    );

    // One hot spare: 14 disks make two raid6 legs of 7.
    keys(&mut w, &[Tab, Tab]);
    assert_eq!(w.layout.focus, wizard::screens::layout::Focus::Spares);
    assert!(screen(&w).contains("←→ spares"));
    keys(&mut w, &[Right]);
    keys(&mut w, &[KeyCode::BackTab, KeyCode::BackTab, Down]);
    let two_legs = LevelChoice {
        level: Level::Raid6,
        vdevs: 2,
        parity: 0,
    };
    assert_eq!(w.level_choice(), two_legs);
    let shown = fitting_screen(&w);
    for row in [
        "│   ( ) raid6       48 TB  2                    ≈117 MB/s  recommended         │",
        "│ > (*) 2 × raid6   40 TB  2 (up to 4)          ≈117 MB/s                      │",
        "│   Filesystem  <ext4>  xfs   btrfs           Hot spares  <1>  of up to 7      │",
    ] {
        assert!(shown.contains(row), "{row}\n{shown}");
    }
    let array = w.storage().arrays.remove(0);
    assert_eq!(
        (array.level, array.vdevs, array.spares, array.disks().count),
        (Level::Raid6, Some(2), 1, Count::Exactly(15))
    );

    // A level without redundancy has no spare, and keeps the number asked
    // for until a level that can have one is chosen again.
    keys(&mut w, &[Down, Down]);
    assert_eq!(w.level(), Level::Raid0);
    assert!(
        fitting_screen(&w).contains("Hot spares  none with raid0"),
        "{}",
        screen(&w)
    );
    assert_eq!(w.storage().arrays[0].spares, 0);
    keys(&mut w, &[Up, Up]);
    assert_eq!(w.level_choice(), two_legs);

    // The review and the recipe the service runs carry the legs and the
    // spare.
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
    admin_password(&mut w);
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let text = review_text(&w);
    for line in [
        "Array 'data': 2 raid6 legs of 7 disks each, striped (raid60); 1 hot spare as",
        "leg 'data-1' (/dev/md/data-1):",
        "hot spare, holding no data (md rebuilds a failed member onto it at once, in",
        "- sdp: ST4000VN008-2DR166 (ZDH1A007), 4 TB sas HDD via LSI SAS1068",
        "mdadm --create /dev/md/data --run --homehost=pcnas --name=data --metadata=1.2",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
    let handoff = start(&mut w);
    let recipe = toml::to_string(&handoff.recipe).unwrap();
    assert!(
        recipe.contains("level = \"raid6\"\n") && recipe.contains("vdevs = 2\nspares = 1\n"),
        "{recipe}"
    );
    assert_eq!(
        nasforge_engine::spec::DeviceRecipe::parse(&recipe, std::path::Path::new("wizard.toml"))
            .unwrap(),
        handoff.recipe,
        "the recipe reads back as it was handed over"
    );
}

/// The PC as an image built for a ZFS pool has it.
fn sas_pc_with_zfs() -> common::Board {
    let board = common::writable_copy("x86-sas-16");
    for (path, text) in [
        ("/sys/module/zfs/version", "2.2.7-1~bpo12+1\n"),
        ("/usr/sbin/zpool", ""),
    ] {
        let file = board.host.path(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    board
}

#[test]
fn fifteen_disks_as_a_pool_get_two_raidz2_vdevs_and_a_hot_spare_at_80x24() {
    let board = sas_pc_with_zfs();
    let mut w = fifteen_on_the_pc(&board);
    assert!(
        screen(&w)
            .contains("Or a ZFS pool (raidz2 here, checksummed): set Filesystem to zfs below."),
        "{}",
        screen(&w)
    );
    keys(&mut w, &[Esc]);
    to_zfs(&mut w);
    assert_eq!(w.level_choice(), LevelChoice::one(Level::Raidz2));
    keys(
        &mut w,
        &[Tab, Tab, Right, KeyCode::BackTab, KeyCode::BackTab],
    );
    keys(&mut w, &[Down]);
    assert_eq!(
        w.level_choice(),
        LevelChoice {
            level: Level::Raidz2,
            vdevs: 2,
            parity: 0,
        }
    );
    let shown = fitting_screen(&w);
    insta::assert_snapshot!("layout_15_zfs", shown);
    let array = w.storage().arrays.remove(0);
    assert_eq!(
        (array.level, array.vdevs, array.spares, array.name.as_str()),
        (Level::Raidz2, Some(2), 1, "tank")
    );
    // A wide raidz1's warning is shown whole: the recommendation then
    // goes without its reason.
    keys(&mut w, &[Up, Up, Up]);
    assert_eq!(w.level_choice(), LevelChoice::one(Level::Raidz1));
    let shown = flat(&fitting_screen(&w));
    assert!(
        shown.contains("Recommended: raidz2. Expected bottleneck")
            && shown.contains("! raidz1 over 14 disks: a second disk failing before the first is rebuilt loses everything; from 6 disks raidz2 (two disks of parity) survives that Filesystem"),
        "{shown}"
    );
    keys(&mut w, &[Down, Down, Down]);

    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
    admin_password(&mut w);
    let plan = w.plan().unwrap();
    let create = nasforge_engine::storage::zpool::create(&plan.arrays[0]);
    let words: Vec<&str> = create.iter().map(String::as_str).collect();
    let at = |w: &str| words.iter().position(|x| *x == w).unwrap();
    assert_eq!(words.iter().filter(|w| **w == "raidz2").count(), 2);
    assert_eq!(at("spare"), words.len() - 2, "{words:?}");
    assert_eq!(
        words[words.len() - 1],
        "/dev/disk/by-id/wwn-0x5000c500b0000007"
    );
}

// An old NAS's array adopted as it is (`i` on one of its disks).

const ADOPT: KeyCode = KeyCode::Char('i');

/// The fixture with sda and sdb members of 'openmediavault:0' holding
/// xfs, and the answers mdadm and blkid give about them.
fn old_raid1() -> (common::Board, Vec<(String, String)>) {
    let board = board();
    for devnum in ["8:0", "8:16"] {
        labelled(&board, devnum, "linux_raid_member", "openmediavault:0");
    }
    let answers = vec![
        (
            "mdadm --examine --export /dev/sda".to_string(),
            omv_member("raid1", 2, "0a0b0c0d:0e0f1011:12131415:16171819"),
        ),
        (
            "mdadm --examine --export /dev/sdb".to_string(),
            omv_member("raid1", 2, "1a0b0c0d:0e0f1011:12131415:16171819"),
        ),
        (
            format!("blkid -p -o value -s TYPE {OMV_PROBE}"),
            "xfs\n".to_string(),
        ),
    ];
    (board, answers)
}

/// As [`wizard_on`] (plainly drawn), with more answers for the commands
/// discovery asks; the commands it ran are returned too.
fn wizard_answering(
    board: &common::Board,
    answers: Vec<(String, String)>,
) -> (Wizard, Vec<String>) {
    let mut runner = RecordingRunner::answering(answers);
    for (disk, json) in [
        ("sda", SMART_PASSED),
        ("sdb", SMART_PASSED),
        ("sdc", SMART_FAILED),
        ("sdd", SMART_PASSED),
    ] {
        runner.responses.push((
            format!("smartctl --json -H -A /dev/{disk}"),
            json.to_string(),
        ));
    }
    let facts = facts::gather(&board.host, &mut runner).unwrap();
    let settings = Settings {
        theme: PLAIN,
        dry_run: false,
        fs_uuid: FS_UUID.into(),
        now: NOW,
    };
    (Wizard::new(facts, settings), runner.lines)
}

#[test]
fn an_old_md_array_is_adopted_as_it_is_and_the_service_plans_the_same() {
    let (board, answers) = old_raid1();
    let (mut w, _) = wizard_answering(&board, answers.clone());
    keys(&mut w, &[Enter]);
    on_disk(&mut w, "sdb", ADOPT);
    let notice = w.notice.clone().unwrap();
    assert!(
        !notice.error
            && notice.text.contains("raid1 'openmediavault:0'")
            && notice.text.contains("Nothing on it is erased"),
        "{notice:?}"
    );
    let shown = screen(&w);
    assert!(
        shown.contains(" [i] sda") && shown.contains(">[i] sdb"),
        "{shown}"
    );
    assert!(
        shown.contains("Adopted: the raid1 array on sda, sdb"),
        "{shown}"
    );
    insta::assert_snapshot!("disks_adopted", shown);

    // One array: nothing is chosen beside it.
    on_disk(&mut w, "sdd", SPACE);
    assert!(w.notice.as_ref().unwrap().error);
    assert!(w.disks.chosen.is_empty());

    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Layout);
    let shown = screen(&w);
    assert!(
        flat(&shown).contains("Adopting the raid1 array as it is:"),
        "{shown}"
    );
    assert!(
        flat(&shown).contains("checks that it still holds the xfs filesystem seen there now"),
        "{shown}"
    );
    insta::assert_snapshot!("layout_adopted", shown);

    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
    admin_password(&mut w);
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let review = flat(&review_text(&w));
    assert!(
        review.contains("the raid1 array 'openmediavault:0' (UUID 3f1c2a4b:5d6e7f80:91a2b3c4:d5e6f708) adopted as it is, 2 of 2 member(s) here, as /dev/md/data, its xfs filesystem mounted at /srv/data; nothing on it is erased"),
        "{review}"
    );
    // No disk is erased, so no name is typed: Enter starts.
    let handoff = start(&mut w);
    let array = &handoff.recipe.storage.as_ref().unwrap().arrays[0];
    assert_eq!(
        (
            array.import,
            array.uuid.as_deref(),
            array.level,
            array.filesystem,
            array.wipe,
            array.disk_match.is_none()
        ),
        (
            true,
            Some("3f1c2a4b:5d6e7f80:91a2b3c4:d5e6f708"),
            Level::Raid1,
            Filesystem::Xfs,
            false,
            true
        )
    );
    adopts_and_builds_nothing(&handoff.steps);

    // nasforge-setup.service runs `--unattended` on the recipe the wizard
    // wrote: it finds the same array and plans exactly what was reviewed.
    let host = &board.host;
    service::start(host, &handoff, &mut RecordingRunner::default()).unwrap();
    let recipe_file = host.path(image_files::WIZARD_RECIPE);
    assert_eq!(DeviceRecipe::load(&recipe_file).unwrap(), handoff.recipe);
    assert_eq!(
        service_plan(host, RecordingRunner::answering(answers)).as_ref(),
        Some(&handoff.plan)
    );
}

#[test]
fn adopting_needs_an_array_and_nothing_chosen_beside_it() {
    let (board, answers) = old_raid1();
    let (mut w, _) = wizard_answering(&board, answers);
    keys(&mut w, &[Enter]);
    on_disk(&mut w, "sdd", ADOPT);
    let notice = w.notice.clone().unwrap();
    assert!(
        notice.error && notice.text.contains("sdd holds no md array or ZFS pool"),
        "{notice:?}"
    );
    on_disk(&mut w, "sdd", SPACE);
    on_disk(&mut w, "sda", ADOPT);
    let notice = w.notice.clone().unwrap();
    assert!(
        notice.error && notice.text.contains("unchoose sdd"),
        "{notice:?}"
    );
    assert!(w.disks.adopted.is_none());
    // Let go with i again, after adopting: a new array may be built.
    on_disk(&mut w, "sdd", SPACE);
    on_disk(&mut w, "sda", ADOPT);
    assert!(w.disks.adopted.is_some());
    on_disk(&mut w, "sdb", ADOPT);
    assert!(w.disks.adopted.is_none());
    assert!(w.storage().arrays.is_empty());
}

#[test]
fn an_array_md_cannot_run_is_shown_refused_before_anything_is_written() {
    let board = board();
    labelled(&board, "8:0", "linux_raid_member", "openmediavault:0");
    let (mut w, ran) = wizard_answering(
        &board,
        vec![(
            "mdadm --examine --export /dev/sda".into(),
            omv_member("raid0", 2, "0a0b0c0d:0e0f1011:12131415:16171819"),
        )],
    );
    assert!(
        ran.iter()
            .all(|c| !c.contains("--assemble") && !c.contains("--create")),
        "{ran:?}"
    );
    keys(&mut w, &[Enter]);
    on_disk(&mut w, "sda", ADOPT);
    keys(&mut w, &[Enter]);
    let shown = flat(&screen(&w));
    assert!(
        shown.contains("! array 'data': cannot be imported: 1 of its 2 members are here (1 missing); raid0 runs with at most 0 missing"),
        "{shown}"
    );
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Layout, "refused plans stay here");
    assert!(w.notice.as_ref().unwrap().error);
}

#[test]
fn an_old_zfs_pool_is_adopted_under_its_own_name_after_a_read_only_look() {
    let board = board();
    common::with_zfs(&board);
    for devnum in ["8:16", "8:32"] {
        labelled(&board, devnum, "zfs_member", "oldtank");
    }
    let probe = "nasforge-probe-5871402329107765531";
    let (mut w, ran) = wizard_answering(
        &board,
        vec![
            (
                "zpool import -d /dev/disk/by-id".into(),
                OLDTANK_LISTING.into(),
            ),
            (
                "zfs get -H -r -t filesystem".into(),
                format!(
                    "{probe}\tmountpoint\t/oldtank\tdefault\n{probe}\tcanmount\ton\tdefault\n{probe}\tencryption\toff\tdefault\n"
                ),
            ),
            ("zpool get -H -o value bootfs".into(), "-\n".into()),
        ],
    );
    // Discovery imported it only read-only, under another name, and
    // exported it again.
    let imports: Vec<&String> = ran
        .iter()
        .filter(|c| c.contains(" import ") || c.starts_with("zpool export"))
        .collect();
    assert_eq!(
        imports,
        [
            "zpool import -d /dev/disk/by-id",
            &format!(
                "zpool import -N -o readonly=on -o cachefile=none -d /dev/disk/by-id -f -t 5871402329107765531 {probe}"
            ),
            &format!("zpool export {probe}"),
        ]
    );
    keys(&mut w, &[Enter]);
    on_disk(&mut w, "sdc", ADOPT);
    assert!(screen(&w).contains("Adopted: the mirror pool on sdb, sdc"));
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Layout);
    assert_eq!(w.layout.mount.value(), "/srv/oldtank");
    let shown = flat(&screen(&w));
    assert!(shown.contains("It keeps its name 'oldtank'"), "{shown}");
    assert!(shown.contains("! "), "the -f warning: {shown}");
    keys(&mut w, &[Enter]);
    assert_eq!(w.screen, Screen::Shares, "{:?}", w.notice);
    admin_password(&mut w);
    keys(&mut w, &[Enter, Enter]);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let handoff = start(&mut w);
    let array = &handoff.recipe.storage.as_ref().unwrap().arrays[0];
    assert_eq!(
        (
            array.name.as_str(),
            array.import,
            array.uuid.as_deref(),
            array.level,
            array.filesystem,
            array.mount.as_str()
        ),
        (
            "oldtank",
            true,
            Some("5871402329107765531"),
            Level::Mirror,
            Filesystem::Zfs,
            "/srv/oldtank"
        )
    );
    let commands: Vec<String> = handoff
        .steps
        .iter()
        .flat_map(|s| s.actions.iter().map(ToString::to_string))
        .collect();
    assert!(
        commands.iter().any(|c| c.contains("zpool import -N -d /dev/disk/by-id -o cachefile=/etc/zfs/zpool.cache -f 5871402329107765531")),
        "{commands:#?}"
    );
    assert!(
        commands
            .iter()
            .all(|c| !c.contains("zpool create") && !c.contains("wipefs")),
        "{commands:#?}"
    );
}
