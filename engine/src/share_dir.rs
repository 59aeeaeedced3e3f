//! A share's folder made, owned and moded by root without following a
//! symbolic link. Whoever can write a share can replace a folder in it
//! with a link to `/etc`; `mkdir -p`, `chown` and `chmod` would follow
//! it and hand the system directory to the share's user. Here every part
//! below the share's mount is opened with `O_NOFOLLOW` relative to the one
//! above, must stay on the mount's filesystem, and the ownership and mode
//! are set on the opened folder itself (`fchown`, `fchmod`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ShareDirError {
    #[error(
        "{mount} is not mounted (it is on the system's filesystem); nasforge makes no share folder on the system disk: mount it (`nasforge-setup status` says why it is not) and try again"
    )]
    NotMounted { mount: String },
    #[error(
        "{path} is a symbolic link{}; a share's folder is never reached through one, as anyone who can write the share can plant it: remove the link and try again",
        target.as_ref().map(|t| format!(" to {t}")).unwrap_or_default()
    )]
    Link {
        path: String,
        target: Option<String>,
    },
    #[error("{path} is not a folder: move it away and try again")]
    NotFolder { path: String },
    #[error(
        "{path} is on another filesystem than {mount}; nasforge does not follow a share into another mount: unmount it and try again"
    )]
    OtherFilesystem { path: String, mount: String },
    #[error("{path} is not below {mount}")]
    NotBelow { path: String, mount: String },
    #[error("the share's user {0} does not exist on this system")]
    NoSuchUser(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: io::Error,
    },
}

/// Who owns the folder and how it may be used, set after it exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// `user`'s id and login group, as `chown user:` takes them.
pub fn owner_of(user: &str) -> Result<Owner, ShareDirError> {
    let name = CString::new(user).map_err(|_| ShareDirError::NoSuchUser(user.into()))?;
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Err(ShareDirError::NoSuchUser(user.into()));
    }
    Ok(Owner {
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// The share's mount (a path on the system under `root`) opened, refused
/// when it is on the same filesystem as `root`: an array that failed to
/// mount, or a path on no array.
pub fn open_mount(root: &Path, mount: &str) -> Result<OwnedFd, ShareDirError> {
    let at = root.join(mount.trim_start_matches('/'));
    let fd =
        open(libc::AT_FDCWD, at.as_os_str().as_bytes(), 0).map_err(|source| ShareDirError::Io {
            what: "opening",
            path: mount.into(),
            source,
        })?;
    let system = open(libc::AT_FDCWD, root.as_os_str().as_bytes(), 0).map_err(|source| {
        ShareDirError::Io {
            what: "opening",
            path: root.display().to_string(),
            source,
        }
    })?;
    if device(&fd, mount)? == device(&system, "/")? {
        return Err(ShareDirError::NotMounted {
            mount: mount.into(),
        });
    }
    Ok(fd)
}

/// `path` made below the opened `mount` one part at a time (mode 0755 for
/// each new part), then given `owner` and `mode` when they are asked for.
pub fn make_below(
    mount_fd: &OwnedFd,
    mount: &str,
    path: &str,
    owner: Option<Owner>,
    mode: Option<u32>,
) -> Result<(), ShareDirError> {
    let rest = if path == mount {
        ""
    } else {
        path.strip_prefix(mount.trim_end_matches('/'))
            .and_then(|r| r.strip_prefix('/'))
            .ok_or_else(|| ShareDirError::NotBelow {
                path: path.into(),
                mount: mount.into(),
            })?
    };
    let dev = device(mount_fd, mount)?;
    let mut here: Option<OwnedFd> = None;
    let mut shown = mount.to_string();
    for part in rest.split('/').filter(|p| !p.is_empty()) {
        if part == "." || part == ".." {
            return Err(ShareDirError::NotBelow {
                path: path.into(),
                mount: mount.into(),
            });
        }
        shown = format!("{}/{part}", shown.trim_end_matches('/'));
        let dir = here.as_ref().unwrap_or(mount_fd);
        let next = enter(dir, part, &shown)?;
        if device(&next, &shown)? != dev {
            return Err(ShareDirError::OtherFilesystem {
                path: shown,
                mount: mount.into(),
            });
        }
        here = Some(next);
    }
    let dir = here.as_ref().unwrap_or(mount_fd);
    if let Some(o) = owner
        && unsafe { libc::fchown(dir.as_raw_fd(), o.uid, o.gid) } != 0
    {
        return Err(io_error("changing the owner of", &shown));
    }
    if let Some(m) = mode
        && unsafe { libc::fchmod(dir.as_raw_fd(), m as libc::mode_t) } != 0
    {
        return Err(io_error("changing the mode of", &shown));
    }
    Ok(())
}

/// The folder `part` of `dir`, made when it is missing; never a link.
fn enter(dir: &OwnedFd, part: &str, shown: &str) -> Result<OwnedFd, ShareDirError> {
    let name = part.as_bytes();
    match open(dir.as_raw_fd(), name, libc::O_NOFOLLOW) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(refusal(dir, part, shown, e)),
    }
    let c = CString::new(name).map_err(|_| ShareDirError::NotFolder { path: shown.into() })?;
    if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o755) } != 0 {
        let e = io::Error::last_os_error();
        // Made meanwhile by someone else: opened below like any other.
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(ShareDirError::Io {
                what: "making",
                path: shown.into(),
                source: e,
            });
        }
    }
    open(dir.as_raw_fd(), name, libc::O_NOFOLLOW).map_err(|e| refusal(dir, part, shown, e))
}

