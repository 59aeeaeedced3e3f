//! Wizard mode's way in, with the real tools: agetty renders the login
//! screen's note, and the profile snippet runs in a pseudo-terminal
//! (util-linux's `script`) as an unprivileged account made a member of
//! `sudo` with `setpriv`, so the host's real sudo asks for its password.
//! Nothing here may start the wizard without a password.

use nasforge_testkit::stdin;

use nasforge_engine::image_files::{ENABLE_WIZARD, FILES, SETUP_BINARY};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use stdin::spawn_with_stdin;

fn installed(path: &str) -> &'static str {
    FILES.iter().find(|f| f.path == path).unwrap().contents
}

const SNIPPET: &str = "/etc/profile.d/nasforge-setup.sh";
/// What the hint says at every login while setup is pending.
const HINT: &str = "run 'sudo nasforge-setup'";
const NOBODY: &str = "65534";
/// Debian's `sudo` group, which its /etc/sudoers lets run anything.
const SUDO_GID: &str = "27";

/// A stand-in board: the snippet with its paths moved into a temporary
/// directory that `nobody` can read, and a "wizard" that leaves a mark
/// when something runs it.
struct Board {
    dir: tempfile::TempDir,
}

impl Board {
    /// `console` is the pattern the snippet takes for a console login;
    /// given, it replaces it, so a pseudo-terminal stands in for tty1.
    fn new(pending: bool, console: Option<&str>) -> Board {
        let dir = tempfile::tempdir().unwrap();
        let board = Board { dir };
        chmod(board.dir.path(), 0o755);
        let mut text = installed(SNIPPET).to_string();
        for (from, to) in [
            (ENABLE_WIZARD.0, board.path("pending.issue")),
            (SETUP_BINARY, board.path("wizard")),
        ] {
            assert!(text.contains(from), "{from} not in the snippet");
            text = text.replace(from, to.to_str().unwrap());
        }
        if let Some(pattern) = console {
            let from = "/dev/tty*\" sudo \"*";
            assert!(text.contains(from), "{text}");
            text = text.replace(from, &format!("{pattern}\" sudo \"*"));
        }
        std::fs::write(board.path("snippet.sh"), text).unwrap();
        chmod(&board.path("snippet.sh"), 0o644);
        let ran = board.path("wizard-ran");
        std::fs::write(
            board.path("wizard"),
            format!("#!/bin/sh\nid -u > {}\n", ran.display()),
        )
        .unwrap();
        chmod(&board.path("wizard"), 0o755);
        if pending {
            std::fs::write(board.path("pending.issue"), "pending\n").unwrap();
        }
        board
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Who ran the wizard, if anyone did.
    fn wizard_ran_as(&self) -> Option<String> {
        std::fs::read_to_string(self.path("wizard-ran"))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// A login shell's start in a pseudo-terminal, as `setpriv` makes the
    /// account (`uid` None: root) with `groups`, typing `typed`. Returns
    /// what the terminal showed.
    fn login(&self, uid: Option<&str>, groups: &str, env: &str, typed: &str) -> String {
        let user = uid.map_or(String::new(), |u| format!("--reuid={u} --regid={u} "));
        let shell = format!(
            "setpriv {user}--groups={groups} --reset-env env {env} sh -ic '. {}; echo login-shell-goes-on'",
            self.path("snippet.sh").display()
        );
        let out = spawn_with_stdin(
            Command::new("timeout")
                .args(["60", "script", "-qec", &shell, "/dev/null"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
            typed,
        )
        .wait_with_output()
        .unwrap();
        let shown = String::from_utf8_lossy(&out.stdout).replace('\r', "");
        assert!(
            out.status.success(),
            "{shell}: {shown}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(shown.contains("login-shell-goes-on"), "{shown}");
        shown
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// setpriv needs root: the tests that use it are `#[ignore]`d, so a run
/// without root reports them skipped; scripts/test includes them when it
/// runs as root, as CI does. Run anyway without root, they fail saying why.
fn need_root() {
    assert!(
        unsafe { libc::geteuid() } == 0,
        "needs root to change to another account: scripts/test runs it as root, as CI does"
    );
}

#[test]
fn the_snippet_is_valid_sh_and_bash() {
    for shell in ["sh", "bash"] {
        let out = Command::new(shell)
            .args(["-n", "-c", installed(SNIPPET)])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// agetty prints the issue.d entries with its escapes expanded: the note
/// comes out as written while the link is there, and not at all once
/// setup has removed it.
#[test]
fn the_login_screen_shows_the_note_only_while_setup_is_pending() {
    let dir = tempfile::tempdir().unwrap();
    let issue_d = dir.path().join("issue.d");
    std::fs::create_dir(&issue_d).unwrap();
    let note = dir.path().join("setup-pending.issue");
    std::fs::write(&note, installed(ENABLE_WIZARD.1)).unwrap();
    let link = issue_d.join(Path::new(ENABLE_WIZARD.0).file_name().unwrap());
    let screen = || {
        let out = Command::new("script")
            .arg("-qec")
            .arg(format!(
                "agetty --show-issue --issue-file {}",
                issue_d.display()
            ))
            .arg("/dev/null")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).replace('\r', "")
    };
    std::os::unix::fs::symlink(&note, &link).unwrap();
    let shown = screen();
    assert_eq!(shown.trim_end(), installed(ENABLE_WIZARD.1).trim_end());
    assert!(shown.contains("`sudo nasforge-setup`"), "{shown}");
    std::fs::remove_file(&link).unwrap();
    assert_eq!(screen().trim(), "");
}

#[test]
fn only_a_login_shell_while_setup_is_pending_gets_the_hint() {
    let run = |board: &Board, flags: &str| {
        let out = Command::new("sh")
            .arg(flags)
            .arg(format!(". {}", board.path("snippet.sh").display()))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let done = Board::new(false, None);
    assert_eq!(run(&done, "-ic"), "", "nothing once setup is done");
    let pending = Board::new(true, None);
    assert_eq!(run(&pending, "-c"), "", "nothing for a script");
    let shown = run(&pending, "-ic");
    assert_eq!(shown.lines().count(), 1, "{shown}");
    assert!(shown.contains(HINT), "{shown}");
    assert_eq!(pending.wizard_ran_as(), None, "no terminal, no wizard");
}

/// A login over SSH has a pseudo-terminal: the hint, no wizard, not even
/// a password prompt, for a member of `sudo` too.
#[test]
#[ignore = "needs root to change to another account: scripts/test runs it as root, as CI does"]
fn an_ssh_login_gets_only_the_hint() {
    need_root();
    let board = Board::new(true, None);
    let shown = board.login(Some(NOBODY), SUDO_GID, "", "");
    assert!(shown.contains(HINT), "{shown}");
    assert!(!shown.contains("[sudo]"), "{shown}");
    assert_eq!(board.wizard_ran_as(), None);
}

/// On the console (a pseudo-terminal stands in for tty1 here) the wizard
/// starts through sudo, which asks for the password: a wrong one gets no
/// wizard and the login goes on. Root (sudo asks root nothing) shows the
/// same path does run the wizard, as root.
#[test]
#[ignore = "needs root to change to another account: scripts/test runs it as root, as CI does"]
fn a_console_login_starts_the_wizard_only_through_sudo() {
    need_root();
    let board = Board::new(true, Some("/dev/pts/*"));
    let shown = board.login(Some(NOBODY), SUDO_GID, "", "wrong\nwrong\nwrong\n");
    assert!(shown.contains(HINT), "{shown}");
    assert!(shown.contains("[sudo] password for nobody"), "{shown}");
    assert!(shown.contains("incorrect password"), "{shown}");
    assert_eq!(board.wizard_ran_as(), None, "{shown}");

    let shown = board.login(None, SUDO_GID, "", "");
    assert_eq!(board.wizard_ran_as().as_deref(), Some("0"), "{shown}");
}

#[test]
#[ignore = "needs root to change to another account: scripts/test runs it as root, as CI does"]
fn the_console_starts_the_wizard_once_per_login_and_only_for_sudo_members() {
    need_root();
    let board = Board::new(true, Some("/dev/pts/*"));
    let shown = board.login(None, SUDO_GID, "NASFORGE_SETUP_OFFERED=1", "");
    assert!(shown.contains(HINT), "{shown}");
    assert_eq!(board.wizard_ran_as(), None, "a shell inside the same login");
    let shown = board.login(Some(NOBODY), NOBODY, "", "");
    assert!(shown.contains(HINT), "{shown}");
    assert!(!shown.contains("[sudo]"), "not a member of sudo: {shown}");
    assert_eq!(board.wizard_ran_as(), None);
}
