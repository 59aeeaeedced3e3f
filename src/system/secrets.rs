//! Password material computed on the workstation, so the image never
//! carries a plaintext password: a crypt(3) hash for /etc/shadow. (Samba's
//! NT hash is nasforge_engine::shares::smbpasswd's, shared with the board.) Also the
//! rules a recipe's own hashes must meet, and the list of what in a
//! finished image is a password equivalent.

use crate::image::Image;
use crate::manifest::{Secret, SecretKind};
use anyhow::{Context, Result, bail};
use std::ffi::{CStr, CString};
use std::ops::RangeInclusive;

#[link(name = "crypt")]
unsafe extern "C" {
    fn crypt_rn(
        phrase: *const libc::c_char,
        setting: *const libc::c_char,
        data: *mut libc::c_void,
        size: libc::c_int,
    ) -> *mut libc::c_char;
    fn crypt_gensalt_rn(
        prefix: *const libc::c_char,
        count: libc::c_ulong,
        rbytes: *const libc::c_char,
        nrbytes: libc::c_int,
        output: *mut libc::c_char,
        output_size: libc::c_int,
    ) -> *mut libc::c_char;
}

/// The hashing scheme for new password hashes in one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `$y$`, what Debian's own tools write since bullseye.
    Yescrypt,
    /// `$6$` with [`SHA512_ROUNDS`], for images whose libcrypt predates
    /// yescrypt.
    Sha512,
}

/// crypt(3)'s default of 5000 rounds makes sha512-crypt cheap to guess on
/// today's hardware; 656000 is passlib's default for it. The cost is paid
/// once per login on the board, and by every guess of an attacker.
pub const SHA512_ROUNDS: libc::c_ulong = 656_000;

impl Scheme {
    /// From the image's /var/lib/dpkg/status: yescrypt when its installed
    /// libcrypt1 (libxcrypt) is 4.3.0 or later, the release that added it.
    /// An image without libcrypt1 has glibc's own crypt, which has no
    /// yescrypt.
    pub fn for_dpkg_status(status: &str) -> Scheme {
        let version = status.split("\n\n").find_map(|stanza| {
            let field = |name: &str| {
                stanza
                    .lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                    .map(str::trim)
            };
            (field("Package") == Some("libcrypt1")
                && field("Status").is_some_and(|s| s.ends_with(" installed")))
            .then(|| field("Version"))
            .flatten()
        });
        match version.map(upstream_numbers) {
            Some(v) if v.as_slice() >= [4, 3, 0].as_slice() => Scheme::Yescrypt,
            _ => Scheme::Sha512,
        }
    }

    fn setting(self) -> (&'static str, libc::c_ulong) {
        match self {
            // 0: libxcrypt's default cost, the one Debian's tools use.
            Scheme::Yescrypt => ("$y$", 0),
            Scheme::Sha512 => ("$6$", SHA512_ROUNDS),
        }
    }
}

