//! What an md array another machine made holds, looked at before anything
//! adopts it: assembled read-only under a name of its own (md then writes
//! nothing to its members: no resync, no superblock update), libblkid's
//! probe of the array, and stopped again, whatever was found. An array udev
//! already started is probed where it runs. So the wizard can say what is
//! on it, and the planner can refuse a recipe that names another
//! filesystem before anything is written.

use super::existing::{ExistingMd, assemble_readonly, probe_type};
use super::existing_pool::said;
use crate::command::{Ask, Cmd};
use crate::machine::disks::Host;

/// The device it is assembled as while it is looked at: its own name
/// (`openmediavault:0`) may be taken here.
pub fn probe_device(md: &ExistingMd) -> String {
    let short: String = md
        .uuid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect();
    format!("/dev/md/nasforge-probe-{short}")
}

/// libblkid's name for what is on the array (`ext4`), empty when it
/// knows nothing there; mdadm's or blkid's words when it cannot be looked
/// at.
pub fn probe(md: &ExistingMd, host: &Host, ask: &mut dyn Ask) -> Result<String, String> {
    let running = md
        .assembled()
        .flat_map(|m| {
            crate::machine::mounts::holders(&host.path(&format!("/sys/class/block/{}", m.device)))
        })
        .find(|h| h.starts_with("md"));
    if let Some(running) = running {
        return blkid(ask, &format!("/dev/{running}"));
    }
    let device = probe_device(md);
    let devices: Vec<String> = md
        .assembled()
        .map(|m| format!("/dev/{}", m.device))
        .collect();
    said(
        ask,
        &assemble_readonly(&device, &md.uuid, &devices, md.missing() > 0),
    )?;
    let found = blkid(ask, &device);
    // Stopped whatever blkid said: an array left assembled would hold its
    // disks from everything that follows.
    said(ask, &Cmd::new(&["mdadm", "--stop", &device]))?;
    found
}

/// blkid's TYPE of `device`; it exits 2 when it finds nothing there.
fn blkid(ask: &mut dyn Ask, device: &str) -> Result<String, String> {
    let cmd = probe_type(device);
    let answer = ask.query(&cmd).map_err(|e| e.to_string())?;
    match answer.status {
        0 | 2 => Ok(answer.stdout.trim().to_string()),
        _ => Err(format!("`{cmd}` said: {}", answer.stderr.trim())),
    }
}
