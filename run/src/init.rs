//! The run's namespaces, and the first process of its PID namespace.
//!
//! The inner process enters new user, network, mount and PID namespaces
//! before it starts (`NamespaceSetup`, between fork and exec) — a user
//! namespace always, also for a root caller, so that nothing the command
//! holds is a capability over the host. Its first child is PID 1 of the new
//! PID namespace (`pid_one`): it mounts a `/proc` of that namespace (no
//! process outside is visible, none can be signalled or read), gives up the
//! capabilities it had in the run's user namespace, and starts the command
//! under Landlock and the seccomp filter; it reaps whatever the command
//! leaves behind and exits with the command's status. When it exits the
//! kernel ends every process left in the namespace.

use std::io;
use std::process::Command;

use crate::sys::RunError;

/// What the inner process does between fork and exec, prepared before.
pub(crate) struct NamespaceSetup {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

pub(crate) fn namespace_setup() -> NamespaceSetup {
    // SAFETY: geteuid and getegid cannot fail and touch no memory.
    #[allow(unsafe_code)]
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    NamespaceSetup {
        uid_map: format!("0 {uid} 1\n").into_bytes(),
        gid_map: format!("0 {gid} 1\n").into_bytes(),
    }
}

impl NamespaceSetup {
    /// New user, network, mount and PID namespaces, this user root in the
    /// first (as `unshare -r`: the inner process keeps the capabilities to
    /// bring `lo` up and mount across its exec; files it makes belong to
    /// this user outside). A root caller gets a user namespace too: its
    /// capabilities there are nothing over the host's files, mounts,
    /// network namespaces or processes. Ends with the process when the
    /// launcher goes (`PR_SET_PDEATHSIG`).
    #[allow(unsafe_code)]
    pub(crate) fn enter(&self) -> io::Result<()> {
        let flags =
            libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWNS | libc::CLONE_NEWPID;
        // SAFETY: unshare and prctl take integers only.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::unshare(flags) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", &self.uid_map)?;
        write_proc(c"/proc/self/gid_map", &self.gid_map)?;
        Ok(())
    }
}

/// open + write + close, nothing else (safe between fork and exec).
#[allow(unsafe_code)]
fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; `data` outlives the call; the fd is
    // closed on every path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n < 0 || n as usize != data.len() {
            return Err(err);
        }
    }
    Ok(())
}

/// Forks PID 1 of the run's PID namespace, which calls `confine` (Landlock,
/// on itself), installs `filter` (with the names guard's thread when
/// `guard` is given) and runs `cmd`; returns the command's exit
/// status as PID 1 passed it on. Called with one thread only (the inner
/// process starts none), so the child may go on as an ordinary process.
#[allow(unsafe_code)]
pub(crate) fn pid_one(
    cmd: &mut Command,
    confine: impl FnOnce() -> Result<(), RunError>,
    filter: &[libc::sock_filter],
    guard: Option<crate::guard::Guard>,
) -> Result<u8, RunError> {
    // SAFETY: this process has a single thread here (the inner process
    // makes none: the proxy's listener went to the launcher, see
    // relay::send_fd), so the child inherits no lock another thread held
    // and may allocate and run ordinary code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(crate::sys::io("starting the run's PID 1")(
            io::Error::last_os_error(),
        ));
    }
    if pid == 0 {
        let code = match init(cmd, confine, filter, guard) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("gatehouse-run: {e}");
                crate::LAUNCH_FAILED
            }
        };
        std::process::exit(i32::from(code));
    }
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status of our own child into `status`.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(crate::sys::io("waiting for the run's PID 1")(
                io::Error::last_os_error(),
            ));
        }
    }
    Ok(wait_code(status))
}

/// 128+N for a signal N, as a shell reports it.
fn wait_code(status: libc::c_int) -> u8 {
    if libc::WIFEXITED(status) {
        u8::try_from(libc::WEXITSTATUS(status) & 0xff).unwrap_or(1)
    } else if libc::WIFSIGNALED(status) {
        u8::try_from((128 + libc::WTERMSIG(status)) & 0xff).unwrap_or(1)
    } else {
        1
    }
}

