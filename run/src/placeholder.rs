//! Placeholders: the empty files a run binds over protected names that do
//! not exist yet (so they cannot be made), shared by the runs of one
//! workspace under a shared lock and removed by the last one.

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::plan::{Mount, MountKind};
use crate::sys::{RunError, io};

/// What a placeholder error names: the path, and (when it exists) who
/// owns it — a placeholder left by a run as another user (root) cannot be
/// shared by this one.
fn placeholder_what(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match path.symlink_metadata() {
        Ok(md) => format!(
            "the placeholder {} (owned by uid {}, mode {:o}: left by a run as another user, it cannot be shared; remove it or run as that user)",
            path.display(),
            md.uid(),
            md.mode() & 0o7777
        ),
        Err(_) => format!("the placeholder {}", path.display()),
    }
}

/// Two runs in one workspace share a placeholder: each holds a shared lock
/// on it while its command runs, and a run that ends removes it only when
/// it can take the lock alone (`remove_placeholder`). Otherwise the first
/// to end would unlink the file the other's block is mounted on, and the
/// kernel would drop that mount: the name would become creatable.
///
/// Makes the empty file at `path` (or opens the empty file another run
/// made), locks it shared, and checks it is still the file at `path` (a
/// run ending may have removed it between the open and the lock: then it
/// is made again). `None` when a file with content appeared there meanwhile
/// (it is bound read-only all the same, and never removed); an error when
/// something else did.
pub(crate) fn hold_placeholder(path: &Path) -> Result<Option<std::fs::File>, RunError> {
    use std::os::unix::fs::MetadataExt;
    let appeared =
        || RunError::Landlock(format!("{} appeared while the run started", path.display()));
    for _ in 0..16 {
        let f = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                match path.symlink_metadata() {
                    Ok(md) if md.is_file() && md.len() == 0 => {}
                    Ok(md) if md.is_file() => return Ok(None),
                    Ok(_) => return Err(appeared()),
                    Err(_) => continue,
                }
                match open_plain(path) {
                    Ok(f) => f,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io(placeholder_what(path))(e)),
                }
            }
            Err(e) => return Err(io(placeholder_what(path))(e)),
        };
        f.lock_shared().map_err(io("locking a placeholder"))?;
        let (Ok(held), Ok(now)) = (f.metadata(), path.symlink_metadata()) else {
            continue;
        };
        if held.ino() == now.ino() && held.dev() == now.dev() {
            if !held.is_file() {
                return Err(appeared());
            }
            return Ok(Some(f));
        }
    }
    Err(appeared())
}

/// Opens `path` for reading as it is: never through a symbolic link, and
/// never waiting (a FIFO swapped in by a command still running elsewhere
/// must not hang the launcher); the callers check it is the empty file
/// they expect.
fn open_plain(path: &Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// An empty file that another run holds (`hold_placeholder`) is that run's
/// placeholder, not the user's: this run shares it as a block of its own,
/// so that the other run, ending first, leaves it in place (unlinking it
/// would drop this run's mount on it), and the last run to end removes it.
pub(crate) fn adopt_live_placeholders(mounts: &mut [Mount]) {
    for m in mounts.iter_mut() {
        if m.dir || !matches!(m.kind, MountKind::ReadOnly | MountKind::Hide) {
            continue;
        }
        if !(m.path.symlink_metadata()).is_ok_and(|md| md.is_file() && md.len() == 0) {
            continue;
        }
        let live = open_plain(&m.path)
            .is_ok_and(|f| matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)));
        if live {
            m.kind = MountKind::Block;
        }
    }
}

/// Removes a placeholder the run made or shared once no run holds it and
/// it is still an empty file (`hold_placeholder`).
pub(crate) fn remove_placeholder(path: &Path) {
    use std::os::unix::fs::MetadataExt;
    if !path
        .symlink_metadata()
        .is_ok_and(|m| m.is_file() && m.len() == 0)
    {
        return;
    }
    let Ok(f) = open_plain(path) else {
        return;
    };
    // Another run holds it: that run removes it when it ends.
    if f.try_lock().is_err() {
        return;
    }
    let (Ok(held), Ok(now)) = (f.metadata(), path.symlink_metadata()) else {
        return;
    };
    if held.ino() == now.ino() && held.dev() == now.dev() && now.is_file() && now.len() == 0 {
        let _ = std::fs::remove_file(path);
    }
}
