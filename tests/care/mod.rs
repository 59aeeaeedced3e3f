//! Care after first boot on the emulated board (issue 15), chained on the
//! boot where a member disk is missing: the degraded array's alerts reach a
//! mail and a web hook sink on the host, a blank disk replaces the missing
//! member, the array grows onto a second blank disk through a power cut in
//! its reshape, and a share added to nasforge.toml is applied, once a link
//! a share's user planted where its folder goes has stopped the apply.

mod board;
mod sinks;

use super::common::printed;
use super::{Board, GIB, Phases, boot_file_now, smb_get, smbclient};
use board::{by_id, fail, poll, ssh_run};
use sinks::{Http, Request, Smtp};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const SMTP_USER: &str = "nas";
/// Kept root-only on the board's root filesystem, never on the card.
pub const SMTP_PASSWORD: &str = "e2e-smtp-secret-root-only";
/// Where the recipe sends mail, and who it comes from.
const MAIL_TO: &str = "admin@example.com";
const MAIL_FROM: &str = "nas@example.com";
const GROW_UNIT: &str = "nasforge-grow-test";
/// What the board's journal is searched for when an alert does not come.
const ALERT_LOG: &str = "alert|msmtp|sendmail|mdadm|mdmonitor|nasforge";
const MD_LOG: &str = "nasforge|mdadm|md127|md/data|resize2fs|raid";

/// The host's SMTP and HTTP sinks, bound before the image is built so the
/// recipe can name their ports.
pub struct Sinks {
    pub smtp: Smtp,
    pub http: Http,
}

/// How much each sink had received at some moment.
#[derive(Clone, Copy)]
pub struct Mark {
    mails: usize,
    sessions: usize,
    requests: usize,
}

impl Sinks {
    pub fn start() -> Sinks {
        Sinks {
            smtp: Smtp::start(),
            http: Http::start(),
        }
    }

    pub fn mark(&self) -> Mark {
        Mark {
            mails: self.smtp.mails.len(),
            sessions: self.smtp.sessions.len(),
            requests: self.http.requests.len(),
        }
    }

    /// The recipe's `[alerts]`, pointing at the sinks where the board
    /// finds the host: qemu's user-network gateway.
    pub fn recipe(&self) -> String {
        format!(
            r#"[alerts]
email = "{MAIL_TO}"
webhook = "http://10.0.2.2:{}/hook"
[alerts.smtp]
host = "10.0.2.2"
port = {}
tls = "off"
from = "{MAIL_FROM}"
user = "{SMTP_USER}"
password = "{SMTP_PASSWORD}"
"#,
            self.http.port, self.smtp.port
        )
    }

    /// The mails' text and the web hook POSTs' bodies received since `mark`,
    /// each with the moment the sink had it, in order.
    pub fn alerts_since(&self, mark: Mark) -> Vec<String> {
        let mut out: Vec<String> = self
            .smtp
            .mails
            .since(mark.mails)
            .into_iter()
            .map(|m| format!("mail: {}", m.data))
            .collect();
        out.extend(
            self.http
                .requests
                .since(mark.requests)
                .into_iter()
                .filter(|r| r.method == "POST")
                .map(|r| format!("hook: {}", r.body)),
        );
        out
    }

    /// Everything received since `mark`, for a failure message.
    fn received(&self, mark: Mark) -> String {
        format!(
            "mails: {:#?}\nSMTP sessions:\n{}\nHTTP requests: {:#?}",
            self.smtp.mails.since(mark.mails),
            self.smtp.sessions.since(mark.sessions).join("--\n"),
            self.http.requests.since(mark.requests)
        )
    }
}

/// The SMTP password travels in the image's root filesystem only: the
/// board recipe on the FAT partition, which anyone with the card reads,
/// does not have it.
pub fn secret_kept_off_the_card(dir: &Path) {
    let card = boot_file_now(dir, "nasforge.toml");
    assert!(
        card.contains("[[shares]]") && !card.contains(SMTP_PASSWORD),
        "nasforge.toml on the boot partition must hold the shares and not the SMTP password:\n{card}"
    );
}

/// Two blank 2 GiB disks, to replace the missing member and to grow onto.
/// Their serials, from their file names, are `blank1` and `blank2`.
pub fn blank_disks(dir: &Path) -> Vec<PathBuf> {
    ["blank1", "blank2"]
        .iter()
        .map(|name| {
            let p = dir.join(format!("{name}.img"));
            std::fs::File::create(&p).unwrap().set_len(2 * GIB).unwrap();
            p
        })
        .collect()
}

