//! The names guard: no new case variant of a protected name directly under
//! a write root (docs/run.md, "The names guard").
//!
//! The engine compares protected names without case (`.GIT/hooks/pre-commit`
//! is denied like `.git/hooks/pre-commit`), but Landlock and mounts hold
//! only names that exist. So the system calls that make a folder, a link or
//! a node under a new name — `mkdir`, `mknod`, `symlink`, `link`, `rename`
//! — stop in the kernel (seccomp `SECCOMP_RET_USER_NOTIF`) and this guard, a
//! thread of the run's PID 1 under the same Landlock domain, credentials and
//! mount namespace as the command, makes the call *on the command's
//! behalf*: it reads the paths from the command's memory once, refuses a
//! new name that equals a protected name in any case in a write root's own
//! folder (`EACCES`), and otherwise makes the call itself on its copy, with
//! the command's directories and umask, and returns the result. Acting on
//! its own copy is what makes it safe: the command cannot change the path
//! between the check and the use (the kernel's `CONTINUE` would read it
//! again). A regular file made by `open(O_CREAT)` is not stopped: each
//! round trip costs tens of µs, files are made by the thousand, and a file
//! named `.GIT` holds no hooks (docs/run.md says what this leaves).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// What the guard protects: the write roots' directories (device, inode)
/// and the protected names, lower case.
#[derive(Clone, Debug, Default)]
pub(crate) struct Guard {
    roots: Vec<(u64, u64)>,
    names: Vec<String>,
}

impl Guard {
    pub(crate) fn new(roots: &[PathBuf], names: &[String]) -> Guard {
        Guard {
            roots: (roots.iter())
                .filter_map(|r| std::fs::metadata(r).ok())
                .map(|m| (m.dev(), m.ino()))
                .collect(),
            names: (names.iter())
                .filter(|n| !n.contains('/'))
                .map(|n| n.to_ascii_lowercase())
                .collect(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.roots.is_empty() || self.names.is_empty()
    }
}

/// The system calls the guard makes, as the filter sends them.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Call {
    MkdirAt,
    MknodAt,
    SymlinkAt,
    LinkAt,
    RenameAt2,
}

/// The numbers the filter hands to the guard.
pub(crate) fn notified() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_mkdirat,
        libc::SYS_mknodat,
        libc::SYS_symlinkat,
        libc::SYS_linkat,
        libc::SYS_renameat,
        libc::SYS_renameat2,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_mkdir,
        libc::SYS_mknod,
        libc::SYS_symlink,
        libc::SYS_link,
        libc::SYS_rename,
    ]);
    v
}

/// Runs the guard on the listener `fd` until every process under the
/// filter has gone. Call on a thread made after Landlock and before the
/// filter: it must be confined like the command and not filtered itself.
#[allow(unsafe_code)]
pub(crate) fn serve(listener: OwnedFd, guard: Guard) {
    // Its own umask (the command's is applied by hand), its own cwd.
    // SAFETY: unshare and umask take integers only.
    unsafe {
        libc::unshare(libc::CLONE_FS);
        libc::umask(0);
    }
    let fd = listener.as_raw_fd();
    loop {
        // SAFETY: a zeroed seccomp_notif is a valid value for the kernel to
        // fill; the ioctl writes within it.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) };
        if r != 0 {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                _ => return,
            }
        }
        // One at a time, on this thread: none of these calls blocks.
        answer(fd, &req, &guard);
    }
}

/// The answer to one request: the call made, or refused.
fn answer(fd: RawFd, req: &libc::seccomp_notif, guard: &Guard) {
    respond(fd, req, handle(fd, req, guard));
}

/// Sends `outcome` as the answer to `req`.
#[allow(unsafe_code)]
fn respond(fd: RawFd, req: &libc::seccomp_notif, outcome: Outcome) {
    let (val, error) = match outcome {
        Outcome::Value(v) => (v, 0),
        Outcome::Errno(e) => (0, -e),
    };
    let mut resp = libc::seccomp_notif_resp {
        id: req.id,
        val,
        error,
        flags: 0,
    };
    // SAFETY: the ioctl reads `resp`, which lives across the call. A
    // request whose process has gone answers ENOENT: nothing to do.
    unsafe {
        libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp);
    }
}

enum Outcome {
    Value(i64),
    Errno(i32),
}

fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// The command's view, for one request: its memory, its directories, its
/// umask.
struct Target {
    tid: u32,
}

