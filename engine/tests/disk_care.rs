//! Disk care after setup: the `spin_down` setting, hd-idle's configuration
//! and what status says about self-tests and scrubs.

use nasforge_testkit::board as common;

use nasforge_engine::journal::Journal;
use nasforge_engine::planner::{self, Plan};
use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::spec::{self, DeviceRecipe, SpinDown};
use nasforge_engine::status;
use nasforge_engine::steps::{self, Action, Context};
use std::path::Path;

fn recipe(spin_down: &str) -> String {
    format!(
        r#"[storage]
mode = "unattended"
{spin_down}
[[storage.arrays]]
name = "data"
level = "raid5"
disks = {{ transport = "sata", model = "WDC WD40EFRX*", count = 4 }}
filesystem = "ext4"
mount = "/srv/data"
"#
    )
}

fn parse(spin_down: &str) -> Result<DeviceRecipe, String> {
    DeviceRecipe::parse(&recipe(spin_down), Path::new("nasforge.toml")).map_err(|e| e.to_string())
}

#[test]
fn spin_down_takes_minutes_hours_seconds_or_off() {
    let cases = [
        ("", SpinDown::Off),
        ("spin_down = \"20min\"", SpinDown::After(1200)),
        ("spin_down = \"1h\"", SpinDown::After(3600)),
        ("spin_down = \"900s\"", SpinDown::After(900)),
        ("spin_down = \"10 min\"", SpinDown::After(600)),
        ("spin_down = \"off\"", SpinDown::Off),
        ("spin_down = \"0\"", SpinDown::Off),
        ("spin_down = 0", SpinDown::Off),
        ("spin_down = false", SpinDown::Off),
    ];
    for (line, want) in cases {
        let got = parse(line).unwrap().storage.unwrap().spin_down;
        assert_eq!(got, want, "{line}");
    }
    assert_eq!(SpinDown::After(1200).to_string(), "20min");
    assert_eq!(SpinDown::After(7200).to_string(), "2h");
}

#[test]
fn a_bad_spin_down_is_refused_with_its_line_and_the_accepted_forms() {
    for (line, why) in [
        ("spin_down = \"20\"", "is not a spin-down time"),
        ("spin_down = \"20m\"", "is not a spin-down time"),
        ("spin_down = \"soon\"", "is not a spin-down time"),
        ("spin_down = \"-5min\"", "is not a spin-down time"),
        ("spin_down = \"99999999h\"", "is not a spin-down time"),
        ("spin_down = \"1min\"", "too short"),
        ("spin_down = 20", "has no unit"),
        ("spin_down = true", "does not say when"),
    ] {
        let err = parse(line).unwrap_err();
        assert!(err.starts_with("nasforge.toml:3:"), "{line}: {err}");
        assert!(err.contains(why), "{line}: {err}");
        assert!(
            err.contains("\"20min\"") && err.contains("\"off\""),
            "names the accepted forms: {err}"
        );
    }
}

#[test]
fn hd_idle_comes_only_with_spin_down_or_the_wizard() {
    let storage = |line: &str| parse(line).unwrap().storage.unwrap();
    let off = storage("");
    let on = storage("spin_down = \"30min\"");
    assert!(!spec::required_packages(Some(&off), &[], None).contains(&"hd-idle"));
    assert!(spec::required_packages(Some(&on), &[], None).contains(&"hd-idle"));
    assert!(!spec::required_packages(None, &[], None).contains(&"hd-idle"));
    let wizard = DeviceRecipe::parse("[storage]\nmode = \"wizard\"\n", Path::new("x.toml"))
        .unwrap()
        .storage
        .unwrap();
    assert!(spec::required_packages(Some(&wizard), &[], None).contains(&"hd-idle"));
}

fn plan_on_pi5(spin_down: &str, ssd: &[&str]) -> Plan {
    let board = common::board("pi5-jmb585");
    let mut inventory = board.inventory();
    for disk in &mut inventory.disks {
        if ssd.contains(&disk.name.as_str()) {
            disk.rotational = false;
        }
    }
    let recipe = parse(spin_down).unwrap();
    planner::plan(recipe.storage.as_ref().unwrap(), &[], &inventory).unwrap()
}

