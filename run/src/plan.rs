//! From a policy's file rules to what the kernel enforces.
//!
//! Landlock only allows, and a right on a directory holds for everything
//! beneath it; so the plan grants each place the policy opens (`/` when
//! readable, the write roots, a rule that gives more than the rules around
//! it) with Landlock, and takes access away beneath a grant with mounts in
//! the run's own mount namespace, as sandbox-runtime and Codex do with
//! bubblewrap: a `none` directory is covered by an empty read-only tmpfs, a
//! `none` file by `/dev/null`, a read-only path inside a writable one is
//! bound read-only, and a rule beneath those that gives more again is bound
//! back. The engine decides the access at every such place. What neither
//! can hold — a glob, a rule on a path that does not exist yet — is
//! reported, never dropped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::walk::{expand, nested_repositories};

use gatehouse::{
    FileAccess, FileSandbox, NetworkTarget, Outcome, Policy, PolicySet, Query, Workspace,
};

/// The rights a grant gives.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum Rights {
    /// Read files, list directories, execute.
    Read,
    /// Everything: read, write, create, remove.
    Write,
    /// Write an existing file only (`/dev/null`, `/dev/tty`).
    WriteFile,
}

/// One Landlock rule: `rights` on `path` and everything beneath it.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    pub path: PathBuf,
    pub rights: Rights,
    pub dir: bool,
}

/// How a mount changes access beneath a grant.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum MountKind {
    /// `none`: an empty read-only tmpfs over a directory, `/dev/null` over
    /// a file.
    Hide,
    /// `read` inside a writable tree: the path bound read-only.
    ReadOnly,
    /// More access again beneath a hidden or read-only path: the original
    /// bound back, writable or not.
    Expose { write: bool },
    /// A path that does not exist yet, inside a writable tree, where the
    /// policy gives less (a protected name, `read ".claude/agents"`): its
    /// first missing component is made an empty file for the run and bound
    /// read-only over itself, so that nothing can be created there; the empty file is removed when the run ends (as
    /// sandbox-runtime does).
    Block,
}

/// One mount, in the order they are made (parents first).
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct Mount {
    pub path: PathBuf,
    pub kind: MountKind,
    pub dir: bool,
}

/// What a run enforces, and what it cannot. Made once, by the launcher, and
/// handed to the namespace's process as JSON (`sys::send_plan`).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Plan {
    /// `None`: `danger-full-access`, no file restriction at all.
    pub grants: Option<Vec<Grant>>,
    /// Mounts that take access away (and give it back) beneath the grants.
    pub mounts: Vec<Mount>,
    /// Rules the kernel cannot hold (the run refuses to start without
    /// `--allow-weaker`), each a sentence naming the rule.
    pub weaker: Vec<String>,
    /// Facts worth a line on stderr (rules on paths that do not exist).
    pub notes: Vec<String>,
    /// The unix sockets the policy lets the command reach.
    pub sockets: Sockets,
    /// The write roots, and the names protected directly under each (lower
    /// case): no case variant of one may be made there (`guard`).
    pub write_roots: Vec<PathBuf>,
    pub protect: Vec<String>,
    /// Directories bound over themselves so that they cannot be renamed or
    /// removed (`EBUSY`): every directory between a write root and a mount
    /// of the plan, so that renaming a parent cannot free a protected path.
    pub pins: Vec<PathBuf>,
    /// The programs the `apps` rules deny, covered in the run (`apps`).
    #[serde(default)]
    pub apps: Vec<crate::apps::Blocked>,
}

/// The unix sockets a policy allows (`socket` queries).
#[derive(Clone, Debug, Default, Eq, PartialEq, Serialize, Deserialize)]
pub enum Sockets {
    /// None: `socket(AF_UNIX)` is refused in the kernel (seccomp).
    #[default]
    None,
    /// These paths only.
    Paths(Vec<String>),
    /// Every one (`allow socket *`, `network unrestricted`).
    All,
}

