//! Lints of `permissions` and `commands` blocks: rules that contradict each
//! other, and rules that can never decide because another one always does
//! first. Each is a warning with the other rule as a related location and a
//! help line. (The `network` block's lints are in [`super::network`].)

use std::collections::HashMap;

use crate::diag::Diagnostic;
use crate::syntax::ast::*;

/// `allow P` and `deny P` in one block; the same permission twice.
pub(super) fn permissions(stmts: &[PermStmt], diags: &mut Vec<Diagnostic>) {
    // The first rule of each effect for each permission.
    let mut seen: HashMap<(Permission, Effect), &Spanned<Permission>> = HashMap::new();
    for st in stmts {
        let PermStmt::Rule {
            effect,
            permissions,
            ..
        } = st
        else {
            continue;
        };
        for p in permissions {
            if let Some(first) = seen.get(&(p.node, *effect)) {
                diags.push(
                    Diagnostic::warning(
                        "covered_rule",
                        format!("`{}` is already {}", p.node.as_str(), past(*effect)),
                        p.span,
                    )
                    .with_label(first.span, "first written here")
                    .with_help(Some("remove the repeated permission".into())),
                );
                continue;
            }
            let other = match effect {
                Effect::Allow => Effect::Deny,
                Effect::Deny => Effect::Allow,
            };
            if let Some(o) = seen.get(&(p.node, other)) {
                let (allow, deny) = match effect {
                    Effect::Allow => (p, *o),
                    Effect::Deny => (*o, p),
                };
                diags.push(
                    Diagnostic::warning(
                        "contradictory_rules",
                        format!(
                            "`{}` is both allowed and denied; the deny decides",
                            p.node.as_str()
                        ),
                        allow.span,
                    )
                    .with_label(deny.span, "denied here, and deny wins")
                    .with_help(Some(format!(
                        "remove `{}` from the allow rule, or the deny rule if it should be allowed",
                        p.node.as_str()
                    ))),
                );
            }
            seen.insert((p.node, *effect), p);
        }
    }
}

fn past(e: Effect) -> &'static str {
    match e {
        Effect::Allow => "allowed",
        Effect::Deny => "denied",
    }
}

/// Whether every argv that `narrow` matches is also matched by `broad`:
/// `broad` is no longer, and at each of its positions admits every
/// alternative `narrow` admits.
fn covers(broad: &CommandRule, narrow: &CommandRule) -> bool {
    broad.pattern.len() <= narrow.pattern.len()
        && broad.pattern.iter().zip(&narrow.pattern).all(|(b, n)| {
            n.alternatives
                .iter()
                .all(|a| b.alternatives.iter().any(|x| x == a))
        })
}

fn text(r: &CommandRule) -> String {
    let words: Vec<String> = r
        .pattern
        .iter()
        .map(|w| match w.alternatives.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(" ")),
        })
        .collect();
    format!("{} {}", r.effect.as_str(), words.join(" "))
}

/// What is wrong with a command rule, given another that covers it.
#[derive(Clone, Copy)]
enum Finding {
    /// The same words and effect again.
    Repeated,
    /// A `prompt` and a `forbid` of the same words.
    Contradictory,
    /// A stricter rule covers it, so it never decides.
    Dead,
    /// A broader `allow` covers this `allow`.
    Covered,
}

/// The strictest matching rule decides (forbid > prompt > allow). A rule
/// another one covers with a stricter effect never decides; an allow that a
/// broader allow covers adds nothing; a rule written twice is reported
/// once. A `prompt` and a `forbid` on the same prefix contradict each other.
/// A narrower `prompt` or `forbid` under a broader one of the same effect
/// is kept quiet: its `because` text may be the point of it.
pub(super) fn commands(rules: &[CommandRule], diags: &mut Vec<Diagnostic>) {
    // Rules by each alternative of their first word, so that a rule is
    // compared only with rules for the same program.
    let mut by_program: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, r) in rules.iter().enumerate() {
        for a in r.pattern.first().map_or(&[][..], |w| &w.alternatives[..]) {
            by_program.entry(a.as_str()).or_default().push(i);
        }
    }
    for (i, r) in rules.iter().enumerate() {
        let Some(first) = r.pattern.first() else {
            continue;
        };
        let mut candidates: Vec<usize> = first
            .alternatives
            .iter()
            .flat_map(|a| by_program.get(a.as_str()).into_iter().flatten().copied())
            .filter(|&j| j != i)
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let mut report: Option<(usize, Finding)> = None;
        for j in candidates {
            let Some(o) = rules.get(j) else { continue };
            if !covers(o, r) {
                continue;
            }
            let same_words = covers(r, o);
            let kind = if same_words && o.effect == r.effect {
                // Word for word again: reported at the later one.
                (j < i).then_some(Finding::Repeated)
            } else if same_words
                && matches!(
                    (o.effect, r.effect),
                    (CommandEffect::Forbid, CommandEffect::Prompt)
                        | (CommandEffect::Prompt, CommandEffect::Forbid)
                )
            {
                // Reported once, at the prompt.
                (r.effect == CommandEffect::Prompt).then_some(Finding::Contradictory)
            } else if o.effect > r.effect {
                Some(Finding::Dead)
            } else if o.effect == r.effect && r.effect == CommandEffect::Allow {
                Some(Finding::Covered)
            } else {
                None
            };
            if let Some(k) = kind {
                report = Some((j, k));
                break;
            }
        }
        let Some((j, kind)) = report else { continue };
        let Some(o) = rules.get(j) else { continue };
        let d = match kind {
            Finding::Repeated => Diagnostic::warning(
                "covered_rule",
                "this rule is written word for word above",
                r.span,
            )
            .with_label(o.span, "first written here")
            .with_help(Some("remove one of the two rules".into())),
            Finding::Contradictory => Diagnostic::warning(
                "contradictory_rules",
                format!(
                    "`{}` and `{}` name the same command; the forbid decides",
                    text(r),
                    text(o)
                ),
                r.span,
            )
            .with_label(o.span, "forbidden here, and forbid wins over prompt")
            .with_help(Some(
                "keep one of the two: `forbid` refuses the command, `prompt` asks a person".into(),
            )),
            Finding::Dead => Diagnostic::warning(
                if r.effect == CommandEffect::Allow {
                    "dead_allow"
                } else {
                    "dead_rule"
                },
                format!("this `{}` rule never decides anything", r.effect.as_str()),
                r.span,
            )
            .with_label(
                o.span,
                format!(
                    "this `{}` rule matches every command it matches, and {} wins over {}",
                    o.effect.as_str(),
                    o.effect.as_str(),
                    r.effect.as_str()
                ),
            )
            .with_help(Some(format!(
                "remove `{}`, or narrow `{}`",
                text(r),
                text(o)
            ))),
            Finding::Covered => {
                Diagnostic::warning("covered_rule", "this rule never decides anything", r.span)
                    .with_label(
                        o.span,
                        "this broader allow already matches every command it matches",
                    )
                    .with_help(Some(format!("remove `{}`", text(r))))
            }
        };
        diags.push(d);
    }
}
