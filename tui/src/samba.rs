//! Samba: the shares go in a file of their own, pulled into smb.conf with
//! one `include =` line, so the distribution's smb.conf stays as shipped.

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

pub fn shares_conf(shares: &[&Share]) -> String {
    let mut out = String::from(
        "# Written by nasforge-setup from the recipe's [[shares]].\n\
         [global]\n\
         \x20  # macOS clients: Apple extensions, needed for Time Machine.\n\
         \x20  fruit:aapl = yes\n\
         \x20  fruit:model = MacSamba\n",
    );
    for share in shares {
        let Some(smb) = &share.smb else { continue };
        let users = smb.users.join(" ");
        out += &format!("\n[{}]\n", share.name);
        out += &format!("   path = {}\n", share.path);
        out += &format!("   valid users = {users}\n");
        if smb.readonly {
            out += "   read only = yes\n";
        } else {
            out += "   read only = no\n";
            out += &format!("   write list = {users}\n");
        }
        // Every share gets the same vfs stack: fruit on some shares and not
        // others confuses macOS clients that have both mounted.
        out += "   vfs objects = fruit streams_xattr\n";
        out += "   fruit:metadata = stream\n";
        out += "   create mask = 0664\n";
        out += "   directory mask = 2775\n";
        if smb.users.len() > 1 {
            out += &format!("   force group = {}\n", smb.users[0]);
        }
        if smb.timemachine {
            out += "   fruit:time machine = yes\n";
        }
    }
    out
}

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
