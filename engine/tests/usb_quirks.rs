//! Setup keeps USB bridges off UAS before it creates anything: on the Pi 4
//! fixture with a JMicron JMS566 on `uas` (on the problem list), setup
//! plans the kernel command line first, writes cmdline.txt, records the
//! reboot in the journal and asks for it, then after the reboot goes on
//! with the storage steps, or refuses once if the quirk is still not in
//! effect.

use nasforge_testkit::board as common;

use nasforge_engine::command::{Ask, Query, SpawnError};
use nasforge_engine::executor::{self, Ended, Event, ExecError};
use nasforge_engine::journal::{self, Journal};
use nasforge_engine::machine::disks::Host;
use nasforge_engine::machine::usb::ACTIVE_QUIRKS;
use nasforge_engine::runner::{RecordingRunner, RunError, Runner, SystemRunner};
use nasforge_engine::setup::{self, Prepared, SetupError};
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::steps::{Action, Cmd};
use std::path::Path;
use std::time::Duration;

const CMDLINE: &str = "/boot/firmware/cmdline.txt";
const PIOS: &str = "console=serial0,115200 console=tty1 root=PARTUUID=1234abcd-02 rootfstype=ext4 fsck.repair=yes rootwait\n";

/// The board as setup changes it: files are written under the fake root,
/// commands (the reboot among them) are only recorded.
struct FakeBoard {
    files: SystemRunner,
    commands: RecordingRunner,
}

impl FakeBoard {
    fn new(host: &Host) -> FakeBoard {
        let mut files = SystemRunner::new(host.clone(), None).unwrap();
        files.echo = false;
        FakeBoard {
            files,
            commands: RecordingRunner::default(),
        }
    }
}

impl Runner for FakeBoard {
    fn apply(&mut self, action: &Action) -> Result<(), RunError> {
        if let Action::WriteFile { .. } = action {
            self.files.apply(action)?;
        }
        self.commands.apply(action)
    }

    fn wait(&mut self, duration: Duration) {
        self.commands.wait(duration)
    }
}

impl Ask for FakeBoard {
    fn query(&mut self, cmd: &Cmd) -> Result<Query, SpawnError> {
        self.commands.query(cmd)
    }
}

