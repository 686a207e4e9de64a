//! The Linux half: the policy loaded, the plan checked, gatehouse-egress
//! started, the namespace made, Landlock applied, the command run.
//!
//! Three processes of this binary take part. The *outer* one (in the
//! host's network) starts gatehouse-egress on a loopback port; it starts
//! the *inner* one (`--inner FD`) in new user, network, mount and PID
//! namespaces (`init::NamespaceSetup`), where only `lo` exists. The inner
//! one brings `lo` up, binds 127.0.0.1:3128 there and hands that listening
//! socket to the outer one over a socket pair (`relay::send_fd`: no socket
//! file exists that another run's command could reach), which accepts on it
//! and forwards to the proxy. The inner one makes the plan's mounts and
//! forks PID 1 of the new PID namespace (`init::pid_one`), which restricts
//! itself with Landlock and seccomp and runs the command. Its exit status
//! comes back through all three.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gatehouse::{PolicySet, Workspace};
use landlock::{
    ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};

use crate::Args;
use crate::init::{hide_sockets, namespace_setup, pid_one};
use crate::placeholder::{adopt_live_placeholders, hold_placeholder, remove_placeholder};
use crate::plan::{Grant, Mount, MountKind, Plan, Rights, Sockets};
use crate::relay::{Reaper, catch_signals, recv_fd, send_fd, splice};

/// The proxy's address inside the namespace.
const PROXY_PORT: u16 = 3128;

/// The ABI whose file rights the plan asks for: all of them up to IoctlDev.
const WANT: ABI = ABI::V5;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("{0}")]
    Policy(String),
    #[error("refusing to run: {0}")]
    Weaker(String),
    #[error("Landlock: {0}")]
    Landlock(String),
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("gatehouse-egress did not listen on 127.0.0.1:{0} within 10 s")]
    EgressStart(u16),
    #[error(
        "gatehouse-egress stopped at start ({0}) before it listened; its own message, above, names the cause (an unreachable upstream DNS server, a policy it refused, a port in use)"
    )]
    EgressExited(String),
}

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> RunError {
    let what = what.into();
    move |source| RunError::Io { what, source }
}

/// Runs the command; returns its exit status.
pub fn run(args: &Args) -> Result<u8, RunError> {
    let dir = match &args.workspace {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(io("the current directory"))?,
    };
    let dir =
        std::fs::canonicalize(&dir).map_err(io(format!("the workspace {}", dir.display())))?;
    let abi = kernel_abi();
    if let Some(fd) = args.inner {
        return inner(args, fd, &dir, abi);
    }
    let text = std::fs::read_to_string(&args.policy_file).map_err(|source| RunError::Read {
        path: args.policy_file.display().to_string(),
        source,
    })?;
    let name = args.policy_file.display().to_string();
    let set = PolicySet::from_source(&name, &text).map_err(|e| RunError::Policy(e.to_string()))?;
    let policy = set
        .select(args.policy.as_deref())
        .map_err(|e| RunError::Policy(e.to_string()))?;
    let home = std::env::var("HOME").ok().filter(|h| h.starts_with('/'));
    let ws = Workspace::bind(&dir).with_home(home);
    let mut plan = crate::plan::plan(&set, policy, &ws, args.allow_weaker);
    adopt_live_placeholders(&mut plan.mounts);
    crate::apps::add_to(&mut plan, &set, policy);
    // A policy file the command could change (write it, replace it, or
    // re-point a link to it) is never read again while it runs: the
    // command would loosen its own rules.
    let reload = !crate::plan::writable(policy, &ws, &plan, &args.policy_file);
    if !reload {
        eprintln!(
            "gatehouse-run: note: the command may write {}: its changes are not taken while it runs (the launch's rules stay)",
            args.policy_file.display()
        );
    }
    outer(args, &plan, abi, Launch { text, reload })
}

/// What the launch read: the policy's text, and whether the file may be
/// read again while the command runs.
struct Launch {
    text: String,
    reload: bool,
}

/// The most a plan may take as JSON between the two processes.
const PLAN_LIMIT: usize = 64 << 20;

/// The plan, to the namespace's process: its length (4 bytes, little
/// endian), then its JSON. It is made once, by the launcher, where the
/// host's file system is in view: the inner process does not walk it again.
fn send_plan(ctl: &mut UnixStream, plan: &Plan) -> io::Result<()> {
    use std::io::Write;
    let json = serde_json::to_vec(plan).map_err(io::Error::other)?;
    let len = u32::try_from(json.len()).map_err(|_| io::Error::other("the plan is too large"))?;
    ctl.write_all(&len.to_le_bytes())?;
    ctl.write_all(&json)
}

