//! Guardian verdicts on the auto-reviewer's assessment (docs/language.md#guardian):
//! the seven steps, in order. A verdict can only be stricter than the
//! assessment, never looser.

use std::borrow::Cow;

use super::known_safe::trusted_name;
use super::shell::{self, Script};
use crate::compile::Policy;
use crate::compile::guardian::GMatcher;
use crate::decision::{Decision, Outcome, Reason, RuleId};
use crate::normalize::path::lexical_path;
use crate::normalize::{Host, HostBuf, normalize_host};
use crate::query::{Assessment, Query, ReviewOutcome, ReviewStatus};
use crate::syntax::ast::{AuthLevel, RiskCategory, RiskLevel};

/// What the matchers look at in an action.
#[derive(Default)]
struct Facts {
    /// Command lines (argv joined by single spaces) and wrapper scripts.
    lines: Vec<String>,
    /// The argv and, for a plain wrapper script, each of its commands.
    argvs: Vec<Vec<String>>,
    /// A write's path, and the path-like words of the argvs.
    paths: Vec<String>,
    /// A connect target, normalised.
    host: Option<String>,
    tool: Option<(String, String)>,
}

/// At most this many shell wrappers in one action, the outer one included
/// (as for `exec`, docs/language.md#sandbox).
const MAX_WRAPPERS: usize = 3;

/// Whether a guardian reads `argv` as a wrapper, `PROGRAM -c|-lc SCRIPT`
/// (whatever the program: its script is matched by `command ~` rules).
pub(crate) fn wrapper_shaped(argv: &[String]) -> bool {
    matches!(argv, [_, flag, _] if flag == "-c" || flag == "-lc")
}

/// Adds `argv` and, when it is a wrapper (`PROGRAM -c|-lc SCRIPT` with a
/// trusted program), its script and the commands of that script, nested
/// wrappers included: command and risk rules see every command that would
/// run, however deeply it is wrapped (docs/language.md#sandbox, #guardian).
fn expand(argv: &[String], wrappers: usize, f: &mut Facts, script_words: &mut Vec<String>) {
    f.argvs.push(argv.to_vec());
    let [program, _, script] = argv else {
        return;
    };
    if !wrapper_shaped(argv) {
        return;
    }
    f.lines.push(script.clone());
    script_words.extend(super::words::texts(script));
    if wrappers > MAX_WRAPPERS || trusted_name(program).is_none() {
        return;
    }
    if let Script::Plain(cmds) = shell::split(script) {
        for cmd in &cmds {
            expand(cmd, wrappers + 1, f, script_words);
        }
    }
}

/// A path as written and, when it differs, lexically normalised: a rule
/// for `**/.aws/credentials` also sees `~/.aws/./credentials`.
fn push_path(paths: &mut Vec<String>, word: &str) {
    paths.push(word.to_string());
    if let Cow::Owned(n) = lexical_path(word) {
        paths.push(n);
    }
}

fn facts(action: &Query) -> Facts {
    let mut f = Facts::default();
    match action {
        Query::Exec { argv, .. } => {
            f.lines.push(argv.join(" "));
            // Path-like words of the argv, its commands, and — plain or not —
            // the words of every wrapper's script.
            let mut script_words = Vec::new();
            expand(argv, 1, &mut f, &mut script_words);
            let words: Vec<&String> = f.argvs.iter().flatten().chain(&script_words).collect();
            for w in words {
                if w.contains('/') || w.starts_with('.') || w.starts_with('~') {
                    push_path(&mut f.paths, w);
                }
            }
        }
        Query::Write { path, .. } => push_path(&mut f.paths, path),
        Query::Connect { host, .. } | Query::Dns { name: host } => {
            let mut buf = HostBuf::new();
            f.host = match normalize_host(host, &mut buf) {
                Ok(Host::Name(n)) => Some(n.to_string()),
                Ok(Host::Ip(ip)) => Some(ip.to_string()),
                Err(_) => Some(host.to_ascii_lowercase()),
            };
        }
        Query::Mcp { server, tool, .. } => f.tool = Some((server.clone(), tool.clone())),
        _ => {}
    }
    f
}

fn prefix_matches(pattern: &[Vec<String>], argv: &[String]) -> bool {
    pattern.len() <= argv.len()
        && pattern.iter().zip(argv).enumerate().all(|(i, (alts, w))| {
            // The program also matches by basename, as in `commands` rules.
            let base = super::known_safe::basename(w);
            alts.iter().any(|a| a == w || (i == 0 && a == base))
        })
}

