//! The apply plan in words, one line per change, as `apply` prints it and
//! the operation journal keeps it.

use super::ApplyPlan;
use crate::planner::Plan;
use crate::spec::{Nfs, Share, Smb};

impl ApplyPlan {
    pub fn describe(&self) -> String {
        if self.nothing_to_change() {
            return "nasforge.toml is what was set up: nothing to change.\n".into();
        }
        let mut out = String::new();
        for array in &self.arrays_added {
            let alone = Plan {
                arrays: vec![array.clone()],
                shares: vec![],
                alert: self.plan.alert.clone(),
                spin_down: self.plan.spin_down,
                kept: vec![],
                system_mirror: None,
            };
            out += "+ ";
            out += &alone.describe();
        }
        for share in &self.shares_added {
            out += &format!(
                "+ share '{}' at {} ({})\n",
                share.name,
                share.path,
                access(share)
            );
        }
        for share in &self.shares_removed {
            out += &format!(
                "- share '{}' at {}: no longer shared; its directory and files stay\n",
                share.name, share.path
            );
        }
        for change in &self.shares_changed {
            out += &format!("~ share '{}': {}\n", change.name, change.what.join("; "));
        }
        for user in &self.users_added {
            out += &format!(
                "+ user '{user}' opens a share now (set a Samba password with `nasforge-setup user passwd {user}` if it has none)\n"
            );
        }
        for line in &self.alerts_changed {
            out += line;
            out += "\n";
        }
        for refusal in &self.refusals {
            out += &format!("! refused: {refusal}\n");
        }
        if self.refusals.is_empty()
            && self.arrays_added.is_empty()
            && self.shares_added.is_empty()
            && self.shares_removed.is_empty()
            && self.shares_changed.is_empty()
            && self.alerts_changed.is_empty()
        {
            out += "= no array or share changes; nasforge.toml is recorded as what is set up\n";
        }
        out
    }
}

/// Who reaches a share: "SMB: admin, bob; NFS: 192.168.1.0/24".
fn access(share: &Share) -> String {
    let mut parts = Vec::new();
    if let Some(smb) = &share.smb {
        parts.push(format!("SMB: {}", smb_words(smb)));
    }
    if let Some(nfs) = &share.nfs {
        parts.push(format!("NFS: {}", nfs_words(nfs)));
    }
    parts.join("; ")
}

fn smb_words(smb: &Smb) -> String {
    let mut words = vec![if smb.users.is_empty() {
        "no users".to_string()
    } else {
        smb.users.join(", ")
    }];
    if smb.guest {
        words.push("guests may read".into());
    }
    if smb.readonly {
        words.push("read-only".into());
    }
    match (smb.timemachine, smb.timemachine_max_size) {
        (true, Some(max)) => words.push(format!("Time Machine up to {max} each")),
        (true, None) => words.push("Time Machine".into()),
        _ => {}
    }
    words.join(", ")
}

fn nfs_words(nfs: &Nfs) -> String {
    let clients = nfs.clients.0.join(" ");
    if nfs.readonly {
        format!("{clients}, read-only")
    } else {
        clients
    }
}

/// What changed between two shares of the same name, in words.
pub(super) fn share_changes(old: &Share, new: &Share) -> Vec<String> {
    let mut what = Vec::new();
    if old.name != new.name {
        what.push(format!("renamed to '{}'", new.name));
    }
    if old.path != new.path {
        what.push(format!(
            "path {} → {} (the old directory and its files stay)",
            old.path, new.path
        ));
    }
    match (&old.smb, &new.smb) {
        (None, Some(smb)) => what.push(format!("now on SMB ({})", smb_words(smb))),
        (Some(_), None) => what.push("no longer on SMB".into()),
        (Some(a), Some(b)) if a != b => {
            what.push(format!("SMB {} → {}", smb_words(a), smb_words(b)))
        }
        _ => {}
    }
    match (&old.nfs, &new.nfs) {
        (None, Some(nfs)) => what.push(format!("now on NFS ({})", nfs_words(nfs))),
        (Some(_), None) => what.push("no longer on NFS".into()),
        (Some(a), Some(b)) if a != b => {
            what.push(format!("NFS {} → {}", nfs_words(a), nfs_words(b)))
        }
        _ => {}
    }
    what
}
