//! The policy's `apps` deny list, held by the kernel (issue 61; docs/run.md,
//! "Programs"). At launch, every program in `PATH` and the standard
//! program directories whose path, or the file it resolves to, the engine's
//! `app` query denies is covered, in the run's mount namespace, by a small
//! read-only script that says so and exits 126: the program can neither be
//! run nor read (so not copied and run under another name), through any
//! link to it or hard link found beside it. While the command runs, the
//! launcher reads the policy file again every 200 ms and kills (SIGKILL)
//! every process of the run whose program the policy in force denies: a
//! program denied while it runs dies within a second, and so does one
//! started afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gatehouse::{Outcome, Policy, PolicySet, Query};
use serde::{Deserialize, Serialize};

/// A program the run covers, and what the cover says when it is run.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct Blocked {
    /// The file itself (links resolved).
    pub path: PathBuf,
    /// One line: the program, the rule that denies it.
    pub message: String,
}

/// Where programs are looked for besides `PATH`.
const PROGRAM_DIRS: [&str; 9] = [
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/games",
    "/usr/local/games",
    "/snap/bin",
];

/// Entries read from one directory at most.
const DIR_LIMIT: usize = 20_000;

/// Why the policy denies running `program`, as one line, or `None`.
pub fn denial(set: &PolicySet, policy: &Policy, program: &str) -> Option<String> {
    let q = Query::App {
        program: program.to_string(),
    };
    let d = policy.decide(&q);
    if d.outcome != Outcome::Deny {
        return None;
    }
    let rule = (d.rule.and_then(|r| set.rule(r)))
        .map(|r| format!(", rule {}:{}:{}", r.file, r.line, r.column))
        .unwrap_or_default();
    Some(format!(
        "{program} is denied by the policy (app, reason {}{rule})",
        d.reason.as_str()
    ))
}

/// The programs of `PATH` (`path_env`) and the standard directories that
/// the policy denies, each once (by the file its links resolve to), with
/// every hard link to one of them found in those directories.
pub fn scan(set: &PolicySet, policy: &Policy, path_env: Option<&OsStr>) -> Vec<Blocked> {
    let mut dirs: Vec<PathBuf> = PROGRAM_DIRS.iter().map(PathBuf::from).collect();
    if let Some(p) = path_env {
        dirs.extend(std::env::split_paths(p).filter(|d| d.is_absolute()));
    }
    let mut seen_dirs = BTreeSet::new();
    // Every program found: its resolved file and identity.
    let mut files: BTreeMap<PathBuf, (u64, u64)> = BTreeMap::new();
    let mut blocked: BTreeMap<PathBuf, String> = BTreeMap::new();
    for d in dirs {
        let Ok(real) = std::fs::canonicalize(&d) else {
            continue;
        };
        if !seen_dirs.insert(real) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten().take(DIR_LIMIT) {
            let found = e.path();
            let Ok(target) = std::fs::canonicalize(&found) else {
                continue;
            };
            let Ok(meta) = std::fs::metadata(&target) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            files.insert(target.clone(), (meta.dev(), meta.ino()));
            let why = denial(set, policy, &found.to_string_lossy())
                .or_else(|| denial(set, policy, &target.to_string_lossy()));
            if let Some(why) = why {
                blocked.entry(target).or_insert(why);
            }
        }
    }
    // A hard link under another name is the same program.
    let ids: BTreeMap<(u64, u64), String> = blocked
        .iter()
        .filter_map(|(p, why)| files.get(p).map(|id| (*id, why.clone())))
        .collect();
    for (p, id) in &files {
        if let Some(why) = ids.get(id) {
            blocked.entry(p.clone()).or_insert_with(|| why.clone());
        }
    }
    blocked
        .into_iter()
        .map(|(path, message)| Blocked { path, message })
        .collect()
}

