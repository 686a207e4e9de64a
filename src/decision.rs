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

/// The rule table of a compiled set, compact (issue 62): file names
/// interned and named by runs of rules, every statement's text in one
/// arena in rule order (a rule's text ends where the next one's starts),
/// the few `because` texts beside it, and 12 bytes a rule. Artifacts
/// (format 7) hold it as it is, decoded in place; [`RuleTable::is_valid`]
/// checks every range and order a load relies on.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct RuleTable {
    files: Vec<String>,
    /// `(first rule, file)`: the rules from `first` on, up to the next run,
    /// were written in `files[file]`.
    file_runs: Vec<(u32, u32)>,
    text: String,
    entries: Vec<RuleEntry>,
    /// `(rule, range in because_text)`, by rule.
    because: Vec<(u32, [u32; 2])>,
    because_text: String,
}

/// One rule: its line and column and where its text starts.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct RuleEntry {
    line: u32,
    column: u32,
    start: u32,
}

impl RuleTable {
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Gives back the growth room of the table's vectors (a compiled set
    /// lives long; its size is what a proxy holds).
    pub(crate) fn shrink(&mut self) {
        self.files.shrink_to_fit();
        self.file_runs.shrink_to_fit();
        self.text.shrink_to_fit();
        self.entries.shrink_to_fit();
        self.because.shrink_to_fit();
        self.because_text.shrink_to_fit();
    }

    /// Adds a rule; `file` is interned.
    pub(crate) fn push(
        &mut self,
        file: &str,
        line: usize,
        column: usize,
        source: &str,
        because: Option<&str>,
    ) -> RuleId {
        let file = match self.files.iter().rposition(|f| f == file) {
            Some(i) => i,
            None => {
                self.files.push(file.to_string());
                self.files.len() - 1
            }
        };
        self.push_at(
            u32::try_from(file).unwrap_or(u32::MAX),
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(column).unwrap_or(u32::MAX),
            source,
            because,
        )
    }

    fn push_at(
        &mut self,
        file: u32,
        line: u32,
        column: u32,
        source: &str,
        because: Option<&str>,
    ) -> RuleId {
        let id = u32::try_from(self.entries.len()).unwrap_or(u32::MAX);
        if self.file_runs.last().is_none_or(|&(_, f)| f != file) {
            self.file_runs.push((id, file));
        }
        let start = u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        self.text.push_str(source);
        if let Some(b) = because {
            let from = u32::try_from(self.because_text.len()).unwrap_or(u32::MAX);
            self.because_text.push_str(b);
            let to = u32::try_from(self.because_text.len()).unwrap_or(u32::MAX);
            self.because.push((id, [from, to]));
        }
        self.entries.push(RuleEntry {
            line,
            column,
            start,
        });
        RuleId(id)
    }

    /// The file index of a rule: the run it falls in.
    fn file_of(&self, id: RuleId) -> Option<u32> {
        let at = self.file_runs.partition_point(|&(first, _)| first <= id.0);
        self.file_runs.get(at.checked_sub(1)?).map(|&(_, f)| f)
    }

