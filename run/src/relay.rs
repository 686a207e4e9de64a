//! The launcher's plumbing: the relay between the namespace's socket and
//! the proxy, the proxy's reaper, the temporary directory's cleanup.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

/// Copies both ways between two streams, each way on a thread of its own.
pub(crate) fn splice<A, B>(a: A, b: B)
where
    A: Read + Write + Send + 'static + TryClone,
    B: Read + Write + Send + 'static + TryClone,
{
    let (Ok(a2), Ok(b2)) = (a.try_clone_stream(), b.try_clone_stream()) else {
        return;
    };
    std::thread::spawn(move || pump(a, b2));
    std::thread::spawn(move || pump(b, a2));
}

fn pump<R: Read + TryClone, W: Write + TryClone>(mut r: R, mut w: W) {
    let _ = io::copy(&mut r, &mut w);
    w.shutdown_write();
}

/// What `splice` needs of a stream beyond Read and Write.
pub(crate) trait TryClone: Sized {
    fn try_clone_stream(&self) -> io::Result<Self>;
    fn shutdown_write(&self);
}

impl TryClone for TcpStream {
    fn try_clone_stream(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn shutdown_write(&self) {
        let _ = self.shutdown(std::net::Shutdown::Write);
    }
}

impl TryClone for UnixStream {
    fn try_clone_stream(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn shutdown_write(&self) {
        let _ = self.shutdown(std::net::Shutdown::Write);
    }
}

/// Stops gatehouse-egress however the run ends.
pub(crate) struct Reaper(pub(crate) Child);

impl Reaper {
    /// SIGTERM, so that the proxy flushes its telemetry (it bounds that to
    /// 5 s), then SIGKILL after 6 s.
    pub(crate) fn stop(&mut self) {
        if let Ok(pid) = libc::pid_t::try_from(self.0.id()) {
            #[allow(unsafe_code)]
            // SAFETY: kill takes two integers and only sends a signal; the
            // pid is our own child's, not yet waited for (so not reused).
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(6) {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) struct Cleanup(pub(crate) PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
