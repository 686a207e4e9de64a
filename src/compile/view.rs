//! The lowered network view: a policy's `network` section as the compiler
//! read it (requirements joined, addresses canonical), kept in the compiled
//! set and in artifacts, so that the exporters and embedders such as the
//! sandbox-runtime decider read one form whether the policy came as text,
//! artifact or bundle (docs/api.md).

use std::collections::HashMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::Policy;
use super::domains::DomainTrie;
use super::prefixes::Intervals;
use crate::decision::RuleId;

/// Network mode of a policy.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub(crate) enum NetMode {
    Off,
    Unrestricted,
    Constrained,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct SocketEntry {
    pub deny: Option<RuleId>,
    pub allow: Option<RuleId>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Net {
    pub mode: NetMode,
    /// The `network off|unrestricted` statement, when written.
    pub mode_rule: Option<RuleId>,
    pub default_allow: bool,
    pub default_rule: Option<RuleId>,
    /// `Some(rule)` when `dns off` is written.
    pub dns_off: Option<RuleId>,
    pub local_allow: bool,
    pub domains: DomainTrie,
    pub v4: Intervals,
    pub v6: Intervals,
    #[serde(serialize_with = "super::sorted::map")]
    pub sockets: HashMap<String, SocketEntry>,
    pub socket_any: Option<RuleId>,
    /// Whether any socket is allowed (listeners then stay on loopback).
    pub sockets_allowed: bool,
    /// Every rule of the section, lowered, in source order: what
    /// [`Policy::network`] shows the exporters and embedders.
    pub rules: super::netrules::NetRules,
    /// Where `local allow` is written (it is no rule: it never decides).
    pub local_allow_at: Option<Place>,
    /// The rule id the compiler gave next after `local allow`: its place
    /// among the rules, for messages in source order.
    pub local_allow_next: u32,
}

impl Net {
    pub(crate) fn empty(mode: NetMode) -> Net {
        Net {
            mode,
            mode_rule: None,
            default_allow: false,
            default_rule: None,
            dns_off: None,
            local_allow: false,
            domains: DomainTrie::build(&[]),
            v4: Intervals::default(),
            v6: Intervals::default(),
            sockets: HashMap::new(),
            socket_any: None,
            sockets_allowed: false,
            rules: super::netrules::NetRules::default(),
            local_allow_at: None,
            local_allow_next: 0,
        }
    }
}

/// A policy's `network` section as the compiler lowered it: the mode, the
/// settings, and every rule in source order (the set's requirements' deny
/// rules joined after the policy's own, as decisions see them). Rules name
/// their statement by [`RuleId`]; [`PolicySet::rule`](super::PolicySet::rule)
/// gives its file, line and text.
///
/// ```
/// use gatehouse::{NetworkTarget, PolicySet};
///
/// let set = PolicySet::from_source("p.policy", "policy p {\n  network {\n    allow domain **.github.com port 443\n    deny cidr 10.0.0.0/8\n  }\n}\n")?;
/// let net = set.single().expect("one policy").network();
/// assert_eq!(net.rules.len(), 2);
/// assert!(matches!(&net.rules[0].target, NetworkTarget::Domain(d) if d == "**.github.com"));
/// assert_eq!(set.rule(net.rules[1].rule).expect("a rule").line, 4);
/// # Ok::<(), gatehouse::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct NetworkView<'a> {
    /// `network off`, `unrestricted`, or a `network { }` block.
    pub mode: NetworkMode,
    /// The `network off|unrestricted` statement, when written.
    pub mode_rule: Option<RuleId>,
    /// The `default allow` statement, when written (`None`: default deny).
    pub default_allow: Option<RuleId>,
    /// Where `local allow` is written (`None`: local deny).
    pub local_allow: Option<&'a Place>,
    /// The `dns off` statement, when written.
    pub dns_off: Option<RuleId>,
    /// Every rule, in source order.
    pub rules: &'a [NetworkRule],
}

/// A policy's network mode.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub enum NetworkMode {
    /// `network off`, or no `network` section.
    Off,
    /// `network unrestricted`.
    Unrestricted,
    /// A `network { }` block.
    Constrained,
}

/// One `allow|deny` rule of a `network` block.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NetworkRule {
    /// `allow` (true) or `deny`.
    pub allow: bool,
    /// What it names.
    pub target: NetworkTarget,
    /// Its port list (`None`: every port).
    pub ports: Option<Vec<PortSpan>>,
    /// The statement.
    pub rule: RuleId,
}

/// What a network rule names.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum NetworkTarget {
    /// A domain pattern as written (`x.com`, `*.x.com`, `**.x.com`, `*`).
    Domain(String),
    /// One address, canonical: a mapped or compatible IPv6 address is its
    /// IPv4 address, as queries read it.
    Ip(IpAddr),
    /// A prefix as written (an IPv6 prefix inside `::ffff:0:0/96` applies
    /// as the IPv4 prefix it maps: `normalize::canonical_prefix`).
    Cidr(ipnet::IpNet),
    /// One unix socket path.
    Socket(String),
    /// `allow socket *`.
    AnySocket,
}

impl NetworkTarget {
    /// Whether this target names the host `name` (a DNS name, compared
    /// without case and without a trailing dot): a domain pattern that
    /// matches it. Addresses, prefixes and sockets name no DNS name.
    ///
    /// ```
    /// use gatehouse::NetworkTarget;
    /// let t = NetworkTarget::Domain("**.github.com".into());
    /// assert!(t.matches_name("api.GitHub.com."));
    /// assert!(!t.matches_name("github.io"));
    /// ```
    pub fn matches_name(&self, name: &str) -> bool {
        let NetworkTarget::Domain(text) = self else {
            return false;
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        crate::normalize::pattern::DomainPattern::parse(text).is_ok_and(|p| p.matches_name(&name))
    }
}

/// An inclusive port range of a rule's port list (`443` is `443-443`).
#[derive(Clone, Copy, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct PortSpan {
    /// The first port.
    pub lo: u16,
    /// The last port.
    pub hi: u16,
}

impl std::fmt::Display for PortSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// Where a statement that is no rule is written.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Place {
    /// The source's name.
    pub file: String,
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
    /// The statement's text, whitespace folded.
    pub source: String,
}

impl Policy {
    /// The policy's `network` section, lowered (see [`NetworkView`]).
    pub fn network(&self) -> NetworkView<'_> {
        let n = &self.net;
        NetworkView {
            mode: match n.mode {
                NetMode::Off => NetworkMode::Off,
                NetMode::Unrestricted => NetworkMode::Unrestricted,
                NetMode::Constrained => NetworkMode::Constrained,
            },
            mode_rule: n.mode_rule,
            default_allow: n.default_rule,
            local_allow: n.local_allow_at.as_ref(),
            dns_off: n.dns_off,
            rules: n.rules.all(),
        }
    }
}
