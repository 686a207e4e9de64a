//! Kernel notifications of changes to the files a watcher reloads
//! (inotify), so that an idle daemon costs nothing: the reload threads
//! sleep until the kernel says something in a watched directory moved,
//! instead of `stat`-ing every policy file five times a second.
//!
//! Directories are watched, not files: editors and deployment tools replace
//! a file by renaming another over it (a watch on the old inode would see
//! nothing more), and a Kubernetes-style `..data` symlink swap is a rename
//! in the same directory. For a path that is a symbolic link, the directory
//! of the file it resolves to is watched as well. Any event in a watched
//! directory wakes the watcher, which then checks its files exactly as it
//! did when polling (`stat`, a read when one moved, the serial and rollback
//! checks of every load): a notification only says when to look, never
//! what to load.
//!
//! Fail safe: where inotify is unavailable, a watch cannot be added (the
//! per-user watch limit), the kernel's queue overflowed, or a watched
//! directory went away, the watcher says so once on standard error and
//! polls from then on, as before.

use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;

/// What wakes a reload thread.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// SIGHUP: read everything again.
    Hup,
    /// The runtime ended: the reload thread stops.
    Stop,
    /// Something in a watched directory changed: look at the files.
    Changed,
    /// Notifications can no longer be trusted (an overflow, a directory
    /// gone, a read error): look at the files, and poll from now on.
    Lost(String),
}

/// Watches the directories of a set of files and sends a [`Wake`] for
/// each batch of events.
pub(crate) struct Notifier {
    #[cfg(target_os = "linux")]
    fd: std::sync::Arc<rustix::fd::OwnedFd>,
    /// The directories watched so far, with their watch descriptors.
    dirs: std::collections::HashMap<PathBuf, i32>,
    /// The thread reading the events.
    #[cfg(test)]
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Notifier {
    /// A notifier whose events go to `to`, read by a thread of its own;
    /// `None` where the kernel gives none (then the caller polls).
    pub(crate) fn start(to: Sender<Wake>) -> Option<Notifier> {
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::inotify;
            let fd = std::sync::Arc::new(inotify::init(inotify::CreateFlags::CLOEXEC).ok()?);
            let reader = fd.clone();
            let _thread = std::thread::Builder::new()
                .name("gatehouse-notify".into())
                .spawn(move || read_events(&reader, &to))
                .ok()?;
            Some(Notifier {
                fd,
                dirs: Default::default(),
                #[cfg(test)]
                thread: Some(_thread),
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = to;
            None
        }
    }

    /// Watches the directory `path` lies in, and for a symbolic link the
    /// directory of the file it resolves to. False when a watch could not
    /// be added (the caller then polls: nothing would wake it for that
    /// file).
    pub(crate) fn watch_file(&mut self, path: &Path) -> bool {
        let mut dirs = vec![parent(path)];
        if let Ok(target) = std::fs::canonicalize(path) {
            dirs.push(parent(&target));
        }
        dirs.into_iter().all(|d| self.watch_dir(d))
    }

    fn watch_dir(&mut self, dir: PathBuf) -> bool {
        if self.dirs.contains_key(&dir) {
            return true;
        }
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::inotify::{WatchFlags, add_watch};
            let flags = WatchFlags::CREATE
                | WatchFlags::DELETE
                | WatchFlags::MODIFY
                | WatchFlags::CLOSE_WRITE
                | WatchFlags::MOVED_FROM
                | WatchFlags::MOVED_TO
                | WatchFlags::ATTRIB
                | WatchFlags::DELETE_SELF
                | WatchFlags::MOVE_SELF
                | WatchFlags::ONLYDIR;
            let Ok(wd) = add_watch(&*self.fd, &dir, flags) else {
                return false;
            };
            self.dirs.insert(dir, wd);
            true
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = dir;
            false
        }
    }
}

impl Drop for Notifier {
    /// Removes every watch: the kernel then queues an `IN_IGNORED` event
    /// for each, which wakes the notifier's thread, whose next send fails
    /// (its reload thread has gone) and which then ends. With no watch
    /// yet, one is added on `/` and removed for the same wake-up.
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::inotify::{WatchFlags, add_watch, remove_watch};
            if self.dirs.is_empty()
                && let Ok(wd) = add_watch(&*self.fd, "/", WatchFlags::ONLYDIR | WatchFlags::ATTRIB)
            {
                self.dirs.insert(PathBuf::from("/"), wd);
            }
            for wd in self.dirs.values() {
                let _ = remove_watch(&*self.fd, *wd);
            }
        }
    }
}