/// What the engine answers for unix sockets: the paths `allow socket`
/// names that the policy allows, or all of them.
pub fn sockets(policy: &Policy) -> Sockets {
    let allowed = |path: &str| {
        policy
            .decide_in(&Query::Socket { path: path.into() }, None)
            .outcome
            == Outcome::Allow
    };
    // A path no rule names: allowed only by `allow socket *` or an
    // unrestricted network.
    if allowed("/nonexistent/gatehouse-run/any.sock") {
        return Sockets::All;
    }
    let paths: BTreeSet<String> = (policy.network().rules.iter())
        .filter_map(|r| match &r.target {
            NetworkTarget::Socket(p) if r.allow && allowed(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    if paths.is_empty() {
        Sockets::None
    } else {
        Sockets::Paths(paths.into_iter().collect())
    }
}

/// Every directory strictly between a write root and a mount's path
/// (the path itself is a mount point already), shallowest first.
fn pins(mounts: &[Mount], grants: &[Grant]) -> Vec<PathBuf> {
    let roots: Vec<&Path> = (grants.iter())
        .filter(|g| g.rights == Rights::Write && g.dir)
        .map(|g| g.path.as_path())
        .collect();
    let mut out: BTreeSet<PathBuf> = BTreeSet::new();
    for m in mounts {
        // The directories the kernel will walk: a path through a symbolic
        // link is pinned where the link leads (a mount on a link's path
        // lands on its target).
        let Some(parent) = m.path.parent().and_then(|p| std::fs::canonicalize(p).ok()) else {
            continue;
        };
        let mut at = Some(parent.as_path());
        while let Some(dir) = at {
            // Strictly below a write root: its parent may be written, so
            // it could be renamed.
            if roots.iter().any(|r| dir != *r && dir.starts_with(r))
                && dir.symlink_metadata().is_ok_and(|m| m.is_dir())
            {
                out.insert(dir.to_path_buf());
            }
            at = dir.parent();
        }
    }
    // Shallowest first: a pin's own mount must not cover a deeper one.
    let mut v: Vec<PathBuf> = out.into_iter().collect();
    v.sort_by_key(|p| p.components().count());
    v
}

impl Plan {
    /// The empty files the run makes on the host for [`MountKind::Block`].
    pub fn placeholders(&self) -> impl Iterator<Item = &Path> {
        (self.mounts.iter())
            .filter(|m| m.kind == MountKind::Block)
            .map(|m| m.path.as_path())
    }
}

/// The first component of `path` that does not exist (`path` itself when
/// only it is missing); `None` when it exists.
fn first_missing(path: &str) -> Option<String> {
    let mut at = String::new();
    for seg in segs(path) {
        at.push('/');
        at.push_str(seg);
        if Path::new(&at).symlink_metadata().is_err() {
            return Some(at);
        }
    }
    None
}

/// What the engine gives `path`: readable, writable.
fn access(policy: &Policy, ws: &Workspace, path: &str) -> (bool, bool) {
    let read = policy.read(path, ws).outcome == Outcome::Allow;
    let write = policy
        .decide_in(
            &Query::Write {
                path: path.to_string(),
                workspace: None,
                home: None,
            },
            Some(ws),
        )
        .outcome
        == Outcome::Allow;
    (read, write)
}

/// Whether the command could change `file` under `plan`: write it, or
/// replace it or a link on its way through a directory it may write —
/// asked of the file as named and as it resolves. Without file rules
/// (`danger-full-access`) or a path that does not resolve: yes.
pub fn writable(policy: &Policy, ws: &Workspace, plan: &Plan, file: &Path) -> bool {
    if plan.grants.is_none() {
        return true;
    }
    let named = match std::env::current_dir() {
        Ok(cwd) => cwd.join(file),
        Err(_) => return true,
    };
    let Ok(resolved) = std::fs::canonicalize(file) else {
        return true;
    };
    // Every prefix of the name as given: a link there could be re-pointed.
    let mut names: Vec<PathBuf> = named.ancestors().map(Path::to_path_buf).collect();
    names.push(resolved);
    names.iter().any(|p| match p.to_str() {
        Some("/") => false,
        Some(p) => access(policy, ws, p).1,
        None => true,
    })
}

/// `a` gives at least what `b` gives.
fn covers(a: (bool, bool), b: (bool, bool)) -> bool {
    (a.0 || !b.0) && (a.1 || !b.1)
}

fn rights(a: (bool, bool)) -> Option<Rights> {
    match a {
        (_, true) => Some(Rights::Write),
        (true, false) => Some(Rights::Read),
        (false, false) => None,
    }
}

/// `path` lies strictly beneath `dir`.
fn beneath(dir: &str, path: &str) -> bool {
    if dir == "/" {
        return path != "/" && path.starts_with('/');
    }
    path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// The segments of an absolute path.
pub(crate) fn segs(p: &str) -> Vec<&str> {
    p.split('/').filter(|s| !s.is_empty()).collect()
}

/// Builds the plan for `policy` in `ws` (its root absolute, its home bound
/// for `~` rules). `allow_weaker` expands globs over the files that exist
/// now instead of only reporting them.
pub fn plan(set: &PolicySet, policy: &Policy, ws: &Workspace, allow_weaker: bool) -> Plan {
    let mut out = Plan {
        sockets: sockets(policy),
        ..Plan::default()
    };
    let Some(view) = policy.files(ws) else {
        out.weaker.push(format!(
            "the workspace `{}` is not an absolute path",
            ws.root
        ));
        return out;
    };
    if view.sandbox == FileSandbox::DangerFullAccess {
        return out;
    }
    out.write_roots = view.write_roots.iter().map(PathBuf::from).collect();
    out.protect = view.protect.clone();
    let (anchors, missing) = places(set, &view, ws, allow_weaker, &mut out);
    let blocks = blocks(policy, ws, &missing, &mut out.notes);
    let mut grants = grants_and_mounts(policy, ws, &anchors, &mut out);
    // Not beneath another block, and after every other mount.
    for b in &blocks {
        if !blocks.iter().any(|o| beneath(o, b)) {
            out.mounts.push(Mount {
                path: b.into(),
                kind: MountKind::Block,
                dir: false,
            });
        }
    }
    for dev in ["/dev/null", "/dev/tty"] {
        if Path::new(dev).exists() {
            grants.push(Grant {
                path: dev.into(),
                rights: Rights::WriteFile,
                dir: false,
            });
        }
    }
    out.pins = pins(&out.mounts, &grants);
    out.grants = Some(grants);
    out
}

/// The places whose access the plan must set, as they exist now (the
/// workspace, the write roots, the git directory, protected names in any
/// case, every repository's code-running parts, every rule's path, and with
/// `allow_weaker` what each glob matches now), sorted so that parents come
/// before their children; and the paths that do not exist where the policy
/// gives less than the tree around them.
fn places(
    set: &PolicySet,
    view: &gatehouse::FileView,
    ws: &Workspace,
    allow_weaker: bool,
    out: &mut Plan,
) -> (Vec<String>, BTreeSet<String>) {
    let place = |id| {
        set.rule(id)
            .map(|r| format!("`{}` ({}:{})", r.source, r.file, r.line))
            .unwrap_or_else(|| "a rule".into())
    };
    let mut anchors: BTreeSet<String> = BTreeSet::new();
    anchors.insert(view.workspace.clone());
    anchors.extend(view.write_roots.iter().cloned());
    if let Some(g) = &ws.gitdir {
        anchors.insert(g.clone());
    }
    let mut missing: BTreeSet<String> = BTreeSet::new();
    for root in &view.write_roots {
        // Protected names as they exist, in any case; those that do not
        // exist yet cannot be created.
        let mut found: Vec<String> = Vec::new();
        if let Ok(rd) = std::fs::read_dir(root) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if view.protect.iter().any(|p| p.eq_ignore_ascii_case(&name)) {
                    anchors.insert(format!("{}/{name}", root.trim_end_matches('/')));
                    found.push(name);
                }
            }
            for p in &view.protect {
                if !found.iter().any(|f| f.eq_ignore_ascii_case(p)) {
                    missing.insert(format!("{}/{p}", root.trim_end_matches('/')));
                }
            }
        }
    }
    // The code-running parts of every repository below a write root, at
    // any depth (the engine protects them: docs/language.md#sandbox,
    // `write`): `.git/hooks` and `.git/config` as they exist at launch.
    for root in &view.write_roots {
        nested_repositories(Path::new(root), &mut anchors, &mut out.notes);
    }
    for r in &view.rules {
        match (&r.path, &r.base) {
            (Some(p), _) => {
                if Path::new(p).symlink_metadata().is_err() {
                    if r.access != FileAccess::Write {
                        missing.insert(p.clone());
                    }
                    continue;
                }
                anchors.insert(p.clone());
            }
            (None, Some(base)) => {
                out.weaker.push(format!("{}: Landlock cannot match a glob; with --allow-weaker it holds for the {} files that match now, not for files created later", place(r.rule), base));
                if allow_weaker {
                    let mut seen = 0usize;
                    expand(&r.pattern, base, Path::new(base), &mut anchors, &mut seen);
                }
            }
            (None, None) => {}
        }
    }
    anchors.retain(|a| Path::new(a).symlink_metadata().is_ok());
    (anchors.into_iter().collect(), missing)
}

/// Of the paths that do not exist, the first missing component of each
/// that must not be created during the run (where the policy gives less
/// than the folder it would be made in).
fn blocks(
    policy: &Policy,
    ws: &Workspace,
    missing: &BTreeSet<String>,
    notes: &mut Vec<String>,
) -> BTreeSet<String> {
    let mut blocks: BTreeSet<String> = BTreeSet::new();
    for p in missing {
        let Some(first) = first_missing(p) else {
            continue;
        };
        let parent = Path::new(&first)
            .parent()
            .map_or("/".to_string(), |d| d.display().to_string());
        let (here, there) = (access(policy, ws, p), access(policy, ws, &parent));
        if covers(here, there) {
            continue;
        }
        if !there.1 {
            // Nothing can be created there anyway, and a `none` path that
            // does not exist has nothing to read.
            notes.push(format!(
                "`{p}` does not exist: its rule holds if it is made before the command starts"
            ));
            continue;
        }
        if blocks.insert(first.clone()) && first != *p {
            notes.push(format!(
                "`{p}` does not exist: `{first}` cannot be created during the run"
            ));
        }
    }
    blocks
}

/// Landlock grants where a place gives more than its nearest anchored
/// parent, and mounts where it gives less (hidden or read-only) or more
/// again beneath a weakened one (bound back).
fn grants_and_mounts(
    policy: &Policy,
    ws: &Workspace,
    anchors: &[String],
    out: &mut Plan,
) -> Vec<Grant> {
    let mut grants = Vec::new();
    let is_dir = |p: &str| Path::new(p).symlink_metadata().is_ok_and(|m| m.is_dir());
    let root = access(policy, ws, "/");
    if let Some(r) = rights(root) {
        grants.push(Grant {
            path: "/".into(),
            rights: r,
            dir: true,
        });
    }
    // Parents sort before their children.
    let mut weakened: Vec<&str> = Vec::new();
    for a in anchors {
        if a == "/" {
            continue;
        }
        let here = access(policy, ws, a);
        let parent = (anchors.iter().rev())
            .find(|p| beneath(p, a))
            .map_or("/", String::as_str);
        let there = access(policy, ws, parent);
        let link = Path::new(a)
            .symlink_metadata()
            .is_ok_and(|m| m.is_symlink());
        if here == there {
            continue;
        }
        if link {
            out.weaker.push(format!("`{a}` is a symbolic link: its access is decided where it points, and the rules there hold"));
            continue;
        }
        let dir = is_dir(a);
        if !covers(here, there) {
            let kind = if here.0 {
                MountKind::ReadOnly
            } else {
                MountKind::Hide
            };
            out.mounts.push(Mount {
                path: a.into(),
                kind,
                dir,
            });
            weakened.push(a);
        }
        if !covers(there, here) {
            if let Some(r) = rights(here) {
                grants.push(Grant {
                    path: a.into(),
                    rights: r,
                    dir,
                });
            }
            if weakened.iter().any(|w| beneath(w, a)) {
                out.mounts.push(Mount {
                    path: a.into(),
                    kind: MountKind::Expose { write: here.1 },
                    dir,
                });
            }
        }
    }
    grants
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn fixture() -> PathBuf {
        let d = std::env::temp_dir().join(format!("gh-run-plan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for p in [
            "ws/src",
            "ws/secrets/public",
            "ws/.git",
            "ws/target/release",
        ] {
            std::fs::create_dir_all(d.join(p)).unwrap();
        }
        std::fs::write(d.join("ws/a.env"), "x").unwrap();
        std::fs::write(d.join("ws/src/main.rs"), "x").unwrap();
        d
    }

    #[test]
    fn grants_open_and_mounts_take_away() {
        let d = fixture();
        let ws_dir = d.join("ws");
        let src = "policy p { sandbox workspace-write { exclude \"/tmp\"; none \"secrets\" \"**/*.env\"; read \"secrets/public\" \"target/release\" } }";
        let set = PolicySet::from_source("p", src).unwrap();
        let p = set.policies().next().unwrap();
        let ws = Workspace::new(ws_dir.to_string_lossy());
        let plan = plan(&set, p, &ws, false);
        assert_eq!(plan.weaker.len(), 1, "{:?}", plan.weaker);
        assert!(plan.weaker[0].contains("**/*.env"), "{:?}", plan.weaker);
        let rel = |p: &Path| {
            p.strip_prefix(&ws_dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        };
        let grants: Vec<(String, Rights)> = (plan.grants.as_ref().unwrap().iter())
            .filter(|g| g.path.starts_with(&ws_dir))
            .map(|g| (rel(&g.path), g.rights))
            .collect();
        assert_eq!(
            grants,
            [
                ("".to_string(), Rights::Write),
                ("secrets/public".to_string(), Rights::Read)
            ]
        );
        assert!(
            plan.grants
                .as_ref()
                .unwrap()
                .iter()
                .any(|g| g.path == Path::new("/") && g.rights == Rights::Read)
        );
        let mounts: Vec<(String, MountKind)> =
            plan.mounts.iter().map(|m| (rel(&m.path), m.kind)).collect();
        assert_eq!(
            mounts,
            [
                (".git".to_string(), MountKind::ReadOnly),
                ("secrets".to_string(), MountKind::Hide),
                (
                    "secrets/public".to_string(),
                    MountKind::Expose { write: false }
                ),
                ("target/release".to_string(), MountKind::ReadOnly),
                // Protected names that do not exist yet cannot be made.
                (".agents".to_string(), MountKind::Block),
                (".zerocode".to_string(), MountKind::Block),
            ]
        );
        // With --allow-weaker the glob holds for the file that exists now.
        let plan = super::plan(&set, p, &ws, true);
        assert!(
            plan.mounts
                .iter()
                .any(|m| m.path == ws_dir.join("a.env") && m.kind == MountKind::Hide && !m.dir),
            "{:?}",
            plan.mounts
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn globs_reach_through_symlinked_directories_and_parents_are_pinned() {
        let d = std::env::temp_dir().join(format!("gh-run-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("home/project")).unwrap();
        std::fs::create_dir_all(d.join("ws/target/release")).unwrap();
        std::fs::write(d.join("home/project/project.env"), "x").unwrap();
        std::os::unix::fs::symlink(d.join("home"), d.join("ws/link-home")).unwrap();
        // A loop: walked once.
        std::os::unix::fs::symlink(d.join("ws"), d.join("home/back")).unwrap();
        let ws_dir = d.join("ws");
        let src = "policy p { sandbox workspace-write { exclude \"/tmp\"; none \"**/*.env\"; read \"target/release\" } }";
        let set = PolicySet::from_source("p", src).unwrap();
        let p = set.policies().next().unwrap();
        let ws = Workspace::new(ws_dir.to_string_lossy());
        let plan = plan(&set, p, &ws, true);
        assert!(
            plan.mounts
                .iter()
                .any(|m| m.path == ws_dir.join("link-home/project/project.env")
                    && m.kind == MountKind::Hide),
            "{:?}",
            plan.mounts
        );
        // target/release is read-only; target, between it and the write
        // root, is pinned so that renaming it cannot free the path.
        assert_eq!(plan.pins, [ws_dir.join("target")], "{:?}", plan.pins);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn sockets_follow_the_engine() {
        let one = |src: &str| {
            let set = PolicySet::from_source("p", src).unwrap();
            sockets(set.policies().next().unwrap())
        };
        assert_eq!(one("policy p { network { default deny } }"), Sockets::None);
        assert_eq!(one("policy p { network off }"), Sockets::None);
        assert_eq!(
            one("policy p { network { allow socket \"/run/a.sock\" } }"),
            Sockets::Paths(vec!["/run/a.sock".into()])
        );
        assert_eq!(
            one(
                "policy p { network { allow socket \"/run/a.sock\"; deny socket \"/run/a.sock\" } }"
            ),
            Sockets::None
        );
        assert_eq!(one("policy p { network { allow socket * } }"), Sockets::All);
        assert_eq!(one("policy p { network unrestricted }"), Sockets::All);
    }

    #[test]
    fn missing_paths_under_a_writable_root_are_blocked_at_their_first_missing_part() {
        let d = std::env::temp_dir().join(format!("gh-run-block-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("ws/.agents")).unwrap();
        std::fs::create_dir_all(d.join("ws/.zerocode")).unwrap();
        std::fs::create_dir_all(d.join("ws/.git")).unwrap();
        std::fs::write(d.join("ws/.BashRC"), "x").unwrap();
        let ws_dir = d.join("ws");
        let src = "policy p { sandbox workspace-write { exclude \"/tmp\"; protect \".bashrc\" \".zshrc\"; read \".claude/agents\"; none \"secrets\" \"/nowhere/x\" } }";
        let set = PolicySet::from_source("p", src).unwrap();
        let p = set.policies().next().unwrap();
        let plan = plan(&set, p, &Workspace::new(ws_dir.to_string_lossy()), false);
        let kinds: Vec<(String, MountKind)> = (plan.mounts.iter())
            .map(|m| {
                let r = m.path.strip_prefix(&ws_dir).unwrap_or(&m.path);
                (r.to_string_lossy().into_owned(), m.kind)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                // An existing name in another case is held as it is.
                (".BashRC".to_string(), MountKind::ReadOnly),
                (".agents".to_string(), MountKind::ReadOnly),
                (".git".to_string(), MountKind::ReadOnly),
                (".zerocode".to_string(), MountKind::ReadOnly),
                // `.claude` is missing: all of it is closed for the run.
                (".claude".to_string(), MountKind::Block),
                (".zshrc".to_string(), MountKind::Block),
                ("secrets".to_string(), MountKind::Block),
            ]
        );
        // Outside the writable roots nothing can be made anyway.
        assert!(
            plan.notes.iter().any(|n| n.contains("/nowhere/x")),
            "{:?}",
            plan.notes
        );
        assert_eq!(plan.placeholders().count(), 3);
        let _ = std::fs::remove_dir_all(&d);
    }
}
