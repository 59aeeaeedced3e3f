//! mdadm invocations and /etc/mdadm/mdadm.conf, with the traps from the
//! field notes built in.

use crate::planner::{Alert, ArrayPlan, Plan};
use crate::spec::Level;
use serde::{Deserialize, Serialize};

pub const CONF: &str = "/etc/mdadm/mdadm.conf";

/// md's default chunk, passed explicitly so the filesystem's stripe geometry
/// is known before the array exists.
pub const CHUNK_KIB: u64 = 512;

/// One md array to create: an array of partitions (with its spares), a
/// leg of a nested array, or the raid0 over the legs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdCreate {
    /// The md name: the array appears as `/dev/md/<name>`.
    pub name: String,
    pub level: Level,
    /// `--chunk` in KiB, for the levels that stripe.
    pub chunk_kib: Option<u64>,
    /// The members that hold data, in their slots' order.
    pub devices: Vec<String>,
    /// Hot spares, listed after the devices (`--spare-devices`).
    pub spares: Vec<String>,
    /// A raid0 over members of different sizes (see [`create`]).
    pub unequal: bool,
}

impl MdCreate {
    pub fn device(&self) -> String {
        format!("/dev/md/{}", self.name)
    }

    /// Every device md lists as this array's: the members, then the spares.
    pub fn members(&self) -> Vec<String> {
        self.devices.iter().chain(&self.spares).cloned().collect()
    }
}

/// The md arrays that make `array` from its members' partitions
/// (`partitions[i]` is `array.members[i]`'s), in the order they are
/// created: the array itself; or each leg, then the raid0 over the legs.
pub fn arrays(array: &ArrayPlan, partitions: &[String]) -> Vec<MdCreate> {
    let spec = &array.spec;
    let level = spec.level;
    let chunk = level.is_striped().then_some(CHUNK_KIB);
    let part = |spare: bool| -> Vec<String> {
        array
            .members
            .iter()
            .zip(partitions)
            .filter(|(m, _)| m.spare == spare)
            .map(|(_, p)| p.clone())
            .collect()
    };
    let (active, spares) = (part(false), part(true));
    if !spec.is_nested() {
        return vec![MdCreate {
            name: spec.name.clone(),
            level,
            chunk_kib: chunk,
            devices: active,
            spares,
            unequal: !array.equal_members(),
        }];
    }
    let legs = spec.vdev_count();
    let width = active.len() / legs;
    let mut out: Vec<MdCreate> = active
        .chunks(width)
        .enumerate()
        .map(|(i, devices)| MdCreate {
            name: spec.leg_name(i),
            level,
            chunk_kib: chunk,
            devices: devices.to_vec(),
            spares: Vec::new(),
            unequal: false,
        })
        .collect();
    // The spares start on the last leg; `spare-group=` in mdadm.conf lets
    // mdadm's monitor move one to whichever leg loses a disk.
    if let Some(last) = out.last_mut() {
        last.spares = spares;
    }
    let data_per_leg = array.data_disks() as u64 / legs as u64;
    let sizes: Vec<_> = array.active().map(|m| m.disk.size).collect();
    out.push(MdCreate {
        name: spec.name.clone(),
        level: Level::Raid0,
        // One chunk of the raid0 is one full stripe of a leg, so the
        // filesystem's stripe (chunk × every data disk) lines up with
        // whole stripes of both legs and no write reads parity back.
        // raid0 takes any multiple of 4 KiB (mdadm(8), --chunk).
        chunk_kib: Some(CHUNK_KIB * data_per_leg),
        devices: (0..legs)
            .map(|i| format!("/dev/md/{}", spec.leg_name(i)))
            .collect(),
        spares: Vec::new(),
        unequal: sizes.windows(2).any(|w| w[0] != w[1]),
    });
    out
}

