//! The launcher's plumbing: the relay between the namespace's socket and
//! the proxy, the proxy's reaper, a descriptor handed across namespaces.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
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

/// What a signal to the launcher left: the namespace's process to kill,
/// and the signal that came (0: none).
pub(crate) struct Signals {
    pub(crate) child: Arc<AtomicI32>,
    pub(crate) got: Arc<AtomicI32>,
}

/// SIGINT, SIGTERM and SIGHUP to the launcher end the run as the command's
/// own end does: the namespace's process is killed (its PID 1 and the
/// command go with it), and the launcher goes on to stop the proxy and
/// remove its placeholders — a launcher that died of the signal would leave
/// them (an empty `/tmp/.git` makes `/tmp` look like a repository). Blocks
/// the three in this thread (threads made after inherit the block; a child
/// starts with none blocked, as std resets the mask) and waits for them on
/// a thread of its own.
#[allow(unsafe_code)]
pub(crate) fn catch_signals() -> Signals {
    let out = Signals {
        child: Arc::new(AtomicI32::new(0)),
        got: Arc::new(AtomicI32::new(0)),
    };
    // SAFETY: a zeroed sigset_t is filled by sigemptyset before use; the
    // calls take the set by pointer for their duration only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return out; // signals keep their default: the run ends uncleaned
        }
        let (child, got) = (out.child.clone(), out.got.clone());
        std::thread::spawn(move || {
            loop {
                let mut sig = 0;
                if libc::sigwait(&set, &mut sig) != 0 {
                    return;
                }
                got.store(sig, Ordering::SeqCst);
                let pid = child.load(Ordering::SeqCst);
                if pid > 0 {
                    // SAFETY: kill takes integers; the pid is our own
                    // child's, not yet waited for.
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        });
    }
    out
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
                std::thread::sleep(Duration::from_millis(5));
            }
            eprintln!(
                "gatehouse-run: the proxy did not stop within 6 s of SIGTERM; killed (records it had not written are lost)"
            );
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

/// Sends one descriptor over a unix stream (`SCM_RIGHTS`): how the proxy's
/// listening socket inside the namespace reaches the launcher outside,
/// with no socket file another process could find (docs/run.md).
#[allow(unsafe_code)]
pub(crate) fn send_fd(sock: &UnixStream, fd: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    // SAFETY: CMSG_SPACE is arithmetic on a constant size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: a zeroed msghdr is valid; every pointer set in it points at
    // a live buffer of the length given; CMSG_FIRSTHDR is non-null since
    // `control` has room for one header, which is written in bounds.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        if libc::sendmsg(sock.as_raw_fd(), &msg, 0) != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives the descriptor `send_fd` sent (close-on-exec).
#[allow(unsafe_code)]
pub(crate) fn recv_fd(sock: &UnixStream) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    // SAFETY: as in send_fd.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: as in send_fd; the header read back is checked for level,
    // type and length before its data is read; the descriptor it carries
    // is new to this process and owned by nothing else.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if n != 1
            || c.is_null()
            || (*c).cmsg_level != libc::SOL_SOCKET
            || (*c).cmsg_type != libc::SCM_RIGHTS
            || ((*c).cmsg_len as usize)
                < libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the namespace sent no listening socket",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};

    #[test]
    fn a_listening_socket_crosses_and_still_accepts() {
        let (a, b) = UnixStream::pair().expect("pair");
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let addr = l.local_addr().expect("addr");
        send_fd(&a, l.as_raw_fd()).expect("send");
        drop(l);
        let got = TcpListener::from(recv_fd(&b).expect("recv"));
        let mut c = TcpStream::connect(addr).expect("connect");
        c.write_all(b"x").expect("write");
        let (mut s, _) = got.accept().expect("accept");
        let mut buf = [0u8; 1];
        s.read_exact(&mut buf).expect("read");
        assert_eq!(&buf, b"x");
    }

    #[test]
    fn a_message_without_a_descriptor_is_refused() {
        let (mut a, b) = UnixStream::pair().expect("pair");
        a.write_all(b"y").expect("write");
        assert!(recv_fd(&b).is_err());
    }
}