fn write(host: &Host, path: &str, text: &str) {
    let p = host.path(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn recipe(quirks: &str) -> DeviceRecipe {
    DeviceRecipe::parse(
        &format!(
            r#"[storage]
mode = "unattended"
{quirks}
[[storage.arrays]]
name = "docs"
level = "raid1"
disks = {{ transport = "usb", count = 2 }}
filesystem = "ext4"
mount = "/srv/docs"
"#
        ),
        Path::new("nasforge.toml"),
    )
    .unwrap()
}

fn prepare(host: &Host, recipe: &DeviceRecipe, notes: &mut Vec<String>) -> Prepared {
    setup::prepare(
        host,
        Path::new("nasforge.toml"),
        recipe,
        &mut RecordingRunner::default(),
        &mut |n| notes.push(n.to_string()),
    )
    .unwrap()
}

/// A Pi 4 running Raspberry Pi OS in its first boot (boot id `boot-1`).
fn pi4() -> common::Board {
    let board = common::writable_copy("pi4-usb-bridges");
    write(&board.host, CMDLINE, PIOS);
    write(&board.host, journal::BOOT_ID, "boot-1\n");
    board
}

/// The board comes back from a reboot: a new boot id, and usb-storage's
/// parameter as the kernel now has it.
fn reboot(host: &Host, boot: &str, quirks: &str) {
    write(host, journal::BOOT_ID, &format!("{boot}\n"));
    write(host, ACTIVE_QUIRKS, quirks);
}

/// The first run: the quirk step, and nothing after it.
fn first_run(host: &Host, recipe: &DeviceRecipe) -> (Journal, std::path::PathBuf, FakeBoard) {
    let mut notes = Vec::new();
    let prepared = prepare(host, recipe, &mut notes);
    assert_eq!(prepared.steps[0].id, "usb-quirks");
    assert!(
        notes.iter().any(|n| n.starts_with("USB: sda's bridge JMicron JMS566 (357d:7788) is driven by uas and misbehaves under it (source: Linux drivers/usb/storage/unusual_uas.h")),
        "{notes:#?}"
    );
    assert!(
        notes.contains(&format!("USB: {}", setup::REBOOT_NOTE)),
        "{notes:#?}"
    );
    let path = nasforge_engine::journal::path(host);
    let mut journal = Journal::new(
        recipe.clone(),
        prepared.context,
        prepared.plan,
        prepared.steps,
    );
    journal.save(&path).unwrap();
    let mut board = FakeBoard::new(host);
    let ended = executor::execute(&mut journal, &path, host, &mut board, &mut |_| {}).unwrap();
    assert!(
        matches!(&ended, Ended::Rebooting { index: 0, why } if why.contains("JMicron JMS566")),
        "{ended:?}"
    );
    (journal, path, board)
}

#[test]
fn a_listed_bridge_on_uas_gets_its_quirk_and_one_reboot_before_anything_is_created() {
    let board = pi4();
    let host = &board.host;
    let (_, path, runner) = first_run(host, &recipe(""));

    assert_eq!(
        std::fs::read_to_string(host.path(CMDLINE)).unwrap(),
        PIOS.replace("rootwait\n", "rootwait usb-storage.quirks=357d:7788:u\n")
    );
    let lines = &runner.commands.lines;
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].starts_with(&format!("# write {CMDLINE}")),
        "{lines:#?}"
    );
    assert_eq!(lines[1], "systemctl reboot", "the reboot is the last thing");

    // The journal on the card says so: no step done, the reboot asked for
    // in boot-1 by the quirk step.
    let saved = Journal::load(&path).unwrap().unwrap();
    assert!(saved.done.is_empty());
    let asked = saved.reboot.as_ref().unwrap();
    assert_eq!(
        (asked.step.as_str(), asked.index, asked.boot_id.as_deref()),
        ("usb-quirks", 0, Some("boot-1"))
    );
    assert!(asked.why.contains("usb-storage.quirks=357d:7788:u"));

    // After the reboot the kernel has it: the step is done and setup goes
    // on to the disks.
    reboot(host, "boot-2", "357d:7788:u\n");
    let mut journal = saved;
    let mut after = FakeBoard::new(host);
    let mut already = Vec::new();
    let ended = executor::execute(&mut journal, &path, host, &mut after, &mut |e| {
        if let Event::AlreadyDone { index, reason } = e {
            already.push((index, reason.to_string()));
        }
    })
    .unwrap();
    assert_eq!(ended, Ended::Finished);
    assert_eq!(
        already[0],
        (
            0,
            "the kernel runs with usb-storage.quirks=357d:7788:u".into()
        )
    );
    assert!(
        after
            .commands
            .lines
            .iter()
            .any(|l| l.contains("protective MBR + GPT")),
        "{:#?}",
        after.commands.lines
    );
    assert!(!after.commands.lines.iter().any(|l| l == "systemctl reboot"));
    let done = Journal::load(&path).unwrap().unwrap();
    assert!(done.is_complete());
    assert_eq!(done.done[0].id, "usb-quirks");
    assert!(
        done.reboot.is_some(),
        "the journal keeps why the board rebooted"
    );
}

