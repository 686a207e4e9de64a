//! Decisions: what was decided, why, and by which rule.

use serde::{Deserialize, Serialize};

/// The answer to a query.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Let it happen.
    Allow,
    /// Refuse it.
    Deny,
    /// Ask the user (agent actions).
    Ask,
    /// Send to the auto-reviewer (agent actions).
    Review,
    /// A guardian verdict: the reviewed action may run.
    Approved,
    /// A guardian verdict: the reviewed action may not run.
    Denied,
    /// A guardian verdict: the review ran out of time, so the action is
    /// refused.
    TimedOut,
    /// A guardian verdict: the review failed or was cancelled, so the
    /// action is refused.
    Aborted,
    /// A web search mode: results from a cache only.
    Cached,
    /// A web search mode: no web search.
    Disabled,
    /// A web search mode: live results.
    Live,
    /// A web search mode: an index of the web, no live fetch.
    Indexed,
}

impl Outcome {
    /// The outcome's word, as `policyc` prints it and `expect` writes it.
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

macro_rules! reasons {
    ($($(#[$m:meta])* $variant:ident = $text:literal,)+) => {
        /// Why: a stable snake_case reason code (docs/language.md#reason-codes; the
        /// language reference in `docs/language.md` lists every one).
        #[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Reason { $(#[doc = concat!("`", $text, "`.")] $(#[$m])* $variant,)+ }

        impl Reason {
            /// Every reason code, in declaration order.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)+];
            /// The stable snake_case code.
            pub fn as_str(self) -> &'static str {
                match self { $(Reason::$variant => $text,)+ }
            }
        }
    };
}

reasons! {
    // network
    NetworkOff = "network_off",
    Unrestricted = "unrestricted",
    InvalidHost = "invalid_host",
    AmbiguousIpLiteral = "ambiguous_ip_literal",
    InvalidPort = "invalid_port",
    InvalidAddress = "invalid_address",
    InvalidPath = "invalid_path",
    ProtocolDisabled = "protocol_disabled",
    DnsOff = "dns_off",
    DeniedByRule = "denied_by_rule",
    LocalAddress = "local_address",
    NonPublicResolution = "non_public_resolution",
    LookupFailed = "lookup_failed",
    AllowedByRule = "allowed_by_rule",
    DefaultAllow = "default_allow",
    NotAllowed = "not_allowed",
    NonLoopbackListener = "non_loopback_listener",
    Loopback = "loopback",
    // tools and apps
    DefaultDeny = "default_deny",
    UnknownPermission = "unknown_permission",
    // writes
    Unsandboxed = "unsandboxed",
    ReadOnlySandbox = "read_only_sandbox",
    OutsideWritableRoots = "outside_writable_roots",
    ProtectedPath = "protected_path",
    WritableRoot = "writable_root",
    Untrusted = "untrusted",
    /// A `none` file rule covers the path: neither read nor write.
    NoAccess = "no_access",
    /// A `read` file rule covers the path: read, not write.
    ReadOnlyPath = "read_only_path",
    /// A read no `none` rule covers.
    Readable = "readable",
    // exec
    ForbiddenByRule = "forbidden_by_rule",
    PromptRule = "prompt_rule",
    DangerousCommand = "dangerous_command",
    KnownSafe = "known_safe",
    NotKnownSafe = "not_known_safe",
    Escalation = "escalation",
    Sandboxed = "sandboxed",
    /// An empty argv, or a word holding NUL.
    InvalidCommand = "invalid_command",
    // prompts
    ApprovalNever = "approval_never",
    CategoryRejected = "category_rejected",
    // mcp and prompt
    ApprovalMode = "approval_mode",
    /// An MCP server or tool turned `off`: the call is refused.
    ToolDisabled = "tool_disabled",
    DestructiveTool = "destructive_tool",
    ReadOnlyTool = "read_only_tool",
    ClosedWorldTool = "closed_world_tool",
    ToolAnnotations = "tool_annotations",
    CategoryPrompt = "category_prompt",
    // review
    Approved = "approved",
    FailedClosed = "failed_closed",
    Timeout = "timeout",
    Cancelled = "cancelled",
    ReviewerDenied = "reviewer_denied",
    CriticalRisk = "critical_risk",
    InsufficientAuthorization = "insufficient_authorization",
    LevelNotAllowed = "level_not_allowed",
    // web search
    Configured = "configured",
    Default = "default",
    /// An internal failure while deciding; always a deny (fail closed).
    InternalError = "internal_error",
}

/// Who answers an approvable `not_allowed` connect.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Escalation {
    /// A person may approve it.
    Ask,
    /// The auto-reviewer may approve it.
    Review,
    /// Nobody may: the deny stands.
    None,
}

/// Index of a rule in its [`crate::PolicySet`]'s rule table.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Ord, PartialOrd, Serialize, Deserialize)]
pub struct RuleId(
    /// The index.
    pub u32,
);

/// A decision. `Copy` and heap-free: the deciding rule is an index, resolved
/// to file, line, column and text by [`crate::PolicySet::rule`].
///
/// Only the engine makes decisions: the type cannot be built outside this
/// crate (no public constructor, `#[non_exhaustive]`), so a value of it in
/// an embedder's hands came from a policy. Its fields are there to be read.
///
/// ```
/// use gatehouse::{Outcome, PolicySet, Reason};
///
/// let set = PolicySet::from_source(
///     "p.policy",
///     "policy p {\n  commands {\n    forbid rm -rf\n    prompt git push because \"pushes leave the sandbox\"\n  }\n}\n",
/// )?;
/// let p = set.policy("p").expect("compiled");
/// let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
///
/// let d = p.exec(&argv("git push origin main"), false);
/// assert_eq!(d.outcome, Outcome::Ask);
/// let rule = set.rule(d.rule.expect("a rule decided")).expect("known");
/// assert_eq!((rule.line, rule.because), (4, Some("pushes leave the sandbox")));
///
/// // `bash -c` is looked into: the forbidden command inside is found.
/// let script = ["bash", "-c", "cd /tmp && rm -rf /"].map(String::from);
/// let d = p.exec(&script, false);
/// assert_eq!(d.outcome, Outcome::Deny);
/// assert!(!d.is_allow());
/// # let _ = Reason::ALL;
/// # Ok::<(), gatehouse::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash)]
#[non_exhaustive]
pub struct Decision {
    /// What was decided.
    pub outcome: Outcome,
    /// Why: the stable reason code.
    pub reason: Reason,
    /// The deciding rule, when a rule decided (not a default).
    pub rule: Option<RuleId>,
    /// Only on `not_allowed` connect decisions.
    pub escalation: Option<Escalation>,
    /// HTTP-style status; `403` on denied tool calls.
    pub status: Option<u16>,
    /// Review verdicts: the final risk and category.
    pub risk: Option<crate::vocab::RiskLevel>,
    /// Review verdicts: the final category.
    pub category: Option<crate::vocab::RiskCategory>,
}

impl Decision {
    pub(crate) const fn new(outcome: Outcome, reason: Reason, rule: Option<RuleId>) -> Self {
        Decision {
            outcome,
            reason,
            rule,
            escalation: None,
            status: None,
            risk: None,
            category: None,
        }
    }
    pub(crate) const fn allow(reason: Reason, rule: Option<RuleId>) -> Self {
        Self::new(Outcome::Allow, reason, rule)
    }
    pub(crate) const fn deny(reason: Reason, rule: Option<RuleId>) -> Self {
        Self::new(Outcome::Deny, reason, rule)
    }
    /// Whether the outcome is `allow`.
    pub fn is_allow(&self) -> bool {
        self.outcome == Outcome::Allow
    }
}

/// Where a rule was written: a view into the compiled set's rule table
/// ([`crate::PolicySet::rule`]).
#[derive(Clone, Copy, Debug, Eq, PartialEq, Serialize)]
pub struct RuleRef<'a> {
    /// The source's name.
    pub file: &'a str,
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
    /// The statement's text, whitespace folded.
    pub source: &'a str,
    /// The rule's `because` text, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub because: Option<&'a str>,
}

mod rule_table;
pub(crate) use rule_table::RuleTable;
