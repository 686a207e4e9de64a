//! Compile: checked AST → an immutable [`PolicySet`].
//!
//! Everything that can be decided before a query arrives is decided here:
//! patterns are normalised, deny-wins and port lists are merged into the
//! domain automaton ([`domains`]) and the address intervals ([`prefixes`]),
//! and sockets, permissions and apps become exact-match tables. The result is
//! `Send + Sync`, cheap to clone (one `Arc`) and serialisable with serde.

pub(crate) mod agent;
mod compose;
mod select;
mod sorted;
pub use select::SelectError;
pub(crate) mod domains;
pub(crate) mod guardian;
mod inflating;
mod lower;
mod netrules;
mod payload;
pub(crate) mod ports;
pub(crate) mod prefixes;
mod view;

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use self::domains::{DomainRule, DomainTrie};
use self::lower::approvals;
use self::prefixes::{Intervals, PrefixRule, rule_ranges};
pub(crate) use self::view::{Net, NetMode, SocketEntry};
pub use self::view::{NetworkMode, NetworkRule, NetworkTarget, NetworkView, Place, PortSpan};
use crate::decision::{RuleId, RuleRef, RuleTable};
use crate::normalize::pattern::DomainPattern;
use crate::source::{SourceMap, Span};
use crate::syntax::ast::*;

