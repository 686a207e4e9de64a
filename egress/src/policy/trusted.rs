//! Whether a file the daemon takes orders from — a policy, host mode's
//! sandbox table — could be changed by a user other than the daemon's:
//! the daemon runs as root and decides what every sandbox may reach, so a
//! policy that the program inside a sandbox (running as some user of the
//! host) could rewrite, or swap through a directory it can write, would
//! let that program give itself any policy.
//!
//! The rule is OpenSSH's `StrictModes`, with symbolic links followed: every
//! directory a name is resolved in, every symbolic link followed and the
//! file itself must belong to root or to the daemon's own user; the file
//! must not be writable by others, nor by its group unless that group is
//! root's or the daemon's own (a umask of 002 as root, a user's private
//! group); a directory writable by others (or by such a group) must have
//! the sticky bit (as `/tmp` has: nobody but an entry's owner can then
//! remove or rename it). The path is walked one
//! name at a time, each looked at with `lstat` and each link's target
//! walked the same way, so no directory or link on the way is missed and a
//! name is only trusted once everything that could swap it is.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

/// How many symbolic links a path may follow (Linux's `ELOOP` limit).
const MAX_LINKS: usize = 40;

/// A file that another user could change, or a path that could not be
/// walked. Names the path asked for and the place on it at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Untrusted {
    /// Owned by a user other than root and the daemon's.
    #[error(
        "{path}: {at} belongs to uid {uid}: a file the daemon takes orders from, every directory on its way and every link to it must belong to root or to the daemon's user (uid {daemon}), so that no other user can change it"
    )]
    Owner {
        /// The file asked for.
        path: PathBuf,
        /// The file, directory or link at fault.
        at: PathBuf,
        /// Its owner.
        uid: u32,
        /// The daemon's effective user.
        daemon: u32,
    },
    /// Writable by others or by a group other than root's and the
    /// daemon's (a directory without the sticky bit).
    #[error(
        "{path}: {at} is writable by {who} (mode {mode:04o}), so another user could change what it holds; run `chmod go-w {at}`{sticky}"
    )]
    Writable {
        /// The file asked for.
        path: PathBuf,
        /// The file or directory at fault.
        at: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// "its group", "others" or "its group and others".
        who: &'static str,
        /// A hint for a directory: the sticky bit makes it safe too.
        sticky: &'static str,
    },
    /// A name on the way could not be looked at.
    #[error("{path}: {at}: {source}")]
    Io {
        /// The file asked for.
        path: PathBuf,
        /// The name that could not be looked at.
        at: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// More than 40 symbolic links on the way (Linux's own limit).
    #[error("{path}: more than {MAX_LINKS} symbolic links on the way")]
    Links {
        /// The file asked for.
        path: PathBuf,
    },
}

/// Who the daemon runs as: its effective user and group.
#[derive(Clone, Copy)]
struct Daemon {
    uid: u32,
    gid: u32,
}

fn daemon() -> Daemon {
    Daemon {
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::process::getegid().as_raw(),
    }
}

/// Checks one name on the way: `meta` is what `lstat` said of `at`;
/// `last`: the file itself (else a directory or a link).
fn check_one(
    path: &Path,
    at: &Path,
    meta: &std::fs::Metadata,
    last: bool,
    daemon: Daemon,
) -> Result<(), Untrusted> {
    let uid = meta.uid();
    if uid != 0 && uid != daemon.uid {
        return Err(Untrusted::Owner {
            path: path.to_path_buf(),
            at: at.to_path_buf(),
            uid,
            daemon: daemon.uid,
        });
    }
    if meta.file_type().is_symlink() {
        // A link's own mode means nothing; who may swap it is its
        // directory's question.
        return Ok(());
    }
    let mode = meta.mode() & 0o7777;
    let gid = meta.gid();
    let group = if gid == 0 || gid == daemon.gid {
        0
    } else {
        0o020
    };
    let writable = mode & (0o002 | group);
    let sticky_dir = meta.is_dir() && mode & 0o1000 != 0;
    if writable != 0 && (last || !sticky_dir) {
        let who = match writable {
            0o020 => "its group",
            0o002 => "others",
            _ => "its group and others",
        };
        return Err(Untrusted::Writable {
            path: path.to_path_buf(),
            at: at.to_path_buf(),
            mode,
            who,
            sticky: if meta.is_dir() {
                " (or, for a shared directory, `chmod +t`)"
            } else {
                ""
            },
        });
    }
    Ok(())
}

