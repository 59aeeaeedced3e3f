//! The share steps as root performs them, on a real filesystem mounted
//! where an array would be: a link a client planted in a share is never
//! followed, and a share whose array is not mounted gets no folder on the
//! system disk.

use nasforge_engine::machine::disks::Host;
use nasforge_engine::runner::{RunError, Runner, SystemRunner};
use nasforge_engine::steps::Action;
use nasforge_testkit::mounts;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

fn share_dir(path: &str, owner: &str, mode: u32) -> Action {
    Action::ShareDir {
        mount: "/srv/data".into(),
        path: path.into(),
        owner: Some(owner.into()),
        mode: Some(mode),
    }
}

fn runner(root: &Path) -> SystemRunner {
    let mut r = SystemRunner::new(Host::new(root), None).unwrap();
    r.echo = false;
    r
}

/// A tmpfs where the array would be mounted, `<root>/srv/data`.
fn mount_array(root: &Path) {
    mounts::private_namespace();
    mounts::tmpfs(&root.join("srv/data"), None);
}

#[test]
#[ignore = "needs root to mount: scripts/test runs it as root, as CI does"]
fn a_link_planted_in_a_share_is_refused_and_what_it_points_to_keeps_its_owner_and_mode() {
    let t = tempfile::tempdir().unwrap();
    mount_array(t.path());
    let system = t.path().join("etc");
    std::fs::create_dir(&system).unwrap();
    std::fs::set_permissions(&system, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut r = runner(t.path());

    // The share as setup made it: nobody's, group-writable, setgid.
    r.apply(&share_dir("/srv/data/media", "nobody", 0o2775))
        .unwrap();
    let made = std::fs::metadata(t.path().join("srv/data/media")).unwrap();
    assert_eq!(made.mode() & 0o7777, 0o2775);
    assert_eq!(
        made.uid(),
        nasforge_engine::share_dir::owner_of("nobody").unwrap().uid
    );

    // A client that can write /srv/data swaps the folder for a link to
    // the system's /etc, and a Time Machine user's folder for one too.
    std::fs::remove_dir(t.path().join("srv/data/media")).unwrap();
    symlink(&system, t.path().join("srv/data/media")).unwrap();
    for action in [
        share_dir("/srv/data/media", "nobody", 0o2775),
        share_dir("/srv/data/media/nobody", "nobody", 0o2700),
    ] {
        let e = r.apply(&action).unwrap_err();
        assert!(matches!(e, RunError::ShareDir(_)), "{e:?}");
        let said = e.to_string();
        assert!(
            said.contains("/srv/data/media is a symbolic link to")
                && said.contains(system.to_str().unwrap())
                && said.contains("remove the link"),
            "{said}"
        );
        let etc = std::fs::metadata(&system).unwrap();
        assert_eq!((etc.uid(), etc.mode() & 0o7777), (0, 0o755), "{action}");
        assert!(!system.join("nobody").exists(), "{action}");
    }
}

#[test]
fn a_share_whose_array_is_not_mounted_gets_no_folder_on_the_system_disk() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("srv/data")).unwrap();
    let e = runner(t.path())
        .apply(&share_dir("/srv/data/media", "root", 0o2775))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "/srv/data is not mounted (it is on the system's filesystem); nasforge makes no share folder on the system disk: mount it (`nasforge-setup status` says why it is not) and try again"
    );
    assert!(!t.path().join("srv/data/media").exists());
}