/// What is inconsistent inside the compiler, or in the tables of a set
/// loaded from an artifact: never a user's mistake (the checker reports
/// those first). The detail is for a bug report.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Inconsistency {
    /// An index, order or size in a compiled table is wrong.
    #[error("{0}")]
    Table(&'static str),
    /// A rule id beyond the rule table.
    #[error("rule {0} out of range")]
    Rule(u32),
    /// A pattern the checker accepted does not parse.
    #[error("a checked pattern does not parse: {0}")]
    Pattern(#[from] crate::normalize::pattern::PatternError),
    /// A file pattern the checker accepted does not parse.
    #[error("a checked file pattern does not parse: {0}")]
    FilePattern(#[from] crate::normalize::FilePatternError),
    /// The guardian's automaton does not build.
    #[error("the guardian's automaton does not build: {0}")]
    Regex(String),
}

/// Errors of the compile phase. The checker reports every user mistake
/// first, so these mean an internal inconsistency; the set is refused
/// (fail closed).
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The compiler found its own tables inconsistent.
    #[error("internal error while compiling policy `{policy}`: {what}")]
    Internal {
        /// The policy being compiled.
        policy: String,
        /// What was inconsistent.
        what: Inconsistency,
    },
    /// More rules than a rule id can count.
    #[error("too many rules: {0} (at most {max})", max = u32::MAX - 1)]
    TooManyRules(usize),
}

/// A proxy switch: its value and the statement that set it, if written.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct SwitchSetting {
    pub on: bool,
    pub rule: Option<RuleId>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Proxy {
    pub socks5: SwitchSetting,
    pub socks5_udp: SwitchSetting,
    pub upstream: SwitchSetting,
    pub listen_any: SwitchSetting,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Perms {
    /// Per permission (in [`Permission::ALL`] order): first deny, first allow.
    pub rules: Vec<(Option<RuleId>, Option<RuleId>)>,
    pub default_deny: bool,
    pub default_rule: Option<RuleId>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Apps {
    /// Lowercased names without `.app`/`.exe` → first rule.
    #[serde(serialize_with = "sorted::map")]
    pub denied: HashMap<String, RuleId>,
    pub max_len: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Agent {
    pub sandbox: SandboxMode,
    pub approvals: ApprovalMode,
    /// Granular switches, in [`PromptCategory::ALL`] order.
    pub granular: Vec<bool>,
    pub reviewer: Reviewer,
    /// Whether the policy itself writes its approval policy (rather than
    /// taking it from requirements).
    pub own_approvals: bool,
    pub web_search: Option<(WebSearchMode, RuleId)>,
    pub commands: agent::Commands,
    pub mcp: agent::Mcp,
    pub paths: agent::SandboxPaths,
    pub guardian: guardian::Guardian,
}

/// One compiled policy: every question is a method, and every answer a
/// [`Decision`](crate::Decision).
///
/// The typed methods take borrowed input and do not allocate on the common
/// path: `connect`, `connect_addr`, `dns`, `resolved`, `resolved_addrs`,
/// `socket`, `listen`, `listen_on`, `upstream`, `web_search`, `tool`,
/// `app`, `exec`, `write`, `mcp`, `prompt` and `review`. [`Policy::decide`]
/// takes an owned [`Query`](crate::Query) (the JSON and text forms) and
/// [`Policy::decide_ref`] a borrowed one. None of them panics: whatever the
/// input, the answer is a decision, and an internal failure is a deny with
/// reason `internal_error`.
///
/// ```
/// use gatehouse::{Outcome, PolicySet, Reason, Via, Workspace};
///
/// let set = PolicySet::from_source(
///     "agent.policy",
///     "policy agent {\n  network {\n    allow domain *.github.com\n  }\n  \
///      sandbox workspace-write\n  approvals on-request\n}\n",
/// )?;
/// let agent = set.policy("agent").expect("compiled");
///
/// assert!(agent.connect("api.github.com", 443, Via::Https).is_allow());
/// assert_eq!(agent.dns("exfil.attacker.example").reason, Reason::NotAllowed);
///
/// let ws = Workspace::new("/work");
/// assert!(agent.write("/work/src/main.rs", &ws).is_allow());
/// assert_eq!(agent.write("/work/.git/hooks/pre-commit", &ws).outcome, Outcome::Ask);
/// // `..` is resolved before deciding: this write leaves the workspace.
/// assert_eq!(agent.write("/work/../etc/passwd", &ws).reason, Reason::OutsideWritableRoots);
/// # Ok::<(), gatehouse::Error>(())
/// ```
///
/// A `Policy` cannot be built or deserialised outside this crate: it comes
/// from the compiler, or from an artifact whose tables were checked.
#[derive(Clone, Debug)]
pub struct Policy {
    pub(crate) name: String,
    /// Fields masked in decision logs.
    pub(crate) log_masks: Vec<LogField>,
    pub(crate) net: Net,
    pub(crate) proxy: Proxy,
    pub(crate) perms: Perms,
    pub(crate) apps: Apps,
    pub(crate) agent: Agent,
    /// What a query may hold ([`crate::limits::QueryLimits`]).
    pub(crate) limits: crate::limits::QueryLimits,
}

/// How a [`Policy`] is written in an artifact. Kept apart from the public
/// type so that serde's impls do not let a caller forge one.
mod policy_wire {
    use super::*;

    #[derive(Serialize)]
    struct Out<'a> {
        name: &'a String,
        log_masks: &'a Vec<LogField>,
        net: &'a Net,
        proxy: &'a Proxy,
        perms: &'a Perms,
        apps: &'a Apps,
        agent: &'a Agent,
        limits: &'a crate::limits::QueryLimits,
    }

    #[derive(Deserialize)]
    struct In {
        name: String,
        log_masks: Vec<LogField>,
        net: Net,
        proxy: Proxy,
        perms: Perms,
        apps: Apps,
        agent: Agent,
        #[serde(default)]
        limits: crate::limits::QueryLimits,
    }

    pub(super) fn serialize<S: serde::Serializer>(ps: &[Policy], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(ps.iter().map(|p| Out {
            name: &p.name,
            log_masks: &p.log_masks,
            net: &p.net,
            proxy: &p.proxy,
            perms: &p.perms,
            apps: &p.apps,
            agent: &p.agent,
            limits: &p.limits,
        }))
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<Policy>, D::Error> {
        let ins = Vec::<In>::deserialize(d)?;
        Ok(ins
            .into_iter()
            .map(|p| Policy {
                name: p.name,
                log_masks: p.log_masks,
                net: p.net,
                proxy: p.proxy,
                perms: p.perms,
                apps: p.apps,
                agent: p.agent,
                limits: p.limits,
            })
            .collect())
    }
}

impl Policy {
    /// The policy's name, as written after `policy`.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct SetInner {
    #[serde(with = "policy_wire")]
    policies: Vec<Policy>,
    rules: RuleTable,
    /// The revision (a hash of the serialised set), computed once on demand.
    #[serde(skip)]
    revision: std::sync::OnceLock<String>,
}

/// An immutable, compiled set of policies. Cheap to clone; `Send + Sync`.
///
/// Built from sources ([`PolicySet::from_source`],
/// [`PolicySet::from_sources`], or [`build()`](crate::build()) to keep the
/// diagnostics) or loaded from a compiled artifact
/// ([`PolicySet::from_artifact`], whose tables are checked on load). There
/// is no other way to make one.
///
/// ```
/// use gatehouse::{PolicySet, Via};
///
/// let set = PolicySet::from_source(
///     "fleet.policy",
///     "policy ci {\n  network {\n    allow domain github.com\n  }\n}\n\
///      policy offline {\n  network off\n}\n",
/// )?;
/// assert_eq!(set.policies().map(|p| p.name()).collect::<Vec<_>>(), ["ci", "offline"]);
/// let d = set.policy("ci").expect("compiled").connect("github.com", 443, Via::Https);
/// let rule = set.rule(d.rule.expect("a rule decided")).expect("known");
/// assert_eq!((rule.file, rule.line), ("fleet.policy", 3));
///
/// // Compiled once, shipped as bytes, loaded without the compiler's work.
/// let bytes = set.to_artifact().expect("serialises");
/// let loaded = PolicySet::from_artifact(&bytes).expect("valid");
/// assert_eq!(loaded.revision(), set.revision());
/// # Ok::<(), gatehouse::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PolicySet {
    inner: Arc<SetInner>,
}

/// How a [`PolicySet`] is written in an artifact (`{"inner": ...}`).
#[derive(Serialize)]
struct SetOut<'a> {
    inner: &'a SetInner,
}

#[derive(Deserialize)]
struct SetIn {
    inner: SetInner,
}

impl PolicySet {
    /// The policy of that name.
    pub fn policy(&self, name: &str) -> Option<&Policy> {
        self.inner.policies.iter().find(|p| p.name == name)
    }
    /// Every policy, in source order.
    pub fn policies(&self) -> impl Iterator<Item = &Policy> {
        self.inner.policies.iter()
    }
    /// The only policy, when the set holds exactly one.
    pub fn single(&self) -> Option<&Policy> {
        match self.inner.policies.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }
    /// Where a rule was written.
    pub fn rule(&self, id: RuleId) -> Option<RuleRef<'_>> {
        self.inner.rules.get(id)
    }

    /// Every rule that decisions can name, in the order they were
    /// compiled: what test coverage is measured against. A statement that
    /// several policies share (a `requirements` block) may appear once per
    /// policy, with the same place.
    pub fn rules(&self) -> impl Iterator<Item = (RuleId, RuleRef<'_>)> + '_ {
        (0..self.inner.rules.len()).filter_map(move |i| {
            let id = RuleId(u32::try_from(i).ok()?);
            Some((id, self.inner.rules.get(id)?))
        })
    }

    /// The set's revision: the first 16 hex digits of the SHA-256 of its
    /// serialised form (the same bytes a compiled artifact checksums),
    /// computed on first use.
    ///
    /// Should the set not serialise (an internal error; [`PolicySet::to_artifact`]
    /// reports it as such), the revision is `unserialisable-N`, with N
    /// unique to this set in this process: never a hex digest, and never
    /// another set's revision, so that logs and live updates can still tell
    /// sets apart.
    pub fn revision(&self) -> &str {
        self.inner
            .revision
            .get_or_init(|| match self.canonical_digest() {
                Ok(hex) => hex.chars().take(16).collect(),
                Err(_) => {
                    static NEXT: std::sync::atomic::AtomicU64 =
                        std::sync::atomic::AtomicU64::new(0);
                    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    format!("unserialisable-{n}")
                }
            })
    }

    /// Checks every internal index (a set loaded from an artifact).
    pub(crate) fn validate(&self) -> Result<(), Inconsistency> {
        if !self.inner.rules.is_valid() {
            return Err(Inconsistency::Table(
                "a rule's file or text is out of range",
            ));
        }
        let rules = self.inner.rules.len();
        let rid = |r: Option<RuleId>| ports::check_rule(r.map_or(u32::MAX, |r| r.0), rules);
        for p in &self.inner.policies {
            let n = &p.net;
            for r in [n.mode_rule, n.default_rule, n.dns_off, n.socket_any] {
                rid(r)?;
            }
            n.domains.validate(rules)?;
            n.v4.validate(rules)?;
            n.v6.validate(rules)?;
            for e in n.sockets.values() {
                rid(e.deny)?;
                rid(e.allow)?;
            }
            let mut read = 0;
            for r in n.rules.iter() {
                rid(Some(r.rule))?;
                read += 1;
            }
            if read != n.rules.len() {
                return Err(Inconsistency::Table(
                    "the network rule list does not read back",
                ));
            }
            for s in [
                p.proxy.socks5,
                p.proxy.socks5_udp,
                p.proxy.upstream,
                p.proxy.listen_any,
            ] {
                rid(s.rule)?;
            }
            if p.perms.rules.len() != Permission::ALL.len()
                || p.agent.granular.len() != PromptCategory::ALL.len()
            {
                return Err(Inconsistency::Table("wrong table size"));
            }
            for (d, a) in &p.perms.rules {
                rid(*d)?;
                rid(*a)?;
            }
            rid(p.perms.default_rule)?;
            for r in p.apps.denied.values() {
                rid(Some(*r))?;
            }
            let a = &p.agent;
            rid(a.web_search.map(|w| w.1))?;
            let cmds = &a.commands.rules.len();
            for r in &a.commands.rules {
                rid(Some(r.rule))?;
                if r.pattern.is_empty() {
                    return Err(Inconsistency::Table("empty command pattern"));
                }
            }
            if a.commands
                .by_program
                .values()
                .flatten()
                .any(|&i| i >= *cmds)
            {
                return Err(Inconsistency::Table("command index out of range"));
            }
            if !a.commands.index_holds() {
                return Err(Inconsistency::Table(
                    "command index does not match the rules' programs",
                ));
            }
            for (_, r) in a.mcp.servers.values() {
                rid(Some(*r))?;
            }
            for (_, r) in a.mcp.tools.values().flat_map(|t| t.values()) {
                rid(Some(*r))?;
            }
            let g = &a.guardian;
            if !g.regex.is_built() {
                return Err(Inconsistency::Table(
                    "the guardian's regular expressions do not build",
                ));
            }
            let matcher_ok = |m: &guardian::GMatcher| match m {
                guardian::GMatcher::Regex(i) => *i < g.regex.patterns.len(),
                _ => true,
            };
            for r in &g.risks {
                rid(Some(r.rule))?;
                if !matcher_ok(&r.matcher) {
                    return Err(Inconsistency::Table("regex index out of range"));
                }
            }
            for (m, r) in &g.deny_actions {
                rid(Some(*r))?;
                if !matcher_ok(m) {
                    return Err(Inconsistency::Table("regex index out of range"));
                }
            }
            for (_, r) in &g.deny_categories {
                rid(Some(*r))?;
            }
            rid(g.allow_rule)?;
            rid(g.authorize_rule)?;
        }
        Ok(())
    }
}

/// Compiles checked files. Call [`crate::check::check`] first: this function
/// assumes the checker found no error, and refuses the set (never guesses)
/// when something does not fit.
pub fn compile(sources: &SourceMap, files: &[File]) -> Result<PolicySet, CompileError> {
    compile_with(sources, files, &crate::Limits::default())
}

/// [`compile`] under the given limits (the regex automaton's size, and the
/// query limits each policy keeps).
pub fn compile_with(
    sources: &SourceMap,
    files: &[File],
    limits: &crate::Limits,
) -> Result<PolicySet, CompileError> {
    let mut c = Compiler {
        sources,
        rules: RuleTable::default(),
        near_line: 0,
        limits: *limits,
    };
    let requirements = requirements_of(files);
    let mut policies = Vec::new();
    for file in files {
        for item in &file.items {
            if let Item::Policy(block) = item {
                let mut policy = c.policy(&compose::compose(block, &requirements))?;
                policy.agent.own_approvals = block
                    .sections
                    .iter()
                    .any(|s| matches!(s.kind, SectionKind::Approvals(_)));
                policies.push(policy);
            }
        }
    }
    if c.rules.len() >= u32::MAX as usize {
        return Err(CompileError::TooManyRules(c.rules.len()));
    }
    c.rules.shrink();
    Ok(PolicySet {
        inner: Arc::new(SetInner {
            policies,
            rules: c.rules,
            revision: std::sync::OnceLock::new(),
        }),
    })
}

struct Compiler<'s> {
    limits: crate::Limits,
    sources: &'s SourceMap,
    rules: RuleTable,
    /// The line of the rule last named (`SourceFile::line_col_near`).
    near_line: usize,
}

/// A statement's text with its blanks folded to single spaces, as
/// decisions and `explain` name it: borrowed when it is already so (most
/// statements, one line of printable ASCII).
pub(in crate::compile) fn folded(text: &str) -> std::borrow::Cow<'_, str> {
    let plain = text.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.contains("  ");
    if plain {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(text.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

impl Compiler<'_> {
    /// Registers a statement as a rule that decisions can name.
    fn rule(&mut self, span: Span) -> RuleId {
        self.rule_because(span, None)
    }

    /// A rule whose `because` text travels into decisions.
    fn rule_because(&mut self, span: Span, because: Option<String>) -> RuleId {
        match self.sources.get(span.file) {
            Some(f) => {
                let lc = f.line_col_near(span.start, &mut self.near_line);
                let text = folded(f.slice(span));
                self.rules
                    .push(&f.name, lc.line, lc.column, &text, because.as_deref())
            }
            None => self.rules.push("", 0, 0, "", because.as_deref()),
        }
    }

    fn policy(&mut self, block: &Block) -> Result<Policy, CompileError> {
        let name = block.name.node.clone();
        let internal = |what: Inconsistency| CompileError::Internal {
            policy: name.clone(),
            what,
        };
        let mut net = None;
        let mut proxy = Proxy {
            socks5: SwitchSetting {
                on: true,
                rule: None,
            },
            socks5_udp: SwitchSetting {
                on: true,
                rule: None,
            },
            upstream: SwitchSetting {
                on: true,
                rule: None,
            },
            listen_any: SwitchSetting {
                on: false,
                rule: None,
            },
        };
        let mut perms = Perms {
            rules: vec![(None, None); Permission::ALL.len()],
            default_deny: false,
            default_rule: None,
        };
        let mut log_masks = Vec::new();
        let mut apps = Apps {
            denied: HashMap::new(),
            max_len: 0,
        };
        let mut agent = Agent {
            sandbox: SandboxMode::WorkspaceWrite,
            approvals: ApprovalMode::OnRequest,
            granular: vec![false; PromptCategory::ALL.len()],
            reviewer: Reviewer::User,
            own_approvals: false,
            web_search: None,
            commands: agent::Commands::default(),
            mcp: agent::Mcp::default(),
            guardian: guardian::Guardian::default(),
            paths: agent::SandboxPaths {
                files: Vec::new(),
                protect: [".git", ".agents", ".zerocode"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                no_tmp: false,
            },
        };
        for section in &block.sections {
            match &section.kind {
                SectionKind::Network(n) => {
                    net = Some(self.network(n, section.span).map_err(internal)?)
                }
                SectionKind::Proxy(stmts) => self.proxy(&mut proxy, stmts),
                SectionKind::Permissions(stmts) => self.permissions(&mut perms, stmts),
                SectionKind::Apps(stmts) => self.apps(&mut apps, stmts),
                SectionKind::Sandbox(s) => self.sandbox(&mut agent, s).map_err(internal)?,
                SectionKind::Commands(rules) => self.commands(&mut agent, rules),
                SectionKind::Mcp(stmts) => self.mcp(&mut agent, stmts),
                SectionKind::Approvals(a) => approvals(&mut agent, a),
                SectionKind::Reviewer(r) => {
                    if let Some(m) = r.first() {
                        agent.reviewer = m.node;
                    }
                }
                SectionKind::WebSearch(w) => {
                    if let Some(m) = w.first() {
                        agent.web_search = Some((m.node, self.rule(section.span)));
                    }
                }
                SectionKind::Guardian(stmts) => {
                    agent.guardian = self.guardian(stmts).map_err(internal)?;
                }
                SectionKind::Log(stmts) => {
                    log_masks.extend(stmts.iter().flat_map(|s| s.fields.iter().map(|f| f.node)));
                }
            }
        }
        // No network section: `network off`, the language default.
        let net = net.unwrap_or_else(|| Net::empty(NetMode::Off));
        Ok(Policy {
            name,
            log_masks,
            net,
            proxy,
            perms,
            apps,
            agent,
            limits: self.limits.query,
        })
    }
}

/// The key an app name is compared by: lowercase, one trailing `.app` or
/// `.exe` removed (docs/language.md#apps).
pub(crate) fn app_key(name: &str) -> String {
    let lower = name.to_lowercase();
    for ext in [".app", ".exe"] {
        if let Some(stem) = lower.strip_suffix(ext) {
            return stem.to_string();
        }
    }
    lower
}

#[cfg(test)]
mod tests {
    #[test]
    fn folded_is_the_words_joined_by_one_space() {
        for text in [
            "allow domain a.com",
            " allow  domain\ta.com ",
            "allow\ndomain a.com",
            "a\u{a0}b c",
            "a\u{3000}b",
            "",
            " ",
            "x",
        ] {
            let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(super::folded(text), words, "{text:?}");
        }
    }
}
