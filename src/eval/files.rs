//! File decisions (docs/language.md#file-rules): `read` and `write` against
//! the sandbox's roots and file rules.
//!
//! A path's access comes from the deepest *literal* rule that covers it
//! (the implicit ones included: `/` readable, and under `workspace-write`
//! the workspace and `/tmp` writable); on one path the weakest literal wins.
//! Then every glob that covers the path may only take access away.

use std::borrow::Cow;

use crate::compile::Policy;
use crate::compile::agent::Access;
use crate::decision::{Decision, Reason, RuleId};
use crate::normalize::{Anchor, normalize_absolute_path};
use crate::syntax::ast::SandboxMode;

use super::agent::Workspace;

/// What decided a path's access.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
enum From {
    /// `/`: reads are open.
    Base,
    /// The workspace or `/tmp` as writable roots (or the workspace as
    /// readable under `read-only`).
    Implicit,
    /// A written rule.
    Rule(RuleId),
}

/// A path's access and what decided it.
#[derive(Clone, Copy, Debug)]
struct Level {
    access: Access,
    from: From,
}

/// The segments of a normal absolute path.
fn segments(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// `path` lies at or below `root`.
fn under(root: &[&str], path: &[&str]) -> bool {
    path.len() >= root.len() && path.iter().zip(root).all(|(a, b)| a == b)
}

impl Policy {
    /// May the agent read `path` (absolute) in `workspace`? Reads are open
    /// unless a `none` rule covers the path (a `sandbox_approval` prompt,
    /// `no_access`); the path is normalised as for [`Policy::write`].
    pub fn read(&self, path: &str, workspace: &Workspace) -> Decision {
        let Some(path) = normalize_absolute_path(path) else {
            return Decision::deny(Reason::InvalidPath, None);
        };
        if self.agent.sandbox == SandboxMode::DangerFullAccess {
            return Decision::allow(Reason::Unsandboxed, None);
        }
        let Some(bound) = Bound::new(workspace) else {
            return Decision::deny(Reason::InvalidPath, None);
        };
        let view = bound.view();
        let path = segments(&path);
        let level = self.level(&path, &view);
        match level.access {
            Access::None => self.prompt_for(
                crate::syntax::ast::PromptCategory::SandboxApproval,
                Reason::NoAccess,
                rule_of(level.from),
            ),
            _ => Decision::allow(Reason::Readable, rule_of(level.from)),
        }
    }

    /// A write under `workspace-write` (the path normalised): no access,
    /// read-only, outside the roots, protected, or allowed.
    pub(super) fn workspace_write(&self, path: &str, workspace: &Workspace) -> Decision {
        let Some(bound) = Bound::new(workspace) else {
            return Decision::deny(Reason::InvalidPath, None);
        };
        let view = bound.view();
        let path = segments(path);
        let level = self.level(&path, &view);
        let prompt = |reason, from| {
            self.prompt_for(
                crate::syntax::ast::PromptCategory::SandboxApproval,
                reason,
                rule_of(from),
            )
        };
        match level.access {
            Access::None => return prompt(Reason::NoAccess, level.from),
            Access::Read if level.from == From::Base => {
                return prompt(Reason::OutsideWritableRoots, level.from);
            }
            Access::Read => return prompt(Reason::ReadOnlyPath, level.from),
            Access::Write => {}
        }
        // A protected name directly under any writable root, and all
        // beneath it; compared without case (case-insensitive file systems).
        let protect = &self.agent.paths.protect;
        for root in self.write_roots(&view) {
            if !under(&root, &path) {
                continue;
            }
            let first = path.get(root.len()).copied().unwrap_or("");
            if !first.is_empty() && protect.iter().any(|p| p.eq_ignore_ascii_case(first)) {
                return prompt(Reason::ProtectedPath, From::Implicit);
            }
            // The code-running parts of every repository below the root, at
            // any depth: `.git/hooks/**` and `.git/config` (the rest of a
            // nested `.git` stays writable: `git clone` and `git commit`
            // inside the workspace keep working).
            if nested_git_code(path.get(root.len()..).unwrap_or_default()) {
                return prompt(Reason::ProtectedPath, From::Implicit);
            }
        }
        if let Some(gitdir) = &view.gitdir {
            if under(gitdir, &path) {
                return prompt(Reason::ProtectedPath, From::Implicit);
            }
        }
        Decision::allow(Reason::WritableRoot, rule_of(level.from))
    }

    /// The literal roots writes may happen under (workspace-write): the
    /// workspace, `/tmp` unless excluded, and every literal `writable`.
    fn write_roots<'v>(&'v self, view: &'v View<'v>) -> Vec<Vec<&'v str>> {
        let mut roots = vec![view.root.clone()];
        if !self.agent.paths.no_tmp {
            roots.push(vec!["tmp"]);
        }
        for f in &self.agent.paths.files {
            if f.access != Access::Write {
                continue;
            }
            if let (Some(lit), Some(base)) = (f.pattern.literal(), view.base(f.pattern.anchor())) {
                let mut r = base.to_vec();
                r.extend(lit);
                roots.push(r);
            }
        }
        roots
    }

    /// The access the rules give `path`.
    fn level(&self, path: &[&str], view: &View<'_>) -> Level {
        let write_mode = self.agent.sandbox == SandboxMode::WorkspaceWrite;
        // (depth, level) of the deepest literal so far; the weakest on ties.
        let mut best = (
            0usize,
            Level {
                access: Access::Read,
                from: From::Base,
            },
        );
        let mut consider = |depth: usize, level: Level| {
            if depth > best.0 || (depth == best.0 && level.access < best.1.access) {
                best = (depth, level);
            }
        };
        let implicit = if write_mode {
            Access::Write
        } else {
            Access::Read
        };
        if under(&view.root, path) {
            consider(
                view.root.len(),
                Level {
                    access: implicit,
                    from: From::Implicit,
                },
            );
        }
        if write_mode && !self.agent.paths.no_tmp && path.first() == Some(&"tmp") {
            consider(
                1,
                Level {
                    access: Access::Write,
                    from: From::Implicit,
                },
            );
        }
        for f in &self.agent.paths.files {
            let Some(lit) = f.pattern.literal() else {
                continue;
            };
            let Some(base) = view.base(f.pattern.anchor()) else {
                continue;
            };
            let depth = base.len() + lit.len();
            if path.len() >= depth && f.pattern.covers(base, path) {
                // Outside workspace-write nothing is writable: a
                // `writable` rule still says "readable".
                let access = if write_mode {
                    f.access
                } else {
                    f.access.min(Access::Read)
                };
                consider(
                    depth,
                    Level {
                        access,
                        from: From::Rule(f.rule),
                    },
                );
            }
        }
        let mut level = best.1;
        for f in &self.agent.paths.files {
            if f.pattern.is_literal() || f.access >= level.access {
                continue;
            }
            let Some(base) = view.base(f.pattern.anchor()) else {
                continue;
            };
            if f.pattern.covers(base, path) {
                level = Level {
                    access: f.access,
                    from: From::Rule(f.rule),
                };
            }
        }
        level
    }
}

