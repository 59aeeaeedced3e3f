//! `apply` after setup: the difference between nasforge.toml and the set-up
//! state as a plan, its steps run with the fake runner on fake boards, and
//! users whose passwords never reach a journal or a command line.

use nasforge_testkit::board as common;
use nasforge_testkit::finished;
use nasforge_testkit::old_nas::{OMV_PROBE, adopts_and_builds_nothing, labelled, omv_member};

use nasforge_engine::apply::{self, ApplyError, users};
use nasforge_engine::journal::{self, Journal};
use nasforge_engine::machine::disks::Host;
use nasforge_engine::operation;
use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::shares::{samba, smbpasswd};
use nasforge_engine::spec::DeviceRecipe;
use std::path::Path;

const SET_UP: &str = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "raid1"
disks = { transport = "sata", count = 2 }
filesystem = "ext4"
mount = "/srv/data"

[[shares]]
name = "media"
path = "/srv/data/media"
smb = { users = ["admin"] }
nfs = { clients = "192.168.1.0/24" }
"#;

fn recipe(text: &str) -> DeviceRecipe {
    DeviceRecipe::parse(text, Path::new("nasforge.toml")).unwrap()
}

/// A board whose setup from `SET_UP` finished.
fn set_up(manifest: &str) -> common::Board {
    let board = common::writable_copy_with_nodes("pi5-jmb585", manifest);
    finished::setup(&board.host, &recipe(SET_UP));
    board
}

fn plan(board: &common::Board, text: &str, erase: &[&str]) -> apply::ApplyPlan {
    let erase: Vec<String> = erase.iter().map(|s| s.to_string()).collect();
    apply::prepare(
        &board.host,
        &recipe(text),
        &erase,
        &mut RecordingRunner::default(),
    )
    .unwrap()
}

/// Runs the plan with the fake runner; the record step is performed by
/// hand, as the fake runner only writes actions down.
fn run(board: &common::Board, p: &apply::ApplyPlan) -> Vec<String> {
    let mut runner = RecordingRunner::default();
    apply::run(&board.host, p, &mut runner, &mut |_| {}).unwrap();
    let mut j = Journal::load(&board.host.path(journal::PATH))
        .unwrap()
        .unwrap();
    j.recipe = p.recipe.clone();
    j.plan = p.plan.clone();
    j.context = p.context.clone();
    j.save(&board.host.path(journal::PATH)).unwrap();
    runner.lines
}

const PHOTOS: &str = r#"
[[shares]]
name = "photos"
path = "/srv/data/photos"
smb = { users = ["admin"] }
"#;

#[test]
fn an_unchanged_recipe_has_nothing_to_change() {
    let board = set_up("dev.txt");
    let p = plan(&board, SET_UP, &[]);
    assert!(p.nothing_to_change(), "{}", p.describe());
    assert!(p.describe().contains("nothing to change"));
    assert!(matches!(
        apply::run(
            &board.host,
            &p,
            &mut RecordingRunner::default(),
            &mut |_| {}
        ),
        Err(ApplyError::NothingToChange)
    ));
}

#[test]
fn a_share_added_regenerates_the_share_steps_and_records_the_recipe() {
    let board = set_up("dev.txt");
    let text = format!("{SET_UP}{PHOTOS}");
    let p = plan(&board, &text, &[]);
    let shown = p.describe();
    assert!(
        shown.contains("+ share 'photos' at /srv/data/photos (SMB: admin)"),
        "{shown}"
    );
    let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "share-dirs",
            "samba-config",
            "samba-users",
            "samba-service",
            "announce",
            "nfs-exports",
            "record-setup"
        ]
    );
    let lines = run(&board, &p).join("\n");
    assert!(lines.contains("mkdir -p /srv/data/photos"), "{lines}");
    assert!(
        lines.contains("[photos]") && lines.contains("[media]"),
        "{lines}"
    );
    assert!(
        lines.contains(&format!("# write {}", journal::PATH)),
        "{lines}"
    );
    let op = operation::last_finished(&board.host).unwrap();
    assert!(op.title.contains("+ share 'photos'"), "{}", op.title);

    let again = plan(&board, &text, &[]);
    assert!(again.nothing_to_change(), "{}", again.describe());
}

