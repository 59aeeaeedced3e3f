//! The real nasforge-setup binary in a real terminal: tmux gives it an
//! 80×24 pseudo-terminal, keys are sent as a person types them, and the
//! screen is read back with capture-pane. On the Pi 5 fixture, with
//! `--dry-run`, the walk ends on the review screen showing the commands.

use nasforge_testkit::board as common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of our own, on a socket in a temporary directory, so a
/// test never touches a user's sessions and leaves no socket behind;
/// killed on drop, whatever the test did.
struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start(shell_command: &str) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let tmux = Tmux {
            socket: dir.path().join("tmux.sock"),
            _dir: dir,
        };
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "wizard",
            "-x",
            "80",
            "-y",
            "24",
            shell_command,
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux is needed for this test (scripts/setup installs it)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Key names as tmux knows them (Enter, Down, Space, C-u, ...).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "wizard"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "wizard", "-l", text]);
    }

    fn screen(&self) -> String {
        // -J joins lines the terminal wrapped, so long output reads whole.
        self.run(&["capture-pane", "-p", "-J", "-t", "wizard", "-S", "-200"])
    }

    /// Waits (at most 20 s, for a loaded machine) until the screen shows
    /// `needle`, and returns the screen.
    fn wait_for(&self, needle: &str) -> String {
        self.wait_until(&format!("`{needle}`"), |screen| screen.contains(needle))
    }

    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("{what} did not appear; the screen shows:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Pages down the review until `needle` is on the screen.
    fn page_until(&self, needle: &str) -> String {
        for _ in 0..20 {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            self.keys(&["PageDown"]);
            // Let the wizard draw the new page before looking again.
            std::thread::sleep(Duration::from_millis(150));
        }
        self.wait_for(needle)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

#[test]
fn the_binary_walks_to_the_review_screen_and_shows_the_commands() {
    let board = common::writable_copy_with_nodes("pi5-jmb585", "dev-with-data.txt");
    let root = board.host.root.to_str().unwrap();
    // The pane stays after the wizard exits, so its printout can be read.
    let tmux = Tmux::start(&format!(
        "env NO_COLOR=1 LANG=C.UTF-8 {} --root '{root}' --dry-run; echo \"exit status $?\"; exec sleep 600",
        env!("CARGO_BIN_EXE_nasforge-setup")
    ));

    let welcome = tmux.wait_for("1/7 Welcome");
    assert!(
        welcome.contains("JMicron JMB585 at 0001:01:00.0"),
        "{welcome}"
    );
    assert!(welcome.contains("dry run"), "{welcome}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("2/7 Disks");
    // A resized terminal is redrawn at its new size.
    let box_width = |width: usize| {
        move |screen: &str| {
            screen
                .lines()
                .any(|l| l.contains("2/7 Disks") && l.ends_with('┐') && l.chars().count() == width)
        }
    };
    tmux.run(&["resize-window", "-t", "wizard", "-x", "100", "-y", "30"]);
    tmux.wait_until("a 100-column frame", box_width(100));
    tmux.run(&["resize-window", "-t", "wizard", "-x", "80", "-y", "24"]);
    tmux.wait_until("an 80-column frame", box_width(80));
    // sda, sdb, sdc, and sdd (which holds the old "photos" filesystem).
    tmux.keys(&["Space", "Down", "Space", "Down", "Space", "Down", "Space"]);
    tmux.wait_for("Chosen: sda, sdb, sdc, sdd");
    tmux.keys(&["Enter"]);
    let layout = tmux.wait_for("3/7 Layout");
    assert!(layout.contains("> (*) raid5     12 TB"), "{layout}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("4/7 Shares");
    tmux.keys(&["Down", "Down", "Down"]);
    tmux.type_text("s3cret pass");
    tmux.keys(&["Down"]);
    tmux.type_text("s3cret pass");
    let shares = tmux.wait_for("Same again               ***********");
    assert!(!shares.contains("s3cret"), "{shares}");
    tmux.keys(&["Enter"]);
    // The optional alerts screen, left empty: Enter goes on to the review.
    tmux.wait_for("Alerts (optional)");
    tmux.keys(&["Enter"]);

    let review = tmux.wait_for("5/7 Review");
    assert!(
        review.contains("Array 'data': raid5 of 4 disk(s) as /dev/md/data"),
        "{review}"
    );
    assert!(review.contains("Type sdd or its serial"), "{review}");
    let erase = tmux.page_until("[1/20] Erase sdd");
    assert!(
        erase.contains("wipefs --all --force /dev/disk/by-id/wwn-0x50014ee2b0000004"),
        "{erase}"
    );
    let create = tmux.page_until("mdadm --create /dev/md/data");
    assert!(
        create.contains("mdadm --create /dev/md/data --run --homehost=pinas --name=data"),
        "{create}"
    );

    // Enter without the disk's name does nothing; with it, the dry run
    // prints what would run and exits.
    tmux.keys(&["Enter"]);
    tmux.wait_for("nothing is erased without it");
    tmux.type_text("sdd");
    tmux.keys(&["Enter"]);
    tmux.wait_for("sdd will be erased when setup starts");
    tmux.keys(&["Enter"]);
    let printed = tmux.wait_for("exit status");
    assert!(printed.contains("exit status 0"), "{printed}");
    assert!(
        printed.contains("Dry run: nothing was changed"),
        "{printed}"
    );
    assert!(
        printed.contains(
            "serial = \"{WD-WCC7K0000001,WD-WCC7K0000002,WD-WCC7K0000003,WD-WCC7K0000004}\""
        ),
        "{printed}"
    );
    assert!(!printed.contains("s3cret"), "{printed}");
    assert!(
        !board.host.path("/var/lib/nasforge").exists(),
        "a dry run writes nothing"
    );
}
