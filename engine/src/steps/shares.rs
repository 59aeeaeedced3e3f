//! The steps that put the arrays on the network: a ZFS dataset for each
//! share on a pool, the shared directories, Samba and its passwords, the
//! mDNS and WS-Discovery announcement, and the NFS exports.

use super::{Action, Cmd, Guard, Step, enable, run};
use crate::planner::Plan;
use crate::shares::{avahi, nfs, samba};
use crate::size::Size;
use crate::spec::Share;

pub(super) fn share_steps(plan: &Plan, steps: &mut Vec<Step>) {
    if plan.shares.is_empty() {
        return;
    }
    // Before the directories: each share's directory is its dataset's
    // mount point, and `apply` regenerates these steps for a share added
    // later, whose dataset they then create.
    steps.extend(super::zfs::dataset_steps(plan));
    steps.push(dirs_step(plan));
    let smb: Vec<(&Share, Option<Size>)> = plan
        .shares
        .iter()
        .filter(|s| s.smb.is_some())
        .map(|s| (s, plan.timemachine_limit(s)))
        .collect();
    if !smb.is_empty() {
        steps.extend(samba_steps(&smb));
    }
    let shares: Vec<&Share> = smb.iter().map(|(s, _)| *s).collect();
    steps.push(announce_step(&shares));
    steps.extend(nfs_step(plan));
}

/// Each share's directory, owned by its first user; Time Machine gives
/// every user a folder of their own. None is reached through a link a
/// client could have planted (see [`Action::ShareDir`]).
fn dirs_step(plan: &Plan) -> Step {
    let datasets = crate::storage::zpool::share_datasets(plan);
    let mut dirs = Vec::new();
    for share in &plan.shares {
        // A dataset is a filesystem of its own, mounted at the share's
        // path; a share with no home is refused as not mounted.
        let mount = if datasets.iter().any(|(s, _)| s.path == share.path) {
            share.path.clone()
        } else {
            plan.array_of(&share.path)
                .map(|a| a.spec.mount.clone())
                .or_else(|| plan.kept_of(&share.path).map(|k| k.spec.mount.clone()))
                .unwrap_or_else(|| share.path.clone())
        };
        let folder = |path: &str, owner: Option<&str>, mode: Option<u32>| Action::ShareDir {
            mount: mount.clone(),
            path: path.to_string(),
            owner: owner.map(String::from),
            mode,
        };
        // A kept disk's files keep their owners and modes.
        let owner = share
            .smb
            .as_ref()
            .and_then(|smb| smb.users.first())
            .filter(|_| plan.kept_of(&share.path).is_none());
        let Some(owner) = owner else {
            dirs.push(folder(&share.path, None, None));
            continue;
        };
        dirs.push(folder(&share.path, Some(owner), Some(0o2775)));
        let Some(smb) = share.smb.as_ref().filter(|s| s.timemachine) else {
            continue;
        };
        // Setgid as the share's folder above, which `chmod 0700` used to
        // leave on: what a user writes there keeps that user's group.
        for user in &smb.users {
            dirs.push(folder(
                &format!("{}/{user}", share.path),
                Some(user),
                Some(0o2700),
            ));
        }
    }
    Step {
        id: "share-dirs".into(),
        title: "Create the shared directories".into(),
        guard: Guard::Always,
        actions: dirs,
        always: vec![],
    }
}

/// Samba's share definitions, the passwords the image builder staged, and
/// the service.
fn samba_steps(smb: &[(&Share, Option<Size>)]) -> [Step; 3] {
    [
        Step {
            id: "samba-config".into(),
            title: format!(
                "Configure Samba shares ({})",
                smb.iter()
                    .map(|(s, _)| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            guard: Guard::Always,
            actions: vec![
                Action::WriteFile {
                    path: samba::SHARES_FILE.into(),
                    contents: samba::shares_conf(smb),
                    mode: 0o644,
                },
                Action::ManagedBlock {
                    path: samba::SMB_CONF.into(),
                    contents: samba::include_line(),
                },
                run(&["testparm", "--suppress-prompt"]),
            ],
            always: vec![],
        },
        Step {
            id: "samba-users".into(),
            title: "Import the Samba passwords staged by the image builder".into(),
            guard: Guard::FilePresent {
                path: samba::STAGED_PASSWORDS.into(),
            },
            actions: vec![
                Action::Run(Cmd {
                    fails_if_stdout_has: Some("failed".into()),
                    ..Cmd::new(&samba::import_command())
                }),
                Action::RemoveFile {
                    path: samba::STAGED_PASSWORDS.into(),
                },
            ],
            always: vec![],
        },
        Step {
            id: "samba-service".into(),
            title: "Start Samba".into(),
            guard: Guard::Always,
            actions: vec![
                enable(&["smbd.service"], false),
                run(&["systemctl", "restart", "smbd.service"]),
            ],
            always: vec![],
        },
    ]
}

/// The avahi service file (removed when no share is on SMB) and the
/// daemons that answer to the NAS's name.
fn announce_step(shares: &[&Share]) -> Step {
    let mut announce = Vec::new();
    if shares.is_empty() {
        // A plan without SMB must not keep announcing an earlier one's.
        announce.push(Action::RemoveFile {
            path: avahi::SERVICE_FILE.into(),
        });
    } else {
        announce.push(Action::WriteFile {
            path: avahi::SERVICE_FILE.into(),
            contents: avahi::service_file(shares),
            mode: 0o644,
        });
    }
    let mut units = vec!["avahi-daemon.service"];
    if !shares.is_empty() {
        units.push("wsdd2.service");
    }
    announce.push(enable(&units, false));
    // avahi-daemon reads /etc/avahi/services again itself when a file there
    // changes (inotify), so it only has to be running. A reload request
    // fails outright while the unit is going down, as it does when systemd
    // loses its D-Bus connection under load (seen on the emulated board).
    announce.push(run(&["systemctl", "start", "avahi-daemon.service"]));
    if !shares.is_empty() {
        // Windows 10 and 11 list a server in Network only through
        // WS-Discovery; wsdd2 reads the names it answers with from smb.conf.
        announce.push(run(&["systemctl", "restart", "wsdd2.service"]));
    }
    Step {
        id: "announce".into(),
        title: "Answer to the NAS's name on the network (mDNS, WS-Discovery)".into(),
        guard: Guard::Always,
        actions: announce,
        always: vec![],
    }
}

fn nfs_step(plan: &Plan) -> Option<Step> {
    let exported: Vec<_> = plan
        .shares
        .iter()
        .filter(|s| s.nfs.is_some())
        .map(|s| {
            let array = plan.array_of(&s.path);
            // A share with a dataset of its own is a mount point itself:
            // exported only while that dataset, not just the pool, is mounted.
            let own_dataset = array
                .is_some_and(|a| a.spec.is_zfs() && crate::storage::zpool::dataset(a, s).is_some());
            let mount = match array {
                Some(a) if !own_dataset => a.spec.mount.as_str(),
                _ => s.path.as_str(),
            };
            (s, mount)
        })
        .collect();
    if exported.is_empty() {
        return None;
    }
    Some(Step {
        id: "nfs-exports".into(),
        title: "Export NFS shares".into(),
        guard: Guard::Always,
        actions: vec![
            Action::WriteFile {
                path: nfs::EXPORTS_FILE.into(),
                contents: nfs::exports(&exported),
                mode: 0o644,
            },
            enable(&["nfs-server.service"], true),
            run(&["exportfs", "-ra"]),
        ],
        always: vec![],
    })
}