#[test]
fn a_share_removed_is_no_longer_served_and_its_files_stay() {
    let board = set_up("dev.txt");
    let text = SET_UP.split("[[shares]]").next().unwrap();
    let p = plan(&board, text, &[]);
    let shown = p.describe();
    assert!(
        shown.contains(
            "- share 'media' at /srv/data/media: no longer shared; its directory and files stay"
        ),
        "{shown}"
    );
    let entries = run(&board, &p);
    let lines = entries.join("\n");
    assert!(
        !lines.contains("rm -r") && !lines.contains("rmdir"),
        "{lines}"
    );
    // The last share gone: Samba's shares, the exports and the
    // announcement are emptied, not left serving the old share.
    let shares_file = entries
        .iter()
        .find(|l| l.starts_with(&format!("# write {}", samba::SHARES_FILE)))
        .expect("Samba's shares are rewritten");
    assert!(!shares_file.contains("[media]"), "{shares_file}");
    assert!(lines.contains("exportfs -ra"), "{lines}");
    assert!(
        lines.contains("rm -f /etc/avahi/services/nasforge.service"),
        "{lines}"
    );
}

#[test]
fn a_share_changed_says_what_changed() {
    let board = set_up("dev.txt");
    let text = SET_UP
        .replace(
            "users = [\"admin\"]",
            "users = [\"admin\"], readonly = true",
        )
        .replace("192.168.1.0/24", "10.0.0.0/8");
    let p = plan(&board, &text, &[]);
    let shown = p.describe();
    assert!(
        shown.contains(
            "~ share 'media': SMB admin → admin, read-only; NFS 192.168.1.0/24 → 10.0.0.0/8"
        ),
        "{shown}"
    );
    assert!(p.refusals.is_empty());
}

#[test]
fn a_share_user_missing_on_the_board_is_refused_with_the_command_to_add_it() {
    let board = set_up("dev.txt");
    let text = format!(
        "{SET_UP}{}",
        PHOTOS.replace("[\"admin\"]", "[\"admin\", \"bob\"]")
    );
    let p = plan(&board, &text, &[]);
    assert!(p.steps.is_empty());
    assert!(
        p.describe().contains(
            "! refused: share 'photos': the user 'bob' does not exist on this NAS; add it with `nasforge-setup user add bob`"
        ),
        "{}",
        p.describe()
    );
    let err = apply::run(
        &board.host,
        &p,
        &mut RecordingRunner::default(),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("nothing was changed"), "{err}");
}

#[test]
fn an_array_changed_or_removed_is_refused_with_the_command_to_use() {
    let board = set_up("dev.txt");
    let p = plan(&board, &SET_UP.replace("count = 2", "count = 3"), &[]);
    let shown = p.describe();
    assert!(
        shown.contains("`nasforge-setup grow --array data --disk DEV`")
            && shown.contains("`nasforge-setup replace --array data`"),
        "{shown}"
    );
    assert!(p.steps.is_empty());

    let p = plan(&board, &SET_UP.replace("raid1", "raid0"), &[]);
    assert!(
        p.describe().contains("level raid1 → raid0"),
        "{}",
        p.describe()
    );
    assert!(p.steps.is_empty());

    let spared = SET_UP.replace("count = 2 }", "count = 3 }\nspares = 1");
    let p = plan(&board, &spared, &[]);
    assert!(
        p.describe().contains("array 'data': spares 0 → 1: apply does not turn members into spares or spares into members; put the old value back"),
        "{}",
        p.describe()
    );
    assert!(p.steps.is_empty());

    let renamed = SET_UP.replace("name = \"data\"", "name = \"store\"");
    let p = plan(&board, &renamed, &[]);
    assert!(
        p.describe()
            .contains("array 'data' was set up but is no longer in nasforge.toml: apply never removes an array"),
        "{}",
        p.describe()
    );
    assert!(p.arrays_added.is_empty() && p.steps.is_empty());
}