impl Target {
    /// A NUL-terminated string at `addr` (at most PATH_MAX bytes), read with
    /// process_vm_readv a page piece at a time (a string may end just
    /// before an unmapped page).
    #[allow(unsafe_code)]
    fn string(&self, addr: u64) -> io::Result<CString> {
        let mut out: Vec<u8> = Vec::new();
        let mut at = addr;
        while out.len() < 4096 {
            let room = 4096 - (at % 4096) as usize;
            let mut buf = vec![0u8; room.min(4096 - out.len()).max(1)];
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let remote = libc::iovec {
                iov_base: at as usize as *mut libc::c_void,
                iov_len: buf.len(),
            };
            let pid = libc::pid_t::try_from(self.tid)
                .map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
            // SAFETY: `local` points at `buf`, of the length given; the
            // remote range is the command's, which the kernel checks.
            let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
            if n <= 0 {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            let n = n as usize;
            if let Some(end) = buf.iter().take(n).position(|b| *b == 0) {
                out.extend(buf.iter().take(end));
                return CString::new(out).map_err(|_| io::Error::from_raw_os_error(libc::EFAULT));
            }
            out.extend(buf.iter().take(n));
            at += n as u64;
        }
        Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
    }

    /// A path argument: `/proc/self/…` and `/proc/thread-self/…` mean the
    /// command's own, not the guard's.
    fn path(&self, addr: u64) -> io::Result<CString> {
        let s = self.string(addr)?;
        let b = s.as_bytes();
        for prefix in [&b"/proc/self/"[..], &b"/proc/thread-self/"[..]] {
            if let Some(rest) = b.strip_prefix(prefix) {
                let mut v = format!("/proc/{}/", self.tid).into_bytes();
                v.extend_from_slice(rest);
                return CString::new(v).map_err(|_| io::Error::from_raw_os_error(libc::EFAULT));
            }
        }
        Ok(s)
    }

    /// The directory a `*at` call resolves `path` from, as a descriptor of
    /// the guard's own (`None`: an absolute path needs none).
    fn dir(&self, dirfd: u64, path: &CString) -> io::Result<Option<OwnedFd>> {
        if path.as_bytes().first() == Some(&b'/') {
            return Ok(None);
        }
        let dirfd = dirfd as u32 as i32;
        let p = if dirfd == libc::AT_FDCWD {
            format!("/proc/{}/cwd", self.tid)
        } else if dirfd >= 0 {
            format!("/proc/{}/fd/{dirfd}", self.tid)
        } else {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        };
        open_path(&p).map(Some)
    }

    fn umask(&self) -> u32 {
        std::fs::read_to_string(format!("/proc/{}/status", self.tid))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
            .unwrap_or(0o022)
    }
}

#[allow(unsafe_code)]
fn open_path(p: &str) -> io::Result<OwnedFd> {
    let c = CString::new(p).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is NUL-terminated; a descriptor returned is new and ours.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn raw(d: &Option<OwnedFd>) -> RawFd {
    d.as_ref().map_or(libc::AT_FDCWD, |f| f.as_raw_fd())
}

/// Where a call makes its new name.
enum Place {
    /// A protected name in a write root's own folder.
    Refused,
    /// Anywhere else: the call as the command made it.
    AsGiven,
    /// A protected name elsewhere: made in exactly the folder that was
    /// checked (its descriptor) under that name, so that a symbolic link
    /// swapped in the path meanwhile cannot move it into a write root.
    Checked(OwnedFd, CString),
}

impl Guard {
    /// Where making `path` (from `dir`) puts its name, and whether it is a
    /// protected name in a write root's own folder.
    #[allow(unsafe_code)]
    fn place(&self, dir: &Option<OwnedFd>, path: &CString) -> Place {
        let bytes = path.as_bytes();
        let trimmed = {
            let mut end = bytes.len();
            while end > 1 && bytes.get(end - 1) == Some(&b'/') {
                end -= 1;
            }
            bytes.get(..end).unwrap_or(bytes)
        };
        let (parent, name) = match trimmed.iter().rposition(|b| *b == b'/') {
            Some(0) => (&b"/"[..], trimmed.get(1..).unwrap_or_default()),
            Some(i) => (
                trimmed.get(..i).unwrap_or_default(),
                trimmed.get(i + 1..).unwrap_or_default(),
            ),
            None => (&b"."[..], trimmed),
        };
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        if !self.names.contains(&lower) {
            return Place::AsGiven;
        }
        let (Ok(parent), Ok(name)) = (CString::new(parent), CString::new(name)) else {
            return Place::Refused;
        };
        // SAFETY: `parent` is NUL-terminated; a descriptor returned is new
        // and ours; fstat writes within `st`, a zeroed stat being valid.
        let folder = unsafe {
            libc::openat(
                raw(dir),
                parent.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if folder < 0 {
            // The folder cannot be seen: the call would fail anyway.
            return Place::Refused;
        }
        let folder = unsafe { OwnedFd::from_raw_fd(folder) };
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(folder.as_raw_fd(), &mut st) } != 0
            || self.roots.contains(&(st.st_dev as u64, st.st_ino as u64))
        {
            return Place::Refused;
        }
        Place::Checked(folder, name)
    }

    #[cfg(test)]
    fn refuses(&self, dir: &Option<OwnedFd>, path: &CString) -> bool {
        matches!(self.place(dir, path), Place::Refused)
    }
}

/// The (directory, path) a call makes its new name at: the command's own,
/// or the checked folder and name.
fn at<'a>(place: &'a Place, dir: &Option<OwnedFd>, path: &'a CString) -> (RawFd, &'a CString) {
    match place {
        Place::Checked(folder, name) => (folder.as_raw_fd(), name),
        _ => (raw(dir), path),
    }
}

#[allow(unsafe_code)]
fn handle(fd: RawFd, req: &libc::seccomp_notif, guard: &Guard) -> Outcome {
    let t = Target { tid: req.pid };
    let a = req.data.args;
    let nr = i64::from(req.data.nr);
    // (dirfd, path) of the name made, and the call's own arguments.
    let result = (|| -> io::Result<Outcome> {
        let cwd = libc::AT_FDCWD as u32 as u64;
        // Normalised to the *at form: (new dirfd, new path, rest).
        let (call, args) = normalise(nr, a, cwd)?;
        // The request still stands (its thread did not go and its id was
        // not reused) after its memory and directories were read.
        let valid = || -> io::Result<()> {
            let mut id = req.id;
            // SAFETY: the ioctl reads the id.
            if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) } != 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOENT));
            }
            Ok(())
        };
        match call {
            Call::MkdirAt | Call::MknodAt => {
                let path = t.path(args[1])?;
                let dir = t.dir(args[0], &path)?;
                valid()?;
                let place = guard.place(&dir, &path);
                if let Place::Refused = place {
                    return Ok(Outcome::Errno(libc::EACCES));
                }
                let (d, p) = at(&place, &dir, &path);
                let mode = (args[2] as u32) & !t.umask();
                // SAFETY: the path is NUL-terminated; the rest are integers.
                let r = unsafe {
                    if call == Call::MkdirAt {
                        libc::mkdirat(d, p.as_ptr(), mode)
                    } else {
                        libc::mknodat(d, p.as_ptr(), mode, args[3] as libc::dev_t)
                    }
                };
                Ok(ret(i64::from(r)))
            }
            Call::SymlinkAt => {
                let target = t.string(args[0])?;
                let path = t.path(args[2])?;
                let dir = t.dir(args[1], &path)?;
                valid()?;
                let place = guard.place(&dir, &path);
                if let Place::Refused = place {
                    return Ok(Outcome::Errno(libc::EACCES));
                }
                let (d, p) = at(&place, &dir, &path);
                // SAFETY: both strings are NUL-terminated.
                let r = unsafe { libc::symlinkat(target.as_ptr(), d, p.as_ptr()) };
                Ok(ret(i64::from(r)))
            }
            Call::LinkAt | Call::RenameAt2 => {
                let old = t.path(args[1])?;
                let new = t.path(args[3])?;
                let odir = t.dir(args[0], &old)?;
                let ndir = t.dir(args[2], &new)?;
                valid()?;
                let place = guard.place(&ndir, &new);
                if let Place::Refused = place {
                    return Ok(Outcome::Errno(libc::EACCES));
                }
                let (nd, np) = at(&place, &ndir, &new);
                let flags = args[4] as u32;
                // SAFETY: both paths are NUL-terminated; the rest integers.
                let r = unsafe {
                    if call == Call::LinkAt {
                        // AT_EMPTY_PATH would name the command's own
                        // descriptor, which the guard resolved above.
                        libc::linkat(raw(&odir), old.as_ptr(), nd, np.as_ptr(), flags as i32)
                    } else {
                        libc::syscall(
                            libc::SYS_renameat2,
                            raw(&odir),
                            old.as_ptr(),
                            nd,
                            np.as_ptr(),
                            flags,
                        ) as i32
                    }
                };
                Ok(ret(i64::from(r)))
            }
        }
    })();
    match result {
        Ok(o) => o,
        Err(e) => Outcome::Errno(errno_of(&e)),
    }
}

