//! The policy watcher: one thread that notices a changed policy file (or
//! SIGHUP), reloads it, and gives the memory of each reload back.

use std::sync::Arc;
use std::time::Duration;

use crate::notify::{Notifier, Wake};
use crate::policy::{Policies, Seen, stat_key, stderr_line};

/// Watches the policy file and reloads when its content changes, or on
/// SIGHUP, until the runtime ends.
///
/// One thread of its own does all of it, one thing at a time. It sleeps
/// until the kernel says something changed in the policy's directory
/// (inotify, [`crate::notify`]) or a SIGHUP comes; then it `stat`s the
/// path (never opens it: a FIFO at the path costs nothing), reads and
/// hashes the file only when its identity, size, modification or change
/// time moved, and keeps looking every 200 ms for one second after any
/// change (a write landing in the same timestamp tick as the read before
/// it is still seen). So an idle daemon neither wakes nor reads its policy
/// (an 8 MiB policy read every 200 ms was 40 MB/s of hashing; a `stat`
/// every 200 ms per file was host mode's idle CPU). It reloads when the
/// hash differs from the last one read, and at every SIGHUP. Where the
/// kernel gives no notifications (or loses some: an overflow, the
/// directory gone) it polls every 200 ms, as before. The reads, the
/// compile and the old set all live and die on that thread, whose freed
/// memory is then given back (docs/egress.md, "Memory").
pub fn watch(policies: Arc<Policies>) {
    let (wakes, wake) = std::sync::mpsc::channel::<Wake>();
    let notifier = Notifier::start(wakes.clone());
    let spawned = std::thread::Builder::new()
        .name("gatehouse-reload".into())
        .spawn(move || reload_thread(&policies, &wake, notifier));
    if let Err(e) = spawned {
        stderr_line(format!(
            "gatehouse-egress: cannot start the reload thread ({e}); the policy in force stays until restart"
        ));
        return;
    }
    // Holds the sender until the runtime ends: the thread is then told to
    // stop.
    tokio::spawn(async move {
        let hups = StopOnDrop(wakes);
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            if let Ok(mut signals) = signal(SignalKind::hangup()) {
                while signals.recv().await.is_some() {
                    if hups.0.send(Wake::Hup).is_err() {
                        return;
                    }
                }
            }
        }
        std::future::pending::<()>().await;
        drop(hups);
    });
}

/// The SIGHUP sender, which tells the reload thread to stop when the
/// runtime drops it (the notifier holds a sender too, so the channel
/// alone would never close).
struct StopOnDrop(std::sync::mpsc::Sender<Wake>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(Wake::Stop);
    }
}

/// What the watcher knows of one policy file: its `stat` identity and
/// when it last saw it change. The digest of what is in force is the
/// policy's own ([`Policies::seen`]), whoever read it last.
pub(crate) struct FileWatch {
    key: Option<[i128; 5]>,
    changed_at: std::time::Instant,
}

impl FileWatch {
    /// Starts watching `p`'s file from what `p` last read of it (never
    /// from a read of its own: a change between `p`'s read and this one
    /// would be taken as in force and never reloaded).
    pub(crate) fn new(p: &Policies) -> FileWatch {
        FileWatch {
            key: p.seen().key,
            changed_at: std::time::Instant::now(),
        }
    }

    /// Reads the file and reloads it, whatever its `stat` says (SIGHUP).
    pub(crate) fn force(&mut self, p: &Policies) {
        p.reload();
        *self = FileWatch::new(p);
    }

    /// One poll: `stat`, and a read only when the file moved (or settles);
    /// a reload when its content differs. Whether it reloaded.
    pub(crate) fn poll(&mut self, p: &Policies) -> bool {
        self.poll_read(p).is_some()
    }

    /// Whether the file at `path` (this watch's) moved since it was last
    /// looked at, or is still settling after a move: a `stat`, no read.
    /// [`FileWatch::poll_read`] then reads it.
    pub(crate) fn moved(&mut self, path: &std::path::Path) -> bool {
        let now_key = stat_key(path);
        if now_key != self.key {
            self.key = now_key;
            self.changed_at = std::time::Instant::now();
            return true;
        }
        self.changed_at.elapsed() <= SETTLE
    }

