//! /etc/passwd, /etc/shadow, /etc/group and /etc/gshadow, edited as text the
//! way useradd would: a new user gets the first free id from 1000, a group
//! of its own name, and membership in the groups asked for. Pure functions,
//! so every case is tested without an image.

use anyhow::{Result, bail};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accounts {
    pub passwd: String,
    pub shadow: String,
    pub group: String,
    pub gshadow: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
}

fn entries(text: &str) -> impl Iterator<Item = Vec<&str>> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split(':').collect())
}

/// One line of a `:`-separated account file (passwd, shadow, group,
/// userconf.txt). A field holding `:` or a line break would add fields or
/// whole accounts, so it is refused here whatever checked it before.
pub fn record(fields: &[&str]) -> Result<String> {
    check_fields(fields)?;
    Ok(fields.join(":") + "\n")
}

pub fn check_fields(fields: &[&str]) -> Result<()> {
    // The field is named by position, not shown: it may be a password hash.
    if let Some(i) = fields.iter().position(|f| f.contains([':', '\n', '\r'])) {
        let account = if i == 0 { "?" } else { fields[0] };
        bail!(
            "refusing to write field {} of account `{}`: it contains `:` or a line break",
            i + 1,
            account.escape_debug()
        );
    }
    Ok(())
}

