//! Dead and covered file rules in a `sandbox` block
//! (docs/language.md#file-rules): a rule that can never decide a path.
//!
//! - the same pattern twice with the same access (`duplicate_file_rule`);
//! - the same pattern with another access: the weakest wins, the other
//!   never decides (`shadowed_file_rule`);
//! - a path inside an ancestor with the same access and no rule between
//!   them, or inside a glob that already takes at least as much away
//!   (`covered_file_rule`).

use crate::diag::Diagnostic;
use crate::normalize::{Anchor, FilePattern, Segment};
use crate::source::Span;
use crate::syntax::ast::{SandboxMode, SandboxSection, SandboxStmt};

/// Access, weakest first (as the engine orders it).
#[derive(Clone, Copy, Debug, Eq, PartialEq, Ord, PartialOrd)]
enum Access {
    None,
    Read,
    Write,
}

impl Access {
    fn keyword(self) -> &'static str {
        match self {
            Access::None => "none",
            Access::Read => "read",
            Access::Write => "writable",
        }
    }
}

struct Rule {
    access: Access,
    pattern: FilePattern,
    text: String,
    span: Span,
}

/// The warnings for one `sandbox` section.
pub(super) fn lint(sb: &SandboxSection, diags: &mut Vec<Diagnostic>) {
    let workspace_write = sb
        .modes
        .first()
        .is_none_or(|m| m.node == SandboxMode::WorkspaceWrite);
    let mut tmp = workspace_write;
    let mut rules: Vec<Rule> = Vec::new();
    for st in sb.block.iter().flatten() {
        let (access, values) = match st {
            SandboxStmt::Writable(v, _) => (Access::Write, v),
            SandboxStmt::Read(v, _) => (Access::Read, v),
            SandboxStmt::None(v, _) => (Access::None, v),
            SandboxStmt::Exclude(..) => {
                tmp = false;
                continue;
            }
            SandboxStmt::Protect(..) => continue,
        };
        for v in values {
            if let Ok(pattern) = FilePattern::parse(&v.node) {
                rules.push(Rule {
                    access,
                    pattern,
                    text: v.node.clone(),
                    span: v.span,
                });
            }
        }
    }
    for (i, r) in rules.iter().enumerate() {
        if let Some(d) = dead(r, i, &rules, workspace_write, tmp) {
            diags.push(d);
        }
    }
}

fn warn(code: &'static str, r: &Rule, message: String, by: Option<(&Rule, &str)>) -> Diagnostic {
    let d = Diagnostic::warning(code, message, r.span).with_help(Some(
        "remove it, or give it an access that differs from the rules around it".into(),
    ));
    match by {
        Some((o, label)) => d.with_label(o.span, label.to_string()),
        None => d,
    }
}

/// Why rule `i` never decides a path, if it never does.
fn dead(
    r: &Rule,
    i: usize,
    rules: &[Rule],
    workspace_write: bool,
    tmp: bool,
) -> Option<Diagnostic> {
    let kw = r.access.keyword();
    for (j, o) in rules.iter().enumerate() {
        if j == i || o.pattern != r.pattern {
            continue;
        }
        if o.access == r.access && j < i {
            let m = format!("`{kw} \"{}\"` is written twice", r.text);
            return Some(warn("duplicate_file_rule", r, m, Some((o, "first here"))));
        }
        if o.access < r.access {
            let m = format!(
                "`{kw} \"{}\"` never decides: `{} \"{}\"` names the same paths, and the weaker access wins",
                r.text,
                o.access.keyword(),
                o.text
            );
            return Some(warn(
                "shadowed_file_rule",
                r,
                m,
                Some((o, "this rule wins")),
            ));
        }
    }
    // A glob that covers the rule's whole tree and takes at least as much.
    for o in rules {
        if o.pattern.is_literal() || o.pattern == r.pattern || o.access > r.access {
            continue;
        }
        if same_tree(&o.pattern, &r.pattern) {
            let m = format!(
                "`{kw} \"{}\"` never decides: `{} \"{}\"` covers every path beneath it with no more access",
                r.text,
                o.access.keyword(),
                o.text
            );
            return Some(warn("covered_file_rule", r, m, Some((o, "this glob"))));
        }
    }
    let lit = r.pattern.literal()?;
    // The nearest literal ancestor, written or implied.
    let mut nearest: Option<(usize, Access, Option<&Rule>)> = None;
    for o in rules {
        let Some(ol) = o.pattern.literal() else {
            continue;
        };
        if o.pattern.anchor() != r.pattern.anchor()
            || ol.len() >= lit.len()
            || !lit.starts_with(&ol)
        {
            continue;
        }
        let deeper =
            nearest.is_none_or(|(d, a, _)| ol.len() > d || (ol.len() == d && o.access < a));
        if deeper {
            nearest = Some((ol.len(), o.access, Some(o)));
        }
    }
    let implied = match (r.pattern.anchor(), lit.first()) {
        (Anchor::Workspace, _) if workspace_write => Some(Access::Write),
        (Anchor::Root, Some(&"tmp")) if tmp => Some(Access::Write),
        _ => None,
    };
    match nearest {
        Some((_, a, Some(o))) if a == r.access => {
            let m = format!(
                "`{kw} \"{}\"` never decides: it lies inside `{} \"{}\"`, which gives the same access",
                r.text,
                o.access.keyword(),
                o.text
            );
            Some(warn("covered_file_rule", r, m, Some((o, "this rule"))))
        }
        None if implied == Some(r.access) => {
            let root = if r.pattern.anchor() == Anchor::Workspace {
                "the workspace"
            } else {
                "/tmp"
            };
            let m = format!(
                "`{kw} \"{}\"` never decides: it lies inside {root}, which is writable already",
                r.text
            );
            Some(warn("covered_file_rule", r, m, None))
        }
        _ => None,
    }
}

/// Whether glob `g` matches `r`'s path (same anchor) and so covers its tree.
fn same_tree(g: &FilePattern, r: &FilePattern) -> bool {
    if g.anchor() != r.anchor() {
        return false;
    }
    let Some(lit) = r.literal() else {
        // Two globs: only a `**`-led glob is known to cover another's tree
        // when its tail is the other's tail.
        return matches!(g.segments(), [Segment::AnyDepth, rest @ ..] if r.segments().ends_with(rest) && !rest.is_empty());
    };
    g.covers(&[], &lit)
}
