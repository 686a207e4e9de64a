//! Exports: a policy's network rules in the formats other enforcement points
//! read, for the places gatehouse itself does not run.
//!
//! | function | for | what it writes |
//! |---|---|---|
//! | [`nftables`] | the kernel under the proxy | the ip/cidr layer as an nftables ruleset |
//! | [`cilium`] | Kubernetes with Cilium ≥ 1.19 | a `CiliumNetworkPolicy` (`toFQDNs`, `toCIDRSet`, the DNS-proxy rule) |
//! | [`srt_settings`] | sandbox-runtime | the `network` part of its settings file |
//! | [`srt_lists`] | sandbox-runtime's `srt proxy` decider | the allow and deny lists of the decider's `hello` |
//!
//! An export never widens a policy: a rule the format cannot say exactly is
//! an [`ExportError::Unexpressible`] naming the rule, its place and why,
//! and nothing is written. (The decider's lists are a pre-filter in front
//! of the decider, which decides every request itself; there
//! [`srt_lists`] reports what it left out as notes instead.) The choices
//! are written down in `docs/integrations/`.

mod cilium;
mod nftables;
mod srt;

pub use cilium::{CiliumOptions, cilium};
pub use nftables::{Exits, nftables};
pub use srt::{SrtLists, srt_lists, srt_settings};

use crate::build::Build;
use crate::source::{SourceMap, Span};
use crate::syntax::ast::{Block, NetStmt, Network, SectionKind, policies_of};

/// Why a policy cannot be exported.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// No policy of that name in the set.
    #[error("no policy `{0}`")]
    UnknownPolicy(String),
    /// No name was given and the set holds several policies (or none).
    #[error("several policies: pick one with `--policy NAME`")]
    Ambiguous,
    /// The sources have errors; `policyc check` shows them.
    #[error("the policy set has errors")]
    Invalid,
    /// Rules the format cannot express without changing what they mean.
    #[error("{}", render_unexpressible(.format, .rules))]
    Unexpressible {
        /// The format (`cilium`, `srt`).
        format: &'static str,
        /// Every rule that does not fit, in source order.
        rules: Vec<Unexpressible>,
    },
}

/// One rule an export cannot carry.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Unexpressible {
    /// `file:line:column` of the rule.
    pub at: String,
    /// The rule as written.
    pub rule: String,
    /// Why the format cannot say it.
    pub why: String,
}

fn render_unexpressible(format: &str, rules: &[Unexpressible]) -> String {
    let mut out = format!(
        "{} {} cannot be expressed in {format} without widening or changing the policy:",
        rules.len(),
        if rules.len() == 1 { "rule" } else { "rules" }
    );
    for r in rules {
        out.push_str(&format!("\n  {}: `{}`: {}", r.at, r.rule, r.why));
    }
    out
}

impl Unexpressible {
    pub(crate) fn new(sources: &SourceMap, span: Span, why: impl Into<String>) -> Self {
        let (at, rule) = match sources.get(span.file) {
            Some(f) => {
                let lc = f.line_col(span.start);
                (
                    format!("{}:{}:{}", f.name, lc.line, lc.column),
                    f.slice(span)
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                )
            }
            None => (String::from("?"), String::new()),
        };
        Unexpressible {
            at,
            rule,
            why: why.into(),
        }
    }
}

/// The policy named `name` (or the only one) of a build without errors,
/// composed with the set's requirements: what every export reads.
pub(crate) fn policy_block(build: &Build, name: Option<&str>) -> Result<Block, ExportError> {
    if build.has_errors() {
        return Err(ExportError::Invalid);
    }
    let files = build.files.as_slice();
    let policies = policies_of(files);
    let block = match name {
        Some(n) => policies
            .iter()
            .find(|b| b.name.node == n)
            .ok_or_else(|| ExportError::UnknownPolicy(n.to_string()))?,
        None => match policies.as_slice() {
            [one] => one,
            _ => return Err(ExportError::Ambiguous),
        },
    };
    let requirements = crate::syntax::ast::requirements_of(files);
    Ok(crate::compile::compose_block(block, &requirements))
}

/// The network section of a block (`None`: not written, which is `network
/// off`).
pub(crate) fn network_of(block: &Block) -> Option<&Network> {
    block.sections.iter().find_map(|s| match &s.kind {
        SectionKind::Network(n) => Some(n),
        _ => None,
    })
}

/// The statements of a `network { ... }` block (none for `off` and
/// `unrestricted`).
pub(crate) fn net_statements(network: Option<&Network>) -> &[NetStmt] {
    match network {
        Some(Network::Block(s)) => s,
        _ => &[],
    }
}
