//! Who can get into the built image, and how: root's password, the vendor
//! passwords everyone knows, sshd's rule for root, and sudo for users who
//! log in with a key and have no password to give it. Pure functions over
//! the files' text, so `build` changes them and `inspect` reports them with
//! the same reading.

use crate::system::secrets;

/// Passwords a base image is known to ship with, as (user, password, who
/// sets it). A build never lets one of these through.
pub const KNOWN_DEFAULTS: &[(&str, &str, &str)] = &[
    // armbian/build: ROOTPWD="1234" in lib/functions/configuration/main-config.sh,
    // set with passwd in the rootfs; armbian-firstlogin replaces it only
    // while /root/.not_logged_in_yet exists.
    ("root", "1234", "Armbian's default root password `1234`"),
    // pi-gen before the April 2022 release: FIRST_USER_PASS=raspberry.
    (
        "pi",
        "raspberry",
        "the old Raspberry Pi OS default `pi`/`raspberry`",
    ),
];

/// The state of one account's password field in /etc/shadow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Password {
    /// `!…` or `*`: no password login.
    Locked,
    /// An empty field: login without a password.
    Empty,
    /// A usable hash; `Some` when it is one of `KNOWN_DEFAULTS`.
    Set(Option<&'static str>),
}

impl std::fmt::Display for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Password::Locked => f.write_str("locked"),
            Password::Empty => f.write_str("EMPTY (anyone can log in)"),
            Password::Set(None) => f.write_str("has a password"),
            Password::Set(Some(why)) => write!(f, "has {why} (anyone can log in)"),
        }
    }
}

/// The shadow field of `user`, if the account is there.
pub fn shadow_field<'a>(shadow: &'a str, user: &str) -> Option<&'a str> {
    shadow.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next() == Some(user)).then(|| f.next().unwrap_or(""))
    })
}

pub fn password_state(user: &str, field: &str) -> Password {
    if field.is_empty() {
        return Password::Empty;
    }
    if field.starts_with('!') || field.starts_with('*') {
        return Password::Locked;
    }
    let known = KNOWN_DEFAULTS
        .iter()
        .find(|(u, p, _)| *u == user && secrets::verifies(p, field))
        .map(|(_, _, why)| *why);
    Password::Set(known)
}

/// Sets `user`'s shadow field, keeping every other line as it is.
pub fn set_shadow_field(shadow: &str, user: &str, value: &str) -> anyhow::Result<String> {
    super::accounts::check_fields(&[value])?;
    let mut out: Vec<String> = shadow
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(':').collect();
            if f.first() == Some(&user) && f.len() >= 2 {
                f[1] = value;
                f.join(":")
            } else {
                l.to_string()
            }
        })
        .collect();
    out.push(String::new());
    Ok(out.join("\n"))
}

/// The drop-in that keeps root from logging in with a password.
pub const SSHD_DROP_IN: &str = "/etc/ssh/sshd_config.d/00-nasforge.conf";
pub const SSHD_SETTINGS: &str = "# Written by nasforge. sshd keeps the first value it reads for a keyword\n# and reads this directory before the rest of sshd_config, so this holds\n# whatever sshd_config says further down (Armbian's says PermitRootLogin yes):\n# root logs in with a key or not at all.\nPermitRootLogin prohibit-password\n";

/// Whether an sshd_config reads `/etc/ssh/sshd_config.d/*.conf` before its
/// own settings (Debian's has had the Include on its first lines since
/// bullseye); when not, the drop-in would be ignored.
pub fn includes_drop_ins(sshd_config: &str) -> bool {
    for line in sshd_config.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let (key, value) = split_keyword(t);
        if key == "include" {
            if value
                .split_whitespace()
                .any(|v| v.starts_with("/etc/ssh/sshd_config.d/"))
            {
                return true;
            }
            continue;
        }
        return false;
    }
    false
}

fn split_keyword(line: &str) -> (String, &str) {
    let cut = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let value = line[cut..].trim_start_matches(|c: char| c.is_whitespace() || c == '=');
    (line[..cut].to_ascii_lowercase(), value.trim())
}

/// sshd's settings for a connection that matches no `Match` block: the first
/// value of each keyword wins, `Include`s are read where they stand.
/// `include` turns an Include's pattern into the texts of the files it
/// names, in sshd's (sorted) order.
pub struct SshdConfig {
    values: Vec<(String, String)>,
}

impl SshdConfig {
    pub fn evaluate(main: &str, include: &dyn Fn(&str) -> Vec<String>) -> SshdConfig {
        let mut values = Vec::new();
        Self::read(main, include, &mut values, 0);
        SshdConfig { values }
    }