/// What setup left after running `plan`, with no step done.
fn journal(plan: &Plan) -> Journal {
    Journal::new(DeviceRecipe::default(), context(plan), plan.clone(), vec![])
}

fn context(plan: &Plan) -> Context {
    Context {
        hostname: "nas".into(),
        system_uuid: None,
        fs_uuids: plan.arrays.iter().map(|_| "u".into()).collect(),
    }
}

#[test]
fn hd_idle_gets_the_hard_disks_by_id_and_never_the_ssd() {
    let plan = plan_on_pi5("spin_down = \"20min\"", &["sdb"]);
    let steps = steps::generate(&plan, &context(&plan));
    let step = steps
        .iter()
        .find(|s| s.id == "spin-down")
        .expect("a spin-down step");
    assert_eq!(
        step.title,
        "Spin idle hard disks down after 20min (hd-idle)"
    );
    let Action::WriteFile { path, contents, .. } = &step.actions[0] else {
        panic!("{:?}", step.actions[0]);
    };
    assert_eq!(path, "/etc/default/hd-idle");
    let opts = contents
        .lines()
        .find_map(|l| l.strip_prefix("HD_IDLE_OPTS="))
        .unwrap();
    let ids: Vec<&str> = plan.arrays[0]
        .members
        .iter()
        .filter(|m| m.disk.name != "sdb")
        .map(|m| m.disk.by_id.as_deref().unwrap())
        .collect();
    let want: Vec<String> = ids.iter().map(|id| format!("-a {id} -i 1200")).collect();
    assert_eq!(opts, format!("\"-i 0 {}\"", want.join(" ")));
    let ssd = plan.arrays[0]
        .members
        .iter()
        .find(|m| m.disk.name == "sdb")
        .unwrap();
    assert!(
        !contents.contains(ssd.disk.by_id.as_deref().unwrap()),
        "{contents}"
    );
    assert_eq!(
        step.actions[1..]
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>(),
        [
            "systemctl enable --no-reload hd-idle.service  # unless enabled already",
            "systemctl restart hd-idle.service"
        ]
    );
}

#[test]
fn no_spin_down_step_when_off_or_when_every_member_is_an_ssd() {
    for (line, ssd) in [
        ("", &[][..]),
        ("spin_down = \"20min\"", &["sda", "sdb", "sdc", "sdd"][..]),
    ] {
        let plan = plan_on_pi5(line, ssd);
        let steps = steps::generate(&plan, &context(&plan));
        assert!(steps.iter().all(|s| s.id != "spin-down"), "{line} {ssd:?}");
    }
}

#[test]
fn the_monthly_scrub_timers_stay_enabled() {
    let plan = plan_on_pi5("", &[]);
    let steps = steps::generate(&plan, &context(&plan));
    let step = steps.iter().find(|s| s.id == "raid-monitoring").unwrap();
    assert!(
        step.actions.iter().any(|a| a.to_string()
            == "systemctl enable --no-reload --now mdcheck_start.timer mdcheck_continue.timer  # unless enabled already")
    );
}

const MDSTAT: &str = "Personalities : [raid6] [raid5] [raid4]\nmd127 : active raid5 sdd1[3] sdc1[2] sdb1[1] sda1[0]\n      11720653824 blocks super 1.2 level 5, 512k chunk, algorithm 2 [4/4] [UUUU]\n      bitmap: 0/30 pages [0KB], 65536KB chunk\n\nunused devices: <none>\n";

