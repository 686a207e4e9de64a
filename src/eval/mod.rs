//! Evaluation: compiled policy + query → [`Decision`].
//!
//! The typed methods of [`Policy`] (`connect`, `dns`, `resolved`, `socket`,
//! `listen`, `tool`, `app`, ...) are the hot path. [`Policy::decide`] takes an
//! owned [`Query`] (the JSON and text forms) and never panics: an internal
//! failure is a deny with reason `internal_error`.

mod agent;
#[cfg(feature = "diff")]
pub(crate) use agent::{argv_valid, wrapper_script};

/// Whether `name` is a shell's (a word after it is shell text).
#[cfg(feature = "diff")]
pub(crate) fn is_shell(name: &str) -> bool {
    words::SHELLS.contains(&name)
}
mod files;
mod files_view;
pub(crate) mod known_safe;
mod network;
#[cfg(feature = "diff")]
pub(crate) use network::listen_addr;
mod review;
#[cfg(feature = "diff")]
pub(crate) use review::wrapper_shaped;
pub(crate) mod shell;
mod tools;
pub(crate) mod words;

use serde::Serialize;

use crate::decision::{Decision, Escalation, Reason, RuleRef};
pub use agent::Workspace;
pub use files_view::{BoundFileRule, FileAccess, FileSandbox, FileView};

use crate::compile::{Policy, PolicySet};
use crate::query::{Query, QueryRef};

fn port_u16(p: i64) -> u16 {
    // Out of range means invalid: port 0 is never a destination.
    u16::try_from(p).unwrap_or(0)
}

impl Policy {
    /// Decides an owned query. A `write` query without a workspace is
    /// decided in the workspace it names, unbound (see [`Policy::decide_in`]).
    pub fn decide(&self, query: &Query) -> Decision {
        self.decide_in(query, None)
    }

    /// Decides an owned query; `workspace` is the bound workspace for
    /// `write` queries (its `.git` pointer already read).
    pub fn decide_in(&self, query: &Query, workspace: Option<&Workspace>) -> Decision {
        let run = || self.decide_inner(query, workspace);
        match std::panic::catch_unwind(run) {
            Ok(r) => r,
            Err(_) => Decision::deny(Reason::InternalError, None),
        }
    }

    /// Decides a borrowed query ([`QueryRef`]) — the same decision as the
    /// owned form's, without copying what it asks about. Never panics: an
    /// internal surprise is a deny (`internal_error`).
    ///
    /// ```
    /// use gatehouse::query::{QueryRef, Via};
    /// use gatehouse::source::SourceMap;
    /// let mut sources = SourceMap::new();
    /// sources.add("p.policy", "policy p { network { default deny\n allow domain github.com } }");
    /// let set = gatehouse::PolicySet::from_sources(sources).expect("builds");
    /// let p = set.single().expect("one policy");
    /// let d = p.decide_ref(QueryRef::Connect { host: "GitHub.com.", port: 443, via: Via::Https });
    /// assert!(d.is_allow());
    /// let addrs = ["10.0.0.1".parse().expect("ip")];
    /// let d = p.decide_ref(QueryRef::Resolved { host: "github.com", addrs: &addrs, port: Some(443) });
    /// assert_eq!(d.reason.as_str(), "non_public_resolution");
    /// ```
    pub fn decide_ref(&self, query: QueryRef<'_>) -> Decision {
        let run = || match query {
            QueryRef::Connect { host, port, via } => self.connect(host, port, via),
            QueryRef::ConnectAddr { addr, port, via } => self.connect_addr(addr, port, via),
            QueryRef::Dns { name } => self.dns(name),
            QueryRef::Resolved { host, addrs, port } => self.resolved_addrs(host, addrs, port),
            QueryRef::Socket { path } => self.socket(path),
            QueryRef::Upstream => self.upstream(),
            QueryRef::Tool { permission } => self.tool(permission),
            QueryRef::App { program } => self.app(program),
            QueryRef::Exec { argv, escalate } => self.exec(argv, escalate),
            QueryRef::Owned(q) => self.decide_inner(q, None),
        };
        match std::panic::catch_unwind(run) {
            Ok(r) => r,
            Err(_) => Decision::deny(Reason::InternalError, None),
        }
    }

