//! Samba: the shares go in a file of their own, pulled into smb.conf with
//! one `include =` line, so the distribution's smb.conf stays as shipped.

use crate::shares::avahi;
use crate::size::Size;
use crate::spec::Share;

pub const SHARES_FILE: &str = "/etc/samba/nasforge.conf";
pub const SMB_CONF: &str = "/etc/samba/smb.conf";
/// Staged by the image builder in smbpasswd format (hashes, never
/// plaintext); imported into Samba's database and then deleted.
pub const STAGED_PASSWORDS: &str = "/var/lib/nasforge/smbpasswd";
pub const PASSDB: &str = "/var/lib/samba/private/passdb.tdb";

/// The line added at the end of smb.conf. At the end because an include is
/// textual: placed inside [global], the shares it defines would swallow the
/// global parameters that follow it.
pub fn include_line() -> String {
    format!("include = {SHARES_FILE}")
}

/// The smb.conf text for the SMB shares, each with the Time Machine size
/// limit to write (None: Samba's own, no limit).
pub fn shares_conf(shares: &[(&Share, Option<Size>)]) -> String {
    let mut out = String::from(
        "# Written by nasforge-setup from the recipe's [[shares]].\n\
         [global]\n\
         \x20  # macOS clients: Apple extensions, needed for Time Machine.\n\
         \x20  fruit:aapl = yes\n\
         \x20  # Finder's copies run on the NAS instead of through the client.\n\
         \x20  fruit:copyfile = yes\n",
    );
    out += &format!("   fruit:model = {}\n", avahi::MODEL);
    out += &format!(
        "   # Announced by avahi from {}, not by smbd as well.\n",
        avahi::SERVICE_FILE
    );
    out += "   multicast dns register = no\n";
    if shares
        .iter()
        .any(|(s, _)| s.smb.as_ref().is_some_and(|s| s.guest))
    {
        // A client without an account (or with a wrong user name) is the
        // guest, which only guest shares let in.
        out += "   map to guest = bad user\n";
    }
    for (share, max_size) in shares {
        let Some(smb) = &share.smb else { continue };
        let users = smb.users.join(" ");
        out += &format!("\n[{}]\n", share.name);
        if smb.timemachine {
            // Each user's Macs back up into a folder only that user can
            // open, created at setup; macOS adds one sparse bundle per Mac.
            // %u, the account the client was mapped to: what the folders
            // are named after, whatever case the Mac typed the name in.
            out += &format!("   path = {}/%u\n", share.path);
        } else {
            out += &format!("   path = {}\n", share.path);
        }
        if smb.guest {
            out += "   guest ok = yes\n";
            out += "   read only = yes\n";
            if !smb.readonly && !users.is_empty() {
                out += &format!("   write list = {users}\n");
            }
        } else {
            out += &format!("   valid users = {users}\n");
            out += &format!(
                "   read only = {}\n",
                if smb.readonly { "yes" } else { "no" }
            );
        }
        // Every share gets the same vfs stack: fruit on some shares and not
        // others confuses macOS clients that have both mounted.
        out += "   vfs objects = fruit streams_xattr\n";
        out += "   fruit:metadata = stream\n";
        // Resource forks live in `._` AppleDouble files (fruit:resource =
        // file). Samba 4.22 (trixie) vetoes those from vfs_fruit's own opens
        // too, so with the default no resource fork can be written:
        // smbtorture 4.22's vfs.fruit fails every resource fork test and
        // passes with this. vfs_fruit(8) gives it as the fix for Mac ZIP
        // archives and rsync as well.
        out += "   fruit:veto_appledouble = no\n";
        out += SHARED_GROUP;
        if smb.users.len() > 1 && !smb.timemachine {
            out += &format!("   force group = {}\n", smb.users[0]);
        }
        if smb.timemachine {
            out += "   fruit:time machine = yes\n";
            if let Some(max) = max_size {
                out += &format!("   fruit:time machine max size = {}M\n", max.bytes() >> 20);
            }
        }
    }
    out
}

/// Files and folders made through SMB are the group's to change, as the
/// setgid directory nasforge makes for the share is. The owner's execute
/// bit stays: Samba keeps the DOS archive attribute there, and without it a
/// client that creates a file with full access is denied (smbtorture's
/// smb2.connect and smb2.read.access failed with `create mask = 0664`).
const SHARED_GROUP: &str = "   create mask = 0774\n   directory mask = 2775\n";

pub fn import_command() -> Vec<String> {
    [
        "pdbedit",
        "-i",
        &format!("smbpasswd:{STAGED_PASSWORDS}"),
        "-e",
        &format!("tdbsam:{PASSDB}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}
