//! NFS exports: one line per share in /etc/exports.d/nasforge.exports.

use crate::spec::Share;

pub const EXPORTS_FILE: &str = "/etc/exports.d/nasforge.exports";

/// `mount` is the array's mount point: `mp` makes nfsd refuse to export
/// the empty directory underneath when the array failed to mount, instead
/// of letting clients write to the boot disk.
pub fn exports(shares: &[(&Share, &str)]) -> String {
    let mut out = String::from("# Written by nasforge-setup from the recipe's [[shares]].\n");
    for (share, mount) in shares {
        let Some(nfs) = &share.nfs else { continue };
        let rw = if nfs.readonly { "ro" } else { "rw" };
        let mp = if share.path == *mount {
            "mp".to_string()
        } else {
            format!("mp={mount}")
        };
        let clients: Vec<String> = nfs
            .clients
            .0
            .iter()
            .map(|c| format!("{c}({rw},sync,no_subtree_check,root_squash,{mp})"))
            .collect();
        out += &format!("\"{}\" {}\n", share.path, clients.join(" "));
    }
    out
}