    pub(crate) fn get(&self, id: RuleId) -> Option<RuleRef<'_>> {
        let i = id.0 as usize;
        let e = self.entries.get(i)?;
        let end = match self.entries.get(i + 1) {
            Some(next) => next.start as usize,
            None => self.text.len(),
        };
        let because = match self.because.binary_search_by_key(&id.0, |&(r, _)| r) {
            Ok(k) => {
                let [from, to] = self.because.get(k)?.1;
                Some(self.because_text.get(from as usize..to as usize)?)
            }
            Err(_) => None,
        };
        Some(RuleRef {
            file: self.files.get(self.file_of(id)? as usize)?,
            line: e.line as usize,
            column: e.column as usize,
            source: self.text.get(e.start as usize..end)?,
            because,
        })
    }

    /// Whether the table is as [`RuleTable::push`] builds it (one loaded
    /// from an artifact): every entry resolves, texts start in order from
    /// the arena's start, file runs and `because` ranges are in rule order
    /// and name what exists.
    pub(crate) fn is_valid(&self) -> bool {
        let n = self.entries.len();
        let Ok(n32) = u32::try_from(n) else {
            return false;
        };
        let starts_ok = self.entries.first().is_none_or(|e| e.start == 0)
            && self
                .entries
                .windows(2)
                .all(|w| matches!(w, [a, b] if a.start <= b.start));
        let runs_ok = self.file_runs.first().is_none_or(|&(first, _)| first == 0)
            && (n == 0 || !self.file_runs.is_empty())
            && self
                .file_runs
                .windows(2)
                .all(|w| matches!(w, [a, b] if a.0 < b.0))
            && self
                .file_runs
                .iter()
                .all(|&(first, f)| first < n32.max(1) && (f as usize) < self.files.len());
        let because_ok = self
            .because
            .windows(2)
            .all(|w| matches!(w, [a, b] if a.0 < b.0))
            && self.because.iter().all(|&(r, [from, to])| {
                r < n32 && self.because_text.get(from as usize..to as usize).is_some()
            });
        starts_ok && runs_ok && because_ok && (0..n).all(|i| self.get(RuleId(i as u32)).is_some())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod rule_table_tests {
    use super::*;

    fn table() -> RuleTable {
        let mut t = RuleTable::default();
        t.push("a.policy", 3, 5, "allow domain x.example", None);
        t.push("a.policy", 4, 5, "forbid rm -rf", Some("never wipe"));
        t.push("b.policy", 1, 1, "deny cidr 10.0.0.0/8", None);
        t.push("a.policy", 9, 7, "prompt git push", Some("a person"));
        t
    }

    #[test]
    fn every_rule_reads_back_as_it_was_pushed() {
        let t = table();
        let r = t.get(RuleId(1)).unwrap();
        assert_eq!(
            (r.file, r.line, r.column, r.source, r.because),
            ("a.policy", 4, 5, "forbid rm -rf", Some("never wipe"))
        );
        let r = t.get(RuleId(2)).unwrap();
        assert_eq!(
            (r.file, r.source, r.because),
            ("b.policy", "deny cidr 10.0.0.0/8", None)
        );
        let r = t.get(RuleId(3)).unwrap();
        assert_eq!(
            (r.file, r.line, r.because),
            ("a.policy", 9, Some("a person"))
        );
        assert!(t.get(RuleId(4)).is_none());
        assert!(t.is_valid());
    }

    #[test]
    fn the_wire_form_is_the_table_and_every_lie_is_refused() {
        let t = table();
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(
            json["text"],
            "allow domain x.exampleforbid rm -rfdeny cidr 10.0.0.0/8prompt git push"
        );
        assert_eq!(json["because_text"], "never wipea person");
        assert_eq!(
            json["file_runs"],
            serde_json::json!([[0, 0], [2, 1], [3, 0]])
        );
        let back: RuleTable = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        assert!(back.is_valid());
        let refused = |path: &[&str], index: Option<usize>, v: serde_json::Value| {
            let mut bad = json.clone();
            let mut at = &mut bad;
            for p in path {
                at = &mut at[*p];
            }
            if let Some(i) = index {
                at = &mut at[i];
            }
            *at = v;
            let back: RuleTable = serde_json::from_value(bad).unwrap();
            assert!(!back.is_valid(), "{path:?} {index:?}");
        };
        // A text past the arena, texts out of order, not from 0.
        refused(
            &["entries"],
            Some(3),
            serde_json::json!({"line": 9, "column": 7, "start": 9999}),
        );
        refused(
            &["entries"],
            Some(1),
            serde_json::json!({"line": 4, "column": 5, "start": 60}),
        );
        refused(
            &["entries"],
            Some(0),
            serde_json::json!({"line": 3, "column": 5, "start": 1}),
        );
        // A text split inside a character.
        let mut t2 = RuleTable::default();
        t2.push("a.policy", 1, 1, "allow domain é.example", None);
        t2.push("a.policy", 2, 1, "deny cidr 10.0.0.0/8", None);
        let mut j2 = serde_json::to_value(&t2).unwrap();
        j2["entries"][1]["start"] = serde_json::json!(14);
        assert!(!serde_json::from_value::<RuleTable>(j2).unwrap().is_valid());
        // File runs: an unknown file, out of order, not from rule 0.
        refused(&["file_runs"], Some(1), serde_json::json!([2, 7]));
        refused(&["file_runs"], Some(1), serde_json::json!([3, 1]));
        refused(&["file_runs"], Some(0), serde_json::json!([1, 0]));
        refused(&["file_runs"], None, serde_json::json!([]));
        // Because: past its arena, a rule that does not exist, out of order.
        refused(&["because"], Some(0), serde_json::json!([1, [0, 999]]));
        refused(&["because"], Some(1), serde_json::json!([9, [10, 18]]));
        refused(&["because"], Some(1), serde_json::json!([0, [10, 18]]));
    }
}
