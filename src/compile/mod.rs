//! Compile: checked AST → an immutable [`PolicySet`].
//!
//! Everything that can be decided before a query arrives is decided here:
//! patterns are normalised, deny-wins and port lists are merged into the
//! domain automaton ([`domains`]) and the address intervals ([`prefixes`]),
//! and sockets, permissions and apps become exact-match tables. The result is
//! `Send + Sync`, cheap to clone (one `Arc`) and serialisable with serde.

pub(crate) mod agent;
mod compose;
pub(crate) mod domains;
pub(crate) mod guardian;
pub(crate) mod ports;
pub(crate) mod prefixes;

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use self::domains::{DomainRule, DomainTrie};
use self::prefixes::{Intervals, PrefixRule, rule_ranges};
use crate::decision::{RuleId, RuleRef, RuleTable};
use crate::normalize::pattern::DomainPattern;
use crate::source::{SourceMap, Span};
use crate::syntax::ast::*;

/// Errors of the compile phase. The checker reports every user mistake
/// first, so these mean an internal inconsistency; the set is refused
/// (fail closed).
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
pub enum CompileError {
    #[error("internal error while compiling policy `{policy}`: {what}")]
    Internal { policy: String, what: String },
    #[error("too many rules: {0} (at most {max})", max = u32::MAX - 1)]
    TooManyRules(usize),
}

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
    pub sockets: HashMap<String, SocketEntry>,
    pub socket_any: Option<RuleId>,
    /// Whether any socket is allowed (listeners then stay on loopback).
    pub sockets_allowed: bool,
}

impl Net {
    fn empty(mode: NetMode) -> Net {
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
        }
    }
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

/// One compiled policy. Decide with the methods in [`crate::eval`].
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    #[serde(default)]
    pub(crate) limits: crate::limits::QueryLimits,
}