/// `1:4.4.33-2` -> [4, 4, 33]: the upstream version's leading numbers.
fn upstream_numbers(version: &str) -> Vec<u64> {
    let v = version.split_once(':').map_or(version, |(_, v)| v);
    let v = v.rsplit_once('-').map_or(v, |(u, _)| u);
    v.split('.')
        .map_while(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

/// A fresh salted hash of `password` made by the build host's libxcrypt
/// (the library Debian-based images verify with).
pub fn crypt_password(password: &str, scheme: Scheme) -> Result<String> {
    let (prefix, count) = scheme.setting();
    hash_with(password, prefix, count)
}

fn hash_with(password: &str, prefix: &str, count: libc::c_ulong) -> Result<String> {
    let prefix_c = CString::new(prefix).expect("prefixes are literals without NUL");
    let mut setting = vec![0u8; 256];
    // SAFETY: `prefix_c` is NUL-terminated; a null rbytes asks libxcrypt for
    // random bytes from the OS; `setting` is as large as the size passed.
    let made = unsafe {
        crypt_gensalt_rn(
            prefix_c.as_ptr(),
            count,
            std::ptr::null(),
            0,
            setting.as_mut_ptr().cast(),
            setting.len() as libc::c_int,
        )
    };
    if made.is_null() {
        bail!(
            "the build host's libcrypt cannot make a {prefix} salt: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: a non-null result is the NUL-terminated string in `setting`.
    let setting = unsafe { CStr::from_ptr(made) }.to_owned();
    let phrase = CString::new(password).context("a password cannot contain a NUL character")?;
    let hash = crypt_to_string(&phrase, &setting)
        .with_context(|| format!("the build host's libcrypt cannot hash with {prefix}"))?;
    Ok(hash)
}

/// crypt_rn's result, or None when it failed (libxcrypt returns null or a
/// string starting with `*` then).
fn crypt_to_string(phrase: &CStr, setting: &CStr) -> Option<String> {
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
        return None;
    }
    // SAFETY: non-null results are NUL-terminated strings inside `data`.
    let out = unsafe { CStr::from_ptr(out) }.to_str().ok()?;
    (!out.starts_with('*')).then(|| out.to_string())
}

/// Whether `password` is the one `hash` was made from, checked by the
/// build host's libxcrypt (the library the images use, so every scheme they
/// write verifies: yescrypt, sha512-crypt, ...).
pub fn verifies(password: &str, hash: &str) -> bool {
    let (Ok(phrase), Ok(setting)) = (CString::new(password), CString::new(hash)) else {
        return false;
    };
    crypt_to_string(&phrase, &setting).is_some_and(|out| out == hash)
}

/// crypt(3)'s base-64 alphabet, which every accepted scheme's salt and
/// hash are written in.
fn is_b64(s: &str) -> bool {
    s.bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'/')
}

/// Why `s` is not a crypt(3) hash accepted in `password_hash`, or None when
/// it is one. The formats are libxcrypt's crypt(5); each part is checked, so
/// nothing but the scheme's own characters reaches /etc/shadow or
/// userconf.txt.
pub fn crypt_hash_problem(s: &str) -> Option<String> {
    if let Some(c) = s.chars().find(|c| !c.is_ascii_graphic() || *c == ':') {
        return Some(format!(
            "it contains {c:?}; a hash is one line of `$`, letters, digits, `.` and `/`"
        ));
    }
    let Some(rest) = s.strip_prefix('$') else {
        return Some("a hash starts with its scheme, such as `$y$`".into());
    };
    let parts: Vec<&str> = rest.split('$').collect();
    let shape = |want: &str| Some(format!("a `${}$` hash has the form `{want}`", parts[0]));
    match parts.as_slice() {
        [scheme @ ("y" | "gy"), params, salt, hash] => {
            field_problem(params, 1..=usize::MAX, "parameters")
                .or_else(|| field_problem(salt, 0..=86, "salt"))
                .or_else(|| field_problem(hash, 43..=43, "hash"))
                .map(|p| format!("{p} (a `${scheme}$` hash)"))
        }
        ["y" | "gy", ..] => shape("$y$<parameters>$<salt>$<43-character hash>"),
        ["7", setting, hash] => field_problem(setting, 11..=97, "setting")
            .or_else(|| field_problem(hash, 43..=43, "hash")),
        ["7", ..] => shape("$7$<setting>$<43-character hash>"),
        [scheme @ ("6" | "5"), tail @ ..] => sha_crypt_problem(scheme, tail),
        ["2b" | "2y", cost, salt_hash] => {
            let ok = cost.len() == 2 && cost.parse::<u8>().is_ok_and(|c| (4..=31).contains(&c));
            if !ok {
                return Some(format!(
                    "bcrypt's cost `{cost}` is not two digits from 04 to 31"
                ));
            }
            field_problem(salt_hash, 53..=53, "salt and hash")
        }
        ["2b" | "2y", ..] => shape("$2b$<cost>$<22-character salt><31-character hash>"),
        _ => Some(format!(
            "`${}$` is not a scheme nasforge accepts: use yescrypt (`$y$`), sha512-crypt (`$6$`), sha256-crypt (`$5$`), bcrypt (`$2b$`) or scrypt (`$7$`)",
            parts[0]
        )),
    }
}

/// Why one `$`-separated field of a hash is not `len` characters of the
/// schemes' base64 alphabet, if it is not; `what` names it.
fn field_problem(text: &str, len: RangeInclusive<usize>, what: &str) -> Option<String> {
    if !is_b64(text) {
        Some(format!(
            "its {what} has characters other than letters, digits, `.` and `/`"
        ))
    } else if !len.contains(&text.len()) {
        let want = if len.start() == len.end() {
            len.start().to_string()
        } else {
            format!("{} to {}", len.start(), len.end())
        };
        Some(format!(
            "its {what} is {} characters long, not {want}",
            text.len()
        ))
    } else {
        None
    }
}

/// sha512-crypt (`$6$`) or sha256-crypt (`$5$`): `tail` is what follows
/// the scheme, `[rounds=N$]<salt>$<hash>`.
fn sha_crypt_problem(scheme: &str, tail: &[&str]) -> Option<String> {
    let hash_len = if scheme == "6" { 86 } else { 43 };
    let tail = match tail {
        [rounds, salt, hash] => {
            let n = rounds.strip_prefix("rounds=").unwrap_or("");
            // libxcrypt raises fewer rounds to 1000 when it hashes,
            // so such a hash could never match: its user locked out.
            let ok = n.len() <= 9
                && n.starts_with(|c: char| ('1'..='9').contains(&c))
                && n.bytes().all(|c| c.is_ascii_digit())
                && n.parse::<u32>().is_ok_and(|n| n >= 1000);
            if !ok {
                return Some(format!(
                    "`{rounds}` is not `rounds=N` with N from 1000 to 999999999"
                ));
            }
            [*salt, *hash]
        }
        [salt, hash] => [*salt, *hash],
        _ => {
            return Some(format!(
                "a `${scheme}$` hash has the form `${scheme}$[rounds=N$]<salt>$<{hash_len}-character hash>`"
            ));
        }
    };
    field_problem(tail[0], 1..=16, "salt")
        .or_else(|| field_problem(tail[1], hash_len..=hash_len, "hash"))
}

/// Names of the accounts in a `name:field:...` file whose `field` is a
/// password hash: anything but empty or a lock (`*`, `!`, `x`). A locked
/// hash (`!$6$...`) still counts: it can be guessed offline.
fn hashed_accounts(text: &str, field: usize) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let value = f.get(field)?.trim_start_matches('!');
            (!matches!(value, "" | "*" | "x")).then(|| f[0].to_string())
        })
        .collect()
}

