//! mdadm invocations and /etc/mdadm/mdadm.conf, with the traps from the
//! field notes built in.

use crate::planner::{Alert, ArrayPlan};
use crate::spec::Level;

pub const CONF: &str = "/etc/mdadm/mdadm.conf";

/// md's default chunk, passed explicitly so the filesystem's stripe geometry
/// is known before the array exists.
pub const CHUNK_KIB: u64 = 512;

/// `mdadm --create` for an array whose members are `partitions`.
pub fn create(array: &ArrayPlan, homehost: &str, partitions: &[String]) -> Vec<String> {
    let level = array.spec.level;
    let name = &array.spec.name;
    let mut argv: Vec<String> = vec![
        "mdadm".into(),
        "--create".into(),
        array.spec.md_device(),
        "--run".into(),
        format!("--homehost={homehost}"),
        format!("--name={name}"),
        "--metadata=1.2".into(),
        format!("--level={}", level.mdadm().unwrap_or("1")),
        format!("--raid-devices={}", partitions.len()),
    ];
    if level.is_striped() {
        argv.push(format!("--chunk={CHUNK_KIB}"));
    }
    // Unequal raid0 members need an explicit layout (else "RUN_ARRAY failed:
    // Unknown error 524"); `original` is what newer mdadm picks itself.
    // Never `dangerous`.
    if level == Level::Raid0 && !array.equal_members() {
        argv.push("--layout=original".into());
    }
    // mdadm >= 4.4 silently skips the bitmap with --run unless asked; raid0
    // cannot have one.
    if level != Level::Raid0 {
        argv.push("--bitmap=internal".into());
    }
    argv.extend(partitions.iter().cloned());
    argv
}

/// The lines above the `mdadm --detail --scan` output. mdmonitor refuses to
/// run without MAILADDR or PROGRAM. A mail address alone would reach no
/// one (the board has no sendmail), so nasforge's handler runs beside it.
pub fn conf_header(homehost: &str, alert: &Alert) -> String {
    let alert = match alert {
        Alert::Mail(addr) => format!(
            "MAILADDR {addr}
PROGRAM {}",
            crate::alerts::MDADM_EVENT
        ),
        Alert::Program(program) => format!("PROGRAM {program}"),
    };
    format!(
        "# Written by nasforge-setup. Regenerate the ARRAY lines with\n\
         # `mdadm --detail --scan`, then run `update-initramfs -u -k all`.\n\
         HOMEHOST {homehost}\n\
         {alert}\n\
         DEVICE partitions containers\n"
    )
}

pub const DEFAULT_FILE: &str = "/etc/default/mdadm";

/// Debian's /etc/default/mdadm with the cron checkarray off: the monthly
/// scrub runs from mdcheck_start.timer instead (no cron needed, and it
/// pauses after six hours and continues the next night), and two schedulers
/// would scrub twice.
pub fn default_file() -> &'static str {
    "# Written by nasforge-setup. The monthly scrub runs from mdcheck_start.timer,\n\
     # so the cron job's checkarray stays off to avoid scrubbing twice.\n\
     AUTOCHECK=false\n\
     AUTOSCAN=true\n\
     START_DAEMON=true\n\
     DAEMON_OPTIONS=\"--syslog\"\n\
     VERBOSE=false\n"
}

/// `mdadm MD --add PART`: the partition joins as a spare, and md rebuilds
/// onto it at once when the array is degraded.
pub fn add(md: &str, part: &str) -> Vec<String> {
    ["mdadm", md, "--add", part].map(String::from).to_vec()
}

/// `mdadm MD --fail PART --remove PART`: a member md still lists (failed or
/// not) leaves the array, so its slot can take a new disk. Failing a member
/// already marked faulty is harmless.
pub fn fail_and_remove(md: &str, part: &str) -> Vec<String> {
    ["mdadm", md, "--fail", part, "--remove", part]
        .map(String::from)
        .to_vec()
}

/// `mdadm --grow MD --raid-devices=N`: more mirrors for raid1 (a spare
/// becomes one), a reshape for raid5/raid6. With metadata 1.2 mdadm moves
/// the data offset instead of keeping a backup of the critical section.
pub fn grow_raid_devices(md: &str, count: usize) -> Vec<String> {
    vec![
        "mdadm".into(),
        "--grow".into(),
        md.into(),
        format!("--raid-devices={count}"),
    ]
}
