//! The `filesystem` part of sandbox-runtime's settings (`policyc export
//! srt`): the policy's sandbox mode and file rules as `allowWrite`,
//! `denyWrite`, `denyRead` and `allowRead` (docs/integrations/srt.md).
//!
//! sandbox-runtime's paths are relative to the directory it runs in, so
//! the workspace is `.`; `~/` is the home. The mapping:
//!
//! | gatehouse | sandbox-runtime |
//! |---|---|
//! | `workspace-write` | `allowWrite: ["."]`, and `"/tmp"` unless `exclude "/tmp"` |
//! | `writable P` (a literal path) | `allowWrite` P |
//! | `none P` | `denyRead` P, and `denyWrite` P where it lies in a writable root |
//! | `read P` in a writable root | `denyWrite` P |
//! | `read P` inside a `none` directory | `allowRead` P |
//! | `read-only` | `allowWrite: []` |
//!
//! What sandbox-runtime cannot say is a note (`policyc` prints it on
//! stderr), never an error: `danger-full-access` (srt always confines
//! writes: stricter there), a glob in `writable` (srt cannot grant with a
//! glob: stricter), and a glob in `denyWrite` (srt on Linux does not apply
//! it: a file the glob matches that exists at start is still covered by
//! `denyRead` for a `none` rule, but a `read` glob leaves writes open
//! under srt — weaker, so said).

use serde_json::{Value, json};

use super::Unexpressible;
use crate::compile::agent::Access;
use crate::compile::{Policy, PolicySet};
use crate::normalize::{Anchor, FilePattern, Segment};
use crate::syntax::ast::SandboxMode;

/// The `filesystem` object and what it could not say.
pub(super) fn filesystem(set: &PolicySet, policy: &Policy) -> (Value, Vec<Unexpressible>) {
    let paths = &policy.agent.paths;
    let mut notes = Vec::new();
    let mut allow_write: Vec<String> = Vec::new();
    let mut deny_write: Vec<String> = Vec::new();
    let mut deny_read: Vec<String> = Vec::new();
    let mut allow_read: Vec<String> = Vec::new();
    let writable = policy.agent.sandbox == SandboxMode::WorkspaceWrite;
    match policy.agent.sandbox {
        SandboxMode::WorkspaceWrite => {
            allow_write.push(".".into());
            if !paths.no_tmp {
                allow_write.push("/tmp".into());
            }
        }
        SandboxMode::ReadOnly => {}
        SandboxMode::DangerFullAccess => notes.push(Unexpressible {
            at: format!("policy {}", policy.name()),
            rule: "sandbox danger-full-access".into(),
            why: "sandbox-runtime always confines writes: under srt the command may write only where `allowWrite` says (nothing here), which is stricter than `danger-full-access`".into(),
        }),
    }
    // Literal `none` directories, for `read` rules that re-open a path
    // inside one.
    let hidden: Vec<&FilePattern> = (paths.files.iter())
        .filter(|f| f.access == Access::None && f.pattern.is_literal())
        .map(|f| &f.pattern)
        .collect();
    let push = |list: &mut Vec<String>, p: String| {
        if !list.contains(&p) {
            list.push(p);
        }
    };
    for f in &paths.files {
        let p = render(&f.pattern);
        let glob = !f.pattern.is_literal();
        match f.access {
            Access::Write if glob => notes.push(Unexpressible::rule(
                set,
                f.rule,
                "sandbox-runtime's `allowWrite` takes no globs (srt on Linux skips them): not written, so srt denies these writes (stricter)",
            )),
            Access::Write if writable => push(&mut allow_write, p),
            Access::Write => {}
            Access::None => {
                push(&mut deny_read, p.clone());
                if writable {
                    if glob {
                        notes.push(Unexpressible::rule(
                            set,
                            f.rule,
                            "sandbox-runtime on Linux does not apply a glob in `denyWrite`: files it matches at start are hidden by `denyRead`, but a new file matching it can be written under srt",
                        ));
                    }
                    push(&mut deny_write, p);
                }
            }
            Access::Read => {
                let reopens = !glob
                    && hidden
                        .iter()
                        .any(|h| **h != f.pattern && inside(&f.pattern, h));
                if reopens {
                    push(&mut allow_read, p.clone());
                }
                if writable {
                    if glob {
                        notes.push(Unexpressible::rule(
                            set,
                            f.rule,
                            "sandbox-runtime on Linux does not apply a glob in `denyWrite`: under srt these paths stay writable where a writable root covers them (weaker)",
                        ));
                    }
                    push(&mut deny_write, p);
                }
            }
        }
    }
    let mut fs = json!({
        "denyRead": deny_read,
        "allowWrite": allow_write,
        "denyWrite": deny_write,
    });
    if !allow_read.is_empty() {
        if let Some(o) = fs.as_object_mut() {
            o.insert("allowRead".into(), allow_read.into());
        }
    }
    (fs, notes)
}

/// A pattern as sandbox-runtime writes a path: `/abs`, `./rel` (the
/// directory srt runs in) or `~/home`.
fn render(p: &FilePattern) -> String {
    let mut out = match p.anchor() {
        Anchor::Root => String::new(),
        Anchor::Workspace => ".".into(),
        Anchor::Home => "~".into(),
    };
    for s in p.segments() {
        out.push('/');
        match s {
            Segment::Literal(t) | Segment::Glob(t) => out.push_str(t),
            Segment::AnyDepth => out.push_str("**"),
        }
    }
    if out.is_empty() { "/".into() } else { out }
}

/// `inner` (a literal) lies strictly below the literal `outer`, with the
/// same anchor.
fn inside(inner: &FilePattern, outer: &FilePattern) -> bool {
    match (inner.literal(), outer.literal()) {
        (Some(i), Some(o)) => {
            inner.anchor() == outer.anchor() && i.len() > o.len() && i.starts_with(&o)
        }
        _ => false,
    }
}