fn recv_plan(ctl: &mut UnixStream) -> io::Result<Plan> {
    use std::io::Read;
    let mut len = [0u8; 4];
    ctl.read_exact(&mut len)?;
    let len = usize::try_from(u32::from_le_bytes(len)).map_err(io::Error::other)?;
    if len > PLAN_LIMIT {
        return Err(io::Error::other("the plan is too large"));
    }
    let mut json = vec![0u8; len];
    ctl.read_exact(&mut json)?;
    serde_json::from_slice(&json).map_err(io::Error::other)
}

/// The weaker points of this run: the plan's and the kernel's.
fn weaker(plan: &Plan, abi: ABI) -> Vec<String> {
    let mut v = plan.weaker.clone();
    if plan.grants.is_some() {
        if abi == ABI::Unsupported {
            v.push("this kernel has no Landlock: no file rule would hold".into());
        } else if (abi as i32) < (WANT as i32) {
            let missing = AccessFs::from_all(WANT) & !AccessFs::from_all(abi);
            v.push(format!(
                "this kernel's Landlock ABI is {}: it cannot restrict {:?}",
                abi as i32, missing
            ));
        }
    }
    if !crate::seccomp::SUPPORTED {
        v.push("no seccomp filter for this architecture: unix sockets, file handles and io_uring stay open to the command".into());
    }
    v
}

fn outer(args: &Args, plan: &Plan, abi: ABI, launch: Launch) -> Result<u8, RunError> {
    let signals = catch_signals();
    let weak = weaker(plan, abi);
    for w in &weak {
        eprintln!("gatehouse-run: weaker: {w}");
    }
    if !weak.is_empty() && !args.allow_weaker {
        return Err(RunError::Weaker(format!(
            "{} rule(s) above cannot be held by the kernel; pass --allow-weaker to run anyway",
            weak.len()
        )));
    }
    for n in &plan.notes {
        eprintln!("gatehouse-run: note: {n}");
    }
    if let Sockets::Paths(p) = &plan.sockets {
        if args.socket_paths {
            eprintln!(
                "gatehouse-run: weaker: unix sockets open for {}: the other sockets bound now are hidden, one bound later is reachable",
                p.join(", ")
            );
        } else {
            eprintln!(
                "gatehouse-run: note: the policy allows the unix socket(s) {}; the kernel cannot allow one socket path and refuse another, so every unix socket is refused (as sandbox-runtime on Linux); --socket-paths opens them",
                p.join(", ")
            );
        }
    }
    if args.explain {
        explain(plan, abi);
    }
    // gatehouse-egress on a free loopback port, with the same policy.
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map_err(io("a free loopback port"))?
        .port();
    let egress_bin = egress_binary(args);
    let mut cmd = Command::new(&egress_bin);
    // The network keeps the launch's policy: the proxy never reads the
    // file again (the command may be able to write it).
    cmd.arg("--quiet")
        .arg("--policy")
        .arg(&args.policy_file)
        .arg("--http")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--no-reload")
        .stdin(Stdio::null());
    if let Some(n) = &args.policy {
        cmd.arg("--policy-name").arg(n);
    }
    if let Some(l) = &args.log {
        cmd.arg("--log").arg(l);
    }
    if let Some(o) = &args.otel {
        cmd.arg("--otel").arg(o);
    }
    // The proxy ends with the launcher, however the launcher ends (killed
    // with SIGTERM or SIGKILL, it runs no Drop): SIGTERM, so that the proxy
    // still flushes what it queued.
    // SAFETY: the closure runs between fork and exec and calls prctl(2)
    // with integers and pthread_sigmask(3) with a set it fills first
    // (both async-signal-safe).
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The launcher blocks SIGINT, SIGTERM and SIGHUP to wait for
            // them (`catch_signals`), and a child inherits its mask: the
            // proxy would never see the SIGTERM that stops it, and be
            // killed 6 s later without flushing its records.
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            if libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let egress = cmd
        .spawn()
        .map_err(io(format!("starting {}", egress_bin.display())))?;
    let mut egress = Reaper(egress);
    crate::apps::record_blocked(args.log.as_deref(), &plan.apps);
    let ready = Instant::now();
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        if let Ok(Some(status)) = egress.0.try_wait() {
            return Err(RunError::EgressExited(status.to_string()));
        }
        if ready.elapsed() > Duration::from_secs(10) {
            return Err(RunError::EgressStart(port));
        }
        // It listens within a few ms: a short step keeps start-up short.
        std::thread::sleep(Duration::from_millis(2));
    }
    // The socket pair the namespace's listening socket comes back over.
    let (ctl, child_end) = UnixStream::pair().map_err(io("a socket pair"))?;
    let child_fd = child_end.as_raw_fd();
    // The inner process, in namespaces of its own.
    let exe = std::env::current_exe().map_err(io("this program's path"))?;
    let mut inner = Command::new(exe);
    inner.args(std::env::args_os().skip(1).take_while(|a| a != "--"));
    inner
        .arg("--inner")
        .arg(child_fd.to_string())
        .arg("--")
        .args(&args.command);
    let setup = namespace_setup();
    // SAFETY: the closure runs between fork and exec; it calls only
    // fcntl(2), prctl(2), unshare(2), open(2), write(2) and close(2) on
    // buffers made before the fork (no allocation, no locks), as pre_exec
    // requires.
    #[allow(unsafe_code)]
    unsafe {
        inner.pre_exec(move || {
            // The child's end survives the exec (and only into the inner
            // process, which closes it).
            if libc::fcntl(child_fd, libc::F_SETFD, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            setup.enter()
        });
    }
    let mut child = inner.spawn().map_err(io(
        "starting the namespace (user, network, mount and PID namespaces)",
    ))?;
    drop(child_end);
    if let Ok(pid) = i32::try_from(child.id()) {
        signals.child.store(pid, Ordering::SeqCst);
        if signals.got.load(Ordering::SeqCst) != 0 {
            // A signal came before the run started: it ends now.
            let _ = child.kill();
        }
    }
    // The apps rules, live: the policy file read again while the run goes.
    let _watch = i32::try_from(child.id()).ok().map(|pid| {
        crate::apps::Watch::start(
            args.policy_file.clone(),
            launch.text,
            launch.reload,
            args.policy.clone(),
            pid,
            args.log.clone(),
        )
    });
    let mut ctl = ctl;
    // A failure here is the inner process's to report (it has ended).
    let _ = send_plan(&mut ctl, plan);
    // The proxy's listening socket inside the namespace; each connection
    // to it forwarded to gatehouse-egress.
    if let Ok(fd) = recv_fd(&ctl) {
        let listener = TcpListener::from(fd);
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                if let Ok(t) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) {
                    splice(s, t);
                }
            }
        });
    }
    let status = child.wait().map_err(io("waiting for the run"))?;
    egress.stop();
    // The empty files the blocks were mounted on, if still empty files.
    for p in plan.placeholders() {
        remove_placeholder(p);
    }
    // Ended by a signal to the launcher: 128+N, as the shell reports it.
    match u8::try_from(signals.got.load(Ordering::SeqCst)) {
        Ok(sig) if sig != 0 => Ok(128u8.saturating_add(sig)),
        _ => Ok(exit_code(status)),
    }
}

