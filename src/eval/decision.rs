//! Decisions: what was decided, why, and by which rule.

use serde::{Deserialize, Serialize};

/// The answer to a query.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Allow,
    Deny,
    /// Ask the user (agent actions).
    Ask,
    /// Send to the auto-reviewer (agent actions).
    Review,
    /// Guardian verdicts.
    Approved,
    Denied,
    TimedOut,
    Aborted,
    /// Web search modes.
    Cached,
    Disabled,
    Live,
    Indexed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allow => "allow",
            Outcome::Deny => "deny",
            Outcome::Ask => "ask",
            Outcome::Review => "review",
            Outcome::Approved => "approved",
            Outcome::Denied => "denied",
            Outcome::TimedOut => "timed_out",
            Outcome::Aborted => "aborted",
            Outcome::Cached => "cached",
            Outcome::Disabled => "disabled",
            Outcome::Live => "live",
            Outcome::Indexed => "indexed",
        }
    }
}

/// Why: a stable snake_case reason code (language spec §16; the language
/// reference in `docs/language.md` lists every one).
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    // network
    NetworkOff,
    Unrestricted,
    InvalidHost,
    AmbiguousIpLiteral,
    InvalidPort,
    InvalidAddress,
    InvalidPath,
    ProtocolDisabled,
    DnsOff,
    DeniedByRule,
    LocalAddress,
    NonPublicResolution,
    LookupFailed,
    AllowedByRule,
    DefaultAllow,
    NotAllowed,
    NonLoopbackListener,
    Loopback,
    // tools and apps
    DefaultDeny,
    UnknownPermission,
    // web search
    Configured,
    Default,
    /// The query kind is not decided by this version of the engine
    /// (always a deny).
    Unsupported,
    /// An internal failure; always a deny (fail closed).
    InternalError,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NetworkOff => "network_off",
            Reason::Unrestricted => "unrestricted",
            Reason::InvalidHost => "invalid_host",
            Reason::AmbiguousIpLiteral => "ambiguous_ip_literal",
            Reason::InvalidPort => "invalid_port",
            Reason::InvalidAddress => "invalid_address",
            Reason::InvalidPath => "invalid_path",
            Reason::ProtocolDisabled => "protocol_disabled",
            Reason::DnsOff => "dns_off",
            Reason::DeniedByRule => "denied_by_rule",
            Reason::LocalAddress => "local_address",
            Reason::NonPublicResolution => "non_public_resolution",
            Reason::LookupFailed => "lookup_failed",
            Reason::AllowedByRule => "allowed_by_rule",
            Reason::DefaultAllow => "default_allow",
            Reason::NotAllowed => "not_allowed",
            Reason::NonLoopbackListener => "non_loopback_listener",
            Reason::Loopback => "loopback",
            Reason::DefaultDeny => "default_deny",
            Reason::UnknownPermission => "unknown_permission",
            Reason::Configured => "configured",
            Reason::Default => "default",
            Reason::Unsupported => "unsupported",
            Reason::InternalError => "internal_error",
        }
    }

    /// Every reason code, for documentation tests.
    pub const ALL: &'static [Reason] = &[
        Reason::NetworkOff,
        Reason::Unrestricted,
        Reason::InvalidHost,
        Reason::AmbiguousIpLiteral,
        Reason::InvalidPort,
        Reason::InvalidAddress,
        Reason::InvalidPath,
        Reason::ProtocolDisabled,
        Reason::DnsOff,
        Reason::DeniedByRule,
        Reason::LocalAddress,
        Reason::NonPublicResolution,
        Reason::LookupFailed,
        Reason::AllowedByRule,
        Reason::DefaultAllow,
        Reason::NotAllowed,
        Reason::NonLoopbackListener,
        Reason::Loopback,
        Reason::DefaultDeny,
        Reason::UnknownPermission,
        Reason::Configured,
        Reason::Default,
        Reason::Unsupported,
        Reason::InternalError,
    ];
}

/// Who answers an approvable `not_allowed` connect.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Escalation {
    Ask,
    Review,
    None,
}

/// Index of a rule in its [`crate::PolicySet`]'s rule table.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Ord, PartialOrd, Serialize, Deserialize)]
pub struct RuleId(pub u32);

/// A decision. `Copy` and heap-free: the deciding rule is an index, resolved
/// to file, line, column and text by [`crate::PolicySet::rule`].
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash)]
pub struct Decision {
    pub outcome: Outcome,
    pub reason: Reason,
    pub rule: Option<RuleId>,
    /// Only on `not_allowed` connect decisions.
    pub escalation: Option<Escalation>,
    /// HTTP-style status; `403` on denied tool calls.
    pub status: Option<u16>,
}

impl Decision {
    pub const fn new(outcome: Outcome, reason: Reason, rule: Option<RuleId>) -> Self {
        Decision {
            outcome,
            reason,
            rule,
            escalation: None,
            status: None,
        }
    }
    pub const fn allow(reason: Reason, rule: Option<RuleId>) -> Self {
        Self::new(Outcome::Allow, reason, rule)
    }
    pub const fn deny(reason: Reason, rule: Option<RuleId>) -> Self {
        Self::new(Outcome::Deny, reason, rule)
    }
    pub fn is_allow(&self) -> bool {
        self.outcome == Outcome::Allow
    }
}

/// Where a rule was written.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct RuleRef {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// The statement's text, whitespace folded.
    pub source: String,
}