const BACKUP: &str = r#"
[[storage.arrays]]
name = "backup"
level = "raid1"
disks = { transport = "sata", count = 2 }
filesystem = "ext4"
mount = "/srv/backup"
"#;

fn with_backup(extra: &str) -> String {
    SET_UP.replacen(
        "\n[[shares]]",
        &format!("{}{extra}\n[[shares]]", BACKUP.trim_end()),
        1,
    )
}

#[test]
fn a_new_array_on_a_disk_with_data_needs_wipe_and_erase() {
    let board = set_up("dev-with-data.txt");
    let p = plan(&board, &with_backup(""), &[]);
    let shown = p.describe();
    assert!(
        shown.contains("sdd") && shown.contains("set wipe = true in storage.arrays[1]"),
        "{shown}"
    );
    assert!(p.steps.is_empty());

    let p = plan(&board, &with_backup("\nwipe = true"), &[]);
    assert!(
        p.describe().contains("run again with `--erase sdd`"),
        "{}",
        p.describe()
    );
    assert!(p.steps.is_empty());

    let p = plan(&board, &with_backup("\nwipe = true"), &["/dev/sdd"]);
    assert!(p.refusals.is_empty(), "{}", p.describe());
    let members: Vec<&str> = p.arrays_added[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(members, ["sdc", "sdd"]);
    assert!(
        p.describe().contains("[will be erased]"),
        "{}",
        p.describe()
    );
    let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    assert!(
        ids.contains(&"wipe:sdd") && ids.contains(&"fstab"),
        "{ids:?}"
    );
    assert_eq!(ids.last(), Some(&"record-setup"));
}

#[test]
fn a_recipe_with_a_typo_is_reported_with_file_and_line() {
    let text = SET_UP.replace("filesystem = \"ext4\"", "filesytem = \"ext4\"");
    let err = DeviceRecipe::parse(&text, Path::new("/boot/firmware/nasforge.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("/boot/firmware/nasforge.toml:"), "{err}");
    assert!(err.contains("filesytem"), "{err}");
}

#[test]
fn apply_before_setup_finished_says_what_to_run() {
    let board = common::writable_copy("pi5-jmb585");
    let err = apply::prepare(
        &board.host,
        &recipe(SET_UP),
        &[],
        &mut RecordingRunner::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("was never set up"), "{err}");

    let mut journal = finished::setup(&board.host, &recipe(SET_UP));
    journal.done.truncate(2);
    journal.finished = None;
    journal.save(&journal::path(&board.host)).unwrap();
    let stopped = format!(
        "setup has not finished (2 of {} steps done): run `sudo nasforge-setup --unattended` to finish it first",
        journal.steps.len()
    );
    let err = apply::prepare(
        &board.host,
        &recipe(SET_UP),
        &[],
        &mut RecordingRunner::default(),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), stopped);
    let err: nasforge_engine::care::CareError = journal::finished(&board.host).unwrap_err().into();
    assert_eq!(err.to_string(), stopped, "care words it as apply does");
}

const PASSWORD: &str = "correct horse battery";

/// Every file under the root's /var/lib/nasforge and /var/log: where the
/// journals and the log live.
fn journals_and_logs(host: &Host) -> String {
    let mut all = String::new();
    for dir in ["/var/lib/nasforge", "/var/log"] {
        let mut stack = vec![host.path(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let path = e.path();
                if path.is_dir() {
                    stack.push(path);
                } else if !path.ends_with("smbpasswd") {
                    all += &std::fs::read_to_string(&path).unwrap_or_default();
                }
            }
        }
    }
    all
}

#[test]
fn a_user_added_gets_an_account_and_a_samba_password_that_no_journal_or_command_holds() {
    let board = set_up("dev.txt");
    let host = &board.host;
    let p = users::plan_add(host, "bob").unwrap();
    assert_eq!(p.uid, 1001);
    assert!(
        p.describe().contains("+ user 'bob' (uid 1001"),
        "{}",
        p.describe()
    );
    let mut runner = RecordingRunner::default();
    users::run(host, &p, PASSWORD, &mut runner, &mut |_| {}).unwrap();
    let lines = runner.lines.join("\n");
    assert!(
        lines.contains(
            "useradd --create-home --user-group --uid 1001 --shell /usr/sbin/nologin bob"
        ),
        "a share user gets no shell: an SMB password change syncs to Unix: {lines}"
    );
    assert!(
        p.describe().contains("no shell, no login password"),
        "{}",
        p.describe()
    );
    assert!(
        lines.contains("pdbedit -i smbpasswd:/var/lib/nasforge/smbpasswd"),
        "{lines}"
    );
    let hash = smbpasswd::nt_hash(PASSWORD);
    let staged = std::fs::read_to_string(host.path(samba::STAGED_PASSWORDS)).unwrap();
    assert!(staged.starts_with("bob:1001:") && staged.contains(&hash));
    let mode = std::fs::metadata(host.path(samba::STAGED_PASSWORDS)).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    let kept = journals_and_logs(host);
    assert!(
        kept.contains("Add the user 'bob'"),
        "the operation is in the history"
    );
    for secret in [PASSWORD, hash.as_str()] {
        assert!(!lines.contains(secret) && !kept.contains(secret));
    }

    let taken = users::plan_add(host, "admin").unwrap_err().to_string();
    assert!(
        taken.contains("nasforge-setup user passwd admin"),
        "{taken}"
    );
    let bad = users::plan_add(host, "Bob").unwrap_err().to_string();
    assert!(bad.contains("not a valid user name"), "{bad}");
}

#[test]
fn a_password_changed_is_staged_for_pdbedit_and_nowhere_else() {
    let board = set_up("dev.txt");
    let host = &board.host;
    let p = users::plan_passwd(host, "admin").unwrap();
    assert_eq!((p.uid, p.new_account), (1000, false));
    let mut runner = RecordingRunner::default();
    users::run(host, &p, PASSWORD, &mut runner, &mut |_| {}).unwrap();
    let lines = runner.lines.join("\n");
    assert!(!lines.contains("useradd"), "{lines}");
    let hash = smbpasswd::nt_hash(PASSWORD);
    let kept = journals_and_logs(host);
    assert!(!lines.contains(PASSWORD) && !lines.contains(&hash) && !kept.contains(&hash));

    let missing = users::plan_passwd(host, "carol").unwrap_err().to_string();
    assert!(
        missing.contains("nasforge-setup user add carol"),
        "{missing}"
    );
    let empty = users::run(host, &p, "", &mut runner, &mut |_| {}).unwrap_err();
    assert!(empty.to_string().contains("empty"), "{empty}");
}

#[test]
fn a_card_still_in_wizard_mode_keeps_the_arrays_the_wizard_chose() {
    let board = set_up("dev.txt");
    let card = SET_UP.replace(
        "mode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid1\"\ndisks = { transport = \"sata\", count = 2 }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n",
        "mode = \"wizard\"\n",
    );
    assert!(card.contains("mode = \"wizard\"") && !card.contains("raid1"));
    let p = plan(&board, &card, &[]);
    assert!(p.refusals.is_empty(), "{}", p.describe());
    let with_photos = plan(&board, &format!("{card}{PHOTOS}"), &[]);
    assert!(
        with_photos.refusals.is_empty() && with_photos.shares_added.len() == 1,
        "{}",
        with_photos.describe()
    );
}

#[test]
fn alerts_changed_rewrite_smartd_and_the_routing_and_a_password_on_the_card_is_refused() {
    let board = set_up("dev.txt");
    let alerts = "\n[alerts]\nwebhook = \"http://10.0.2.2:8080/hook\"\ntemperature = 45\n";
    let p = plan(&board, &format!("{SET_UP}{alerts}"), &[]);
    assert!(p.refusals.is_empty(), "{}", p.describe());
    let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    assert!(
        ids.contains(&"smartd") && ids.last() == Some(&"record-setup"),
        "{ids:?}"
    );
    let text = nasforge_engine::executor::dry_run(&p.steps);
    assert!(
        text.contains("-W 4,40,45") && text.contains("/etc/nasforge/alerts.json"),
        "{text}"
    );

    let secret = "\n[alerts]\nemail = \"me@example.com\"\n[alerts.smtp]\nhost = \"smtp.example.com\"\nuser = \"me\"\npassword = \"hunter2-on-the-card\"\n";
    let p = plan(&board, &format!("{SET_UP}{secret}"), &[]);
    assert!(p.steps.is_empty(), "{}", p.describe());
    assert!(
        p.refusals.iter().any(
            |r| r.contains("alerts.smtp.password") && r.contains("/etc/nasforge/smtp-password")
        ),
        "{:?}",
        p.refusals
    );
}

#[test]
fn a_share_off_the_arrays_is_refused_also_on_a_card_in_wizard_mode() {
    let board = set_up("dev.txt");
    // What the card of a NAS the wizard set up says: no arrays.
    let card = SET_UP
        .split("[[shares]]")
        .nth(1)
        .map(|shares| format!("[storage]\nmode = \"wizard\"\n\n[[shares]]{shares}"))
        .unwrap();
    assert!(plan(&board, &card, &[]).refusals.is_empty());
    for (path, nfs) in [
        ("/", "*"),
        ("/etc", "192.168.1.0/24"),
        ("/srv", "*"),
        ("/srv/database", "*"),
    ] {
        let hostile = format!(
            "{card}\n[[shares]]\nname = \"x\"\npath = \"{path}\"\nsmb = {{ users = [\"admin\"] }}\nnfs = {{ clients = \"{nfs}\" }}\n"
        );
        let p = plan(&board, &hostile, &[]);
        assert!(p.steps.is_empty(), "{path}: {}", p.describe());
        assert!(
            p.refusals.iter().any(|r| r.starts_with(&format!(
                "shares[1].path: share 'x': {path} is on none of the arrays, pools or kept disks setup made (/srv/data)"
            ))),
            "{path}: {:?}",
            p.refusals
        );
    }
}

#[test]
fn the_review_shows_alerts_changes_and_where_the_stored_password_would_go() {
    let board = set_up("dev.txt");
    let mine = "\n[alerts]\nemail = \"me@example.com\"\n[alerts.smtp]\nhost = \"smtp.example.com\"\nuser = \"me\"\n";
    run(&board, &plan(&board, &format!("{SET_UP}{mine}"), &[]));
    let password = board.host.path("/etc/nasforge/smtp-password");
    std::fs::create_dir_all(password.parent().unwrap()).unwrap();
    std::fs::write(&password, "hunter2\n").unwrap();

    // Someone with the card points the relay at their own host, unencrypted.
    let theirs = mine.replace(
        "host = \"smtp.example.com\"",
        "host = \"mail.attacker.example\"\ntls = \"off\"",
    );
    let p = plan(&board, &format!("{SET_UP}{theirs}"), &[]);
    let text = p.describe();
    assert!(
        text.contains("- Alerts by email to me@example.com through smtp.example.com:587 (starttls), logging in as me")
            && text.contains("+ Alerts by email to me@example.com through mail.attacker.example:25 (off), logging in as me")
            && text.contains("! the SMTP password kept in /etc/nasforge/smtp-password will be sent to mail.attacker.example:25, in clear text (tls = \"off\")"),
        "{text}"
    );
    assert!(
        !text.contains("nothing to change") && !text.contains("hunter2"),
        "{text}"
    );

    let webhook = format!(
        "{SET_UP}{}",
        mine.replace(
            "[alerts.smtp]",
            "webhook = \"https://hooks.example/nas-token-123\"\ntemperature = 45\n[alerts.smtp]"
        )
    );
    let text = plan(&board, &webhook, &[]).describe();
    assert!(
        text.contains("+ Alerts posted as JSON to https://hooks.example/… (token hidden, URL #")
            && !text.contains("nas-token-123")
            && text.contains("~ disks warn over 45 °C (was 50 °C)")
            && !text.contains("SMTP password"),
        "the relay is unchanged: {text}"
    );
}

/// sdc and sdd hold the two members of a raid1 OpenMediaVault made, with
/// ext4 on it: what mdadm and blkid say of them.
fn old_raid1_on_sdc_sdd(board: &common::Board) -> RecordingRunner {
    let mut answers = vec![(
        format!("blkid -p -o value -s TYPE {OMV_PROBE}"),
        "ext4\n".to_string(),
    )];
    for (devnum, disk, dev_uuid) in [
        ("8:32", "sdc", "0a0b0c0d:0e0f1011:12131415:16171819"),
        ("8:48", "sdd", "1a0b0c0d:0e0f1011:12131415:16171819"),
    ] {
        labelled(board, devnum, "linux_raid_member", "openmediavault:0");
        answers.push((
            format!("mdadm --examine --export /dev/{disk}"),
            omv_member("raid1", 2, dev_uuid),
        ));
    }
    RecordingRunner::answering(answers)
}

const ADOPT_OLD: &str = r#"
[[storage.arrays]]
name = "old"
import = true
uuid = "3f1c2a4b:5d6e7f80:91a2b3c4:d5e6f708"
level = "raid1"
filesystem = "ext4"
mount = "/srv/old"
"#;

#[test]
fn an_old_array_added_to_the_recipe_after_setup_is_adopted_as_it_is() {
    let board = set_up("dev.txt");
    let text = SET_UP.replacen("\n[[shares]]", &format!("{ADOPT_OLD}\n[[shares]]"), 1);
    let mut runner = old_raid1_on_sdc_sdd(&board);
    let p = apply::prepare(&board.host, &recipe(&text), &[], &mut runner).unwrap();
    assert!(p.refusals.is_empty(), "{}", p.describe());
    let shown = p.describe();
    assert!(
        shown.contains("the raid1 array 'openmediavault:0' (UUID 3f1c2a4b:5d6e7f80:91a2b3c4:d5e6f708) adopted as it is, 2 of 2 member(s) here, as /dev/md/old, its ext4 filesystem mounted at /srv/old; nothing on it is erased"),
        "{shown}"
    );
    // Looked into read-only before the plan was shown.
    assert!(
        runner
            .lines
            .iter()
            .any(|c| c.starts_with("mdadm --assemble /dev/md/nasforge-probe-3f1c2a4b --readonly"))
            && runner
                .lines
                .iter()
                .any(|c| c == "mdadm --stop /dev/md/nasforge-probe-3f1c2a4b"),
        "{:?}",
        runner.lines
    );
    adopts_and_builds_nothing(&p.steps);
    let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    assert!(
        ids.contains(&"mdadm-conf") && ids.contains(&"fstab") && ids.contains(&"mount:old"),
        "{ids:?}"
    );
    assert_eq!(ids.last(), Some(&"record-setup"));

    // A recipe naming the array as something it is not changes nothing.
    let wrong = text.replacen(
        "level = \"raid1\"\nfilesystem = \"ext4\"\nmount = \"/srv/old\"",
        "level = \"raid1\"\nfilesystem = \"xfs\"\nmount = \"/srv/old\"",
        1,
    );
    let p = apply::prepare(
        &board.host,
        &recipe(&wrong),
        &[],
        &mut old_raid1_on_sdc_sdd(&set_up("dev.txt")),
    )
    .unwrap();
    assert!(p.steps.is_empty());
    assert!(
        p.describe()
            .contains("the array holds an ext4 filesystem, not xfs"),
        "{}",
        p.describe()
    );
}