fn inner(args: &Args, fd: i32, dir: &Path, abi: ABI) -> Result<u8, RunError> {
    // SAFETY: the launcher passed its end of a socket pair as this
    // descriptor (`--inner FD`), made for this process alone; nothing else
    // here owns it.
    #[allow(unsafe_code)]
    let mut ctl = unsafe { UnixStream::from_raw_fd(fd) };
    let plan = &recv_plan(&mut ctl).map_err(io("receiving the plan from the launcher"))?;
    loopback_up()?;
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT)))
        .map_err(io("the proxy port inside the namespace"))?;
    send_fd(&ctl, listener.as_raw_fd()).map_err(io("handing the proxy port to the launcher"))?;
    drop(listener);
    drop(ctl);
    // Held until the command ends (this process waits for it).
    crate::apps::cover(&plan.apps)?;
    let mut _placeholders = Vec::new();
    if plan.grants.is_some() {
        _placeholders = mounts(&plan.pins, &plan.mounts)?;
    }
    let open_unix = match &plan.sockets {
        Sockets::None => false,
        Sockets::All => true,
        Sockets::Paths(_) => args.socket_paths,
    };
    if let (Sockets::Paths(allowed), true) = (&plan.sockets, open_unix) {
        // SAFETY: getppid cannot fail and touches no memory.
        #[allow(unsafe_code)]
        let launcher = unsafe { libc::getppid() };
        let n = hide_sockets(launcher, allowed);
        if args.explain {
            eprintln!("gatehouse-run: hid {n} unix socket(s) the policy does not allow");
        }
    }
    let proxy = format!("http://127.0.0.1:{PROXY_PORT}");
    let (prog, rest) = match args.command.split_first() {
        Some(x) => x,
        None => return Err(RunError::Policy("no command".into())),
    };
    let mut cmd = Command::new(prog);
    cmd.args(rest).current_dir(dir);
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        cmd.env(k, &proxy);
    }
    for k in ["NO_PROXY", "no_proxy"] {
        cmd.env_remove(k);
    }
    cmd.env("GATEHOUSE_RUN", "1");
    // The names guard, where there are write roots and protected names.
    let guard = crate::guard::Guard::new(&plan.write_roots, &plan.protect);
    let guard = (!guard.is_empty() && plan.grants.is_some()).then_some(guard);
    let filter = crate::seccomp::program(!open_unix, guard.is_some());
    pid_one(
        &mut cmd,
        || restrict(plan.grants.as_deref(), args.allow_weaker, abi),
        &filter,
        guard,
    )
}

