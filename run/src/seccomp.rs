//! The command's seccomp filter: the few system calls whose effect neither
//! Landlock nor the namespaces can hold (docs/run.md, "Threat model").
//!
//! - `socket(AF_UNIX, …)` → `EPERM` unless the policy allows a unix socket:
//!   a pathname socket's `connect()` names a path seccomp cannot read and
//!   Landlock (ABI ≤ 7) does not judge, so the socket is refused where it is
//!   made (sandbox-runtime's rule). `socketpair` stays open: a pair is
//!   connected to nothing but itself.
//! - `open_by_handle_at` → `EPERM`: it opens a file by inode, below every
//!   mount that hides or protects it (a capability in the run's own user
//!   namespace can be enough on 6.x kernels).
//! - `io_uring_setup`, `io_uring_enter`, `io_uring_register` → `EPERM`: an
//!   io_uring makes sockets and opens files without the system calls this
//!   filter judges.
//! - a system call of another ABI (i386 through `int 0x80`, x32) → `ENOSYS`:
//!   its numbers are not the ones judged here (`socketcall` would make a
//!   unix socket unseen).
//!
//! Everything else passes. The filter is a classic BPF program the kernel
//! runs on every system call of the command and its children; it cannot be
//! lifted (a filter only adds).

use std::io;

/// A classic BPF instruction (`struct sock_filter`).
type Insn = libc::sock_filter;

#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64

/// Whether this build has a filter for its architecture.
pub(crate) const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

// Offsets in `struct seccomp_data`: nr (u32), arch (u32), ip (u64), args.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARG0: u32 = 16; // the low half of args[0] on a little-endian ABI

const RET_ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
const RET_ERRNO: u32 = 0x0005_0000; // SECCOMP_RET_ERRNO
const RET_USER_NOTIF: u32 = 0x7fc0_0000; // SECCOMP_RET_USER_NOTIF

fn stmt(code: u32, k: u32) -> Insn {
    Insn {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> Insn {
    Insn {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

const LD_W_ABS: u32 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS (0x20)
const JEQ_K: u32 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u32 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
const RET_K: u32 = 0x06; // BPF_RET | BPF_K

/// The filter's program. `block_unix`: refuse `socket(AF_UNIX, …)`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn program(block_unix: bool, guard: bool) -> Vec<Insn> {
    let eperm = RET_ERRNO | libc::EPERM as u32;
    let enosys = RET_ERRNO | libc::ENOSYS as u32;
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, NATIVE_ARCH, 1, 0),
        stmt(RET_K, enosys),
        stmt(LD_W_ABS, OFF_NR),
    ];
    if cfg!(target_arch = "x86_64") {
        // x32's numbers carry bit 30 (__X32_SYSCALL_BIT).
        p.push(jump(JGE_K, 0x4000_0000, 0, 1));
        p.push(stmt(RET_K, enosys));
    }
    for nr in [
        libc::SYS_open_by_handle_at,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        p.push(jump(JEQ_K, nr as u32, 0, 1));
        p.push(stmt(RET_K, eperm));
    }
    if guard {
        for nr in crate::guard::notified() {
            p.push(jump(JEQ_K, nr as u32, 0, 1));
            p.push(stmt(RET_K, RET_USER_NOTIF));
        }
    }
    if block_unix {
        p.push(jump(JEQ_K, libc::SYS_socket as u32, 0, 3));
        p.push(stmt(LD_W_ABS, OFF_ARG0));
        p.push(jump(JEQ_K, libc::AF_UNIX as u32, 0, 1));
        p.push(stmt(RET_K, eperm));
    }
    p.push(stmt(RET_K, RET_ALLOW));
    p
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) fn program(_block_unix: bool, _guard: bool) -> Vec<Insn> {
    Vec::new()
}

/// Installs `program` on this thread (and so on what it starts). Needs
/// `no_new_privs` set first. Safe between fork and exec: one prctl(2) on
/// memory made before.
#[allow(unsafe_code)]
pub(crate) fn install(program: &[Insn]) -> io::Result<()> {
    if program.is_empty() {
        return Ok(());
    }
    let len =
        u16::try_from(program.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `program`, which outlives the call; the
    // kernel copies the program and keeps no pointer to it.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Installs `program` and returns the listener of its `SECCOMP_RET_USER_NOTIF`
/// answers (for `guard::serve`). Needs `no_new_privs` set first.
#[allow(unsafe_code)]
pub(crate) fn install_with_listener(program: &[Insn]) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let len =
        u16::try_from(program.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // WAIT_KILLABLE_RECV (5.19+): once the guard has a request, only a
    // fatal signal interrupts the waiting call, so a call the guard made
    // is never restarted and made twice (a mkdir answering EEXIST).
    let mut fd = -1;
    for flags in [
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
    ] {
        // SAFETY: as in `install`; the descriptor returned is new and ours.
        fd = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &prog as *const libc::sock_fprog,
            )
        };
        if fd >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            break;
        }
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
#[allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    /// What a child process under the filter gets from one call:
    /// 0 when it succeeded, else its errno.
    #[allow(unsafe_code)]
    fn under_filter(block_unix: bool, call: fn() -> libc::c_long) -> i32 {
        let prog = program(block_unix, false);
        // SAFETY: the child calls only prctl, the probe's system call and
        // _exit (async-signal-safe), on memory made before the fork; the
        // parent waits for it.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0, "fork");
            if pid == 0 {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || install(&prog).is_err()
                {
                    libc::_exit(200);
                }
                let r = call();
                let code = if r < 0 { *libc::__errno_location() } else { 0 };
                libc::_exit(code);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            libc::WEXITSTATUS(status)
        }
    }

    #[allow(unsafe_code)]
    fn unix_socket() -> libc::c_long {
        // SAFETY: socket(2) takes integers only.
        unsafe { libc::c_long::from(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0)) }
    }

    #[allow(unsafe_code)]
    fn inet_socket() -> libc::c_long {
        // SAFETY: as above.
        unsafe { libc::c_long::from(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0)) }
    }

    #[allow(unsafe_code)]
    fn unix_pair() -> libc::c_long {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        unsafe {
            libc::c_long::from(libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM,
                0,
                fds.as_mut_ptr(),
            ))
        }
    }

    #[allow(unsafe_code)]
    fn by_handle() -> libc::c_long {
        // SAFETY: a null handle is refused before it is read (EPERM from
        // the filter, EFAULT from the kernel without it).
        unsafe { libc::syscall(libc::SYS_open_by_handle_at, -100, std::ptr::null::<u8>(), 0) }
    }

    #[allow(unsafe_code)]
    fn uring() -> libc::c_long {
        // SAFETY: a null params pointer is refused before it is read.
        unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, std::ptr::null::<u8>()) }
    }

    #[test]
    fn unix_sockets_are_refused_where_made_unless_allowed() {
        assert_eq!(under_filter(true, unix_socket), libc::EPERM);
        assert_eq!(under_filter(false, unix_socket), 0);
        assert_eq!(under_filter(true, inet_socket), 0);
        assert_eq!(under_filter(true, unix_pair), 0);
    }

    #[test]
    fn handles_and_io_uring_are_refused() {
        assert_eq!(under_filter(false, by_handle), libc::EPERM);
        assert_eq!(under_filter(false, uring), libc::EPERM);
    }
}