/// Why `part` could not be opened as a folder: a link (and where it
/// points), something else than a folder, or the system's own error.
fn refusal(dir: &OwnedFd, part: &str, shown: &str, e: io::Error) -> ShareDirError {
    let errno = e.raw_os_error();
    if errno != Some(libc::ELOOP) && errno != Some(libc::ENOTDIR) {
        return ShareDirError::Io {
            what: "opening",
            path: shown.into(),
            source: e,
        };
    }
    let Ok(c) = CString::new(part) else {
        return ShareDirError::NotFolder { path: shown.into() };
    };
    let mut buf = vec![0u8; 4096];
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return ShareDirError::NotFolder { path: shown.into() };
    }
    buf.truncate(n as usize);
    ShareDirError::Link {
        path: shown.into(),
        target: Some(String::from_utf8_lossy(&buf).into_owned()),
    }
}

fn open(dir: libc::c_int, name: &[u8], extra: libc::c_int) -> io::Result<OwnedFd> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let fd = unsafe {
        libc::openat(
            dir,
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | extra,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn device(fd: &OwnedFd, shown: &str) -> Result<u64, ShareDirError> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io_error("reading", shown));
    }
    Ok(st.st_dev)
}

fn io_error(what: &'static str, path: &str) -> ShareDirError {
    ShareDirError::Io {
        what,
        path: path.into(),
        source: io::Error::last_os_error(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    fn mount_of(dir: &Path) -> OwnedFd {
        open(libc::AT_FDCWD, dir.as_os_str().as_bytes(), 0).unwrap()
    }

    #[test]
    fn makes_the_missing_parts_and_sets_owner_and_mode_on_the_last() {
        let t = tempfile::tempdir().unwrap();
        let mount = t.path().to_str().unwrap();
        std::fs::create_dir(t.path().join("media")).unwrap();
        let me = Owner {
            uid: unsafe { libc::getuid() },
            gid: unsafe { libc::getgid() },
        };
        let path = format!("{mount}/media/photos/2024");
        make_below(&mount_of(t.path()), mount, &path, Some(me), Some(0o2770)).unwrap();
        let made = std::fs::metadata(&path).unwrap();
        assert_eq!(made.permissions().mode() & 0o7777, 0o2770);
        assert_eq!((made.uid(), made.gid()), (me.uid, me.gid));
        let between = std::fs::metadata(t.path().join("media/photos")).unwrap();
        assert_eq!(between.permissions().mode() & 0o7777, 0o755 & !umask());
        // Again, as every apply does: nothing to make, same result.
        make_below(&mount_of(t.path()), mount, &path, Some(me), Some(0o2770)).unwrap();
    }

    fn umask() -> u32 {
        let old = unsafe { libc::umask(0o022) };
        unsafe { libc::umask(old) };
        old
    }

    #[test]
    fn a_planted_link_anywhere_on_the_way_is_refused_and_its_target_untouched() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o750)).unwrap();
        let mount = t.path().join("srv");
        std::fs::create_dir(&mount).unwrap();
        let m = mount.to_str().unwrap();
        for (planted, share) in [("media", "media"), ("media", "media/photos")] {
            let link = mount.join(planted);
            let _ = std::fs::remove_file(&link);
            symlink(outside.path(), &link).unwrap();
            let e = make_below(
                &mount_of(&mount),
                m,
                &format!("{m}/{share}"),
                None,
                Some(0o2775),
            )
            .unwrap_err();
            assert!(
                matches!(&e, ShareDirError::Link { path, target: Some(to) }
                    if *path == format!("{m}/media") && to == outside.path().to_str().unwrap()),
                "{e}"
            );
            assert!(e.to_string().contains("remove the link"), "{e}");
            let kept = std::fs::metadata(outside.path()).unwrap();
            assert_eq!(kept.permissions().mode() & 0o7777, 0o750, "{share}");
            assert!(!outside.path().join("photos").exists(), "{share}");
        }
    }

    #[test]
    fn a_file_where_a_folder_belongs_and_a_path_off_the_mount_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let m = t.path().to_str().unwrap();
        std::fs::write(t.path().join("media"), "x").unwrap();
        let e =
            make_below(&mount_of(t.path()), m, &format!("{m}/media/a"), None, None).unwrap_err();
        assert!(matches!(e, ShareDirError::NotFolder { .. }), "{e}");
        let e = make_below(&mount_of(t.path()), m, "/etc", None, Some(0o777)).unwrap_err();
        assert!(matches!(e, ShareDirError::NotBelow { .. }), "{e}");
        let e = make_below(&mount_of(t.path()), m, &format!("{m}/../x"), None, None).unwrap_err();
        assert!(matches!(e, ShareDirError::NotBelow { .. }), "{e}");
    }

    #[test]
    fn a_folder_on_the_system_filesystem_is_not_a_mount_and_another_mount_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let e = open_mount(t.path(), "/").unwrap_err();
        assert!(matches!(e, ShareDirError::NotMounted { .. }), "{e}");
        assert!(e.to_string().contains("is not mounted"), "{e}");
        // /proc is a filesystem of its own on every Linux system.
        open_mount(Path::new("/"), "/proc").unwrap();
        let e =
            make_below(&mount_of(Path::new("/")), "/", "/proc/nasforge", None, None).unwrap_err();
        assert!(
            matches!(&e, ShareDirError::OtherFilesystem { path, .. } if path == "/proc"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_user_is_named() {
        let e = owner_of("no-such-user-here").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the share's user no-such-user-here does not exist on this system"
        );
        assert_eq!(owner_of("root").unwrap(), Owner { uid: 0, gid: 0 });
    }
}
