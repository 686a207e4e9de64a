//! Properties (docs/language.md#properties): `never|always OUTCOME
//! PATTERN`, proved over every query of the pattern. For the kinds the
//! diff decides exactly (connect, dns, socket, upstream, web_search, tool,
//! prompt, app, mcp) the query space is cut into the same cells, with the
//! pattern's own boundaries added as cuts, so that every cell lies wholly
//! inside or wholly outside the pattern and one witness decides it; a
//! proof covers every query. `write` and `read` are decided on the
//! file classes (`files.rs`) and `exec` on the command-rule trie
//! (`exec.rs`); what neither covers (files in another workspace, a shell
//! wrapper's scripts after `exec bash *`) is sampled: queries drawn from
//! the pattern, never reported as proved.

use crate::build::Build;
use crate::compile::Policy;
use crate::decision::{Decision, Outcome};
use crate::query::Query;
use crate::source::{FileId, Span};
use crate::syntax::ast::{HostPattern, Item, Pattern, PropStmt};

use super::cells::{Atoms, HostClass, VIAS, annotations};
use super::covers::{host_in, in_pattern};

/// One claim of a `properties` block, ready to prove.
#[derive(Clone, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub struct PropertyCase {
    /// The source's name.
    pub file: String,
    /// The claim's line, from 1.
    pub line: usize,
    /// The claim's column, from 1, in characters.
    pub column: usize,
    /// The claim's place in the sources.
    pub span: Span,
    /// The block's description, when it has one.
    pub block: Option<String>,
    /// The policy named by the last `policy NAME` before it in its block;
    /// `None`: every policy of the set.
    pub policy: Option<String>,
    /// `always` rather than `never`.
    pub always: bool,
    /// `allow`, `ask` or `deny`.
    pub outcome: String,
    /// The set of queries ([`PropertyCase::covers`] asks whether a query
    /// lies in it).
    pub(crate) pattern: Pattern,
    /// The claim as written (`never allow connect 169.254.169.254:*`).
    pub text: String,
}

/// What proving a claim for one policy found.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Verdict {
    /// No query of the pattern breaks the claim: every one was decided
    /// (`cells` classes of queries, each decided alike).
    Proved {
        /// How many classes of queries were decided.
        cells: usize,
    },
    /// A query of the pattern breaks the claim.
    Refuted {
        /// The query.
        counterexample: Query,
        /// How the policy decides it.
        decision: Decision,
    },
    /// No query drawn from the pattern breaks the claim, but the domain is
    /// not decided exactly (`write`, `read`, `exec`).
    NotRefuted {
        /// How many queries were drawn.
        sampled: usize,
    },
}

/// The outcome's class a claim names: `allow` (allow and the modes and
/// verdicts that let it happen), `ask`, or `deny` (everything that refuses).
pub fn outcome_class(o: Outcome) -> &'static str {
    match o {
        Outcome::Allow | Outcome::Approved | Outcome::Live | Outcome::Cached => "allow",
        Outcome::Ask => "ask",
        Outcome::Review => "review",
        Outcome::Deny
        | Outcome::Denied
        | Outcome::TimedOut
        | Outcome::Aborted
        | Outcome::Disabled
        | Outcome::Indexed => "deny",
    }
}

impl PropertyCase {
    /// Whether a decision keeps the claim.
    pub fn holds(&self, d: &Decision) -> bool {
        (outcome_class(d.outcome) == self.outcome) == self.always
    }

    /// Whether a query lies in the claim's pattern.
    pub fn covers(&self, q: &Query) -> bool {
        in_pattern(&self.pattern, q)
    }
}