/// `mdadm --create` for one array.
pub fn create(md: &MdCreate, homehost: &str) -> Vec<String> {
    let level = md.level;
    let mut argv: Vec<String> = vec![
        "mdadm".into(),
        "--create".into(),
        md.device(),
        "--run".into(),
        format!("--homehost={homehost}"),
        format!("--name={}", md.name),
        "--metadata=1.2".into(),
        format!("--level={}", level.mdadm().unwrap_or("1")),
        format!("--raid-devices={}", md.devices.len()),
    ];
    if !md.spares.is_empty() {
        argv.push(format!("--spare-devices={}", md.spares.len()));
    }
    if let Some(chunk) = md.chunk_kib {
        argv.push(format!("--chunk={chunk}"));
    }
    // Unequal raid0 members need an explicit layout (else "RUN_ARRAY failed:
    // Unknown error 524"); `original` is what newer mdadm picks itself.
    // Never `dangerous`.
    if level == Level::Raid0 && md.unequal {
        argv.push("--layout=original".into());
    }
    // mdadm >= 4.4 silently skips the bitmap with --run unless asked; raid0
    // cannot have one.
    if level != Level::Raid0 {
        argv.push("--bitmap=internal".into());
    }
    // mdadm makes the first --raid-devices of the list members and the
    // rest spares.
    argv.extend(md.members());
    argv
}

/// Only the arrays mdadm.conf lists assemble on their own, at boot and
/// when a disk appears (udev's `mdadm --incremental`): an array on disks
/// from another machine stays as it is, unassembled, so nothing writes to
/// it (a read-write start updates every superblock, and one not shut down
/// cleanly resyncs) before someone chooses to use it. Not `+homehost`: an
/// older nasforge, or the same recipe on a new card, gives the board the
/// old one's hostname, and mdadm starts an array whose homehost matches
/// read-write (Incremental.c). An array a step made before a power cut,
/// not yet listed, is assembled by the executor when setup goes on.
pub const AUTO_LISTED_ONLY: &str = "AUTO -all";

/// The mdadm.conf the image carries before its first boot. Without one,
/// mdadm's postinst (run by the offline install) writes ARRAY lines for
/// every array on the disks it finds (`mkconf generate`), which would make
/// an old NAS's arrays this host's own, started read-write at the next
/// boot. Its ARRAY line names an array that cannot exist (UUID zero) and
/// is ignored: initramfs-tools' mdadm hook, finding no ARRAY line, would
/// put mkconf's list in the initramfs's copy instead of this file, and
/// udev starts what that lists before the root is mounted. Setup replaces
/// the file with its own arrays.
pub fn first_boot_conf() -> String {
    format!(
        "# Written by nasforge before the first boot; nasforge-setup replaces it\n\
         # with the arrays it makes. Arrays on disks from another machine are\n\
         # left unassembled until they are chosen.\n\
         HOMEHOST <system>\n\
         {AUTO_LISTED_ONLY}\n\
         MAILADDR root\n\
         # No array: a line here keeps the initramfs from listing other disks' arrays.\n\
         ARRAY <ignore> UUID=00000000:00000000:00000000:00000000\n"
    )
}

/// The lines above the `mdadm --detail --scan` output. mdmonitor refuses to
/// run without MAILADDR or PROGRAM. A mail address alone would reach no
/// one (the board has no sendmail), so nasforge's handler runs beside it.
/// With `legs`, a note that a regenerated file must keep what nasforge
/// added to the legs' lines.
pub fn conf_header(homehost: &str, alert: &Alert, legs: bool) -> String {
    let alert = match alert {
        Alert::Mail(addr) => format!(
            "MAILADDR {addr}
PROGRAM {}",
            crate::paths::MDADM_EVENT
        ),
        Alert::Program(program) => format!("PROGRAM {program}"),
    };
    let legs = if legs {
        "# Keep the legs' lines first, before the arrays over them, with their\n\
         # spare-group= words: mdadm's monitor moves a spare within its group.\n"
    } else {
        ""
    };
    format!(
        "# Written by nasforge-setup. Regenerate the ARRAY lines with\n\
         # `mdadm --detail --scan`, then run `update-initramfs -u -k all`.\n\
         {legs}HOMEHOST {homehost}\n\
         {AUTO_LISTED_ONLY}\n\
         {alert}\n\
         DEVICE partitions containers\n\
         # A member that drops out and comes back (a USB bridge reset) is\n\
         # re-added by udev's `mdadm --incremental`: with the write-intent\n\
         # bitmap, md copies only what changed while it was away.\n\
         POLICY action=re-add\n"
    )
}

/// An ARRAY line of `mdadm --detail --scan` that nasforge puts first in
/// mdadm.conf, with words of its own added.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanLine {
    /// The line's array, as the scan names it (`/dev/md/data-0`).
    pub device: String,
    pub add: Vec<String>,
}