#[test]
fn status_shows_the_last_self_test_and_scrub() {
    let board = common::writable_copy("pi5-jmb585");
    let plan = plan_on_pi5("", &[]);
    let journal = journal(&plan);
    std::fs::write(board.host.path("/proc/mdstat"), MDSTAT).unwrap();
    let md = board.host.path("/sys/block/md127/md");
    std::fs::create_dir_all(&md).unwrap();
    for (name, value) in [
        ("sync_action", "idle\n"),
        ("last_sync_action", "check\n"),
        ("mismatch_cnt", "0\n"),
    ] {
        std::fs::write(md.join(name), value).unwrap();
    }
    let mut runner = RecordingRunner::default();
    runner.responses.push((
        "smartctl --json -a".into(),
        std::fs::read_to_string(common::data("smartctl/qemu-ata-selftests.json")).unwrap(),
    ));
    let text = status::collect(&board.host, Some(&journal), &mut runner).render();
    assert!(
        text.contains("md127: raid5, healthy; last scrub: check, 0 mismatches"),
        "{text}"
    );
    assert!(
        text.contains(
            "  sda: passed, 31 °C, 1 hours on; last self-test: extended, passed at 4660 hours"
        ),
        "{text}"
    );
    assert_eq!(
        runner
            .lines
            .iter()
            .filter(|l| l.starts_with("smartctl --json -a /dev/disk/by-id/"))
            .count(),
        4,
        "one query per member, by stable name: {:?}",
        runner.lines
    );
}

const MDSTAT_DEGRADED: &str = "Personalities : [raid6] [raid5] [raid4]\nmd127 : active raid5 sdd1[3] sdb1[1] sda1[0]\n      11720653824 blocks super 1.2 level 5, 512k chunk, algorithm 2 [4/3] [UU_U]\n      bitmap: 2/30 pages [8KB], 65536KB chunk\n\nunused devices: <none>\n";

#[test]
fn status_names_the_disk_a_degraded_array_lacks_by_its_serial() {
    let board = common::writable_copy("pi5-jmb585");
    let plan = plan_on_pi5("", &[]);
    let journal = journal(&plan);
    let host = &board.host;
    std::fs::write(host.path("/proc/mdstat"), MDSTAT_DEGRADED).unwrap();
    std::fs::create_dir_all(host.dev_path("/dev/md")).unwrap();
    std::os::unix::fs::symlink("../md127", host.dev_path("/dev/md/data")).unwrap();
    std::fs::create_dir_all(host.dev_path("/dev/disk/by-id")).unwrap();
    for m in &plan.arrays[0].members {
        let part = format!("{}1", m.disk.name);
        std::fs::write(host.dev_path(&part), "").unwrap();
        let link = format!("{}-part1", m.disk.stable_path());
        std::os::unix::fs::symlink(format!("../../{part}"), host.dev_path(&link)).unwrap();
    }
    let md = host.path("/sys/block/md127/md");
    let state = |disk: &str, state: &str| {
        let dir = md.join(format!("dev-{disk}1"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("state"), state).unwrap();
    };
    for disk in ["sda", "sdb", "sdd"] {
        state(disk, "in_sync\n");
    }
    let sdc = plan.arrays[0]
        .members
        .iter()
        .find(|m| m.disk.name == "sdc")
        .unwrap();
    let words = format!(
        "data (md127): raid5, degraded (3 of 4 members), missing the disk that was sdc ({}, serial {})",
        sdc.disk.model.as_deref().unwrap(),
        sdc.disk.serial.as_deref().unwrap()
    );
    let status =
        |runner: &mut RecordingRunner| status::collect(host, Some(&journal), runner).render();
    // Pulled out: md removed it.
    let text = status(&mut RecordingRunner::default());
    assert!(text.contains(&words), "{text}");
    // Failed and still listed: missing all the same.
    state("sdc", "faulty\n");
    let text = status(&mut RecordingRunner::default());
    assert!(text.contains(&words), "{text}");
    // Two planned disks out of it where md lacks one (one was replaced
    // since): which one is missing is not guessed.
    std::fs::remove_dir_all(md.join("dev-sdd1")).unwrap();
    let text = status(&mut RecordingRunner::default());
    assert!(
        text.contains("data (md127): raid5, degraded (3 of 4 members)\n"),
        "{text}"
    );
}
