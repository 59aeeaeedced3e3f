//! Password material computed on the workstation, so the image never
//! carries a plaintext password: a crypt(3) hash for /etc/shadow. (Samba's
//! NT hash is nasforge_setup::smbpasswd's, shared with the board.)

use anyhow::{Context, Result};
use sha_crypt::{PasswordHasher, ShaCrypt};
use std::io::Read;

/// sha512-crypt (`$6$`), which libxcrypt on every Debian-based image
/// verifies; 16 random salt characters as crypt(3) makes them.
pub fn crypt_password(password: &str) -> Result<String> {
    let mut salt = [0u8; 12];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut salt))
        .context("reading /dev/urandom for a salt")?;
    let hash = ShaCrypt::SHA512
        .hash_password_with_salt(password.as_bytes(), &salt)
        .map_err(|e| anyhow::anyhow!("hashing a password: {e}"))?;
    Ok(hash.to_string())
}

/// Whether a string is a crypt(3) hash this tool accepts in `password_hash`.
pub fn is_crypt_hash(s: &str) -> bool {
    ["$y$", "$gy$", "$6$", "$5$", "$2b$", "$7$"]
        .iter()
        .any(|p| s.starts_with(p))
        && s.len() > 20
        && !s.contains(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crypt_hashes_are_salted_sha512() {
        let a = crypt_password("s3cret").unwrap();
        let b = crypt_password("s3cret").unwrap();
        assert!(a.starts_with("$6$") && is_crypt_hash(&a), "{a}");
        assert_ne!(a, b, "a fresh salt each time");
        assert!(!a.contains("s3cret"));
    }
}