/// The legs of `plan`'s nested arrays, in order: each ARRAY line before
/// the raid0 over them, so one pass of `mdadm --assemble --scan` (the
/// initramfs) finds the legs before it needs them, and `spare-group=` on
/// every leg of an array, so mdadm's monitor moves a spare to whichever
/// leg lost a disk.
pub fn leg_lines(plan: &Plan) -> Vec<ScanLine> {
    plan.arrays
        .iter()
        .filter(|a| a.spec.is_nested())
        .flat_map(|a| {
            (0..a.spec.vdev_count()).map(|i| ScanLine {
                device: format!("/dev/md/{}", a.spec.leg_name(i)),
                add: vec![format!("{SPARE_GROUP}{}", a.spec.name)],
            })
        })
        .collect()
}

const SPARE_GROUP: &str = "spare-group=";

/// The ARRAY lines of `scan` without the words that start with one of
/// `drop`, those of `first` first, in that order and with their words
/// added, then the others as the scan lists them.
pub fn scan_lines(scan: &str, drop: &[String], first: &[ScanLine]) -> Vec<String> {
    let lines: Vec<Vec<&str>> = scan
        .lines()
        .map(|l| {
            l.split_whitespace()
                .filter(|w| !drop.iter().any(|d| w.starts_with(d.as_str())))
                .collect()
        })
        .collect();
    let device = |words: &[&str]| words.get(1).map(|d| d.to_string());
    let mut out = Vec::new();
    for f in first {
        if let Some(words) = lines.iter().find(|w| device(w).as_ref() == Some(&f.device)) {
            let mut line = words.join(" ");
            for add in &f.add {
                line += " ";
                line += add;
            }
            out.push(line);
        }
    }
    for words in &lines {
        if !device(words).is_some_and(|d| first.iter().any(|f| f.device == d)) {
            out.push(words.join(" "));
        }
    }
    out
}

/// mdadm.conf with its ARRAY lines replaced by those of `scan` (the output
/// of `mdadm --detail --scan`, without `spares=`, which counts a disk being
/// rebuilt), keeping the order and the `spare-group=` words of the lines
/// there (see [`leg_lines`]); None when the lines are the same, so nothing
/// needs rewriting.
pub fn merge_array_lines(existing: &str, scan: &str) -> Option<String> {
    let old: Vec<&str> = existing
        .lines()
        .filter(|l| l.starts_with("ARRAY "))
        .collect();
    let kept: Vec<ScanLine> = old
        .iter()
        .filter_map(|l| {
            let mut words = l.split_whitespace().skip(1);
            let device = words.next()?.to_string();
            let add = words
                .filter(|w| w.starts_with(SPARE_GROUP))
                .map(str::to_string)
                .collect();
            Some(ScanLine { device, add })
        })
        .collect();
    let arrays: Vec<String> = scan_lines(scan, &["spares=".into()], &kept)
        .into_iter()
        .filter(|l| l.starts_with("ARRAY "))
        .collect();
    if old == arrays.iter().map(String::as_str).collect::<Vec<_>>() {
        return None;
    }
    let mut out: String = existing
        .lines()
        .filter(|l| !l.starts_with("ARRAY "))
        .map(|l| format!("{l}\n"))
        .collect();
    for line in arrays {
        out += &line;
        out.push('\n');
    }
    Some(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legs_lines_come_first_with_their_words_and_the_rest_as_scanned() {
        let scan = "ARRAY /dev/md/data metadata=1.2 name=pcnas:data UUID=c\nARRAY /dev/md/backup metadata=1.2 spares=1 name=pcnas:backup UUID=d\nARRAY /dev/md/data-1 metadata=1.2 name=pcnas:data-1 UUID=b\nARRAY /dev/md/data-0 metadata=1.2 name=pcnas:data-0 UUID=a\n";
        let legs = [0, 1].map(|i| ScanLine {
            device: format!("/dev/md/data-{i}"),
            add: vec!["spare-group=data".into()],
        });
        assert_eq!(
            scan_lines(scan, &["spares=".into()], &legs),
            [
                "ARRAY /dev/md/data-0 metadata=1.2 name=pcnas:data-0 UUID=a spare-group=data",
                "ARRAY /dev/md/data-1 metadata=1.2 name=pcnas:data-1 UUID=b spare-group=data",
                "ARRAY /dev/md/data metadata=1.2 name=pcnas:data UUID=c",
                "ARRAY /dev/md/backup metadata=1.2 name=pcnas:backup UUID=d",
            ]
        );
    }
}