/// Binds `path` over itself, read-only (with everything mounted beneath).
fn bind_read_only(path: &Path) -> Result<(), RunError> {
    let src = cstr(path)?;
    mount(
        Some(&src),
        path,
        None,
        libc::MS_BIND | libc::MS_REC,
        "binding",
    )?;
    mount(
        None,
        path,
        None,
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
        "making read-only",
    )
}

/// Applies the grants to this process (and so to what it starts), and
/// Landlock's scopes where the kernel has them (ABI 6: no signal to, and
/// no abstract unix socket of, a process outside the run).
fn restrict(grants: Option<&[Grant]>, allow_weaker: bool, abi: ABI) -> Result<(), RunError> {
    let ll = |e: landlock::RulesetError| RunError::Landlock(e.to_string());
    let scoped = (abi as i32) >= (ABI::V6 as i32);
    let Some(grants) = grants else {
        if scoped {
            Ruleset::default()
                .scope(Scope::Signal | Scope::AbstractUnixSocket)
                .map_err(ll)?
                .create()
                .map_err(ll)?
                .restrict_self()
                .map_err(ll)?;
        }
        return Ok(());
    };
    let all = AccessFs::from_all(WANT);
    let mut rs = Ruleset::default().handle_access(all).map_err(ll)?;
    if scoped {
        rs = rs
            .scope(Scope::Signal | Scope::AbstractUnixSocket)
            .map_err(ll)?;
    }
    let mut rs = rs.create().map_err(ll)?;
    for g in grants {
        let mut rights = match g.rights {
            Rights::Read => AccessFs::from_read(WANT),
            Rights::Write => all,
            Rights::WriteFile => AccessFs::WriteFile.into(),
        };
        if !g.dir {
            rights &= AccessFs::from_file(WANT);
        }
        let Ok(fd) = PathFd::new(&g.path) else {
            continue; // gone since the plan: nothing to grant
        };
        rs = rs.add_rule(PathBeneath::new(fd, rights)).map_err(ll)?;
    }
    let status = rs.restrict_self().map_err(ll)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        RulesetStatus::PartiallyEnforced if allow_weaker => Ok(()),
        s => Err(RunError::Landlock(format!(
            "the kernel enforced the rules only {s:?}"
        ))),
    }
}

fn explain(plan: &Plan, abi: ABI) {
    eprintln!("gatehouse-run: Landlock ABI {}", abi as i32);
    eprintln!("gatehouse-run: unix sockets {:?}", plan.sockets);
    match &plan.grants {
        None => eprintln!("gatehouse-run: danger-full-access: no file restriction"),
        Some(g) => {
            for g in g {
                eprintln!("gatehouse-run: grant {:?} {}", g.rights, g.path.display());
            }
            for p in &plan.pins {
                eprintln!("gatehouse-run: pin {}", p.display());
            }
            for m in &plan.mounts {
                eprintln!("gatehouse-run: mount {:?} {}", m.kind, m.path.display());
            }
        }
    }
}

fn egress_binary(args: &Args) -> PathBuf {
    if let Some(e) = &args.egress {
        return e.clone();
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("gatehouse-egress")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("gatehouse-egress"))
}

fn exit_code(s: ExitStatus) -> u8 {
    match (s.code(), s.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from((128 + sig) & 0xff).unwrap_or(1),
        _ => 1,
    }
}

pub(crate) fn cstr(p: &Path) -> Result<std::ffi::CString, RunError> {
    std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| RunError::Io {
        what: format!("{}: a NUL in the path", p.display()),
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })
}

