//! The plan in words: one block per array, one line per share.

use super::{ArrayPlan, Plan};
use crate::spec::{Level, Share};

impl Plan {
    /// The plan in words, as `plan` prints it and the wizard shows it.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for a in &self.arrays {
            out += &describe_array(a);
        }
        for k in &self.kept {
            let label = k
                .label
                .as_deref()
                .map(|l| format!(" '{l}'"))
                .unwrap_or_default();
            out += &format!(
                "Kept disk '{}': the {}{label} filesystem on {} ({}), mounted as it is at {}; nothing on it is erased\n",
                k.spec.name,
                k.filesystem,
                k.device,
                k.disk.summary(),
                k.spec.mount
            );
        }
        for share in &self.shares {
            out += &describe_share(share);
        }
        out
    }
}

/// An array's lines: its members, capacity, redundancy, bottleneck,
/// warnings and the disks it left out.
fn describe_array(a: &ArrayPlan) -> String {
    let mut out = String::new();
    let s = &a.spec;
    if s.is_zfs() {
        out += &pool_line(a);
    } else {
        let device = if s.level == Level::Single {
            "a partition".to_string()
        } else {
            s.md_device()
        };
        out += &format!(
            "Array '{}': {} of {} disk(s) as {device}, {} mounted at {}\n",
            s.name,
            s.level,
            a.members.len(),
            s.filesystem,
            s.mount
        );
    }
    for m in &a.members {
        let erase = if m.erase { "  [will be erased]" } else { "" };
        let controller = m
            .disk
            .controller
            .as_ref()
            .map(|c| format!(" via {}", c.label()))
            .unwrap_or_default();
        out += &format!(
            "  - {}: {}{controller}{erase}\n",
            m.disk.name,
            m.disk.summary()
        );
    }
    let overhead = if s.is_zfs() {
        "before ZFS's metadata, raidz padding and reserved space"
    } else {
        "before filesystem overhead"
    };
    out += &format!("  capacity: about {} ({overhead})", a.capacity);
    if a.lost_to_mixed_sizes.0 > 0 {
        out += &format!(
            ", {} unused because members differ in size",
            a.lost_to_mixed_sizes
        );
    }
    out += "\n";
    let t = a.tolerance;
    out += &match (t.guaranteed, t.best_case) {
        (0, _) => "  survives: no disk failure\n".to_string(),
        (g, b) if g == b => format!("  survives: {g} failed disk(s)\n"),
        (g, b) if s.is_zfs() => format!(
            "  survives: {g} failed disk(s) in each vdev, {b} in all when they fall in different vdevs\n"
        ),
        (g, b) => format!(
            "  survives: {g} failed disk(s), up to {b} if each is from a different mirror\n"
        ),
    };
    let b = a.throughput.bottleneck();
    let others: Vec<String> = a
        .throughput
        .limits
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != a.throughput.bottleneck)
        .map(|(_, l)| format!("{} ≈{} MB/s", l.what, l.mb_s))
        .collect();
    out += &format!("  expected bottleneck: {} at ≈{} MB/s", b.what, b.mb_s);
    if !others.is_empty() {
        out += &format!(" (also: {})", others.join("; "));
    }
    out += "\n";
    for w in &a.warnings {
        out += &format!("  warning: {w}\n");
    }
    for s in &a.skipped {
        out += &format!("  skipped {s}\n");
    }
    out
}

/// A pool's first line: its layout in vdevs, where it mounts, its sector
/// size.
fn pool_line(a: &ArrayPlan) -> String {
    let s = &a.spec;
    let vdevs = s.vdev_count();
    let width = a.members.len() / vdevs.max(1);
    let layout = match (s.level, vdevs) {
        (Level::Stripe, _) => format!("a stripe of {} disk(s)", a.members.len()),
        (level, 1) => format!("one {level} vdev of {width} disks"),
        (level, n) => format!("{n} {level} vdevs of {width} disks each, striped"),
    };
    let ashift = a.ashift.unwrap_or(12);
    format!(
        "Pool '{}': ZFS, {layout}, mounted at {}; ashift {ashift} ({}-byte blocks)\n",
        s.name,
        s.mount,
        1u64 << ashift
    )
}

/// A share's line: where it is and who reaches it how.
fn describe_share(share: &Share) -> String {
    let mut how = Vec::new();
    if let Some(smb) = &share.smb {
        let tm = if smb.timemachine {
            ", Time Machine"
        } else {
            ""
        };
        if smb.guest {
            how.push("SMB read-only for guests".into());
        }
        if !smb.users.is_empty() {
            let ro = if smb.readonly { " read-only" } else { "" };
            how.push(format!("SMB{ro} for {}{tm}", smb.users.join(", ")));
        }
    }
    if let Some(nfs) = &share.nfs {
        let ro = if nfs.readonly { " read-only" } else { "" };
        how.push(format!("NFS{ro} to {}", nfs.clients.0.join(" ")));
    }
    format!(
        "Share '{}': {} ({})\n",
        share.name,
        share.path,
        how.join("; ")
    )
}