fn rule_of(from: From) -> Option<RuleId> {
    match from {
        From::Rule(r) => Some(r),
        _ => None,
    }
}

/// A workspace's paths, normalised: its root, its git directory, the home.
struct Bound<'w> {
    root: Cow<'w, str>,
    gitdir: Option<Cow<'w, str>>,
    home: Option<Cow<'w, str>>,
}

impl<'w> Bound<'w> {
    /// `None` when the root is not an absolute path. A git directory or
    /// home that is not is left unbound.
    fn new(ws: &'w Workspace) -> Option<Bound<'w>> {
        Some(Bound {
            root: normalize_absolute_path(&ws.root)?,
            gitdir: ws.gitdir.as_deref().and_then(normalize_absolute_path),
            home: ws.home.as_deref().and_then(normalize_absolute_path),
        })
    }

    fn view(&self) -> View<'_> {
        View {
            root: segments(&self.root),
            gitdir: self.gitdir.as_deref().map(segments),
            home: self.home.as_deref().map(segments),
        }
    }
}

/// A workspace as segments.
struct View<'w> {
    root: Vec<&'w str>,
    gitdir: Option<Vec<&'w str>>,
    home: Option<Vec<&'w str>>,
}

impl<'w> View<'w> {
    /// The segments a pattern of this anchor is relative to; `None` for a
    /// home pattern when no home is bound (the rule then covers nothing).
    fn base(&self, anchor: Anchor) -> Option<&[&'w str]> {
        match anchor {
            Anchor::Root => Some(&[]),
            Anchor::Workspace => Some(&self.root),
            Anchor::Home => self.home.as_deref(),
        }
    }
}

/// Whether `rest` (a path's segments below a writable root) is inside
/// `.git/hooks` or is `.git/config` of a repository at any depth
/// (docs/language.md#sandbox, `write`): names compared without case.
fn nested_git_code(rest: &[&str]) -> bool {
    rest.windows(2).enumerate().any(|(i, w)| {
        let [git, next] = w else { return false };
        git.eq_ignore_ascii_case(".git")
            && (next.eq_ignore_ascii_case("hooks")
                || (next.eq_ignore_ascii_case("config") && i + 2 == rest.len()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_compares_segments() {
        assert!(under(&["w"], &["w", ".git", "x"]));
        assert!(under(&["w"], &["w"]));
        assert!(!under(&["w"], &["wx", "a"]));
        assert!(under(&[], &["a"]));
        assert_eq!(segments("/w/"), vec!["w"]);
    }
}
