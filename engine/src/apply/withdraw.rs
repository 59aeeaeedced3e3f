//! What the share steps leave behind when the last share of a kind goes:
//! they write Samba's shares, the NFS exports and the announcement only
//! while some share uses them, so apply empties them itself.

use crate::shares::{avahi, nfs, samba};
use crate::spec::Share;
use crate::steps::{Action, Cmd, Guard, Step};

pub(super) fn steps(old: &[Share], new: &[Share]) -> Option<Step> {
    let smb = |shares: &[Share]| shares.iter().any(|s| s.smb.is_some());
    let exported = |shares: &[Share]| shares.iter().any(|s| s.nfs.is_some());
    let mut actions = Vec::new();
    if smb(old) && !smb(new) {
        actions.push(Action::WriteFile {
            path: samba::SHARES_FILE.into(),
            contents: samba::shares_conf(&[]),
            mode: 0o644,
        });
        actions.push(run(&["systemctl", "restart", "smbd.service"]));
    }
    if exported(old) && !exported(new) {
        actions.push(Action::WriteFile {
            path: nfs::EXPORTS_FILE.into(),
            contents: nfs::exports(&[]),
            mode: 0o644,
        });
        actions.push(run(&["exportfs", "-ra"]));
    }
    if !old.is_empty() && new.is_empty() {
        actions.push(Action::RemoveFile {
            path: avahi::SERVICE_FILE.into(),
        });
        // avahi-daemon notices the removed file itself (see announce_step).
        actions.push(run(&["systemctl", "start", "avahi-daemon.service"]));
    }
    (!actions.is_empty()).then(|| Step {
        id: "shares-withdrawn".into(),
        title: "Stop serving the kinds of share no share uses any more".into(),
        guard: Guard::Always,
        actions,
        always: vec![],
    })
}

fn run(argv: &[&str]) -> Action {
    Action::Run(Cmd::new(argv))
}
