//! The plan in words: one block per array, one line per share.

use super::{ArrayPlan, Member, Plan};
use crate::spec::{Level, Share};

impl Plan {
    /// The plan in words, as `plan` prints it and the wizard shows it.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if let Some(m) = &self.system_mirror {
            let erase = if m.erase {
                format!(", erasing what it holds ({})", m.disk.describe_contents())
            } else {
                String::new()
            };
            out += &format!(
                "System: mirrored (RAID1, /dev/md/system) from {} ({}) onto {} ({}){erase}; the PC boots from either, and reboots once while this is set up\n",
                m.system.name,
                m.system.summary(),
                m.disk.name,
                m.disk.summary()
            );
        }
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
    if a.spec.level == Level::Pool {
        return describe_pool(a);
    }
    let mut out = String::new();
    let s = &a.spec;
    if s.is_zfs() {
        out += &pool_line(a);
    } else {
        out += &md_line(a);
    }
    // A nested array's members under their legs, each leg an md array of
    // its own; spares apart, as they hold no data.
    let groups = a.groups();
    for (i, group) in groups.iter().enumerate() {
        if s.is_nested() {
            out += &format!("  leg '{}' (/dev/md/{}):\n", s.leg_name(i), s.leg_name(i));
        }
        for m in group {
            out += &member_line(m);
        }
    }
    let spares: Vec<&Member> = a.spares().collect();
    if !spares.is_empty() {
        out += &spares_heading(a, spares.len());
        for m in spares {
            out += &member_line(m);
        }
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
        (g, b) if s.is_nested() => format!(
            "  survives: {g} failed disk(s) in each leg, {b} in all when they fall in different legs\n"
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

/// A pool's lines: each disk with its role and where it mounts, what the
/// pool holds, what a lost disk costs, its speed.
fn describe_pool(a: &ArrayPlan) -> String {
    let s = &a.spec;
    let parity = s.parity.unwrap_or(0);
    let data = a.members.len() - parity + a.joined.len();
    let mut out = format!(
        "Pool '{}': {data} data disk(s) joined by mergerfs at {}, {} (SnapRAID), each disk its own {} filesystem under {}\n",
        s.name,
        s.mount,
        match parity {
            0 => "no parity".to_string(),
            1 => "1 parity disk".to_string(),
            p => format!("{p} parity disks"),
        },
        s.filesystem,
        crate::spec::pool::disks_dir(&s.name)
    );
    for m in a.members.iter().filter(|m| m.parity) {
        out += &format!("  parity: {}", &member_line(m)[4..]);
    }
    for m in a.members.iter().filter(|m| !m.parity) {
        out += &format!("  data: {}", &member_line(m)[4..]);
    }
    for k in &a.joined {
        out += &format!(
            "  data, kept as it is: {} ({}, {} at {}; its files stay and are served in the pool)\n",
            k.disk.name,
            k.disk.summary(),
            k.filesystem,
            k.spec.mount
        );
    }
    let largest = a
        .members
        .iter()
        .filter(|m| !m.parity)
        .map(|m| m.disk.size)
        .chain(a.joined.iter().map(|k| k.disk.size))
        .max()
        .unwrap_or(crate::size::Size(0));
    out += &format!(
        "  capacity: about {} (the data disks' sum, before filesystem overhead)",
        a.capacity
    );
    if a.lost_to_mixed_sizes.0 > 0 {
        out += &format!(
            ", {} of the parity disks beyond the largest data disk unused",
            a.lost_to_mixed_sizes
        );
    }
    out += "\n";
    out += &format!("  survives: {}\n", describe_loss(parity, largest));
    let b = a.throughput.bottleneck();
    out += &format!(
        "  speed: one disk's, as each file lies whole on one disk; expected bottleneck: {} at ≈{} MB/s\n",
        b.what, b.mb_s
    );
    for w in &a.warnings {
        out += &format!("  warning: {w}\n");
    }
    for s in &a.skipped {
        out += &format!("  skipped {s}\n");
    }
    out
}

/// What a pool's capacity and protection come to, in words for the plan.
fn describe_loss(parity: usize, largest_data: crate::size::Size) -> String {
    match parity {
        0 => "a lost disk loses the files on it; the other disks' files stay".to_string(),
        p => format!(
            "{p} lost disk(s): their files are restored from parity as of the last sync (nightly); files changed since are lost. Parity covers data disks up to {largest_data}"
        ),
    }
}

/// An md array's first line: its layout (legs, spares), its device, its
/// filesystem and mount point.
fn md_line(a: &ArrayPlan) -> String {
    let s = &a.spec;
    if let Some(i) = &a.imported {
        let was = i
            .name
            .as_deref()
            .map(|n| format!(" '{}'", crate::machine::printable(n)))
            .unwrap_or_default();
        return format!(
            "Array '{}': the {} array{was} (UUID {}) adopted as it is, {} of {} member(s) here, as {}, its {} filesystem mounted at {}; nothing on it is erased\n",
            s.name,
            s.level,
            i.uuid,
            i.devices.len(),
            i.raid_devices,
            s.md_device(),
            s.filesystem,
            s.mount
        );
    }
    let active = a.active().count();
    let device = if s.level == Level::Single {
        "a partition".to_string()
    } else {
        s.md_device()
    };
    let layout = match s.level.nested_name() {
        Some(nested) if s.is_nested() => format!(
            "{} {} legs of {} disks each, striped ({nested})",
            s.vdev_count(),
            s.level,
            active / s.vdev_count()
        ),
        _ => format!("{} of {active} disk(s)", s.level),
    };
    format!(
        "Array '{}': {layout}{} as {device}, {} mounted at {}\n",
        s.name,
        spares_text(a),
        s.filesystem,
        s.mount
    )
}

/// A pool's first line: its layout in vdevs, where it mounts, its sector
/// size.
fn pool_line(a: &ArrayPlan) -> String {
    let s = &a.spec;
    if let Some(i) = &a.imported {
        return format!(
            "Pool '{}': the ZFS {} pool (id {}) adopted as it is, {} of its {} disk(s) here, its top dataset mounted at {}; nothing on it is erased\n",
            s.name,
            s.level,
            i.uuid,
            a.members.len(),
            i.raid_devices,
            s.mount
        );
    }
    let vdevs = s.vdev_count();
    let active = a.active().count();
    let width = active / vdevs.max(1);
    let layout = match (s.level, vdevs) {
        (Level::Stripe, _) => format!("a stripe of {active} disk(s)"),
        (level, 1) => format!("one {level} vdev of {width} disks"),
        (level, n) => format!("{n} {level} vdevs of {width} disks each, striped"),
    };
    let ashift = a.ashift.unwrap_or(12);
    format!(
        "Pool '{}': ZFS, {layout}{}, mounted at {}; ashift {ashift} ({}-byte blocks)\n",
        s.name,
        spares_text(a),
        s.mount,
        1u64 << ashift
    )
}

/// "; 1 hot spare" after the layout, or nothing.
fn spares_text(a: &ArrayPlan) -> String {
    match a.spares().count() {
        0 => String::new(),
        1 => "; 1 hot spare".into(),
        n => format!("; {n} hot spares"),
    }
}

/// The line above the spares: they hold no data, and who puts them in
/// when a disk fails.
fn spares_heading(a: &ArrayPlan, n: usize) -> String {
    let s = &a.spec;
    let (spares, them) = if n == 1 {
        ("hot spare", "it")
    } else {
        ("hot spares", "one")
    };
    let who = if s.is_zfs() {
        format!("ZFS's event daemon resilvers a faulted disk onto {them}")
    } else if s.is_nested() {
        format!("md rebuilds a failed member onto {them} at once, in whichever leg lost a disk")
    } else {
        format!("md rebuilds a failed member onto {them} at once")
    };
    format!("  {spares}, holding no data ({who}):\n")
}

/// A member's line: its name, what it is, its controller, whether it is
/// erased.
fn member_line(m: &Member) -> String {
    let erase = if m.erase { "  [will be erased]" } else { "" };
    let controller = m
        .disk
        .controller
        .as_ref()
        .map(|c| format!(" via {}", c.label()))
        .unwrap_or_default();
    format!(
        "  - {}: {}{controller}{erase}\n",
        m.disk.name,
        m.disk.summary()
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