/// Whether `path` names a file no user but root and the daemon's could
/// change (module docs). The file must exist.
pub fn check(path: &Path) -> Result<(), Untrusted> {
    check_as(path, daemon())
}

fn check_as(path: &Path, daemon: Daemon) -> Result<(), Untrusted> {
    let io = |at: &Path, source| Untrusted::Io {
        path: path.to_path_buf(),
        at: at.to_path_buf(),
        source,
    };
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| io(Path::new("."), e))?
            .join(path)
    };
    // The names left to walk, the next one last.
    let mut todo: Vec<OsString> = Vec::new();
    let push = |todo: &mut Vec<OsString>, p: &Path| {
        for c in p.components().rev() {
            match c {
                Component::Normal(n) => todo.push(n.to_os_string()),
                Component::ParentDir => todo.push(OsString::from("..")),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    };
    push(&mut todo, &absolute);
    let root = PathBuf::from("/");
    let meta = std::fs::symlink_metadata(&root).map_err(|e| io(&root, e))?;
    check_one(path, &root, &meta, todo.is_empty(), daemon)?;
    // `at` is always a directory already checked, with no link in it.
    let mut at = root;
    let mut links = 0usize;
    while let Some(name) = todo.pop() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        let meta = std::fs::symlink_metadata(&next).map_err(|e| io(&next, e))?;
        check_one(path, &next, &meta, todo.is_empty(), daemon)?;
        if meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(Untrusted::Links {
                    path: path.to_path_buf(),
                });
            }
            let target = std::fs::read_link(&next).map_err(|e| io(&next, e))?;
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            // The link's target, walked in place of the link; a target
            // that ends the path is the file itself, checked as such.
            push(&mut todo, &target);
            continue;
        }
        at = next;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A directory of the test's own, removed when dropped.
    struct Dir(PathBuf);
    impl Dir {
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A directory of the test's own, 0755, with a policy file in it.
    fn setup() -> (Dir, PathBuf) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = Dir(std::env::temp_dir().join(format!(
            "gatehouse-trusted-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )));
        let _ = std::fs::remove_dir_all(d.path());
        std::fs::create_dir(d.path()).unwrap();
        chmod(d.path(), 0o755);
        let f = d.path().join("p.policy");
        std::fs::write(&f, "policy p { }\n").unwrap();
        chmod(&f, 0o644);
        (d, f)
    }

    #[test]
    fn files_only_the_daemon_can_change_pass_and_writable_ones_do_not() {
        let me = daemon();
        let (d, f) = setup();
        check_as(&f, me).unwrap();
        // The file writable by others.
        chmod(&f, 0o646);
        let e = check_as(&f, me).unwrap_err();
        assert!(
            matches!(&e, Untrusted::Writable { at, who: "others", .. } if at == &f),
            "{e}"
        );
        assert!(e.to_string().contains("chmod go-w"), "{e}");
        // Writable by its group: the daemon's own group may, another
        // group may not (giving a file to another group needs root).
        chmod(&f, 0o664);
        check_as(&f, me).unwrap();
        let other_group = Daemon {
            uid: me.uid,
            gid: me.gid.wrapping_add(1),
        };
        if me.gid != 0 {
            assert!(matches!(
                check_as(&f, other_group),
                Err(Untrusted::Writable { .. })
            ));
        } else {
            std::os::unix::fs::chown(&f, None, Some(65_534)).unwrap();
            let e = check_as(&f, me).unwrap_err();
            assert!(
                matches!(
                    &e,
                    Untrusted::Writable {
                        who: "its group",
                        ..
                    }
                ),
                "{e}"
            );
            chmod(&f, 0o666);
            assert!(matches!(
                check_as(&f, me),
                Err(Untrusted::Writable {
                    who: "its group and others",
                    ..
                })
            ));
        }
        chmod(&f, 0o600);
        check_as(&f, me).unwrap();
        // Its directory writable by others: refused; with the sticky bit
        // (as /tmp), a directory on the way is safe.
        chmod(d.path(), 0o757);
        let e = check_as(&f, me).unwrap_err();
        assert!(
            matches!(&e, Untrusted::Writable { at, .. } if at == d.path()),
            "{e}"
        );
        assert!(e.to_string().contains("chmod +t"), "{e}");
        chmod(d.path(), 0o1777);
        check_as(&f, me).unwrap();
        chmod(d.path(), 0o755);
        // A relative path, `..` and `.` on the way.
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        chmod(&sub, 0o755);
        check_as(&sub.join("..").join(".").join("p.policy"), me).unwrap();
        chmod(&sub, 0o757);
        // `sub/..` is walked through `sub`: a writable `sub` is refused
        // (another user could make it a link).
        assert!(check_as(&sub.join("..").join("p.policy"), me).is_err());
        // A file that is not there.
        assert!(matches!(
            check_as(&d.path().join("none"), me),
            Err(Untrusted::Io { .. })
        ));
    }
    #[test]
    fn links_are_followed_and_walked_where_they_point() {
        let me = daemon();
        let (d, f) = setup();
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        chmod(&open, 0o777);
        // A link in a safe directory to a file in a writable one: the
        // target's directory is walked, and refused.
        let g = open.join("q.policy");
        std::fs::write(&g, "policy q { }\n").unwrap();
        chmod(&g, 0o644);
        let link = d.path().join("link.policy");
        std::os::unix::fs::symlink(&g, &link).unwrap();
        let e = check_as(&link, me).unwrap_err();
        assert!(
            matches!(&e, Untrusted::Writable { at, .. } if at == &open),
            "{e}"
        );
        // A relative link to the safe file passes; a loop is refused.
        let rel = d.path().join("rel.policy");
        std::os::unix::fs::symlink("sub/../p.policy", &rel).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        chmod(&d.path().join("sub"), 0o755);
        check_as(&rel, me).unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(matches!(check_as(&a, me), Err(Untrusted::Links { .. })));
        let _ = f;
    }

    /// Another owner, on the file, a directory or a link: refused. Needs
    /// root to give a file away; as another user only the daemon-uid side
    /// is checked (a file of the test's own, judged as if the daemon were
    /// another user).
    #[test]
    fn files_of_another_user_are_refused() {
        let me = daemon().uid;
        let (d, f) = setup();
        let other = if me == 0 { 65_534 } else { me };
        let as_uid = |uid| Daemon { uid, gid: 0 };
        let daemon = as_uid(if me == 0 { 0 } else { me.wrapping_add(1) });
        if me == 0 {
            std::os::unix::fs::chown(&f, Some(other), None).unwrap();
        }
        // As root, the file is the first thing another user owns; as
        // another user, the test's own directory is.
        let e = check_as(&f, daemon).unwrap_err();
        assert!(
            matches!(&e, Untrusted::Owner { at, uid, .. } if *uid == other && (me != 0 || at == &f)),
            "{e}"
        );
        if me == 0 {
            // A link owned by another user, to a root-owned file.
            std::os::unix::fs::chown(&f, Some(0), None).unwrap();
            let link = d.path().join("link.policy");
            std::os::unix::fs::symlink(&f, &link).unwrap();
            std::os::unix::fs::lchown(&link, Some(other), None).unwrap();
            let e = check_as(&link, as_uid(0)).unwrap_err();
            assert!(
                matches!(&e, Untrusted::Owner { at, .. } if at == &link),
                "{e}"
            );
            check_as(&f, as_uid(0)).unwrap();
            // A directory on the way owned by another user.
            std::os::unix::fs::chown(d.path(), Some(other), None).unwrap();
            assert!(matches!(
                check_as(&f, as_uid(0)),
                Err(Untrusted::Owner { .. })
            ));
        }
    }
}
