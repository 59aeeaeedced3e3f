//! Spinning idle hard disks down with hd-idle (Debian bookworm ships
//! 1.05): its /etc/default/hd-idle, read by the packaged hd-idle.service
//! as `HD_IDLE_OPTS`.

use crate::machine::disks::Disk;
use crate::planner::Plan;
use crate::spec::SpinDown;

pub const DEFAULT_FILE: &str = "/etc/default/hd-idle";
pub const SERVICE: &str = "hd-idle.service";

/// The disks to spin down: every rotational member of the plan's arrays
/// and every rotational kept disk. An SSD has no spindle, and hd-idle's
/// SCSI STOP UNIT only takes it offline until the next read. hd-idle
/// rather than hdparm because many USB bridges ignore hdparm's timers.
pub fn disks(plan: &Plan) -> Vec<&Disk> {
    plan.arrays
        .iter()
        .flat_map(|a| &a.members)
        .map(|m| &m.disk)
        .chain(plan.kept.iter().map(|k| &k.disk))
        .filter(|d| d.rotational)
        .collect()
}

/// /etc/default/hd-idle for `disks`; None when spin-down is off.
///
/// hd-idle spins every disk down after 10 minutes unless told otherwise,
/// so the options start with `-i 0` (never) and then name each disk with
/// its own time. Disks are named by their /dev/disk/by-id link, which
/// hd-idle resolves at start: a kernel name such as sdb may belong to
/// another disk after the next boot. A disk without such a link is left
/// spinning rather than risk spinning down the wrong one.
pub fn default_file(spin_down: SpinDown, disks: &[&Disk]) -> Option<String> {
    let SpinDown::After(seconds) = spin_down else {
        return None;
    };
    let mut out = format!(
        "# Written by nasforge-setup from [storage] spin_down = \"{spin_down}\".\n\
         # -i 0 first: hd-idle would otherwise spin every disk down after 10 minutes,\n\
         # SSDs and the system disk included. Then each hard disk of the arrays.\n"
    );
    let mut opts = vec!["-i".to_string(), "0".to_string()];
    for disk in disks {
        match disk.by_id.as_ref().filter(|l| is_plain(l)) {
            Some(link) => opts.extend([
                "-a".to_string(),
                link.clone(),
                "-i".to_string(),
                seconds.to_string(),
            ]),
            None => {
                out += &format!(
                    "# {} has no plain /dev/disk/by-id link, so no stable name: left spinning.\n",
                    disk.name
                )
            }
        }
    }
    out += &format!("HD_IDLE_OPTS=\"{}\"\n", opts.join(" "));
    Some(out)
}

/// The value is read by systemd (`EnvironmentFile=`, split on spaces) and
/// sourced by the package's init script: a link with quotes, `$` or spaces
/// would change the command line. udev's by-id names never hold them.
fn is_plain(link: &str) -> bool {
    link.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/_.:+@=#-".contains(c))
}
