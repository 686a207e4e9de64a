//! Exports: a policy's network rules in the formats other enforcement points
//! read, for the places gatehouse itself does not run.
//!
//! | function | for | what it writes |
//! |---|---|---|
//! | [`nftables`] | the kernel under the proxy | the ip/cidr layer as an nftables ruleset |
//! | [`cilium`] | Kubernetes with Cilium ≥ 1.19 | a `CiliumNetworkPolicy` (`toFQDNs`, `toCIDRSet`, the DNS-proxy rule) |
//! | [`srt_settings`], [`srt_settings_file`] | sandbox-runtime | its settings file: `network` and `filesystem` |
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
mod srt_files;

pub use cilium::{CiliumOptions, cilium};
pub use nftables::{Exits, nftables};
pub use srt::{SrtLists, SrtSettings, srt_lists, srt_settings, srt_settings_file};

use crate::compile::{Place, Policy, PolicySet, SelectError};
use crate::decision::RuleId;

/// Why a policy cannot be exported.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// No policy of that name, or no name and several policies.
    #[error(transparent)]
    Select(#[from] SelectError),
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
    /// The rule `id` of `set`, and why it does not fit.
    pub(crate) fn rule(set: &PolicySet, id: RuleId, why: impl Into<String>) -> Self {
        match set.rule(id) {
            Some(r) => Unexpressible {
                at: format!("{}:{}:{}", r.file, r.line, r.column),
                rule: r.source.to_string(),
                why: why.into(),
            },
            None => Unexpressible {
                at: String::from("?"),
                rule: String::new(),
                why: why.into(),
            },
        }
    }

    /// A statement that is no rule, and why it does not fit.
    pub(crate) fn place(place: &Place, why: impl Into<String>) -> Self {
        Unexpressible {
            at: format!("{}:{}:{}", place.file, place.line, place.column),
            rule: place.source.clone(),
            why: why.into(),
        }
    }
}

/// The policy named `name` (or the only one) of a compiled set, composed
/// with the set's requirements: what every export reads.
pub(crate) fn policy<'s>(
    set: &'s PolicySet,
    name: Option<&str>,
) -> Result<&'s Policy, ExportError> {
    Ok(set.select(name)?)
}