/// The board's copy of the recipe, on the root (Armbian, PC) or the FAT
/// boot partition (Raspberry Pi).
const BOARD_RECIPE_ROOT: &str = "/boot/nasforge.toml";
const BOARD_RECIPE_FAT: &str = "nasforge.toml";

/// Which of `[alerts]`' URLs, each carrying its token, a recipe sets.
fn alert_urls(recipe: &[u8]) -> Vec<String> {
    let Ok(value) = String::from_utf8_lossy(recipe).parse::<toml::Table>() else {
        return Vec::new();
    };
    ["webhook", "ntfy"]
        .into_iter()
        .filter(|k| {
            value
                .get("alerts")
                .and_then(|a| a.get(*k))
                .is_some_and(|u| u.is_str())
        })
        .map(String::from)
        .collect()
}

/// Every password equivalent in the finished image, read from the image
/// itself so nothing that wrote one is missed.
pub fn scan(image: &Image) -> Result<Vec<Secret>> {
    let mut out = Vec::new();
    let mut add = |file: String, kind: SecretKind, accounts: Vec<String>| {
        if !accounts.is_empty() {
            out.push(Secret {
                file,
                kind,
                accounts,
            });
        }
    };
    if let Some(root) = image.ext4() {
        let files: Vec<String> = [
            "/etc/shadow",
            "/etc/shadow-",
            "/etc/gshadow",
            super::SMBPASSWD,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (path, data) in files.iter().zip(root.read_many(&files)?) {
            let Some(data) = data else { continue };
            let text = String::from_utf8_lossy(&data);
            let (kind, field) = if path == super::SMBPASSWD {
                (SecretKind::NtHash, 3)
            } else {
                (SecretKind::CryptHash, 1)
            };
            add(format!("root:{path}"), kind, hashed_accounts(&text, field));
        }
        if let Some(data) = root.read(BOARD_RECIPE_ROOT)? {
            add(
                format!("root:{BOARD_RECIPE_ROOT}"),
                SecretKind::AlertToken,
                alert_urls(&data),
            );
        }
        if root.owner(nasforge_engine::paths::PASSWORD_FILE)?.is_some() {
            add(
                format!("root:{}", nasforge_engine::paths::PASSWORD_FILE),
                SecretKind::SmtpPassword,
                vec!["smtp".into()],
            );
        }
    }
    if let Some(fat) = image.fat(false)? {
        if let Some(data) = fat.read(BOARD_RECIPE_FAT)? {
            add(
                format!("boot:/{BOARD_RECIPE_FAT}"),
                SecretKind::AlertToken,
                alert_urls(&data),
            );
        }
        if let Some(data) = fat.read("userconf.txt")? {
            let text = String::from_utf8_lossy(&data);
            add(
                "boot:/userconf.txt".into(),
                SecretKind::CryptHash,
                hashed_accounts(&text, 1),
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_hashes_are_salted_and_verify_with_libcrypt() {
        let a = crypt_password("s3cret", Scheme::Yescrypt).unwrap();
        let b = crypt_password("s3cret", Scheme::Yescrypt).unwrap();
        assert!(
            a.starts_with("$y$") && crypt_hash_problem(&a).is_none(),
            "{a}"
        );
        assert_ne!(a, b, "a fresh salt each time");
        assert!(!a.contains("s3cret"));
        assert!(verifies("s3cret", &a) && !verifies("s3cret!", &a));
        assert!(!verifies("s3cret", "*") && !verifies("", ""));
        let s = crypt_password("s3cret", Scheme::Sha512).unwrap();
        assert!(s.starts_with("$6$rounds=656000$"), "{s}");
        assert!(crypt_hash_problem(&s).is_none() && verifies("s3cret", &s));
        assert!(crypt_password("nul\0inside", Scheme::Yescrypt).is_err());
    }

    #[test]
    fn the_scheme_follows_the_images_libcrypt() {
        let status = |v: &str| {
            format!(
                "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n\nPackage: libcrypt1\nStatus: install ok installed\nArchitecture: arm64\nVersion: {v}\n"
            )
        };
        assert_eq!(
            Scheme::for_dpkg_status(&status("1:4.4.33-2")),
            Scheme::Yescrypt
        );
        assert_eq!(
            Scheme::for_dpkg_status(&status("1:4.3.0-1")),
            Scheme::Yescrypt
        );
        assert_eq!(
            Scheme::for_dpkg_status(&status("1:4.4.10-10")),
            Scheme::Yescrypt
        );
        assert_eq!(
            Scheme::for_dpkg_status(&status("1:4.2.3-1")),
            Scheme::Sha512
        );
        assert_eq!(Scheme::for_dpkg_status(&status("garbage")), Scheme::Sha512);
        let removed = status("1:4.4.33-2").replace(
            "Package: libcrypt1\nStatus: install ok installed",
            "Package: libcrypt1\nStatus: deinstall ok config-files",
        );
        assert_eq!(Scheme::for_dpkg_status(&removed), Scheme::Sha512);
        assert_eq!(Scheme::for_dpkg_status(""), Scheme::Sha512);
    }

    #[test]
    fn every_scheme_libcrypt_makes_is_accepted() {
        for (prefix, count) in [
            ("$y$", 0),
            ("$gy$", 0),
            ("$7$", 0),
            ("$6$", 0),
            ("$6$", 656_000),
            ("$5$", 0),
            ("$5$", 12_345),
            ("$2b$", 0),
            ("$2y$", 0),
        ] {
            let h = hash_with("pw", prefix, count).unwrap();
            assert_eq!(crypt_hash_problem(&h), None, "{h}");
            assert!(verifies("pw", &h), "{h}");
        }
    }

    #[test]
    fn hostile_or_malformed_hashes_are_refused_with_a_reason() {
        let good = hash_with("pw", "$6$", 0).unwrap();
        let y = hash_with("pw", "$y$", 0).unwrap();
        let b = hash_with("pw", "$2b$", 0).unwrap();
        for (bad, reason) in [
            (format!("{good}\nmallory"), "contains '\\n'"),
            (format!("{good}\rx"), "contains '\\r'"),
            (format!("{good}:0:99999"), "contains ':'"),
            (format!("{y} "), "contains ' '"),
            (format!("{good}A"), "hash is 87 characters long, not 86"),
            (good[..good.len() - 1].to_string(), "not 86"),
            (y.replace("$y$", "$gy$") + "x", "not 43"),
            (format!("{}!", &y[..y.len() - 1]), "other than letters"),
            ("$6$rounds=0$salt$x".into(), "not `rounds=N`"),
            (good.replacen("$6$", "$6$rounds=999$", 1), "not `rounds=N`"),
            ("$6$a$b$c$d".into(), "has the form"),
            (
                "$6$saltisfartoolongxxxxxxx$h".into(),
                "salt is 23 characters",
            ),
            ("$6$$".into(), "salt is 0 characters"),
            (b.replacen("$2b$", "$2b$1", 1), "cost"),
            ("$1$abc$def".into(), "`$1$` is not a scheme"),
            ("plain".into(), "starts with its scheme"),
            ("".into(), "starts with its scheme"),
            ("$".into(), "`$$` is not a scheme"),
            ("$y$j9T$salt".into(), "has the form"),
            ("$6$säl$x".into(), "contains 'ä'"),
        ] {
            let got = crypt_hash_problem(&bad).unwrap_or_default();
            assert!(got.contains(reason), "{bad:?}: {got:?}");
        }
    }

    #[test]
    fn locked_and_empty_fields_are_not_secrets() {
        let shadow =
            "root:*:1::\nbin:!:1::\nlocked:!$6$s$h:1::\nadmin:$y$j9T$s$h:1::\nnone::1::\nx:x:1\n";
        assert_eq!(hashed_accounts(shadow, 1), ["locked", "admin"]);
        let smb = "admin:1000:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:8846F7EAEE8FB117AD06BDD830B7586C:[U          ]:LCT-0:\n";
        assert_eq!(hashed_accounts(smb, 3), ["admin"]);
    }
}
