//! Samba passwords chosen in the wizard, staged exactly as the image builder
//! stages the recipe's: NT hashes in smbpasswd format at
//! [`samba::STAGED_PASSWORDS`](crate::shares::samba::STAGED_PASSWORDS), which the
//! `samba-users` step imports with pdbedit and then deletes. A password is
//! never written in clear.

use md4::{Digest, Md4};

/// Samba's NT hash: MD4 of the UTF-16LE password, as 32 uppercase hex digits.
pub fn nt_hash(password: &str) -> String {
    let utf16: Vec<u8> = password.encode_utf16().flat_map(u16::to_le_bytes).collect();
    Md4::digest(&utf16)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect()
}

/// One smbpasswd(5) line: no LanMan hash (32 `X`), the NT hash, a normal
/// account (`[U ...]`), and the time of the last change in hex seconds.
pub fn line(user: &str, uid: u32, nt_hash: &str, changed: u64) -> String {
    format!(
        "{user}:{uid}:{}:{nt_hash}:[U          ]:LCT-{changed:08X}:",
        "X".repeat(32)
    )
}

/// The users an smbpasswd file has a hash for.
pub fn users(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_once(':').map(|(user, _)| user.to_string()))
        .filter(|u| !u.is_empty() && !u.starts_with('#'))
        .collect()
}

/// `existing` with the lines for the users in `new` replaced by `new`: a
/// password typed in the wizard wins over one the image staged.
pub fn merge(existing: &str, new: &[String]) -> String {
    let replaced: Vec<String> = users(&new.join("\n"));
    let mut out: String = existing
        .lines()
        .filter(|l| {
            l.split_once(':')
                .is_none_or(|(user, _)| !replaced.iter().any(|r| r == user))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    for l in new {
        out += l;
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nt_hashes_match_published_values() {
        assert_eq!(nt_hash("password"), "8846F7EAEE8FB117AD06BDD830B7586C");
        assert_eq!(nt_hash(""), "31D6CFE0D16AE931B73C59D7E0C089C0");
    }

    #[test]
    fn lines_are_in_smbpasswd_format() {
        let l = line("admin", 1000, &nt_hash("password"), 0x6568_2A00);
        assert_eq!(
            l,
            "admin:1000:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:8846F7EAEE8FB117AD06BDD830B7586C:[U          ]:LCT-65682A00:"
        );
    }

    #[test]
    fn merging_replaces_only_the_users_given() {
        let staged = "admin:1000:X:OLD:[U          ]:LCT-1:\nbob:1001:X:BOB:[U          ]:LCT-1:\n";
        let merged = merge(
            staged,
            &["admin:1000:X:NEW:[U          ]:LCT-2:".to_string()],
        );
        assert_eq!(
            merged,
            "bob:1001:X:BOB:[U          ]:LCT-1:\nadmin:1000:X:NEW:[U          ]:LCT-2:\n"
        );
        assert_eq!(users(&merged), ["bob", "admin"]);
    }
}