#[test]
fn a_reboot_that_did_not_bring_the_quirk_is_refused_not_repeated() {
    let board = pi4();
    let host = &board.host;
    let (journal, path, _) = first_run(host, &recipe(""));

    reboot(host, "boot-2", "\n");
    let mut journal = journal;
    let mut after = FakeBoard::new(host);
    let err = executor::execute(&mut journal, &path, host, &mut after, &mut |_| {}).unwrap_err();
    let ExecError::Refused {
        index: 0,
        id,
        reason,
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(id, "usb-quirks");
    assert!(
        reason.contains("the board rebooted for it")
            && reason.contains("boot boot-1; this is boot boot-2")
            && reason.contains(&format!(
                "nasforge wrote usb-storage.quirks=357d:7788:u to {CMDLINE} (which still has it), but /sys/module/usb_storage/parameters/quirks is \"\""
            ))
            && reason.contains("rather than reboot again"),
        "{reason}"
    );
    assert!(
        after.commands.lines.is_empty(),
        "nothing ran: {:#?}",
        after.commands.lines
    );
    let saved = Journal::load(&path).unwrap().unwrap();
    assert_eq!(saved.failure.as_ref().unwrap().step, "usb-quirks");

    // Once someone puts the quirk where the boot reads it, setup goes on.
    reboot(host, "boot-3", "357d:7788:u\n");
    let mut journal = saved;
    executor::execute(
        &mut journal,
        &path,
        host,
        &mut FakeBoard::new(host),
        &mut |_| {},
    )
    .unwrap();
    assert!(journal.is_complete() && journal.failure.is_none());
}

#[test]
fn setup_started_again_before_the_reboot_happened_asks_for_it_again() {
    let board = pi4();
    let host = &board.host;
    let (journal, path, _) = first_run(host, &recipe(""));
    let mut journal = journal;
    let mut again = FakeBoard::new(host);
    let ended = executor::execute(&mut journal, &path, host, &mut again, &mut |_| {}).unwrap();
    assert!(matches!(ended, Ended::Rebooting { index: 0, .. }));
    assert_eq!(again.commands.lines.len(), 2, "{:#?}", again.commands.lines);
    assert_eq!(again.commands.lines[1], "systemctl reboot");
    assert_eq!(
        std::fs::read_to_string(host.path(CMDLINE)).unwrap(),
        PIOS.replace("rootwait\n", "rootwait usb-storage.quirks=357d:7788:u\n"),
        "written the same way twice"
    );
}

#[test]
fn a_quirk_already_active_needs_no_step_and_no_reboot() {
    let board = pi4();
    let host = &board.host;
    write(host, ACTIVE_QUIRKS, "357d:7788:u,46f4:0001:u\n");
    let mut notes = Vec::new();
    let prepared = prepare(host, &recipe("usb_quirks = [\"46f4:0001\"]"), &mut notes);
    assert!(prepared.steps.iter().all(|s| s.id != "usb-quirks"));
    assert!(!prepared.steps.iter().any(|s| s.reboots()));
    assert!(
        !notes.iter().any(|n| n.contains("reboots once")),
        "{notes:#?}"
    );
}

#[test]
fn a_recipe_quirk_is_written_beside_the_listed_one_and_dry_run_shows_the_reboot() {
    let board = pi4();
    let host = &board.host;
    let mut notes = Vec::new();
    let prepared = prepare(host, &recipe("usb_quirks = [\"46f4:0001\"]"), &mut notes);
    assert!(notes.contains(&"USB: 46f4:0001 is named in [storage] usb_quirks".to_string()));
    let dry = executor::dry_run(&prepared.steps);
    let first: Vec<&str> = dry.lines().take(4).collect();
    assert!(
        first[0].starts_with(&format!(
            "[1/{}] Keep USB bridges off UAS: usb-storage.quirks=46f4:0001:u,357d:7788:u on the kernel command line, then reboot once before anything is created (46f4:0001 is named in [storage] usb_quirks; sda's bridge JMicron JMS566",
            prepared.steps.len()
        )),
        "{dry}"
    );
    assert_eq!(first[1], format!("  # write {CMDLINE} (mode 644):"));
    assert_eq!(
        first[2],
        format!(
            "    | {}",
            PIOS.trim_end().to_string() + " usb-storage.quirks=46f4:0001:u,357d:7788:u"
        )
    );
    assert_eq!(first[3], "  systemctl reboot");
}

#[test]
fn a_recipe_quirk_this_board_cannot_take_stops_setup_before_anything_is_written() {
    let board = pi4();
    let host = &board.host;
    std::fs::remove_file(host.path(CMDLINE)).unwrap();
    let err = setup::prepare(
        host,
        Path::new("nasforge.toml"),
        &recipe("usb_quirks = [\"46f4:0001\"]"),
        &mut RecordingRunner::default(),
        &mut |_| {},
    )
    .err()
    .unwrap();
    assert!(matches!(err, SetupError::UsbQuirks(_)), "{err}");
    assert!(
        err.to_string().starts_with("[storage] usb_quirks: cannot keep USB bridges off UAS: this board has no /boot/firmware/cmdline.txt or /boot/armbianEnv.txt")
            && err.to_string().ends_with("nothing was changed"),
        "{err}"
    );

    // Only the listed bridge's: a warning, and setup goes on without it.
    let mut notes = Vec::new();
    let prepared = prepare(host, &recipe(""), &mut notes);
    assert!(prepared.steps.iter().all(|s| s.id != "usb-quirks"));
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("warning: cannot keep USB bridges off UAS")),
        "{notes:#?}"
    );
}