fn ret(r: i64) -> Outcome {
    if r < 0 {
        Outcome::Errno(errno_of(&io::Error::last_os_error()))
    } else {
        Outcome::Value(r)
    }
}

/// A call in its `*at` form: `[dirfd, path, …]` (symlinkat: `[target,
/// dirfd, path]`; linkat and renameat2: `[olddirfd, old, newdirfd, new,
/// flags]`).
fn normalise(nr: i64, a: [u64; 6], cwd: u64) -> io::Result<(Call, [u64; 6])> {
    let [a0, a1, a2, a3, a4, _] = a;
    let out = match nr {
        n if n == libc::SYS_mkdirat => (Call::MkdirAt, [a0, a1, a2, 0, 0, 0]),
        n if n == libc::SYS_mknodat => (Call::MknodAt, [a0, a1, a2, a3, 0, 0]),
        n if n == libc::SYS_symlinkat => (Call::SymlinkAt, [a0, a1, a2, 0, 0, 0]),
        n if n == libc::SYS_linkat => (Call::LinkAt, [a0, a1, a2, a3, a4, 0]),
        n if n == libc::SYS_renameat => (Call::RenameAt2, [a0, a1, a2, a3, 0, 0]),
        n if n == libc::SYS_renameat2 => (Call::RenameAt2, [a0, a1, a2, a3, a4, 0]),
        #[cfg(target_arch = "x86_64")]
        n if n == libc::SYS_mkdir => (Call::MkdirAt, [cwd, a0, a1, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        n if n == libc::SYS_mknod => (Call::MknodAt, [cwd, a0, a1, a2, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        n if n == libc::SYS_symlink => (Call::SymlinkAt, [a0, cwd, a1, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        n if n == libc::SYS_link => (Call::LinkAt, [cwd, a0, cwd, a1, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        n if n == libc::SYS_rename => (Call::RenameAt2, [cwd, a0, cwd, a1, 0, 0]),
        _ => return Err(io::Error::from_raw_os_error(libc::ENOSYS)),
    };
    let _ = cwd;
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    #[test]
    fn refuses_case_variants_in_a_write_roots_own_folder_only() {
        let d = std::env::temp_dir().join(format!("gh-guard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        let g = Guard::new(
            std::slice::from_ref(&d),
            &[".git".into(), ".agents".into(), "a/b".into()],
        );
        let at = |p: &str| g.refuses(&None, &c(&format!("{}/{p}", d.display())));
        assert!(at(".GIT"));
        assert!(at(".Git/"), "a trailing slash names the same entry");
        assert!(at(".git"));
        assert!(at(".AGENTS"));
        assert!(!at(".gitignore"));
        assert!(!at("sub/.GIT"), "deeper is a repository made after launch");
        assert!(!at("a"), "a protected path is not a name");
        // Relative to a directory the command named.
        let dir = Some(open_path(&d.display().to_string()).unwrap());
        assert!(g.refuses(&dir, &c(".gIt")));
        assert!(!g.refuses(&dir, &c("sub/.gIt")));
        assert!(
            g.refuses(&dir, &c("sub/../.gIt")),
            "the parent is resolved, not read"
        );
        // Through symbolic links: where they lead decides; a protected name
        // elsewhere is made in the very folder that was checked.
        std::os::unix::fs::symlink(&d, d.join("sub/to-root")).unwrap();
        std::os::unix::fs::symlink(d.join("sub"), d.join("to-sub")).unwrap();
        assert!(g.refuses(&dir, &c("sub/to-root/.GIT")));
        match g.place(&dir, &c("to-sub/.GIT")) {
            Place::Checked(folder, name) => {
                assert_eq!(name.as_bytes(), b".GIT");
                let st =
                    std::fs::metadata(format!("/proc/self/fd/{}", folder.as_raw_fd())).unwrap();
                assert_eq!(st.ino(), std::fs::metadata(d.join("sub")).unwrap().ino());
            }
            _ => panic!("to-sub/.GIT is made in sub"),
        }
        assert!(matches!(g.place(&dir, &c("plain")), Place::AsGiven));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn every_notified_call_has_its_at_form() {
        for nr in notified() {
            assert!(normalise(nr, [0; 6], 0).is_ok(), "{nr}");
        }
        assert!(normalise(libc::SYS_read, [0; 6], 0).is_err());
    }
}