/// mount(2), its error naming the path.
#[allow(unsafe_code)]
pub(crate) fn mount(
    src: Option<&std::ffi::CStr>,
    target: &Path,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
    what: &str,
) -> Result<(), RunError> {
    let t = cstr(target)?;
    let ptr = |c: Option<&std::ffi::CStr>| c.map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is NUL-terminated or null, and outlives the call.
    let r = unsafe { libc::mount(ptr(src), t.as_ptr(), ptr(fstype), flags, std::ptr::null()) };
    if r != 0 {
        return Err(RunError::Io {
            what: format!("{what} {}", target.display()),
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// The plan's mounts, in this process's own mount namespace: hidden paths
/// covered, read-only paths bound read-only, and paths beneath them that
/// give more again bound back from a descriptor opened before any mount.
/// Makes the mounts; returns the placeholders it holds, to keep open for
/// as long as the command runs.
fn mounts(pins: &[PathBuf], plan: &[Mount]) -> Result<Vec<std::fs::File>, RunError> {
    let mut held = Vec::new();
    if plan.is_empty() {
        return Ok(held);
    }
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        "making private",
    )?;
    // Each directory between a write root and a protected place bound
    // over itself: a mount point cannot be renamed or removed (EBUSY), so
    // renaming a parent cannot free the place (`mv target x; mkdir -p
    // target/release`).
    for p in pins {
        let src = cstr(p)?;
        mount(Some(&src), p, None, libc::MS_BIND, "pinning")?;
    }
    // The originals, opened before anything covers them.
    let mut saved = Vec::new();
    for m in plan {
        if matches!(m.kind, MountKind::Expose { .. }) {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH)
                .open(&m.path)
                .map_err(io(format!("opening {}", m.path.display())))?;
            saved.push((m.path.clone(), f));
        }
    }
    let mut tmpfs = Vec::new();
    for m in plan {
        match m.kind {
            // Gone since the plan, because a mount made before hides a
            // folder above it (`none "~"` with `**/.env` reaching the home
            // through a link): already out of reach.
            MountKind::Hide | MountKind::ReadOnly if !m.path.exists() => {}
            MountKind::Hide if m.dir => {
                mount(
                    Some(c"tmpfs"),
                    &m.path,
                    Some(c"tmpfs"),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    "hiding",
                )?;
                tmpfs.push(m.path.clone());
            }
            MountKind::Hide => {
                mount(Some(c"/dev/null"), &m.path, None, libc::MS_BIND, "hiding")?;
            }
            MountKind::ReadOnly => bind_read_only(&m.path)?,
            MountKind::Block => {
                // The mount point: an empty file, made only if nothing is
                // there (never over something made meanwhile), and held
                // for the run (see `hold_placeholder`).
                if let Some(f) = hold_placeholder(&m.path)? {
                    held.push(f);
                }
                // The empty file bound read-only over itself: a write fails
                // with EROFS (a device like /dev/null would swallow it).
                bind_read_only(&m.path)?;
            }
            MountKind::Expose { write } => {
                // Its mount point, inside a hiding tmpfs, may need making.
                if m.dir {
                    let _ = std::fs::create_dir_all(&m.path);
                } else if !m.path.exists() {
                    let _ = std::fs::File::create(&m.path);
                }
                let Some((_, f)) = saved.iter().find(|(p, _)| p == &m.path) else {
                    continue;
                };
                let src = std::ffi::CString::new(format!("/proc/self/fd/{}", f.as_raw_fd()))
                    .map_err(|_| RunError::Landlock("descriptor path".into()))?;
                mount(
                    Some(&src),
                    &m.path,
                    None,
                    libc::MS_BIND | libc::MS_REC,
                    "binding back",
                )?;
                if !write {
                    mount(
                        None,
                        &m.path,
                        None,
                        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                        "making read-only",
                    )?;
                }
            }
        }
    }
    for t in tmpfs.iter().rev() {
        mount(
            None,
            t,
            None,
            libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
            "making read-only",
        )?;
    }
    Ok(held)
}

/// The Landlock ABI this kernel has (0 when none).
#[allow(unsafe_code)]
fn kernel_abi() -> ABI {
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) reads no memory and
    // returns the ABI version or an error.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    ABI::from(i32::try_from(v).unwrap_or(0))
}

/// `ip link set lo up`, by ioctl.
#[allow(unsafe_code)]
fn loopback_up() -> Result<(), RunError> {
    let err = |what: &str| RunError::Io {
        what: format!("bringing lo up ({what})"),
        source: io::Error::last_os_error(),
    };
    // SAFETY: a zeroed ifreq is a valid value; the name is copied within
    // its bounds (3 bytes of 16); the socket is closed on every path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(err("socket"));
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (d, s) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *d = *s as libc::c_char;
        }
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) < 0 {
            libc::close(fd);
            return Err(err("SIOCGIFFLAGS"));
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        let r = libc::ioctl(fd, libc::SIOCSIFFLAGS, &req);
        libc::close(fd);
        if r < 0 {
            return Err(err("SIOCSIFFLAGS"));
        }
    }
    Ok(())
}
