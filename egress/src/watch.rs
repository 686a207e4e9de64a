//! The policy watcher: one thread that notices a changed policy file (or
//! SIGHUP), reloads it, and gives the memory of each reload back.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::policy::{Policies, PolicyError, read_policy, stderr_line};

/// Watches the policy file and reloads when its content changes, or on
/// SIGHUP, until the runtime ends.
///
/// One thread of its own does all of it, one thing at a time: every 200 ms
/// it `stat`s the path (never opens it: a FIFO at the path costs nothing);
/// it reads and hashes the file only when its identity, size, modification
/// or change time moved, and for one second after any change (a write
/// landing in the same timestamp tick as the read before it is still
/// seen), so an idle daemon never reads its policy (an 8 MiB policy read
/// every 200 ms was 40 MB/s of hashing); it reloads when the hash differs
/// from the last one read, and at every SIGHUP. The reads, the compile and
/// the old set all live and die on that thread, whose freed memory is then
/// given back (docs/egress.md, "Memory").
pub fn watch(policies: Arc<Policies>) {
    let (hups, hup) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("gatehouse-reload".into())
        .spawn(move || reload_thread(&policies, &hup));
    if let Err(e) = spawned {
        stderr_line(format!(
            "gatehouse-egress: cannot start the reload thread ({e}); the policy in force stays until restart"
        ));
        return;
    }
    // Holds the sender until the runtime ends: the thread then sees the
    // channel close and stops.
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            if let Ok(mut signals) = signal(SignalKind::hangup()) {
                while signals.recv().await.is_some() {
                    if hups.send(()).is_err() {
                        return;
                    }
                }
            }
        }
        std::future::pending::<()>().await;
        drop(hups);
    });
}

/// What the watcher knows of one policy file: its `stat` identity, the
/// digest of what it last read, and when it last saw it change.
pub(crate) struct FileWatch {
    key: Option<[i128; 5]>,
    last: String,
    changed_at: std::time::Instant,
}

fn digest(t: &Result<Vec<u8>, PolicyError>) -> String {
    match t {
        Ok(bytes) => gatehouse::artifact::sha256_hex(bytes),
        Err(e) => format!("error: {e}"),
    }
}

impl FileWatch {
    /// Starts watching `p`'s file as it is now.
    pub(crate) fn new(p: &Policies) -> FileWatch {
        FileWatch {
            key: stat_key(&p.path),
            last: digest(&read_policy(&p.path)),
            changed_at: std::time::Instant::now(),
        }
    }

    /// Reads the file and reloads it, whatever its `stat` says (SIGHUP).
    pub(crate) fn force(&mut self, p: &Policies) {
        let text = read_policy(&p.path);
        self.last = digest(&text);
        p.reload_text(text);
    }

    /// One poll: `stat`, and a read only when the file moved (or settles);
    /// a reload when its content differs. Whether it reloaded.
    pub(crate) fn poll(&mut self, p: &Policies) -> bool {
        let now_key = stat_key(&p.path);
        if now_key != self.key {
            self.key = now_key;
            self.changed_at = std::time::Instant::now();
        } else if self.changed_at.elapsed() > SETTLE {
            return false;
        }
        let text = read_policy(&p.path);
        let now = digest(&text);
        if now == self.last {
            return false;
        }
        self.last = now;
        self.changed_at = std::time::Instant::now();
        p.reload_text(text);
        true
    }
}

/// The watcher's loop: see [`watch`].
fn reload_thread(p: &Policies, hup: &std::sync::mpsc::Receiver<()>) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut file = FileWatch::new(p);
    // The first compile's transient memory (made before this thread),
    // given back.
    give_back_free_memory();
    loop {
        match hup.recv_timeout(POLL) {
            Ok(()) => file.force(p),
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
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

/// How long after a change of the file the watcher keeps reading it on
/// every poll.
const SETTLE: Duration = Duration::from_secs(1);

/// What tells the watcher a file may have changed: device, inode, size,
/// modification and change times (`stat`, which never opens the path).
pub(crate) fn stat_key(path: &Path) -> Option<[i128; 5]> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(path).ok()?;
    Some([
        i128::from(m.dev()),
        i128::from(m.ino()),
        i128::from(m.size()),
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
    ])
}