fn with_newline(mut s: String) -> String {
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

impl Accounts {
    pub fn uid_of(&self, name: &str) -> Option<u32> {
        entries(&self.passwd)
            .find(|f| f[0] == name)
            .and_then(|f| f.get(2)?.parse().ok())
    }

    pub fn name_of_uid(&self, uid: u32) -> Option<String> {
        entries(&self.passwd)
            .find(|f| f.get(2).and_then(|u| u.parse().ok()) == Some(uid))
            .map(|f| f[0].to_string())
    }

    pub fn has_group(&self, name: &str) -> bool {
        entries(&self.group).any(|f| f[0] == name)
    }

    /// Adds a user (or, when it exists, updates its password and groups).
    /// `days` is the day number since 1970 for shadow's last-change field.
    pub fn add_user(
        &mut self,
        name: &str,
        hash: Option<&str>,
        groups: &[String],
        days: u64,
    ) -> Result<Added> {
        if let Some(uid) = self.uid_of(name) {
            let f: Vec<&str> = entries(&self.passwd)
                .find(|f| f[0] == name)
                .expect("found above");
            let gid = f.get(3).and_then(|g| g.parse().ok()).unwrap_or(uid);
            let home = f.get(5).unwrap_or(&"").to_string();
            if let Some(h) = hash {
                self.set_password(name, h, days)?;
            }
            self.join_groups(name, groups);
            return Ok(Added {
                name: name.into(),
                uid,
                gid,
                home,
            });
        }
        let used_uids: Vec<u32> = entries(&self.passwd)
            .filter_map(|f| f.get(2)?.parse().ok())
            .collect();
        let used_gids: Vec<u32> = entries(&self.group)
            .filter_map(|f| f.get(2)?.parse().ok())
            .collect();
        // The same number for uid and the private group, as useradd does when it can.
        let id = (1000..60000).find(|i| !used_uids.contains(i) && !used_gids.contains(i));
        let Some(id) = id else {
            bail!("no free user id between 1000 and 60000 in the image")
        };
        if self.has_group(name) {
            bail!(
                "the image already has a group named `{name}` but no such user; pick another user name"
            );
        }
        let home = format!("/home/{name}");
        let id_s = id.to_string();
        let passwd = record(&[name, "x", &id_s, &id_s, "", &home, "/bin/bash"])?;
        let shadow = record(&[
            name,
            hash.unwrap_or("!"),
            &days.to_string(),
            "0",
            "99999",
            "7",
            "",
            "",
            "",
        ])?;
        let group = record(&[name, "x", &id_s, ""])?;
        self.passwd = with_newline(std::mem::take(&mut self.passwd)) + &passwd;
        self.shadow = with_newline(std::mem::take(&mut self.shadow)) + &shadow;
        self.group = with_newline(std::mem::take(&mut self.group)) + &group;
        if let Some(gs) = self.gshadow.take() {
            self.gshadow = Some(with_newline(gs) + &record(&[name, "!", "", ""])?);
        }
        self.join_groups(name, groups);
        Ok(Added {
            name: name.into(),
            uid: id,
            gid: id,
            home,
        })
    }

    fn set_password(&mut self, name: &str, hash: &str, days: u64) -> Result<()> {
        check_fields(&[hash])?;
        let mut found = false;
        let lines: Vec<String> = self
            .shadow
            .lines()
            .map(|l| {
                let mut f: Vec<String> = l.split(':').map(String::from).collect();
                if f.first().is_some_and(|n| n == name) && f.len() >= 3 {
                    found = true;
                    f[1] = hash.to_string();
                    f[2] = days.to_string();
                    f.join(":")
                } else {
                    l.to_string()
                }
            })
            .collect();
        if !found {
            bail!(
                "user `{name}` is in /etc/passwd but not in /etc/shadow; the image's account files disagree"
            );
        }
        self.shadow = lines.join("\n") + "\n";
        Ok(())
    }

    /// Adds `name` to each existing group of `groups`; groups the image does
    /// not have are skipped (the caller reports them).
    pub fn join_groups(&mut self, name: &str, groups: &[String]) {
        self.edit_members(groups, |members| {
            if !members.iter().any(|m| m == name) {
                members.push(name.to_string());
            }
        });
    }

    /// Gives `name` a login shell when its own says no logins
    /// (`/usr/sbin/nologin`, `/bin/false`); true when it changed.
    pub fn allow_login(&mut self, name: &str) -> bool {
        let mut changed = false;
        let lines: Vec<String> = self
            .passwd
            .lines()
            .map(|l| {
                let mut f: Vec<&str> = l.split(':').collect();
                if f.len() == 7
                    && f[0] == name
                    && (f[6].ends_with("/nologin") || f[6].ends_with("/false"))
                {
                    f[6] = "/bin/bash";
                    changed = true;
                }
                f.join(":")
            })
            .collect();
        self.passwd = lines.join("\n") + "\n";
        changed
    }

    pub fn leave_group(&mut self, name: &str, group: &str) {
        self.edit_members(&[group.to_string()], |members| {
            members.retain(|m| m != name)
        });
    }

    /// Applies `change` to the member list of each of `groups`, in group
    /// and gshadow alike.
    fn edit_members(&mut self, groups: &[String], change: impl Fn(&mut Vec<String>)) {
        let edit = |text: &str, member_field: usize| -> String {
            let mut out: Vec<String> = Vec::new();
            for l in text.lines() {
                let mut f: Vec<String> = l.split(':').map(String::from).collect();
                if f.len() > member_field && groups.iter().any(|g| *g == f[0]) {
                    let mut members: Vec<String> = f[member_field]
                        .split(',')
                        .filter(|m| !m.is_empty())
                        .map(String::from)
                        .collect();
                    change(&mut members);
                    f[member_field] = members.join(",");
                }
                out.push(f.join(":"));
            }
            out.join("\n") + "\n"
        };
        self.group = edit(&self.group, 3);
        if let Some(gs) = &self.gshadow {
            self.gshadow = Some(edit(gs, 3));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debian() -> Accounts {
        Accounts {
            passwd: "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\npi:x:1000:1000:,,,:/home/pi:/bin/bash\n".into(),
            shadow: "root:*:19000:0:99999:7:::\npi:!:19000:0:99999:7:::\n".into(),
            group: "root:x:0:\nsudo:x:27:pi\nusers:x:100:\npi:x:1000:\n".into(),
            gshadow: Some("root:*::\nsudo:*::pi\npi:!::\n".into()),
        }
    }

    #[test]
    fn new_user_takes_the_first_free_id_and_joins_groups() {
        let mut a = debian();
        let added = a
            .add_user(
                "admin",
                Some("$6$salt$hash"),
                &["sudo".into(), "users".into()],
                20000,
            )
            .unwrap();
        assert_eq!(
            added,
            Added {
                name: "admin".into(),
                uid: 1001,
                gid: 1001,
                home: "/home/admin".into()
            }
        );
        assert!(
            a.passwd
                .ends_with("admin:x:1001:1001::/home/admin:/bin/bash\n")
        );
        assert!(
            a.shadow
                .ends_with("admin:$6$salt$hash:20000:0:99999:7:::\n")
        );
        assert!(
            a.group.contains("sudo:x:27:pi,admin\n") && a.group.contains("users:x:100:admin\n")
        );
        assert!(a.group.ends_with("admin:x:1001:\n"));
        assert!(a.gshadow.unwrap().contains("sudo:*::pi,admin\n"));
    }

    #[test]
    fn a_nologin_account_gets_a_login_shell_and_nobody_else_changes() {
        let mut a = debian();
        a.passwd = a
            .passwd
            .replace("/home/pi:/bin/bash", "/home/pi:/usr/sbin/nologin");
        assert!(a.allow_login("pi"));
        assert!(a.passwd.contains("pi:x:1000:1000:,,,:/home/pi:/bin/bash\n"));
        assert!(
            a.passwd
                .contains("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        );
        assert!(!a.allow_login("pi"), "a login shell is left as it is");
    }

    #[test]
    fn existing_user_gets_its_password_changed_not_a_duplicate() {
        let mut a = debian();
        let added = a
            .add_user("pi", Some("$6$x$y"), &["sudo".into()], 20001)
            .unwrap();
        assert_eq!(added.uid, 1000);
        assert_eq!(a.passwd.lines().filter(|l| l.starts_with("pi:")).count(), 1);
        assert!(a.shadow.contains("pi:$6$x$y:20001:0:99999:7:::"));
        assert!(
            a.group.contains("sudo:x:27:pi\n"),
            "no second membership: {}",
            a.group
        );
    }

    #[test]
    fn a_user_leaves_a_group_and_nobody_else_does() {
        let mut a = debian();
        a.join_groups("admin", &["sudo".into()]);
        a.leave_group("pi", "sudo");
        assert!(a.group.contains("sudo:x:27:admin\n"), "{}", a.group);
        assert!(a.gshadow.as_ref().unwrap().contains("sudo:*::admin\n"));
        assert_eq!(a.name_of_uid(1000).as_deref(), Some("pi"));
        assert_eq!(a.name_of_uid(4242), None);
    }

    #[test]
    fn no_password_means_a_locked_password() {
        let mut a = debian();
        a.add_user("keyonly", None, &[], 1).unwrap();
        assert!(a.shadow.contains("keyonly:!:1:"));
    }

    #[test]
    fn a_group_of_the_same_name_is_refused() {
        let mut a = debian();
        let e = a.add_user("users", None, &[], 1).unwrap_err().to_string();
        assert!(e.contains("already has a group named `users`"), "{e}");
    }

    #[test]
    fn a_field_that_would_add_lines_or_fields_is_refused() {
        for hash in ["$6$s$h\nmallory::0:0::/:/bin/sh", "$6$s$h:0", "$6$s$h\rx"] {
            let mut a = debian();
            let before = a.clone();
            let e = a.add_user("new", Some(hash), &[], 1).unwrap_err();
            assert!(e.to_string().contains("`:` or a line break"), "{e}");
            let e = a.add_user("pi", Some(hash), &[], 1).unwrap_err();
            assert!(e.to_string().contains("`:` or a line break"), "{e}");
            assert_eq!(a, before, "nothing written");
        }
        assert!(record(&["admin", "$y$j9T$s$h"]).unwrap() == "admin:$y$j9T$s$h\n");
        assert!(record(&["admin\nroot", "x"]).is_err());
    }

    #[test]
    fn files_without_trailing_newline_stay_well_formed() {
        let mut a = Accounts {
            passwd: "root:x:0:0::/root:/bin/sh".into(),
            shadow: "root:*:1:0:99999:7:::".into(),
            group: "root:x:0:".into(),
            gshadow: None,
        };
        a.add_user("u", None, &[], 1).unwrap();
        assert_eq!(
            a.passwd,
            "root:x:0:0::/root:/bin/sh\nu:x:1000:1000::/home/u:/bin/bash\n"
        );
    }
}