impl Policy {
    /// Which of the guardian's `risk` rules and which of its `deny`
    /// action rules match an action, each in the order they are kept
    /// (what a verdict looks at in the action; the diff compares
    /// guardians by it, docs/diff.md).
    pub(crate) fn guardian_hits(&self, action: &Query) -> (Vec<bool>, Vec<bool>) {
        let g = &self.agent.guardian;
        let f = facts(action);
        let lines: Vec<&str> = f.lines.iter().map(String::as_str).collect();
        let regex_hits = if lines.is_empty() {
            vec![false; g.regex.patterns.len()]
        } else {
            g.regex.matching(&lines)
        };
        let matches = |m: &GMatcher| match m {
            GMatcher::Regex(i) => regex_hits.get(*i).copied().unwrap_or(true),
            GMatcher::Prefix(p) => f.argvs.iter().any(|argv| prefix_matches(p, argv)),
            GMatcher::Path(globs) => f.paths.iter().any(|p| globs.iter().any(|g| g.matches(p))),
            GMatcher::Host(pats) => f
                .host
                .as_deref()
                .is_some_and(|h| pats.iter().any(|p| p.matches_name(h))),
            GMatcher::Tool(tools) => f.tool.as_ref().is_some_and(|(s, t)| {
                tools
                    .iter()
                    .any(|(ps, pt)| (ps == "*" || ps == s) && (pt == "*" || pt == t))
            }),
        };
        (
            g.risks.iter().map(|r| matches(&r.matcher)).collect(),
            g.deny_actions.iter().map(|(m, _)| matches(m)).collect(),
        )
    }

    /// The guardian's verdict on a reviewed action.
    pub fn review(&self, action: &Query, a: &Assessment) -> Decision {
        let g = &self.agent.guardian;
        // 1. How the review itself ended.
        match a.status.unwrap_or(ReviewStatus::Ok) {
            ReviewStatus::Failed => {
                return Decision::new(Outcome::Denied, Reason::FailedClosed, None);
            }
            ReviewStatus::Timeout => {
                return Decision::new(Outcome::TimedOut, Reason::Timeout, None);
            }
            ReviewStatus::Cancelled => {
                return Decision::new(Outcome::Aborted, Reason::Cancelled, None);
            }
            ReviewStatus::Ok => {}
        }
        let (risk_hits, deny_hits) = self.guardian_hits(action);
        // 2. The risk: the assessment's, raised by every matching rule.
        let matching: Vec<_> = g
            .risks
            .iter()
            .zip(&risk_hits)
            .filter(|(_, hit)| **hit)
            .map(|(r, _)| r)
            .collect();
        let assessed = a.risk.unwrap_or(RiskLevel::Low);
        let top = matching
            .iter()
            .max_by_key(|r| (r.level, std::cmp::Reverse(r.rule)));
        let (risk, risk_rule, mut category) = match top {
            Some(r) if r.level >= assessed => (r.level, Some(r.rule), Some(r.category)),
            _ => (
                assessed,
                None,
                a.category.or(matching.first().map(|r| r.category)),
            ),
        };
        let verdict =
            |outcome, reason, rule: Option<RuleId>, category: Option<RiskCategory>| Decision {
                risk: Some(risk),
                category,
                ..Decision::new(outcome, reason, rule)
            };
        // 3. Deny rules: an action rule, or a denied category.
        let categories: Vec<RiskCategory> = matching
            .iter()
            .map(|r| r.category)
            .chain(a.category)
            .collect();
        let by_action = g
            .deny_actions
            .iter()
            .zip(&deny_hits)
            .filter(|(_, hit)| **hit)
            .map(|((_, r), _)| (*r, None));
        let by_category = g
            .deny_categories
            .iter()
            .filter(|(c, _)| categories.contains(c))
            .map(|(c, r)| (*r, Some(*c)));
        if let Some((rule, cat)) = by_action.chain(by_category).min_by_key(|(r, _)| *r) {
            category = cat.or(category);
            return verdict(Outcome::Denied, Reason::DeniedByRule, Some(rule), category);
        }
        // 4. The reviewer's own outcome.
        if a.outcome == Some(ReviewOutcome::Deny) {
            return verdict(Outcome::Denied, Reason::ReviewerDenied, risk_rule, category);
        }
        match risk {
            // 5. Critical is never approved.
            RiskLevel::Critical => {
                verdict(Outcome::Denied, Reason::CriticalRisk, risk_rule, category)
            }
            // 6. High needs enough user authorization.
            RiskLevel::High => {
                if a.user_authorization.unwrap_or(AuthLevel::Unknown) >= g.authorize {
                    verdict(Outcome::Approved, Reason::Approved, risk_rule, category)
                } else {
                    verdict(
                        Outcome::Denied,
                        Reason::InsufficientAuthorization,
                        g.authorize_rule.or(risk_rule),
                        category,
                    )
                }
            }
            // 7. Low and medium proceed when allowed.
            level => {
                if g.allow.contains(&level) {
                    verdict(Outcome::Approved, Reason::Approved, risk_rule, category)
                } else {
                    verdict(
                        Outcome::Denied,
                        Reason::LevelNotAllowed,
                        g.allow_rule,
                        category,
                    )
                }
            }
        }
    }
}
