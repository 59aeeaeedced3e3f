//! The manage view and the wizard's alerts screen, driven with keys and
//! drawn on ratatui's TestBackend: a raid5 of three WD Reds missing its
//! third member, with two disks attached, one too small.

use nasforge_testkit::board as common;

use nasforge_engine::machine::md::SyncProgress;
use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::size::Size;
use nasforge_engine::spec::{Level, Share, Smb};
use nasforge_engine::steps::{Action, Cmd, Guard, Step};
use nasforge_setup::manage::model::{ArrayView, Candidate, DiskView, FilesystemView, Overview};
use nasforge_setup::manage::{
    self, Effect, Erases, ManageAction, ManageScreen, Manager, Msg, Planned, StepEvent,
};
use nasforge_setup::ui::theme::Theme;
use nasforge_setup::wizard::screens::alerts::Field;
use nasforge_setup::wizard::{self, Screen, Settings, Wizard, facts};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const PLAIN: Theme = Theme {
    colour: false,
    ascii: false,
};
use KeyCode::{Down, Enter, Esc};
const SPACE: KeyCode = KeyCode::Char(' ');

fn wd(name: Option<&str>, serial: &str, tb: u64) -> DiskView {
    DiskView {
        name: name.map(str::to_string),
        model: "WDC WD40EFRX".into(),
        serial: serial.into(),
        size: Size(tb * 1_000_000_000_000),
    }
}

fn degraded_raid5() -> Overview {
    Overview {
        arrays: vec![ArrayView {
            name: "data".into(),
            level: Level::Raid5,
            md_device: "/dev/md/data".into(),
            expected: 3,
            working: 2,
            degraded: true,
            sync: None,
            members: vec![
                wd(Some("sda"), "WD-WCC7K0000001", 4),
                wd(Some("sdb"), "WD-WCC7K0000002", 4),
            ],
            failed: vec![],
            missing: vec![wd(None, "WD-WCC7K0000003", 4)],
            candidates: vec![
                Candidate {
                    disk: wd(Some("sdd"), "WD-WCC7K0000004", 4),
                    unfit: None,
                },
                Candidate {
                    disk: DiskView {
                        name: Some("sde".into()),
                        model: "ST2000DM008".into(),
                        serial: "ZFL00005".into(),
                        size: Size(2_000_000_000_000),
                    },
                    unfit: Some("smaller than the members (2 TB < 4 TB)".into()),
                },
            ],
            cannot_grow: None,
        }],
        filesystems: vec![FilesystemView {
            array: "data".into(),
            mount: "/srv/data".into(),
            size: Some(Size(8_000_000_000_000)),
            used: Some(Size(1_200_000_000_000)),
        }],
        shares: vec![Share {
            quota: None,
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
        }],
        users: vec!["admin".into()],
        pending: None,
    }
}

fn manager() -> Manager {
    Manager::new(degraded_raid5(), "pinas".into(), PLAIN, false)
}