impl Build {
    /// Every claim of every `properties` block, in source order.
    pub fn properties(&self) -> Vec<PropertyCase> {
        let mut out = Vec::new();
        for (file, (_, src)) in self.files.iter().zip(self.sources.files()) {
            for item in &file.items {
                let Item::Properties(b) = item else { continue };
                let mut policy = None;
                for s in &b.stmts {
                    match s {
                        PropStmt::Policy(n) => policy = Some(n.node.clone()),
                        PropStmt::Claim(c) => {
                            let at = src.line_col(c.span.start);
                            let q = if c.always { "always" } else { "never" };
                            out.push(PropertyCase {
                                file: src.name.clone(),
                                line: at.line,
                                column: at.column,
                                span: c.span,
                                block: b.description.as_ref().map(|d| d.value.clone()),
                                policy: policy.clone(),
                                always: c.always,
                                outcome: c.outcome.node.clone(),
                                pattern: c.pattern.clone(),
                                text: format!("{q} {} {}", c.outcome.node, c.pattern_text),
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// Proves `case` for `policy`, one of this build's compiled policies.
    pub fn prove(&self, case: &PropertyCase, policy: &Policy) -> Verdict {
        let mut cells = 0usize;
        let mut check = |q: Query| -> Option<Verdict> {
            cells += 1;
            let d = policy.decide(&q);
            (!case.holds(&d)).then_some(Verdict::Refuted {
                counterexample: q,
                decision: d,
            })
        };
        #[cfg(feature = "exact-files")]
        if let Pattern::Write { glob, workspace } | Pattern::Read { glob, workspace } =
            &case.pattern
            && workspace.as_deref().is_none_or(|w| w == SAMPLE_WORKSPACE)
            && let Some(paths) = super::files::FileClasses::covered(policy, glob)
        {
            let write = matches!(case.pattern, Pattern::Write { .. });
            for path in paths {
                let (workspace, home) = (
                    Some(SAMPLE_WORKSPACE.to_string()),
                    Some(SAMPLE_HOME.to_string()),
                );
                let q = if write {
                    Query::Write {
                        path,
                        workspace,
                        home,
                    }
                } else {
                    Query::Read {
                        path,
                        workspace,
                        home,
                    }
                };
                if let Some(v) = check(q) {
                    return v;
                }
            }
            return Verdict::Proved { cells };
        }
        if let Pattern::Exec { words, rest } = &case.pattern
            && let Some((argvs, exact)) = super::exec::covered(policy, words, *rest)
        {
            for argv in argvs {
                for escalate in [false, true] {
                    if let Some(v) = check(Query::Exec {
                        argv: argv.clone(),
                        escalate,
                    }) {
                        return v;
                    }
                }
            }
            if exact {
                return Verdict::Proved { cells };
            }
            // A shell wrapper's scripts may follow the words: drawn.
            for q in samples(&case.pattern) {
                if let Some(v) = check(q) {
                    return v;
                }
            }
            return Verdict::NotRefuted { sampled: cells };
        }
        let queries = match &case.pattern {
            Pattern::Write { .. } | Pattern::Read { .. } | Pattern::Exec { .. } => {
                let samples = samples(&case.pattern);
                let n = samples.len();
                for q in samples {
                    if let Some(v) = check(q) {
                        return v;
                    }
                }
                return Verdict::NotRefuted { sampled: n };
            }
            p => exact_queries(&self.files, p),
        };
        let Some(queries) = queries else {
            // The pattern's own cuts could not be read: nothing proved.
            return Verdict::NotRefuted { sampled: 0 };
        };
        for q in queries {
            if let Some(v) = check(q) {
                return v;
            }
        }
        Verdict::Proved { cells }
    }
}

/// One query per class of the pattern's queries, every class covered.
fn exact_queries(files: &[crate::syntax::ast::File], p: &Pattern) -> Option<Vec<Query>> {
    let cuts = cut_file(p)?;
    let atoms = Atoms::of(&[files, std::slice::from_ref(&cuts)]);
    let mut out = Vec::new();
    match p {
        Pattern::Connect { .. } => {
            for (class, host) in atoms.host_classes() {
                let probe = Query::Connect {
                    host: host.clone(),
                    port: 0,
                    via: crate::query::Via::Http,
                };
                if !host_in(p, &probe) {
                    continue;
                }
                for (lo, hi) in atoms.ports_for(class) {
                    let port = [443u16, 80]
                        .into_iter()
                        .find(|x| (lo..=hi).contains(x))
                        .unwrap_or(lo);
                    for via in VIAS {
                        let q = Query::Connect {
                            host: host.clone(),
                            port: i64::from(port),
                            via,
                        };
                        if in_pattern(p, &q) {
                            out.push(q);
                        }
                    }
                }
            }
        }
        Pattern::Dns(_) => {
            for (class, host) in atoms.host_classes() {
                let q = Query::Dns { name: host };
                if matches!(class, HostClass::Name { .. }) && in_pattern(p, &q) {
                    out.push(q);
                }
            }
        }
        Pattern::Socket(path) => match path {
            Some(path) => out.push(Query::Socket { path: path.clone() }),
            None => {
                for path in atoms.sockets.iter().cloned() {
                    out.push(Query::Socket { path });
                }
                out.push(Query::Socket {
                    path: atoms.fresh_socket(),
                });
            }
        },
        Pattern::Upstream => out.push(Query::Upstream),
        Pattern::WebSearch => out.push(Query::WebSearch),
        Pattern::Tool(t) => {
            for perm in crate::vocab::Permission::ALL {
                if t.as_deref().is_none_or(|t| t == perm.as_str()) {
                    out.push(Query::Tool {
                        permission: perm.as_str().to_string(),
                    });
                }
            }
        }
        Pattern::Prompt(c) => {
            for cat in crate::vocab::PromptCategory::ALL {
                if c.as_deref().is_none_or(|c| c == cat.as_str()) {
                    out.push(Query::Prompt { category: *cat });
                }
            }
        }
        Pattern::App(name) => {
            // A fresh name stands for every name no side mentions.
            let names: Vec<String> = match name {
                Some(n) => vec![n.clone()],
                None => {
                    let fresh = (0..)
                        .map(|k| format!("gh-witness-{k}"))
                        .find(|n| atoms.apps.binary_search(n).is_err())?;
                    atoms.apps.iter().cloned().chain([fresh]).collect()
                }
            };
            // A program is denied when any component of its path is a
            // denied name: besides the name alone, a path through each
            // name either side denies.
            for n in names {
                out.push(Query::App {
                    program: format!("/usr/bin/{n}"),
                });
                for d in &atoms.apps {
                    out.push(Query::App {
                        program: format!("/{d}/{n}"),
                    });
                }
                out.push(Query::App { program: n });
            }
        }
        Pattern::Mcp { server, tool } => {
            mcp_queries(&atoms, server.as_deref(), tool.as_deref(), &mut out)
        }
        Pattern::Write { .. } | Pattern::Read { .. } | Pattern::Exec { .. } => return None,
    }
    Some(out)
}

/// Every MCP call of the pattern: each server it names (or every named
/// server and one unnamed), each tool it names (or every tool named for
/// that server and one unnamed), under every combination of annotations.
fn mcp_queries(atoms: &Atoms, server: Option<&str>, tool: Option<&str>, out: &mut Vec<Query>) {
    let fresh = |taken: &[String]| {
        (0..)
            .map(|k| format!("gh-witness-{k}"))
            .find(|n| !taken.contains(n))
            .unwrap_or_default()
    };
    let named: Vec<String> = atoms.mcp.iter().map(|(s, _)| s.clone()).collect();
    let servers: Vec<String> = match server {
        Some(s) => vec![s.to_string()],
        None => named.iter().cloned().chain([fresh(&named)]).collect(),
    };
    for s in servers {
        let tools: Vec<String> = match tool {
            Some(t) => vec![t.to_string()],
            None => {
                let known: Vec<String> = atoms
                    .mcp
                    .iter()
                    .find(|(n, _)| *n == s)
                    .map(|(_, t)| t.clone())
                    .unwrap_or_default();
                let f = fresh(&known);
                known.into_iter().chain([f]).collect()
            }
        };
        for t in tools {
            for i in 0..27 {
                out.push(Query::Mcp {
                    server: s.clone(),
                    tool: t.clone(),
                    annotations: annotations(i),
                });
            }
        }
    }
}

/// A file whose one policy names the pattern's boundaries as rules, so
/// that the cells are cut at them.
fn cut_file(p: &Pattern) -> Option<crate::syntax::ast::File> {
    let ports = |ports: &Option<Vec<crate::syntax::ast::PortRange>>| match ports {
        None => String::new(),
        Some(list) => format!(
            " port {}",
            list.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    let rule = match p {
        Pattern::Connect { host, ports: ps } => {
            let target = match host {
                HostPattern::Any => "domain *".to_string(),
                HostPattern::Domain(d) => format!("domain {}", crate::query::quote_string(d)),
                HostPattern::Ip(ip) => format!("ip {ip}"),
                HostPattern::Cidr(n) => format!("cidr {n}"),
            };
            format!("allow {target}{}", ports(ps))
        }
        Pattern::Dns(d) => format!("allow domain {}", crate::query::quote_string(d)),
        _ => String::new(),
    };
    let text = format!("policy gh-property {{\n  network {{\n    {rule}\n  }}\n}}\n");
    let (file, diags) = crate::syntax::parse_file(FileId(0), &text);
    diags.is_empty().then_some(file)
}

/// The workspace and home sampled `write`/`read` patterns are read in.
pub const SAMPLE_WORKSPACE: &str = "/workspace/project";
/// The home `~` stands for in a sampled pattern.
pub const SAMPLE_HOME: &str = "/home/agent";

/// Queries drawn from a `write`, `read` or `exec` pattern.
fn samples(p: &Pattern) -> Vec<Query> {
    match p {
        Pattern::Write { glob, workspace } | Pattern::Read { glob, workspace } => {
            let ws = workspace.clone().unwrap_or_else(|| SAMPLE_WORKSPACE.into());
            let mut out = Vec::new();
            for path in instances(glob) {
                let abs = if let Some(rest) = path.strip_prefix("~/") {
                    format!("{SAMPLE_HOME}/{rest}")
                } else if path.starts_with('/') {
                    path
                } else {
                    format!("{}/{path}", ws.trim_end_matches('/'))
                };
                let abs = if abs.len() > 1 {
                    abs.trim_end_matches('/').to_string()
                } else {
                    abs
                };
                let (workspace, home) = (Some(ws.clone()), Some(SAMPLE_HOME.to_string()));
                out.push(match p {
                    Pattern::Write { .. } => Query::Write {
                        path: abs,
                        workspace,
                        home,
                    },
                    _ => Query::Read {
                        path: abs,
                        workspace,
                        home,
                    },
                });
            }
            out.sort_by_key(ToString::to_string);
            out.dedup();
            out
        }
        Pattern::Exec { words, rest } => {
            let tails: &[&[&str]] = if *rest {
                &[
                    &[],
                    &["/"],
                    &["."],
                    &["x"],
                    &["-v", "x"],
                    &["--", "/"],
                    &["~"],
                    &["*"],
                    &["/tmp/x", "y"],
                    &["$HOME"],
                ]
            } else {
                &[&[]]
            };
            let mut out = Vec::new();
            for tail in tails {
                let argv: Vec<String> = words
                    .iter()
                    .cloned()
                    .chain(tail.iter().map(|s| s.to_string()))
                    .collect();
                if argv.is_empty() {
                    continue;
                }
                for escalate in [false, true] {
                    out.push(Query::Exec {
                        argv: argv.clone(),
                        escalate,
                    });
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// Paths a glob matches: each `**` as nothing, one and two folders, each
/// `*` as a few names, `?` as one letter, `[...]` as its first member.
pub(crate) fn instances(glob: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        let choices: Vec<String> = match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                let slash = chars.peek() == Some(&'/');
                if slash {
                    chars.next();
                }
                let s = if slash { "/" } else { "" };
                vec![
                    String::new(),
                    format!("a{s}"),
                    format!("hooks/pre-commit{s}"),
                    format!("a/b/c{s}"),
                ]
            }
            '*' => vec!["x".into(), "pre-commit".into(), ".env".into()],
            '?' => vec!["a".into()],
            '[' => {
                let mut first = None;
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                    if first.is_none() && d != '!' && d != '^' {
                        first = Some(d);
                    }
                }
                vec![first.map(String::from).unwrap_or_default()]
            }
            c => vec![c.to_string()],
        };
        let mut next = Vec::new();
        for prefix in &out {
            for ch in &choices {
                if next.len() < 256 {
                    next.push(format!("{prefix}{ch}"));
                }
            }
        }
        out = next;
    }
    out.retain(|p| !p.is_empty() && !p.contains("//"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_is_drawn_from() {
        let got = instances(".git/**");
        assert!(
            got.contains(&".git/hooks/pre-commit".to_string()),
            "{got:?}"
        );
        assert!(got.contains(&".git/".to_string()), "{got:?}");
        assert_eq!(instances("a?c"), vec!["aac".to_string()]);
    }

    #[test]
    fn outcome_classes() {
        assert_eq!(outcome_class(Outcome::Live), "allow");
        assert_eq!(outcome_class(Outcome::TimedOut), "deny");
    }
}