    fn read(
        text: &str,
        include: &dyn Fn(&str) -> Vec<String>,
        values: &mut Vec<(String, String)>,
        depth: u32,
    ) {
        for line in text.lines() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let (key, value) = split_keyword(t);
            match key.as_str() {
                // What follows belongs to the Match block, up to the file's end.
                "match" => return,
                "include" if depth < 8 => {
                    for pattern in value.split_whitespace() {
                        for inner in include(pattern) {
                            Self::read(&inner, include, values, depth + 1);
                        }
                    }
                }
                _ => {
                    // The old name of the same setting.
                    let key = if key == "challengeresponseauthentication" {
                        "kbdinteractiveauthentication".to_string()
                    } else {
                        key
                    };
                    if !values.iter().any(|(k, _)| *k == key) {
                        values.push((key, value.to_ascii_lowercase()));
                    }
                }
            }
        }
    }

    /// The value sshd uses, with OpenSSH's defaults for what is not set.
    pub fn get(&self, key: &str) -> &str {
        match self.values.iter().find(|(k, _)| k == key) {
            Some((_, v)) => v,
            None => match key {
                "permitrootlogin" => "prohibit-password",
                "usepam" => "no",
                _ => "yes",
            },
        }
    }

    /// Whether root may log in with a password: PermitRootLogin yes, and a
    /// password asked either directly or through PAM's keyboard-interactive.
    pub fn root_password_login(&self) -> bool {
        self.get("permitrootlogin") == "yes"
            && (self.get("passwordauthentication") == "yes"
                || (self.get("kbdinteractiveauthentication") == "yes"
                    && self.get("usepam") == "yes"))
    }
}

/// The sudoers drop-in for users with `sudo = true` and no password: with
/// sudo's default rule they could never use it (Raspberry Pi OS dropped
/// 010_pi-nopasswd in 2026-04; Armbian never had it). None when no user
/// needs it.
pub const SUDOERS_DROP_IN: &str = "/etc/sudoers.d/nasforge";

pub fn sudoers(users: &[&str]) -> Option<String> {
    if users.is_empty() {
        return None;
    }
    let mut out = String::from(
        "# Written by nasforge: these users log in with an SSH key only and have\n# no password to give sudo.\n",
    );
    for u in users {
        out.push_str(&format!("{u} ALL=(ALL:ALL) NOPASSWD: ALL\n"));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARMBIAN_1234: &str =
        "$y$j9T$V8kx0b3zJ5dF1Ym2Qr7Gn.$WqpFxUjm4kO5VO4dNlWxIFHysKpnAOdWHrL1SG0Mem.";

    #[test]
    fn known_default_passwords_are_recognised_by_their_hash() {
        assert_eq!(
            password_state("root", ARMBIAN_1234),
            Password::Set(Some(KNOWN_DEFAULTS[0].2))
        );
        assert_eq!(
            password_state("admin", ARMBIAN_1234),
            Password::Set(None),
            "only the account the vendor sets it on"
        );
        let other = secrets::crypt_password("not 1234", secrets::Scheme::Yescrypt).unwrap();
        assert_eq!(password_state("root", &other), Password::Set(None));
        assert_eq!(password_state("root", "*"), Password::Locked);
        assert_eq!(password_state("root", "!$6$x$y"), Password::Locked);
        assert_eq!(password_state("root", ""), Password::Empty);
    }

    #[test]
    fn shadow_fields_change_on_their_line_only() {
        let shadow = "root:$6$a$b:19000:0:99999:7:::\npi:*:19000:0:99999:7:::";
        assert_eq!(shadow_field(shadow, "root"), Some("$6$a$b"));
        assert_eq!(shadow_field(shadow, "nobody"), None);
        assert_eq!(
            set_shadow_field(shadow, "root", "*").unwrap(),
            "root:*:19000:0:99999:7:::\npi:*:19000:0:99999:7:::\n"
        );
        assert!(set_shadow_field(shadow, "root", "$6$a$b\nmallory:x").is_err());
    }

    #[test]
    fn sshd_first_value_wins_and_includes_are_read_in_place() {
        let main = "Include /etc/ssh/sshd_config.d/*.conf\nPermitRootLogin yes\nKbdInteractiveAuthentication no\nUsePAM yes\nMatch User backup\n  PasswordAuthentication no\n";
        let none = |_: &str| Vec::new();
        let armbian = SshdConfig::evaluate(main, &none);
        assert!(armbian.root_password_login());
        let drop_in = |p: &str| {
            assert_eq!(p, "/etc/ssh/sshd_config.d/*.conf");
            vec![SSHD_SETTINGS.to_string()]
        };
        let fixed = SshdConfig::evaluate(main, &drop_in);
        assert_eq!(fixed.get("permitrootlogin"), "prohibit-password");
        assert!(!fixed.root_password_login());
        assert!(!SshdConfig::evaluate("", &none).root_password_login());
        let no_passwords =
            SshdConfig::evaluate("PermitRootLogin=yes\nPasswordAuthentication no\n", &none);
        assert!(!no_passwords.root_password_login());
    }

    #[test]
    fn the_drop_in_counts_only_when_sshd_config_includes_it_first() {
        assert!(includes_drop_ins(
            "\n# comment\nInclude /etc/ssh/sshd_config.d/*.conf\nPort 22\n"
        ));
        assert!(!includes_drop_ins(
            "PermitRootLogin yes\nInclude /etc/ssh/sshd_config.d/*.conf\n"
        ));
        assert!(!includes_drop_ins("Port 22\n"));
    }

    #[test]
    fn sudoers_names_each_key_only_user() {
        assert_eq!(sudoers(&[]), None);
        let text = sudoers(&["admin", "backup"]).unwrap();
        assert!(text.contains("\nadmin ALL=(ALL:ALL) NOPASSWD: ALL\nbackup ALL="));
    }
}