/// What the chain works with: the test's directory, the image and the SSH
/// key, the disks of the degraded boot (the blank ones among them), the
/// 64 MiB file's sha256, and the sinks.
pub struct Care<'a> {
    pub dir: &'a Path,
    pub image: &'a Path,
    pub key: &'a Path,
    pub disks: &'a [PathBuf],
    pub payload_sha: &'a str,
    pub sinks: &'a Sinks,
}

/// Continues the boot with member 1 missing (`mark`: the sinks before it)
/// through a replace, a grow cut by a power loss, its resume on the next
/// boot, and an apply; powers the board off at the end.
pub fn after_a_member_went_missing(c: &Care, mut board: Board, mark: Mark, t: &mut Phases) {
    degraded_alerts(c, &mut board, mark);
    t.lap("alerts of the degraded array: mail and web hook on the host");
    test_alerts(c, &mut board);
    t.lap("alert --test: both channels, the recipe's SMTP login");
    replace(c, &mut board);
    t.lap("replace the missing member with a blank disk, rebuilt, healthy");
    let before = grow_then_power_cut(c, board);
    t.lap("grow onto a fifth disk; power cut during the reshape");
    let mut board = Board::boot(c.dir, c.image, c.disks, "boot5.log");
    board.wait_for_ssh(c.key, Duration::from_secs(600));
    grow_resumed(c, &mut board, before);
    t.lap("the grow resumed at boot: raid5 of 4, filesystem larger, file intact");
    apply_added_share(c, &mut board);
    t.lap("a share added to nasforge.toml: a planted link refused, applied, served");
    board.poweroff(c.key);
    t.lap("power off");
}

/// Whether `text` says the array named `data` is degraded.
fn says_data_degraded(text: &str) -> bool {
    let text = text.to_lowercase();
    text.contains("degraded")
        && text
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w == "data")
}

/// mdadm's monitor reports an array that is degraded when it starts: the
/// report reaches both sinks within minutes of the boot.
fn degraded_alerts(c: &Care, board: &mut Board, mark: Mark) {
    poll(
        board,
        c.key,
        "a mail and a web hook POST saying array `data` is degraded",
        Duration::from_secs(180),
        Duration::from_secs(5),
        ALERT_LOG,
        |_| {
            let mail = c
                .sinks
                .smtp
                .mails
                .since(mark.mails)
                .iter()
                .any(|m| says_data_degraded(&m.data));
            let hook =
                c.sinks.http.requests.since(mark.requests).iter().any(|r| {
                    r.method == "POST" && r.path == "/hook" && says_data_degraded(&r.body)
                });
            if mail && hook {
                Ok(())
            } else {
                Err(c.sinks.received(mark))
            }
        },
    );
}

/// The webhook's JSON `event`.
fn event(request: &Request) -> Option<String> {
    let json: serde_json::Value = serde_json::from_str(&request.body).ok()?;
    json["event"].as_str().map(str::to_string)
}

/// `alert --test` sends through each channel; the mail goes out with the
/// recipe's login, kept root-only on the board.
fn test_alerts(c: &Care, board: &mut Board) {
    let mark = c.sinks.mark();
    let (ok, out) = ssh_run(
        board,
        c.key,
        "sudo -S nasforge-setup alert --test",
        Duration::from_secs(300),
    );
    if !ok {
        fail(
            board,
            c.key,
            &format!("alert --test failed:\n{out}"),
            ALERT_LOG,
        );
    }
    let wait = Duration::from_secs(60);
    let mail =
        c.sinks
            .smtp
            .mails
            .wait_for(mark.mails, |m| m.data.to_lowercase().contains("test"), wait);
    let hook = c.sinks.http.requests.wait_for(
        mark.requests,
        |r| r.method == "POST" && r.path == "/hook" && event(r).as_deref() == Some("test"),
        wait,
    );
    let (Some(mail), Some(_)) = (mail, hook) else {
        let got = c.sinks.received(mark);
        fail(
            board,
            c.key,
            &format!("alert --test said:\n{out}\nbut the sinks got:\n{got}"),
            ALERT_LOG,
        );
    };
    assert_eq!(
        mail.auth,
        Some((SMTP_USER.to_string(), SMTP_PASSWORD.to_string())),
        "the mail went out without the recipe's SMTP login: {mail:#?}"
    );
    assert!(
        mail.from == MAIL_FROM && mail.to.iter().any(|t| t == MAIL_TO),
        "{mail:#?}"
    );
    let (ok, mode) = board.ssh(
        c.key,
        "sudo -S stat -c '%a %U:%G' /etc/nasforge/smtp-password",
    );
    assert!(
        ok && mode.contains("600 root:root"),
        "/etc/nasforge/smtp-password: {mode}"
    );
}