/// The launch's half: the denied programs into the plan (one note naming
/// them; one beneath `/tmp`, where the covers are staged, is left out with
/// a note), each recorded in the decision log.
pub fn add_to(plan: &mut crate::plan::Plan, set: &PolicySet, policy: &Policy) {
    let (under_tmp, apps): (Vec<Blocked>, Vec<Blocked>) =
        scan(set, policy, std::env::var_os("PATH").as_deref())
            .into_iter()
            .partition(|b| b.path.starts_with("/tmp"));
    for b in under_tmp {
        plan.notes.push(format!(
            "{} is not covered: a program beneath /tmp is outside what the launch covers (it is still killed when it runs)",
            b.message
        ));
    }
    if !apps.is_empty() {
        plan.notes.push(format!(
            "{} program(s) the apps rules deny cannot be run or read: {}",
            apps.len(),
            apps.iter()
                .map(|b| b.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    plan.apps = apps;
}

/// Covers each blocked program, in this process's own mount namespace,
/// with its script, read-only: the scripts are made on a tmpfs staged over
/// `/tmp` for the moment it takes, bound over the programs, and the tmpfs
/// taken away again (the bound files stay).
#[cfg(target_os = "linux")]
pub fn cover(blocked: &[Blocked]) -> Result<(), crate::sys::RunError> {
    use crate::sys::{cstr, io, mount};
    use std::os::unix::fs::PermissionsExt as _;
    if blocked.is_empty() {
        return Ok(());
    }
    let stage = Path::new("/tmp");
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        "making private",
    )?;
    mount(
        Some(c"tmpfs"),
        stage,
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        "staging the program covers on",
    )?;
    let made = (|| {
        for (i, b) in blocked.iter().enumerate() {
            let script = stage.join(format!("gatehouse-cover-{i}"));
            std::fs::write(&script, cover_script(b))
                .map_err(io(format!("writing {}", script.display())))?;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
                .map_err(io(format!("making {} executable", script.display())))?;
            let src = cstr(&script)?;
            mount(Some(&src), &b.path, None, libc::MS_BIND, "covering")?;
            mount(
                None,
                &b.path,
                None,
                libc::MS_BIND
                    | libc::MS_REMOUNT
                    | libc::MS_RDONLY
                    | libc::MS_NOSUID
                    | libc::MS_NODEV,
                "making read-only",
            )?;
        }
        Ok(())
    })();
    let t = cstr(stage)?;
    // SAFETY: umount2(2) with a NUL-terminated path that outlives the call.
    #[allow(unsafe_code)]
    let r = unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) };
    if r != 0 {
        return Err(crate::sys::RunError::Io {
            what: "taking the staging tmpfs off /tmp".into(),
            source: std::io::Error::last_os_error(),
        });
    }
    made
}

/// The cover of a blocked program: a script that says why and fails.
pub fn cover_script(b: &Blocked) -> String {
    let line = format!("gatehouse-run: {}", b.message).replace('\'', "'\\''");
    format!("#!/bin/sh\nprintf '%s\\n' '{line}' >&2\nexit 126\n")
}

/// The processes of the run: `root` and its descendants, from `/proc`.
fn descendants(root: i32) -> Vec<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`: the name may hold spaces and
            // parentheses, so read after the last `)`.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if let Some(ppid) = ppid {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        if out.len() > 100_000 {
            break;
        }
        out.push(p);
        if let Some(c) = children.get(&p) {
            todo.extend(c);
        }
    }
    out
}

/// One decision record, appended to the run's log (JSON lines, beside the
/// proxy's network decisions).
fn record(log: Option<&Path>, program: &str, message: &str, action: &str) {
    let Some(log) = log else { return };
    let line = serde_json::json!({
        "time": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0),
        "source": "gatehouse-run",
        "query": format!("app {program}"),
        "decision": "deny",
        "message": message,
        "action": action,
    });
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(f, "{line}");
    }
}

/// Records the programs covered at launch.
pub fn record_blocked(log: Option<&Path>, blocked: &[Blocked]) {
    for b in blocked {
        record(
            log,
            &b.path.to_string_lossy(),
            &b.message,
            "covered at launch: cannot be run or read",
        );
    }
}

/// The live half: a thread that reads the policy file again every 200 ms
/// (when `reload`: the command cannot write the file) and kills the run's
/// processes whose program the policy in force denies.
pub struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    /// `text`: the policy as the launch read it; `reload`: whether the
    /// file is read again (never when the command could write it: it
    /// would loosen its own rules).
    pub fn start(
        policy_file: PathBuf,
        text: String,
        reload: bool,
        name: Option<String>,
        root: i32,
        log: Option<PathBuf>,
    ) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut text = text;
            let label = policy_file.display().to_string();
            let mut set = PolicySet::from_source(&label, &text).ok();
            while !flag.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
                if reload
                    && let Ok(now) = std::fs::read_to_string(&policy_file)
                    && now != text
                {
                    text = now;
                    match PolicySet::from_source(&label, &text) {
                        Ok(s) => {
                            eprintln!(
                                "gatehouse-run: {label} changed: its apps rules now apply to the run's processes (files and network keep the launch's rules)"
                            );
                            set = Some(s);
                        }
                        Err(e) => eprintln!(
                            "gatehouse-run: {label} changed but does not load; the rules in force stay: {e}"
                        ),
                    }
                }
                // Only a policy with an `apps` section can deny a program.
                if !text.contains("apps") {
                    continue;
                }
                let Some(s) = set.as_ref() else { continue };
                let Ok(policy) = s.select(name.as_deref()) else {
                    continue;
                };
                for pid in descendants(root) {
                    if pid == root {
                        continue;
                    }
                    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
                        continue;
                    };
                    let exe = exe.to_string_lossy();
                    let exe = exe.strip_suffix(" (deleted)").unwrap_or(&exe);
                    if let Some(why) = denial(s, policy, exe) {
                        // SAFETY: kill(2) with a pid read from /proc and a
                        // constant signal; it touches no memory of ours.
                        #[allow(unsafe_code)]
                        let killed = unsafe { libc::kill(pid, libc::SIGKILL) } == 0;
                        if killed {
                            eprintln!("gatehouse-run: killed process {pid}: {why}");
                            record(log.as_deref(), exe, &why, &format!("killed process {pid}"));
                        }
                    }
                }
            }
        });
        Watch {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn the_cover_says_why_whatever_the_message_holds() {
        let b = Blocked {
            path: "/usr/bin/nano".into(),
            message: "/usr/bin/it's denied".into(),
        };
        let s = cover_script(&b);
        assert!(s.starts_with("#!/bin/sh\n"));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&s)
            .output()
            .map_err(|e| e.to_string());
        let out = out.as_ref().map(|o| {
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stderr).to_string(),
            )
        });
        assert_eq!(
            out,
            Ok((
                Some(126),
                "gatehouse-run: /usr/bin/it's denied\n".to_string()
            ))
        );
    }

    #[test]
    fn a_denied_name_covers_the_program_and_its_links() {
        let set = PolicySet::from_source("t", "policy p { apps { deny sh } }").unwrap();
        let policy = set.select(None).unwrap();
        let blocked = scan(&set, policy, None);
        // `sh` is a link on most systems (to dash or bash): the file it
        // resolves to is covered, whatever its own name.
        let sh = std::fs::canonicalize("/bin/sh").ok();
        assert!(
            blocked.iter().any(|b| Some(&b.path) == sh.as_ref()),
            "{blocked:?}"
        );
        assert!(
            blocked
                .iter()
                .all(|b| b.message.contains("denied by the policy"))
        );
        assert!(denial(&set, policy, "/usr/bin/ls").is_none());
    }

    #[test]
    fn the_run_is_its_root_and_everything_below() {
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        assert_eq!(descendants(me).first(), Some(&me));
    }
}