impl Policy {
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct SetInner {
    policies: Vec<Policy>,
    rules: RuleTable,
    /// The revision (a hash of the serialised set), computed once on demand.
    #[serde(skip)]
    revision: std::sync::OnceLock<String>,
}

/// An immutable, compiled set of policies. Cheap to clone; `Send + Sync`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PolicySet {
    inner: Arc<SetInner>,
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
            .get_or_init(|| match self.canonical_bytes() {
                Ok(bytes) => crate::digest::sha256_hex(&bytes).chars().take(16).collect(),
                Err(_) => {
                    static NEXT: std::sync::atomic::AtomicU64 =
                        std::sync::atomic::AtomicU64::new(0);
                    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    format!("unserialisable-{n}")
                }
            })
    }

    /// The set serialised canonically: maps in key order (through
    /// `serde_json::Value`), so the same set always gives the same bytes.
    pub(crate) fn canonical_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_value(self).and_then(|v| serde_json::to_vec(&v))
    }

    /// Checks every internal index (a set loaded from an artifact).
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !self.inner.rules.is_valid() {
            return Err("a rule's file or text is out of range".into());
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
                return Err("wrong table size".into());
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
                    return Err("empty command pattern".into());
                }
            }
            if a.commands
                .by_program
                .values()
                .flatten()
                .any(|&i| i >= *cmds)
            {
                return Err("command index out of range".into());
            }
            for (_, r) in a.mcp.servers.values() {
                rid(Some(*r))?;
            }
            for (_, r) in a.mcp.tools.values().flat_map(|t| t.values()) {
                rid(Some(*r))?;
            }
            let g = &a.guardian;
            if !g.regex.is_built() {
                return Err("the guardian's regular expressions do not build".into());
            }
            let matcher_ok = |m: &guardian::GMatcher| match m {
                guardian::GMatcher::Regex(i) => *i < g.regex.patterns.len(),
                _ => true,
            };
            for r in &g.risks {
                rid(Some(r.rule))?;
                if !matcher_ok(&r.matcher) {
                    return Err("regex index out of range".into());
                }
            }
            for (m, r) in &g.deny_actions {
                rid(Some(*r))?;
                if !matcher_ok(m) {
                    return Err("regex index out of range".into());
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

/// A policy block with the requirements composed in, as the compiler sees
/// it (what `policyc export` renders).
pub fn compose_block(policy: &Block, requirements: &[&Block]) -> Block {
    compose::compose(policy, requirements)
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
                let lc = f.line_col(span.start);
                let text = f
                    .slice(span)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                self.rules
                    .push(&f.name, lc.line, lc.column, &text, because.as_deref())
            }
            None => self.rules.push("", 0, 0, "", because.as_deref()),
        }
    }

    fn policy(&mut self, block: &Block) -> Result<Policy, CompileError> {
        let name = block.name.node.clone();
        let internal = |what: &str| CompileError::Internal {
            policy: name.clone(),
            what: what.to_string(),
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
                writable: Vec::new(),
                protect: [".git", ".agents", ".zerocode"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            },
        };
        for section in &block.sections {
            match &section.kind {
                SectionKind::Network(n) => {
                    net = Some(self.network(n, section.span).map_err(|w| internal(&w))?)
                }
                SectionKind::Proxy(stmts) => {
                    for s in stmts {
                        let rule = Some(self.rule(s.span()));
                        let (slot, on) = match s {
                            ProxyStmt::Socks5(v) => (&mut proxy.socks5, v.node == Switch::On),
                            ProxyStmt::Socks5Udp(v) => {
                                (&mut proxy.socks5_udp, v.node == Switch::On)
                            }
                            ProxyStmt::Upstream(v) => (&mut proxy.upstream, v.node == Switch::On),
                            ProxyStmt::Listen(v) => {
                                (&mut proxy.listen_any, v.node == ListenScope::Any)
                            }
                        };
                        *slot = SwitchSetting { on, rule };
                    }
                }
                SectionKind::Permissions(stmts) => {
                    for s in stmts {
                        match s {
                            PermStmt::Default(v) => {
                                perms.default_deny = v.node == Effect::Deny;
                                perms.default_rule = Some(self.rule(v.span));
                            }
                            PermStmt::Rule {
                                effect,
                                permissions,
                                span,
                            } => {
                                let id = self.rule(*span);
                                for p in permissions {
                                    if let Some(slot) = perms.rules.get_mut(p.node.index()) {
                                        let target = if *effect == Effect::Deny {
                                            &mut slot.0
                                        } else {
                                            &mut slot.1
                                        };
                                        target.get_or_insert(id);
                                    }
                                }
                            }
                        }
                    }
                }
                SectionKind::Apps(stmts) => {
                    for s in stmts {
                        let id = self.rule(s.span);
                        for n in &s.names {
                            let key = app_key(&n.node);
                            apps.max_len = apps.max_len.max(key.len());
                            apps.denied.entry(key).or_insert(id);
                        }
                    }
                }
                SectionKind::Sandbox(s) => {
                    if let Some(m) = s.modes.first() {
                        agent.sandbox = m.node;
                    }
                    for st in s.block.iter().flatten() {
                        match st {
                            SandboxStmt::Writable(v, _) => agent
                                .paths
                                .writable
                                .extend(v.iter().map(|p| p.node.clone())),
                            SandboxStmt::Protect(v, _) => agent
                                .paths
                                .protect
                                .extend(v.iter().map(|p| p.node.to_ascii_lowercase())),
                        }
                    }
                }
                SectionKind::Commands(rules) => {
                    for r in rules {
                        let because = r.because.as_ref().map(|b| b.value.clone());
                        let rule = self.rule_because(r.span, because);
                        let pattern = r.pattern.iter().map(|w| w.alternatives.clone()).collect();
                        agent.commands.push(agent::CommandRule {
                            effect: r.effect,
                            pattern,
                            rule,
                        });
                    }
                }
                SectionKind::Mcp(stmts) => {
                    for st in stmts {
                        match st {
                            McpStmt::Server { server, mode, span } => {
                                let rule = self.rule(*span);
                                agent
                                    .mcp
                                    .servers
                                    .entry(server.node.clone())
                                    .or_insert((mode.node, rule));
                            }
                            McpStmt::Tool {
                                server,
                                tool,
                                mode,
                                span,
                                ..
                            } => {
                                let rule = self.rule(*span);
                                agent
                                    .mcp
                                    .tools
                                    .entry(server.clone())
                                    .or_default()
                                    .entry(tool.clone())
                                    .or_insert((mode.node, rule));
                            }
                        }
                    }
                }
                SectionKind::Approvals(a) => {
                    if let Some(m) = a.modes.first() {
                        agent.approvals = m.node;
                    }
                    for g in a.granular.iter().flatten() {
                        if let Some(v) = agent.granular.get_mut(g.category.node.index()) {
                            *v = g.value.node == Switch::On;
                        }
                    }
                }
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
                    agent.guardian = self.guardian(stmts).map_err(|w| internal(&w))?;
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

    fn guardian(&mut self, stmts: &[GuardianStmt]) -> Result<guardian::Guardian, String> {
        use guardian::{GMatcher, Glob, RiskRule};
        let mut g = guardian::Guardian::default();
        let mut patterns: Vec<String> = Vec::new();
        let mut matcher = |m: &Matcher| -> Result<GMatcher, String> {
            Ok(match m {
                Matcher::CommandRegex(s) => {
                    patterns.push(s.value.clone());
                    GMatcher::Regex(patterns.len() - 1)
                }
                Matcher::CommandPrefix(words) => {
                    GMatcher::Prefix(words.iter().map(|w| w.alternatives.clone()).collect())
                }
                Matcher::Path(v) => GMatcher::Path(v.iter().map(|p| Glob::new(&p.node)).collect()),
                Matcher::Host(v) => GMatcher::Host(
                    v.iter()
                        .map(|p| DomainPattern::parse(&p.node).map_err(|e| e.to_string()))
                        .collect::<Result<_, _>>()?,
                ),
                Matcher::Tool(v) => GMatcher::Tool(
                    v.iter()
                        .map(|t| {
                            t.node
                                .split_once('/')
                                .map(|(a, b)| (a.to_string(), b.to_string()))
                                .ok_or("bad tool")
                        })
                        .collect::<Result<_, _>>()?,
                ),
            })
        };
        for st in stmts {
            match st {
                GuardianStmt::Risk {
                    level,
                    category,
                    matcher: m,
                    span,
                } => {
                    let rule = self.rule(*span);
                    g.risks.push(RiskRule {
                        level: level.node,
                        category: category.node,
                        matcher: matcher(m)?,
                        rule,
                    });
                }
                GuardianStmt::DenyCategory { category, span } => {
                    g.deny_categories.push((category.node, self.rule(*span)))
                }
                GuardianStmt::DenyAction { matcher: m, span } => {
                    let rule = self.rule(*span);
                    g.deny_actions.push((matcher(m)?, rule));
                }
                GuardianStmt::Allow { levels, span } => {
                    // Closed downwards (docs/language.md#guardian): `allow medium` lets low
                    // through too, so raising a level never turns a denial
                    // into an approval.
                    let top = levels.iter().map(|l| l.node).max();
                    g.allow = [RiskLevel::Low, RiskLevel::Medium]
                        .into_iter()
                        .filter(|l| top.is_some_and(|t| *l <= t))
                        .collect();
                    g.allow_rule = Some(self.rule(*span));
                }
                GuardianStmt::Authorize { with, span, .. } => {
                    g.authorize = with.node;
                    g.authorize_rule = Some(self.rule(*span));
                }
            }
        }
        guardian::build_regex(&patterns, self.limits.regex_bytes())?;
        g.regex = guardian::RegexSet::from(patterns);
        Ok(g)
    }

    fn network(&mut self, n: &Network, span: Span) -> Result<Net, String> {
        let mut net = Net::empty(NetMode::Constrained);
        let stmts = match n {
            Network::Off => {
                net.mode = NetMode::Off;
                net.mode_rule = Some(self.rule(span));
                return Ok(net);
            }
            Network::Unrestricted => {
                net.mode = NetMode::Unrestricted;
                net.mode_rule = Some(self.rule(span));
                return Ok(net);
            }
            Network::Block(stmts) => stmts,
        };
        let mut domain_rules = Vec::new();
        let mut v4_rules = Vec::new();
        let mut v6_rules = Vec::new();
        for s in stmts {
            match s {
                NetStmt::Default(v) => {
                    net.default_allow = v.node == Effect::Allow;
                    net.default_rule = Some(self.rule(v.span));
                }
                NetStmt::Dns(v) => {
                    let id = self.rule(v.span);
                    net.dns_off = (v.node == Switch::Off).then_some(id);
                }
                NetStmt::Local(v) => {
                    net.local_allow = v.node == Effect::Allow;
                    self.rule(v.span);
                }
                NetStmt::Rule(r) => {
                    let id = self.rule(r.span);
                    let ports = r.ports.as_deref();
                    match &r.target {
                        NetTarget::Domain(text) => {
                            let pattern = DomainPattern::parse(text).map_err(|e| e.to_string())?;
                            if pattern == DomainPattern::Any && r.effect == Effect::Deny {
                                return Err("`deny domain *` reached the compiler".into());
                            }
                            domain_rules.push(DomainRule {
                                pattern,
                                effect: r.effect,
                                rule: id,
                                ports,
                            });
                        }
                        NetTarget::Ip(ip) => {
                            let net_ = ipnet::IpNet::from(*ip);
                            push_ranges(
                                &mut v4_rules,
                                &mut v6_rules,
                                net_,
                                true,
                                r.effect,
                                id,
                                ports,
                            );
                        }
                        NetTarget::Cidr(c) => push_ranges(
                            &mut v4_rules,
                            &mut v6_rules,
                            *c,
                            false,
                            r.effect,
                            id,
                            ports,
                        ),
                        NetTarget::Socket(SocketTarget::Any) => {
                            if r.effect == Effect::Allow {
                                net.socket_any.get_or_insert(id);
                                net.sockets_allowed = true;
                            } else {
                                return Err("`deny socket *` reached the compiler".into());
                            }
                        }
                        NetTarget::Socket(SocketTarget::Path(p)) => {
                            let e = net.sockets.entry(p.clone()).or_insert(SocketEntry {
                                deny: None,
                                allow: None,
                            });
                            if r.effect == Effect::Deny {
                                e.deny.get_or_insert(id);
                            } else {
                                e.allow.get_or_insert(id);
                                net.sockets_allowed = true;
                            }
                        }
                    }
                }
            }
        }
        net.domains = DomainTrie::build(&domain_rules);
        net.v4 = Intervals::build(&v4_rules, u128::from(u32::MAX));
        net.v6 = Intervals::build(&v6_rules, u128::MAX);
        Ok(net)
    }
}

fn push_ranges<'a>(
    v4: &mut Vec<PrefixRule<'a>>,
    v6: &mut Vec<PrefixRule<'a>>,
    net: ipnet::IpNet,
    exact: bool,
    effect: Effect,
    rule: RuleId,
    ports: Option<&'a [PortRange]>,
) {
    let (r4, r6) = rule_ranges(net);
    for (first, last) in r4 {
        v4.push(PrefixRule {
            first,
            last,
            exact: exact && first == last,
            effect,
            rule,
            ports,
        });
    }
    if let Some((first, last)) = r6 {
        v6.push(PrefixRule {
            first,
            last,
            exact,
            effect,
            rule,
            ports,
        });
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
