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

#[link(name = "crypt")]
unsafe extern "C" {
    fn crypt_rn(
        phrase: *const libc::c_char,
        setting: *const libc::c_char,
        data: *mut libc::c_void,
        size: libc::c_int,
    ) -> *mut libc::c_char;
}

/// Whether `password` is the one `hash` was made from, checked by the
/// build host's libxcrypt (the library the images use, so every scheme they
/// write verifies: yescrypt, sha512-crypt, ...).
pub fn verifies(password: &str, hash: &str) -> bool {
    let (Ok(phrase), Ok(setting)) = (
        std::ffi::CString::new(password),
        std::ffi::CString::new(hash),
    ) else {
        return false;
    };
    // libxcrypt's struct crypt_data is 32768 bytes.
    let mut data = vec![0u8; 32768];
    // SAFETY: both strings are NUL-terminated and outlive the call; `data`
    // is as large as the size passed; the result points into `data`.
    let out = unsafe {
        crypt_rn(
            phrase.as_ptr(),
            setting.as_ptr(),
            data.as_mut_ptr().cast(),
            data.len() as libc::c_int,
        )
    };
    if out.is_null() {
        return false;
    }
    // SAFETY: non-null results are NUL-terminated strings inside `data`.
    let out = unsafe { std::ffi::CStr::from_ptr(out) };
    out.to_bytes() == hash.as_bytes()
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
        assert!(verifies("s3cret", &a) && !verifies("s3cret!", &a));
        assert!(!verifies("s3cret", "*") && !verifies("", ""));
    }
}
