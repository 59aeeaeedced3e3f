//! USB disks and the board's power as a person sees them: the wizard's
//! disks screen and `nasforge-setup status --json`, on the Pi 4 fixture
//! with a JMicron, an ASMedia and a VIA bridge and an under-voltage flag.

use nasforge_testkit::board as common;

use nasforge_engine::runner::RecordingRunner;
use nasforge_setup::ui::theme::Theme;
use nasforge_setup::wizard::{self, Msg, Screen, Settings, Wizard, facts};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::process::Command;

fn wizard_on(board: &common::Board) -> Wizard {
    let facts = facts::gather(&board.host, &mut RecordingRunner::default()).unwrap();
    Wizard::new(
        facts,
        Settings {
            theme: Theme {
                colour: false,
                ascii: false,
            },
            dry_run: false,
            fs_uuid: "0b6c0fb3-6d0e-4a4e-9a55-7a1d9d9b2f10".into(),
            now: 1_764_460_800,
        },
    )
}

fn press(w: &mut Wizard, code: KeyCode) {
    w.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// The screen as text with its lines joined, so wrapped sentences read whole.
fn flat_screen(w: &Wizard, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| wizard::draw(frame, w)).unwrap();
    let buffer = terminal.backend().buffer();
    let rows: Vec<String> = (0..height)
        .map(|y| {
            (0..width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
                .trim_matches(|c: char| c == '│' || c.is_whitespace())
                .to_string()
        })
        .collect();
    rows.join(" ")
}

#[test]
fn the_disks_screen_warns_about_power_and_names_each_bridge() {
    let board = common::writable_copy("pi4-usb-bridges");
    let mut w = wizard_on(&board);
    press(&mut w, KeyCode::Enter);
    assert_eq!(w.screen, Screen::Disks);

    let text = flat_screen(&w, 80, 24);
    assert!(
        text.contains(
            "! 2 USB hard disks (sda, sdb) draw their power from the board's own USB ports"
        ),
        "{text}"
    );
    assert!(
        text.contains("Use a powered hub or disks with their own supply."),
        "{text}"
    );
    assert!(
        text.contains("! The board is under-voltage now (get_throttled 0x50005)"),
        "{text}"
    );
    assert!(
        text.contains("usb 5 Gbit/s, uas, JMicron JMS566 357d:7788 — on the UAS problem list"),
        "the cursor disk's details: {text}"
    );
    for name in ["sda", "sdb", "sdc", "mmcblk0"] {
        assert!(text.contains(name), "{name} is still listed: {text}");
    }

    press(&mut w, KeyCode::Down);
    press(&mut w, KeyCode::Down);
    let text = flat_screen(&w, 80, 24);
    assert!(
        text.contains("usb 480 Mbit/s, usb-storage, 2109:0715,"),
        "sdc's details: {text}"
    );
    assert!(!text.contains("problem list"), "{text}");
}

#[test]
fn a_board_with_sound_power_shows_no_warning() {
    let board = common::writable_copy("pi4-usb-bridges");
    std::fs::write(
        board
            .host
            .path(nasforge_engine::machine::power::GET_THROTTLED),
        "0\n",
    )
    .unwrap();
    // Only one bus-powered spinning disk left on the board's ports.
    std::fs::remove_file(board.host.path("/sys/block/sdb")).unwrap();
    let mut w = wizard_on(&board);
    press(&mut w, KeyCode::Enter);
    let text = flat_screen(&w, 80, 24);
    assert!(!text.contains('!'), "{text}");
}

#[test]
fn status_json_carries_the_bridges_and_the_power_warnings() {
    let board = common::writable_copy("pi4-usb-bridges");
    std::fs::create_dir_all(board.host.path("/boot/firmware")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .args(["status", "--json", "--root"])
        .arg(&board.host.root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let usb = json["usb_disks"].as_array().unwrap();
    let ids: Vec<(&str, &str, &str)> = usb
        .iter()
        .map(|u| {
            (
                u["disk"].as_str().unwrap(),
                u["id"].as_str().unwrap(),
                u["bridge"]["driver"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("sda", "357d:7788", "uas"),
            ("sdb", "174c:55aa", "uas"),
            ("sdc", "2109:0715", "usb-storage")
        ]
    );
    assert_eq!(usb[0]["uas_problem"], "JMicron JMS566");
    assert_eq!(usb[0]["quirk_active"], false);
    assert!(usb[1]["uas_problem"].is_null());
    assert_eq!(usb[2]["bridge"]["behind_powered_hub"], true);
    assert_eq!(json["power"]["throttled"], 0x50005);
    let warnings = json["power"]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 2, "{warnings:?}");

    let text =
        std::fs::read_to_string(board.host.path("/boot/firmware/nasforge-status.txt")).unwrap();
    assert!(text.contains("USB disks:\n  sda: 357d:7788"), "{text}");
}