/// `replace` names the missing member by its serial, puts blank1 in its
/// place and follows the rebuild; the array is whole and healthy after.
fn replace(c: &Care, board: &mut Board) {
    let disk = by_id(board, c.key, "blank1");
    let command = format!("sudo -S nasforge-setup replace --array data --disk {disk} --yes");
    let (ok, out) = ssh_run(board, c.key, &command, Duration::from_secs(1800));
    if !(ok && out.contains("replace complete")) {
        fail(board, c.key, &format!("`{command}`:\n{out}"), MD_LOG);
    }
    assert!(
        out.contains("member1"),
        "replace does not name the missing member by its serial:\n{out}"
    );
    poll(
        board,
        c.key,
        "the array whole again ([3/3], no recovery) and status says it is healthy",
        Duration::from_secs(600),
        Duration::from_secs(10),
        MD_LOG,
        |b| {
            let (_, md) = b.ssh(c.key, "cat /proc/mdstat");
            let (_, status) = b.ssh(c.key, "sudo -S nasforge-setup status");
            // The pool on this boot is still missing a disk: only the
            // array's own line counts.
            let data = status
                .lines()
                .find(|l| l.trim_start().starts_with("data (md"))
                .unwrap_or("");
            let whole = md.contains("[3/3]") && !md.contains("recovery");
            if whole && data.contains(", healthy") {
                Ok(())
            } else {
                Err(format!("{md}\n{status}"))
            }
        },
    );
    assert_eq!(
        smb_get(board, c.dir, "payload.bin"),
        c.payload_sha,
        "the file after the replace"
    );
}

/// The size in bytes of the filesystem mounted at /srv/data.
fn data_size(board: &Board, key: &Path) -> u64 {
    let (ok, out) = board.ssh(
        key,
        "mountpoint -q /srv/data && df -B1 --output=size /srv/data",
    );
    out.lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .filter(|_| ok)
        .unwrap_or_else(|| panic!("the size of /srv/data: {out}"))
}

/// Starts growing `data` onto blank2 in a transient unit (the SSH session
/// ends with the power), cuts the power once the reshape runs, and returns
/// the filesystem's size before.
fn grow_then_power_cut(c: &Care, mut board: Board) -> u64 {
    let before = data_size(&board, c.key);
    let disk = by_id(&board, c.key, "blank2");
    let command = format!(
        "sudo -S systemd-run --unit={GROW_UNIT} nasforge-setup grow --array data --disk {disk} --yes"
    );
    let (ok, out) = board.ssh(c.key, &command);
    assert!(ok, "`{command}`:\n{out}");
    poll(
        &mut board,
        c.key,
        "a reshape in /proc/mdstat",
        Duration::from_secs(900),
        Duration::from_secs(2),
        &format!("{GROW_UNIT}|{MD_LOG}"),
        |b| {
            let (_, md) = b.ssh(
                c.key,
                &format!("cat /proc/mdstat; systemctl is-active {GROW_UNIT}"),
            );
            if md.contains("reshape") {
                return Ok(());
            }
            let state = md.lines().last().unwrap_or("").trim();
            if state == "failed" || state == "inactive" {
                let (_, log) = b.ssh(
                    c.key,
                    &format!("sudo -S journalctl -u {GROW_UNIT} --no-pager"),
                );
                panic!("the grow ended ({state}) before a reshape was seen:\n{md}\n{log}");
            }
            Err(md)
        },
    );
    board.power_cut();
    before
}

/// nasforge-resume.service finishes the grow the power cut interrupted:
/// the journal of the operation is gone, the array is a raid5 of four with
/// no reshape left, and the filesystem has grown onto the new space.
fn grow_resumed(c: &Care, board: &mut Board, before: u64) {
    poll(
        board,
        c.key,
        "the grow finished after the power cut: no operation.json, [4/4], no reshape, /srv/data mounted",
        Duration::from_secs(1800),
        Duration::from_secs(15),
        MD_LOG,
        |b| {
            let (_, state) = b.ssh(
                c.key,
                "cat /proc/mdstat; mountpoint /srv/data; sudo -S sh -c \
                 'if test -e /var/lib/nasforge/operation.json; then echo OPERATION-PENDING; else echo OPERATION-DONE; fi'",
            );
            let done = state.contains("[4/4]")
                && !state.contains("reshape")
                && state.contains("is a mountpoint")
                && state.contains("OPERATION-DONE");
            if done { Ok(()) } else { Err(state) }
        },
    );
    let after = data_size(board, c.key);
    if after <= before {
        fail(
            board,
            c.key,
            &format!("/srv/data did not grow: {before} bytes before, {after} after"),
            MD_LOG,
        );
    }
    assert_eq!(
        smb_get(board, c.dir, "payload.bin"),
        c.payload_sha,
        "the file after the grow resumed"
    );
}