    fn decide_inner(&self, query: &Query, workspace: Option<&Workspace>) -> Decision {
        match query {
            Query::Connect { host, port, via } => self.connect(host, port_u16(*port), *via),
            Query::Dns { name } => self.dns(name),
            Query::Resolved { host, addrs, port } => self.resolved(host, addrs, port.map(port_u16)),
            Query::Socket { path } => self.socket(path),
            Query::Listen { addr } => self.listen(addr),
            Query::Upstream => self.upstream(),
            Query::Tool { permission } => self.tool(permission),
            Query::App { program } => self.app(program),
            Query::WebSearch => self.web_search(),
            Query::Write {
                path,
                workspace: named,
                home,
            }
            | Query::Read {
                path,
                workspace: named,
                home,
            } => {
                // The bound workspace, else the named one; a home the
                // query names wins over a bound one.
                let ws = match (workspace, named) {
                    (Some(ws), _) => ws.clone(),
                    (None, Some(root)) => Workspace::new(root.clone()),
                    (None, None) => return Decision::deny(Reason::InvalidPath, None),
                };
                let ws = match home {
                    Some(h) => ws.with_home(Some(h.clone())),
                    None => ws,
                };
                if matches!(query, Query::Read { .. }) {
                    self.read(path, &ws)
                } else {
                    self.write(path, &ws)
                }
            }
            Query::Exec { argv, escalate } => self.exec(argv, *escalate),
            Query::Mcp {
                server,
                tool,
                annotations,
            } => self.mcp(server, tool, annotations),
            Query::Prompt { category } => self.prompt(*category),
            Query::Review { action, assessment } => self.review(action, assessment),
        }
    }
}

/// A decision as reported in JSON (README, `policyc eval`, the WASM
/// build): the outcome and reason as words, the deciding rule resolved.
///
/// ```
/// use gatehouse::{PolicySet, Query};
///
/// let set = PolicySet::from_source("p.policy", "policy p {\n  network {\n    allow domain github.com\n  }\n}\n")?;
/// let p = set.policy("p").expect("compiled");
/// let d = p.decide(&Query::parse("connect github.com:443")?);
/// let json = serde_json::to_string(&set.report(p, &d)).expect("serialises");
/// assert_eq!(
///     json,
///     r#"{"decision":"allow","reason":"allowed_by_rule","policy":"p","rule":{"file":"p.policy","line":3,"column":5,"source":"allow domain github.com"}}"#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct DecisionReport<'a> {
    /// The outcome's word.
    pub decision: &'static str,
    /// The reason code.
    pub reason: &'static str,
    /// The policy that decided.
    pub policy: &'a str,
    /// The deciding rule, or `null` for a default.
    pub rule: Option<RuleRef<'a>>,
    /// Who may approve a `not_allowed` connect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Escalation>,
    /// The HTTP-style status of a denied tool call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// A review verdict's final risk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<crate::vocab::RiskLevel>,
    /// A review verdict's final category.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<crate::vocab::RiskCategory>,
    /// The deciding rule's `because` text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub because: Option<&'a str>,
}

impl PolicySet {
    /// A decision with its deciding rule resolved, ready to print.
    pub fn report<'a>(&'a self, policy: &'a Policy, d: &Decision) -> DecisionReport<'a> {
        DecisionReport {
            decision: d.outcome.as_str(),
            reason: d.reason.as_str(),
            policy: policy.name(),
            rule: d.rule.and_then(|r| self.rule(r)),
            escalation: d.escalation,
            status: d.status,
            risk: d.risk,
            category: d.category,
            because: d.rule.and_then(|r| self.rule(r)).and_then(|r| r.because),
        }
    }
}