fn press(m: &mut Manager, code: KeyCode) -> Effect {
    m.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn typing(m: &mut Manager, text: &str) {
    for c in text.chars() {
        assert_eq!(press(m, KeyCode::Char(c)), Effect::None);
    }
}

fn screen(m: &Manager) -> String {
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    terminal.draw(|frame| manage::draw(frame, m)).unwrap();
    terminal.backend().to_string()
}

/// What an engine would plan for replacing the missing member with sdd,
/// which still holds an old filesystem.
fn replace_plan() -> Planned {
    let cmd = |argv: &[&str]| Action::Run(Cmd::new(argv));
    Planned {
        title: "Replace the missing member of 'data' with sdd".into(),
        text: "'data' (raid5) is missing WDC WD40EFRX (WD-WCC7K0000003).\nsdd (WDC WD40EFRX (WD-WCC7K0000004), 4 TB) is partitioned like sda and added;\nmd then rebuilds onto it while the array stays in use.".into(),
        steps: vec![
            Step {
                id: "partition:sdd".into(),
                title: "Partition sdd like sda".into(),
                guard: Guard::Always,
                actions: vec![cmd(&["sgdisk", "--replicate=/dev/sdd", "/dev/sda"])],
                always: vec![],
            },
            Step {
                id: "add:sdd".into(),
                title: "Add sdd1 to 'data'".into(),
                guard: Guard::Always,
                actions: vec![cmd(&["mdadm", "/dev/md/data", "--add", "/dev/sdd1"])],
                always: vec![],
            },
        ],
        erases: vec![Erases {
            disk: wd(Some("sdd"), "WD-WCC7K0000004", 4),
            holds: "an ext4 filesystem 'photos'".into(),
        }],
    }
}

#[test]
fn the_overview_names_the_missing_member_and_offers_to_replace_it() {
    let m = manager();
    let shown = screen(&m);
    insta::assert_snapshot!("manage_overview_degraded", shown);
    assert!(
        shown.contains("degraded: missing WDC WD40EFRX (WD-WCC7K0000003)")
            && shown.contains("> Replace the failed disk of 'data'"),
        "{shown}"
    );
}

#[test]
fn replace_offers_the_fitting_disk_and_greys_the_small_one_with_its_reason() {
    let mut m = manager();
    press(&mut m, Enter);
    assert_eq!(m.screen, ManageScreen::Replace);
    let shown = screen(&m);
    assert!(
        shown.contains("> sdd WDC WD40EFRX (WD-WCC7K0000004), 4 TB")
            && shown.contains("sde ST2000DM008 (ZFL00005), 2 TB: smaller than the members"),
        "{shown}"
    );
    // The cursor only moves over disks that fit.
    press(&mut m, Down);
    let effect = press(&mut m, Enter);
    assert_eq!(
        effect,
        Effect::Plan(ManageAction::Replace {
            array: "data".into(),
            disk: "sdd".into()
        })
    );
}

#[test]
fn the_replace_review_needs_the_data_disk_typed_before_it_runs() {
    let mut m = manager();
    press(&mut m, Enter);
    let Effect::Plan(action) = press(&mut m, Enter) else {
        panic!("no plan asked for");
    };
    m.update(Msg::Planned(action, Ok(replace_plan())));
    assert_eq!(m.screen, ManageScreen::Review);
    insta::assert_snapshot!("manage_replace_review", screen(&m));

    typing(&mut m, "sda");
    assert_eq!(press(&mut m, Enter), Effect::None, "the wrong disk");
    assert!(m.notice.as_ref().is_some_and(|n| n.error));
    for _ in 0..3 {
        press(&mut m, KeyCode::Backspace);
    }
    typing(&mut m, "WD-WCC7K0000004");
    assert_eq!(press(&mut m, Enter), Effect::None, "confirmed, not yet run");
    assert_eq!(press(&mut m, Enter), Effect::Run);
    assert_eq!(m.screen, ManageScreen::Progress);

    // Ctrl-C does not leave a running operation.
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(m.update(Msg::Key(ctrl_c)), Effect::None);
    m.update(Msg::Step(StepEvent::Starting {
        index: 0,
        total: 2,
        title: "Partition sdd like sda".into(),
    }));
    m.update(Msg::Step(StepEvent::Finished { index: 0 }));
    assert!(screen(&m).contains("1 of 2 steps done"));
    m.update(Msg::Finished(Ok(())));
    assert_eq!(press(&mut m, Enter), Effect::Refresh);
    assert_eq!(m.screen, ManageScreen::Overview);
}

#[test]
fn a_rebuild_shows_its_percent_and_estimate_and_offers_no_second_replace() {
    let mut overview = degraded_raid5();
    overview.arrays[0].sync = Some(SyncProgress {
        action: "recover".into(),
        percent: 45.0,
        minutes_left: Some(2.4),
    });
    let m = Manager::new(overview, "pinas".into(), PLAIN, false);
    let shown = screen(&m);
    assert!(
        shown.contains("rebuilding 45% (about 3 min left)") && !shown.contains("Replace"),
        "{shown}"
    );
}

#[test]
fn a_level_that_cannot_grow_says_why() {
    let mut overview = degraded_raid5();
    overview.arrays[0].degraded = false;
    overview.arrays[0].level = Level::Raid10;
    overview.arrays[0].cannot_grow =
        Some("raid10 arrays cannot be reshaped to more disks here".into());
    let mut m = Manager::new(overview, "pinas".into(), PLAIN, false);
    press(&mut m, Enter);
    assert_eq!(m.screen, ManageScreen::Grow);
    assert!(screen(&m).contains("It cannot grow: raid10 arrays cannot be reshaped"));
    assert_eq!(press(&mut m, SPACE), Effect::None);
    assert_eq!(m.screen, ManageScreen::Overview);
}

#[test]
fn a_zfs_pool_grows_by_whole_vdevs_from_the_chosen_disks() {
    let mut overview = degraded_raid5();
    overview.arrays[0].degraded = false;
    overview.arrays[0].working = 3;
    overview.arrays[0].missing.clear();
    overview.arrays[0].level = Level::Raidz1;
    let mut m = Manager::new(overview, "pinas".into(), PLAIN, false);
    press(&mut m, Enter);
    assert_eq!(m.screen, ManageScreen::Grow);
    assert!(
        screen(&m).contains("ZFS grows a pool by whole vdevs of its shape"),
        "{}",
        screen(&m)
    );
    press(&mut m, SPACE);
    let Effect::Plan(ManageAction::Grow { array, disks }) = press(&mut m, Enter) else {
        panic!("{:?}", m.notice);
    };
    assert_eq!((array.as_str(), disks), ("data", vec!["sdd".to_string()]));
}

#[test]
fn shares_hand_over_the_whole_new_list() {
    let mut m = manager();
    for _ in 0..2 {
        press(&mut m, Down);
    }
    press(&mut m, Enter);
    assert_eq!(m.screen, ManageScreen::Shares);
    press(&mut m, Down);
    typing(&mut m, "media");
    press(&mut m, Down);
    press(&mut m, Down);
    typing(&mut m, "bob");
    assert_eq!(press(&mut m, Enter), Effect::None);
    assert!(
        m.notice
            .as_ref()
            .unwrap()
            .text
            .contains("There is no user 'bob'")
    );
    for _ in 0..3 {
        press(&mut m, KeyCode::Backspace);
    }
    typing(&mut m, "admin");
    let Effect::Plan(ManageAction::Shares(list)) = press(&mut m, Enter) else {
        panic!("{:?}", m.notice);
    };
    let names: Vec<(&str, &str)> = list
        .iter()
        .map(|s| (s.name.as_str(), s.path.as_str()))
        .collect();
    assert_eq!(names, [("data", "/srv/data"), ("media", "/srv/data/media")]);
}

#[test]
fn a_password_change_needs_the_same_password_twice() {
    let mut m = manager();
    for _ in 0..3 {
        press(&mut m, Down);
    }
    press(&mut m, Enter);
    assert_eq!(m.screen, ManageScreen::Users);
    press(&mut m, Down);
    typing(&mut m, "admin");
    press(&mut m, Down);
    typing(&mut m, "new secret");
    press(&mut m, Down);
    typing(&mut m, "new secrte");
    assert_eq!(press(&mut m, Enter), Effect::None);
    assert!(m.notice.as_ref().unwrap().text.contains("differ"));
    assert!(!screen(&m).contains("new secret"), "masked");
    for _ in 0..2 {
        press(&mut m, KeyCode::Backspace);
    }
    typing(&mut m, "et");
    let Effect::Plan(action) = press(&mut m, Enter) else {
        panic!("{:?}", m.notice);
    };
    assert!(
        matches!(&action, ManageAction::SetPassword { name, password } if name == "admin" && password.0 == "new secret")
    );
    assert!(
        !format!("{action:?}").contains("new secret"),
        "Debug hides it"
    );
}

/// The setup wizard on the Pi 5 fixture, at the alerts screen.
fn wizard_at_alerts(board: &common::Board) -> Wizard {
    let facts = facts::gather(&board.host, &mut RecordingRunner::default()).unwrap();
    let mut w = Wizard::new(
        facts,
        Settings {
            theme: PLAIN,
            dry_run: false,
            fs_uuid: "0b6c0fb3-6d0e-4a4e-9a55-7a1d9d9b2f10".into(),
            now: 1_764_460_800,
        },
    );
    w.screen = Screen::Alerts;
    w
}

fn wkey(w: &mut Wizard, code: KeyCode) {
    w.update(wizard::Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

fn wtype(w: &mut Wizard, text: &str) {
    for c in text.chars() {
        wkey(w, KeyCode::Char(c));
    }
}

fn wscreen(w: &Wizard) -> String {
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    terminal.draw(|frame| wizard::draw(frame, w)).unwrap();
    terminal.backend().to_string()
}

#[test]
fn the_alerts_screen_refuses_email_without_a_relay_and_says_so() {
    let board = common::writable_copy_with_nodes("pi5-jmb585", "dev-with-data.txt");
    let mut w = wizard_at_alerts(&board);
    wtype(&mut w, "me@example.com");
    wkey(&mut w, Enter);
    assert_eq!(w.screen, Screen::Alerts);
    assert_eq!(w.alerts.focus, Field::Host);
    insta::assert_snapshot!("alerts_refused", wscreen(&w));

    wtype(&mut w, "smtp.example.com");
    wkey(&mut w, Down);
    wkey(&mut w, Down);
    wkey(&mut w, SPACE);
    for _ in 0..3 {
        wkey(&mut w, Down);
    }
    wtype(&mut w, "hunter2");
    assert!(!wscreen(&w).contains("hunter2"), "masked");
    wkey(&mut w, Down);
    wtype(&mut w, "example.com/hook");
    wkey(&mut w, Enter);
    assert_eq!(w.alerts.focus, Field::Webhook);
    assert!(
        w.notice
            .as_ref()
            .unwrap()
            .text
            .contains("is not a web address")
    );
    wkey(&mut w, KeyCode::Home);
    wtype(&mut w, "https://");
    wkey(&mut w, Enter);
    assert_eq!(w.screen, Screen::Review, "{:?}", w.notice);
    let choices = w.alerts.choices().unwrap().unwrap();
    let smtp = choices.smtp.as_ref().unwrap();
    assert_eq!(
        (smtp.port(), smtp.tls.word()),
        (465, "tls"),
        "the port follows TLS"
    );
    assert_eq!(choices.webhook.as_deref(), Some("https://example.com/hook"));
    wkey(&mut w, Esc);
    assert_eq!(w.screen, Screen::Alerts);
}

#[test]
fn an_empty_alerts_screen_is_skipped() {
    let board = common::writable_copy_with_nodes("pi5-jmb585", "dev-with-data.txt");
    let mut w = wizard_at_alerts(&board);
    wkey(&mut w, Enter);
    assert_eq!(w.screen, Screen::Review);
    assert_eq!(w.alerts.choices(), Ok(None));
}