const ADDED_SHARE: &str =
    "\n[[shares]]\nname = \"added\"\npath = \"/srv/data/added\"\nsmb = { users = [\"admin\"] }\n";

/// A share appended to nasforge.toml on the card is applied by `apply`,
/// served by Samba, and a second `apply` has nothing left to do.
fn apply_added_share(c: &Care, board: &mut Board) {
    // The text is an argument, not stdin: sudo -S reads the password there.
    let append = format!(
        "sudo -S sh -c 'printf %s \"$1\" | tee -a /boot/firmware/nasforge.toml' sh '{ADDED_SHARE}'"
    );
    let (ok, out) = board.ssh(c.key, &append);
    assert!(ok, "appending to nasforge.toml: {out}");
    let (_, toml) = board.ssh(c.key, "sudo -S cat /boot/firmware/nasforge.toml");
    assert!(toml.contains("name = \"added\""), "{toml}");
    let apply = "sudo -S nasforge-setup apply --yes";
    planted_link_refused(c, board, apply);
    let resume = "sudo -S nasforge-setup resume";
    let (ok, out) = ssh_run(board, c.key, resume, Duration::from_secs(600));
    if !(ok && out.contains("resume complete")) {
        fail(
            board,
            c.key,
            &format!("`{resume}`:\n{out}"),
            "nasforge|smbd|samba",
        );
    }
    write_to_added(c, board);
    let (ok, again) = ssh_run(board, c.key, apply, Duration::from_secs(300));
    assert!(
        ok && again.to_lowercase().contains("nothing to change"),
        "a second apply:\n{again}"
    );
}

/// admin owns /srv/data, as any user of its share may write there, and
/// puts a link to /etc where the new share's folder goes: apply stops at
/// the link, /etc keeps its owner and mode, and once the link is gone the
/// pending apply is resumed.
fn planted_link_refused(c: &Care, board: &mut Board, apply: &str) {
    let (ok, out) = board.ssh(c.key, "ln -s /etc /srv/data/added");
    assert!(ok, "planting the link as admin: {out}");
    let (ok, out) = ssh_run(board, c.key, apply, Duration::from_secs(600));
    assert!(
        !ok && out.contains("/srv/data/added is a symbolic link to /etc"),
        "`{apply}` with a link to /etc where the share goes:\n{out}"
    );
    let (_, etc) = board.ssh(c.key, "stat -c '%U:%G %a' /etc");
    assert_eq!(etc.trim(), "root:root 755", "/etc after the refused apply");
    let (ok, out) = board.ssh(c.key, "rm /srv/data/added");
    assert!(ok, "removing the link: {out}");
}

/// smbclient lists the new share and a file put there comes back the same.
fn write_to_added(c: &Care, board: &Board) {
    let (local, back) = (c.dir.join("added.txt"), c.dir.join("added.back"));
    std::fs::write(&local, "written to a share that apply added\n").unwrap();
    let start = Instant::now();
    loop {
        let _ = std::fs::remove_file(&back);
        let out = smbclient(
            board,
            "added",
            &format!(
                "put {} added.txt; ls; get added.txt {}",
                local.display(),
                back.display()
            ),
        );
        let text = printed(&out);
        if out.status.success() && text.contains("added.txt") {
            assert_eq!(
                std::fs::read(&back).unwrap(),
                std::fs::read(&local).unwrap()
            );
            return;
        }
        // Samba takes a moment to load a changed configuration.
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "smbclient on the added share:\n{text}"
        );
        std::thread::sleep(Duration::from_secs(5));
    }
}

#[test]
fn an_alert_names_the_degraded_array_as_a_word() {
    assert!(says_data_degraded(
        "Subject: [e2enas] array data is DEGRADED"
    ));
    assert!(says_data_degraded(
        r#"{"event":"degraded","message":"/dev/md/data lost a member"}"#
    ));
    assert!(!says_data_degraded("array metadata degraded"));
    assert!(!says_data_degraded("array data rebuilt"));
}