    /// [`FileWatch::poll`], with what was read when the file changed: what
    /// it was, and its bytes when they could be read (for other policies
    /// naming the same file, [`Policies::reload_quiet`]).
    pub(crate) fn poll_read(&mut self, p: &Policies) -> Option<(Seen, Option<Vec<u8>>)> {
        let now_key = stat_key(&p.path);
        if now_key != self.key {
            self.key = now_key;
            self.changed_at = std::time::Instant::now();
        } else if self.changed_at.elapsed() > SETTLE {
            return None;
        }
        let (seen, text) = Seen::read(&p.path);
        if seen.digest == p.seen().digest {
            return None;
        }
        self.changed_at = std::time::Instant::now();
        p.set_seen(seen.clone());
        let bytes = text.as_ref().ok().cloned();
        p.reload_text(text);
        Some((seen, bytes))
    }
}

/// The watcher's loop: see [`watch`].
fn reload_thread(p: &Policies, wake: &std::sync::mpsc::Receiver<Wake>, notifier: Option<Notifier>) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut file = FileWatch::new(p);
    let mut notifier = notifier;
    let mut polling = !notifier.as_mut().is_some_and(|n| n.watch_file(&p.path));
    if polling {
        stderr_line(
            "gatehouse-egress: no file notifications for the policy; it is checked every 200 ms"
                .to_string(),
        );
    }
    let mut settle = Settle::default();
    // The first compile's transient memory (made before this thread),
    // given back.
    give_back_free_memory();
    loop {
        let next = if polling || settle.active() {
            wake.recv_timeout(POLL)
        } else {
            wake.recv().map_err(|_| RecvTimeoutError::Disconnected)
        };
        match next {
            Ok(Wake::Hup) => file.force(p),
            Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(Wake::Lost(why)) => {
                stderr_line(format!(
                    "gatehouse-egress: {why}; the policy is checked every 200 ms from now on"
                ));
                polling = true;
                notifier = None;
                if !file.poll(p) {
                    continue;
                }
            }
            Ok(Wake::Changed) | Err(RecvTimeoutError::Timeout) => {
                if matches!(next, Ok(Wake::Changed)) {
                    settle.start();
                    // A symbolic link may point elsewhere now.
                    if let Some(n) = notifier.as_mut()
                        && !n.watch_file(&p.path)
                    {
                        polling = true;
                    }
                }
                if !file.poll(p) {
                    continue;
                }
            }
        }
        // The parse, the check, the bytes read and the old set (when no
        // request holds it any more) are freed by now.
        give_back_free_memory();
    }
}

/// The second after a notification, during which the watcher keeps
/// looking every [`POLL`] (a change in the same timestamp tick as the last
/// read shows in no `stat`).
#[derive(Default)]
pub(crate) struct Settle(Option<std::time::Instant>);

impl Settle {
    /// A notification came: look for the next [`SETTLE`].
    pub(crate) fn start(&mut self) {
        self.0 = Some(std::time::Instant::now() + SETTLE);
    }

    /// Whether the watcher still looks on every [`POLL`].
    pub(crate) fn active(&mut self) -> bool {
        match self.0 {
            Some(until) if std::time::Instant::now() < until => true,
            _ => {
                self.0 = None;
                false
            }
        }
    }
}

/// How often the watcher `stat`s a file.
pub(crate) const POLL: Duration = Duration::from_millis(200);

/// Returns the memory the allocator holds free to the system. glibc's
/// malloc keeps what a compile freed (the parser's token queue, the
/// checker's indexes, the old set) as the high-water mark of the process:
/// 20 reloads of an 8 MiB policy grew a daemon from 130 to 360 MiB. Measured
/// in `egress/tests/e2e/daemon.rs` (`reloads_of_a_large_policy_give_memory_back`).
#[allow(unsafe_code)] // malloc_trim: the reason is above, the test named.
pub(crate) fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a plain integer, touches only the
    // allocator's own free lists (under its own locks) and has no
    // precondition; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// [`give_back_free_memory`] on a thread of its own (it walks the heap:
/// milliseconds for a large one), unless one is already under way.
pub(crate) fn give_back_free_memory_soon() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static UNDER_WAY: AtomicBool = AtomicBool::new(false);
    if UNDER_WAY.swap(true, Ordering::AcqRel) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("gatehouse-trim".into())
        .spawn(|| {
            give_back_free_memory();
            UNDER_WAY.store(false, Ordering::Release);
        });
    if spawned.is_err() {
        UNDER_WAY.store(false, Ordering::Release);
    }
}

/// How long after a change of the file the watcher keeps reading it on
/// every poll.
const SETTLE: Duration = Duration::from_secs(1);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const ALLOW: &str =
        "policy p {\n  network {\n    default deny\n    allow domain allowed.test\n  }\n}\n";

    fn allows(p: &Policies) -> bool {
        p.store.load().single().is_some_and(|s| {
            s.connect("allowed.test", 443, gatehouse::Via::Https)
                .is_allow()
        })
    }

    /// A write that lands after the policy was opened but before the
    /// watcher took its first look is still reloaded (the watcher starts
    /// from what the open read, not from a read of its own). This was a
    /// CI failure: under load the reload thread started after the test
    /// had already rewritten the file, and the change was never seen.
    #[test]
    fn a_change_before_the_watcher_starts_is_reloaded() {
        let p = crate::testing::policies("watch-race", ALLOW).unwrap();
        assert!(allows(&p));
        std::fs::write(&p.path, ALLOW.replace("allow domain", "deny domain")).unwrap();
        let mut w = FileWatch::new(&p);
        assert!(w.poll(&p), "the change was not reloaded");
        assert!(!allows(&p));
        // Nothing more to do once it is in force.
        assert!(!w.poll(&p));
    }

    /// The same after a SIGHUP-style forced reload: the watcher keeps
    /// what the forced read saw, and a later write is reloaded.
    #[test]
    fn a_forced_reload_then_a_change_is_reloaded() {
        let p = crate::testing::policies("watch-force", ALLOW).unwrap();
        let mut w = FileWatch::new(&p);
        w.force(&p);
        assert!(allows(&p));
        std::fs::write(&p.path, ALLOW.replace("allow domain", "deny domain")).unwrap();
        assert!(w.poll(&p));
        assert!(!allows(&p));
    }

    /// Kubernetes mounts a ConfigMap as `p.policy -> ..data/p.policy`,
    /// `..data -> ..2026_12_07_a`, and updates it by renaming a new
    /// `..data` link over the old one: no event on the policy's own name,
    /// nor in the directory the file first resolved to. The watcher sees
    /// the rename in the mount's directory, and the new policy is put in
    /// force with no poll to find it (the thread waits on notifications
    /// alone here).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_configmap_style_symlink_swap_is_reloaded() {
        use std::os::unix::fs::symlink;
        let root = std::env::temp_dir().join(format!("gatehouse-cm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("..2026_12_07_a")).unwrap();
        std::fs::write(root.join("..2026_12_07_a/p.policy"), ALLOW).unwrap();
        symlink("..2026_12_07_a", root.join("..data")).unwrap();
        symlink("..data/p.policy", root.join("p.policy")).unwrap();
        let p = std::sync::Arc::new(
            crate::policy::Policies::open(
                crate::policy::PolicyOptions::new(root.join("p.policy")),
                std::sync::Arc::new(crate::metrics::Metrics::default()),
            )
            .unwrap(),
        );
        assert!(allows(&p));
        let (tx, rx) = std::sync::mpsc::channel();
        let notifier = Notifier::start(tx.clone()).expect("inotify");
        let watched = p.clone();
        let thread = std::thread::spawn(move || reload_thread(&watched, &rx, Some(notifier)));
        // Let the thread add its watches, then swap.
        std::thread::sleep(std::time::Duration::from_millis(200));
        std::fs::create_dir_all(root.join("..2026_12_07_b")).unwrap();
        std::fs::write(
            root.join("..2026_12_07_b/p.policy"),
            ALLOW.replace("allow domain", "deny domain"),
        )
        .unwrap();
        symlink("..2026_12_07_b", root.join("..data_tmp")).unwrap();
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
        let t0 = std::time::Instant::now();
        while allows(&p) {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(5),
                "the swapped policy was not put in force"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        tx.send(Wake::Stop).unwrap();
        thread.join().unwrap();
        let _ = std::fs::remove_dir_all(&root);
    }
}
