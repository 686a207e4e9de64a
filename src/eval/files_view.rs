//! The file rules bound to one workspace, for an enforcer: what
//! `gatehouse-run` turns into Landlock rules. The engine stays the judge:
//! an enforcer takes from here only *where* access may change (each rule's
//! path, the roots, the protected names) and asks [`Policy::read`] and
//! [`Policy::decide`] what the access there is.

use crate::compile::Policy;
use crate::compile::agent::Access;
use crate::decision::RuleId;
use crate::normalize::{FilePattern, normalize_absolute_path};
use crate::syntax::ast::SandboxMode;

use super::agent::Workspace;

/// The sandbox mode a policy's file decisions start from.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum FileSandbox {
    /// `read-only`: nothing is writable.
    ReadOnly,
    /// `workspace-write`: the workspace, `/tmp` and `writable` roots are.
    WorkspaceWrite,
    /// `danger-full-access`: no file is decided (everything is allowed).
    DangerFullAccess,
}

/// What a file rule grants, weakest first.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Ord, PartialOrd)]
pub enum FileAccess {
    /// `none`: neither read nor write.
    None,
    /// `read`: read, not write.
    Read,
    /// `writable`: read and write.
    Write,
}

/// One `writable`, `read` or `none` rule, bound to the workspace and home.
#[derive(Clone, Debug)]
pub struct BoundFileRule {
    /// What the rule grants.
    pub access: FileAccess,
    /// The pattern as compiled.
    pub pattern: FilePattern,
    /// The absolute path the pattern is relative to (`/`, the workspace
    /// or the home); `None` for a `~` rule when no home is bound (the rule
    /// then covers nothing).
    pub base: Option<String>,
    /// The absolute path a literal rule names; `None` for a glob.
    pub path: Option<String>,
    /// The statement, for messages (`Policy::rule`).
    pub rule: RuleId,
}

/// A policy's file rules bound to one workspace (see [`Policy::files`]).
#[derive(Clone, Debug)]
pub struct FileView {
    /// The mode.
    pub sandbox: FileSandbox,
    /// The workspace root, normalised.
    pub workspace: String,
    /// The roots writes may go to under `workspace-write` (the workspace,
    /// `/tmp` unless excluded, every literal `writable` rule), absolute.
    pub write_roots: Vec<String>,
    /// Names protected directly under every write root (lowercase).
    pub protect: Vec<String>,
    /// The written rules, in source order.
    pub rules: Vec<BoundFileRule>,
}

/// The segments joined as an absolute path.
fn join(base: &str, tail: &[&str]) -> String {
    let mut out = base.trim_end_matches('/').to_string();
    for s in tail {
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty() { "/".into() } else { out }
}

impl Policy {
    /// The file rules bound to `workspace` (its root, and its home for `~`
    /// rules); `None` when the workspace root is not an absolute path.
    pub fn files(&self, workspace: &Workspace) -> Option<FileView> {
        let root = normalize_absolute_path(&workspace.root)?.into_owned();
        let home = (workspace.home.as_deref())
            .and_then(normalize_absolute_path)
            .map(|h| h.into_owned());
        let sandbox = match self.agent.sandbox {
            SandboxMode::ReadOnly => FileSandbox::ReadOnly,
            SandboxMode::WorkspaceWrite => FileSandbox::WorkspaceWrite,
            SandboxMode::DangerFullAccess => FileSandbox::DangerFullAccess,
        };
        let paths = &self.agent.paths;
        let rules: Vec<BoundFileRule> = (paths.files.iter())
            .map(|f| {
                let base = match f.pattern.anchor() {
                    crate::normalize::Anchor::Root => Some("/".to_string()),
                    crate::normalize::Anchor::Workspace => Some(root.clone()),
                    crate::normalize::Anchor::Home => home.clone(),
                };
                let path = match (&base, f.pattern.literal()) {
                    (Some(b), Some(lit)) => Some(join(b, &lit)),
                    _ => None,
                };
                BoundFileRule {
                    access: match f.access {
                        Access::None => FileAccess::None,
                        Access::Read => FileAccess::Read,
                        Access::Write => FileAccess::Write,
                    },
                    pattern: f.pattern.clone(),
                    base,
                    path,
                    rule: f.rule,
                }
            })
            .collect();
        let mut write_roots = Vec::new();
        if sandbox == FileSandbox::WorkspaceWrite {
            write_roots.push(root.clone());
            if !paths.no_tmp {
                write_roots.push("/tmp".into());
            }
            write_roots.extend(
                (rules.iter())
                    .filter(|r| r.access == FileAccess::Write)
                    .filter_map(|r| r.path.clone()),
            );
        }
        Some(FileView {
            sandbox,
            workspace: root,
            write_roots,
            protect: paths.protect.clone(),
            rules,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::PolicySet;

    use super::*;

    #[test]
    fn rules_are_bound_to_the_workspace_and_home() {
        let set = PolicySet::from_source(
            "p",
            "policy p { sandbox workspace-write { exclude \"/tmp\"; writable \"~/.cache\" \"/opt/c\"; none \"secrets\" \"**/*.env\" \"~/.ssh\" } }",
        )
        .unwrap();
        let p = set.policies().next().unwrap();
        let ws = Workspace::new("/w/").with_home(Some("/home/me".into()));
        let v = p.files(&ws).unwrap();
        assert_eq!(v.sandbox, FileSandbox::WorkspaceWrite);
        assert_eq!(v.write_roots, ["/w", "/home/me/.cache", "/opt/c"]);
        let paths: Vec<Option<&str>> = v.rules.iter().map(|r| r.path.as_deref()).collect();
        assert_eq!(
            paths,
            [
                Some("/home/me/.cache"),
                Some("/opt/c"),
                Some("/w/secrets"),
                None,
                Some("/home/me/.ssh")
            ]
        );
        assert_eq!(v.rules[3].base.as_deref(), Some("/w"));
        assert!(v.protect.iter().any(|p| p == ".git"));
        let unbound = p.files(&Workspace::new("/w")).unwrap();
        assert_eq!(unbound.rules[0].path, None);
        assert!(p.files(&Workspace::new("w")).is_none());
    }
}