/// The directory a file lies in (`.` for a bare name).
fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The notifier's thread: blocks on the kernel's queue, sends one
/// [`Wake::Changed`] per batch read, [`Wake::Lost`] on an overflow, a
/// watched directory gone or an error (and stops). Ends when the reload
/// thread has gone (the send fails).
#[cfg(target_os = "linux")]
fn read_events(fd: &rustix::fd::OwnedFd, to: &Sender<Wake>) {
    use rustix::fs::inotify::{ReadFlags, Reader};
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
    let mut reader = Reader::new(fd, &mut buf);
    loop {
        let lost = match reader.next() {
            Ok(e) if e.events().contains(ReadFlags::QUEUE_OVERFLOW) => {
                Some("the kernel's queue of file events overflowed".to_string())
            }
            Ok(e)
                if e.events().intersects(
                    ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF,
                ) =>
            {
                Some("a watched directory was removed or moved".to_string())
            }
            Ok(_) => None,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => Some(format!("reading file events failed ({e})")),
        };
        // One note per batch the kernel handed over.
        if !reader.is_buffer_empty() && lost.is_none() {
            continue;
        }
        let stop = lost.is_some();
        let note = lost.map_or(Wake::Changed, Wake::Lost);
        if to.send(note).is_err() || stop {
            return;
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::sync::mpsc::{Receiver, channel};
    use std::time::Duration;

    fn next(rx: &Receiver<Wake>) -> Option<Wake> {
        rx.recv_timeout(Duration::from_secs(5)).ok()
    }

    /// Drains what is queued (a write makes several events, sent as one
    /// or more notes), then says whether anything came within 300 ms.
    fn quiet(rx: &Receiver<Wake>) -> bool {
        while rx.recv_timeout(Duration::from_millis(300)).is_ok() {}
        rx.recv_timeout(Duration::from_millis(300)).is_err()
    }

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("gatehouse-notify-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A write, a rename over the file (as editors save), and a change
    /// of the file a symbolic link points to, in another directory: each
    /// wakes the watcher. Nothing wakes it while nothing changes.
    #[test]
    fn writes_renames_and_link_targets_wake_the_watcher() {
        let d = dir("wake");
        let other = dir("wake-target");
        let file = d.join("p.policy");
        std::fs::write(&file, "a").unwrap();
        let target = other.join("real.policy");
        std::fs::write(&target, "a").unwrap();
        let link = d.join("link.policy");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let (tx, rx) = channel();
        let mut n = Notifier::start(tx).expect("inotify");
        assert!(n.watch_file(&file) && n.watch_file(&link));
        assert!(quiet(&rx), "woken with nothing changed");
        std::fs::write(&file, "b").unwrap();
        assert_eq!(next(&rx), Some(Wake::Changed));
        assert!(quiet(&rx));
        let tmp = d.join("p.policy.tmp");
        std::fs::write(&tmp, "c").unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        assert_eq!(next(&rx), Some(Wake::Changed));
        assert!(quiet(&rx));
        std::fs::write(&target, "b").unwrap();
        assert_eq!(next(&rx), Some(Wake::Changed));
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&other);
    }

    /// A watched directory removed: the notes are lost from then on, and
    /// the watcher is told so (it then polls).
    #[test]
    fn a_removed_directory_is_a_loss() {
        let d = dir("lost");
        let file = d.join("p.policy");
        std::fs::write(&file, "a").unwrap();
        let (tx, rx) = channel();
        let mut n = Notifier::start(tx).expect("inotify");
        assert!(n.watch_file(&file));
        std::fs::remove_dir_all(&d).unwrap();
        let mut lost = false;
        while let Some(w) = next(&rx) {
            if matches!(w, Wake::Lost(_)) {
                lost = true;
                break;
            }
        }
        assert!(lost, "no loss reported");
    }

    /// Dropping the notifier ends its thread (the watches' removal wakes
    /// it, and its send then fails), with watches and without.
    #[test]
    fn dropping_the_notifier_ends_its_thread() {
        let d = dir("drop");
        let file = d.join("p.policy");
        std::fs::write(&file, "a").unwrap();
        for watched in [true, false] {
            let (tx, rx) = channel();
            let mut n = Notifier::start(tx).expect("inotify");
            if watched {
                assert!(n.watch_file(&file));
            }
            let thread = n.thread.take().unwrap();
            drop(rx);
            drop(n);
            let t0 = std::time::Instant::now();
            while !thread.is_finished() {
                assert!(
                    t0.elapsed() < Duration::from_secs(5),
                    "the notifier's thread outlived it (watched: {watched})"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