/// PID 1: its own /proc, no capabilities, confined, then the command.
#[allow(unsafe_code)]
fn init(
    cmd: &mut Command,
    confine: impl FnOnce() -> Result<(), RunError>,
    filter: &[libc::sock_filter],
    guard: Option<crate::guard::Guard>,
) -> Result<u8, RunError> {
    // SAFETY: prctl takes integers only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    crate::sys::mount(
        Some(c"proc"),
        std::path::Path::new("/proc"),
        Some(c"proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "mounting the PID namespace's own",
    )?;
    drop_capabilities()?;
    confine()?;
    let seccomp = |e| crate::sys::io("installing the seccomp filter")(e);
    match guard {
        // The guard: a thread made now, under Landlock and before the
        // filter, so confined like the command and not filtered itself.
        Some(guard) => {
            let (tx, rx) = std::sync::mpsc::channel::<std::os::fd::OwnedFd>();
            std::thread::spawn(move || {
                if let Ok(listener) = rx.recv() {
                    crate::guard::serve(listener, guard);
                }
            });
            let listener = crate::seccomp::install_with_listener(filter).map_err(seccomp)?;
            tx.send(listener)
                .map_err(|_| seccomp(io::Error::other("the guard thread is gone")))?;
        }
        None => crate::seccomp::install(filter).map_err(seccomp)?,
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            eprintln!("gatehouse-run: {:?}: command not found", cmd.get_program());
            return Ok(127);
        }
        Err(e) => {
            eprintln!("gatehouse-run: {:?}: {e}", cmd.get_program());
            return Ok(126);
        }
    };
    let Ok(main) = libc::pid_t::try_from(child.id()) else {
        return Ok(1);
    };
    // Reap everything; the command's own status is the run's.
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes into `status` only.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == main {
            return Ok(wait_code(status));
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Ok(1);
        }
    }
}

/// Every capability gone, for good: `no_new_privs`, an empty bounding set
/// (a uid 0 that execs gets none back), no ambient, none effective,
/// permitted or inheritable. What remains of root inside is the uid: the
/// owner of what the caller owns, no more.
#[allow(unsafe_code)]
fn drop_capabilities() -> Result<(), RunError> {
    let fail = |what: &str| RunError::Io {
        what: format!("dropping capabilities ({what})"),
        source: io::Error::last_os_error(),
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // SAFETY: prctl takes integers; capset reads a header and two data
    // words of the layout _LINUX_CAPABILITY_VERSION_3 defines, all live
    // for the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(fail("no_new_privs"));
        }
        let mut cap = 0;
        while libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) >= 0 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                return Err(fail("the bounding set"));
            }
            cap += 1;
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(fail("ambient"));
        }
        let header = Header {
            version: 0x2008_0522,
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) != 0 {
            return Err(fail("capset"));
        }
    }
    Ok(())
}

/// Covers every bound pathname unix socket of the host's network namespace
/// that the policy does not allow with `/dev/null` (a connect to it fails),
/// when the policy allows some socket paths and so `socket(AF_UNIX)` is
/// open. Reads the launcher's `/proc/PID/net/unix` (the host's sockets),
/// before the PID namespace's `/proc` covers it. Returns how many it hid.
pub(crate) fn hide_sockets(launcher: libc::pid_t, allowed: &[String]) -> usize {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{launcher}/net/unix")) else {
        return 0;
    };
    let mut hidden = 0;
    for line in text.lines().skip(1).take(100_000) {
        let Some(path) = line.split_whitespace().nth(7) else {
            continue;
        };
        if !path.starts_with('/') || allowed.iter().any(|a| a == path) {
            continue;
        }
        use std::os::unix::fs::FileTypeExt;
        let p = std::path::Path::new(path);
        if p.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_socket())
            && crate::sys::mount(Some(c"/dev/null"), p, None, libc::MS_BIND, "hiding").is_ok()
        {
            hidden += 1;
        }
    }
    hidden
}
