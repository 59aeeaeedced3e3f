//! What the image needs for `[alerts]`: the handlers mdadm and smartd run,
//! the timers that retry undelivered alerts and check how full the arrays
//! are, and the SMTP relay's password in a root-only file, the one place
//! it is kept (the board's copy of the recipe goes without it).

use crate::image::ext4::{Ext4, Op};
use crate::manifest::Change;
use anyhow::Result;
use nasforge_engine::image_files::{ALERT_FILES, ALERT_TIMERS};
use nasforge_engine::paths::PASSWORD_FILE;
use nasforge_engine::spec::Alerts;

/// Installs the alert handlers and timers, and the relay's password when
/// the recipe gives one.
pub fn install(
    root: &Ext4,
    alerts: Option<&Alerts>,
    ops: &mut Vec<Op>,
    changes: &mut Vec<Change>,
) -> Result<()> {
    let password = alerts
        .and_then(|a| a.smtp.as_ref())
        .and_then(|s| s.password.as_ref());
    let dirs: Vec<&str> = ALERT_FILES
        .iter()
        .map(|f| f.path)
        .chain(ALERT_TIMERS.iter().map(|(link, _)| *link))
        .chain(password.map(|_| PASSWORD_FILE))
        .filter_map(|path| path.rsplit_once('/').map(|(dir, _)| dir))
        .collect();
    ops.extend(root.missing_dirs(&dirs)?);
    for f in ALERT_FILES {
        replace(root, f.path, ops)?;
        ops.push(Op::root_file(
            f.path,
            f.contents.as_bytes().to_vec(),
            f.mode,
        ));
    }
    for (link, target) in ALERT_TIMERS {
        if root.readlink(link)?.is_none() {
            ops.push(Op::Symlink {
                path: link.into(),
                target: target.into(),
            });
        }
    }
    changes.push(Change {
        file: format!("root:{}", ALERT_FILES[0].path),
        before_sha256: None,
        after_sha256: None,
        why: "alerts: mdadm's and smartd's handlers, a retry of undelivered alerts every 10 minutes and an hourly check of how full the arrays are".into(),
        details: ALERT_FILES.iter().map(|f| f.path.to_string()).collect(),
    });
    if let Some(password) = password {
        replace(root, PASSWORD_FILE, ops)?;
        // No newline: msmtp's passwordeval takes the output as it is.
        ops.push(Op::root_file(
            PASSWORD_FILE,
            password.as_bytes().to_vec(),
            0o600,
        ));
        changes.push(Change {
            file: format!("root:{PASSWORD_FILE}"),
            before_sha256: None,
            after_sha256: None,
            why: "the SMTP relay's password from [alerts.smtp], readable by root only; msmtp reads it when mailing an alert".into(),
            details: vec![],
        });
    }
    Ok(())
}

fn replace(root: &Ext4, path: &str, ops: &mut Vec<Op>) -> Result<()> {
    if root.owner(path)?.is_some() {
        ops.push(Op::Remove { path: path.into() });
    }
    Ok(())
}
