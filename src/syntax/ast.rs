//! The typed AST. Every node carries a [`Span`]; spans never take part in
//! equality (see [`crate::source::Span`]).
//!
//! The AST is faithful to what was written (a domain pattern keeps its
//! spelling, an IPv4-mapped address stays mapped): meaning is assigned by the
//! checker and the compiler, so that the formatter can print exactly what the
//! user meant.
//!
//! Not part of the public API (only the doc-hidden `gatehouse::testing`
//! reaches it, for the reference evaluator), so its many plain fields and
//! variants are documented where they are not obvious, not one by one.
#![allow(missing_docs)]

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::source::Span;

pub use crate::vocab::{
    ApprovalMode, AuthLevel, CommandEffect, Effect, ListenScope, LogField, McpMode, Permission,
    PromptCategory, Reviewer, RiskCategory, RiskLevel, SandboxMode, Switch, WebSearchMode,
};

/// A value with the span it was written at.
#[derive(Clone, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub struct Spanned<T> {
    pub node: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(node: T, span: Span) -> Self {
        Spanned { node, span }
    }
}

/// A string literal: its unescaped value, and whether it was written raw
/// (`r"..."`), which the formatter keeps.
#[derive(Clone, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub struct Str {
    pub value: String,
    pub raw: bool,
    pub span: Span,
}

/// One parsed file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct File {
    pub items: Vec<Item>,
    /// Comments, in source order; the formatter puts them back.
    pub comments: Vec<Comment>,
}

impl File {
    /// The name of the only policy the file defines, if it defines exactly
    /// one: what its `test` blocks run against without `policy NAME`.
    pub(crate) fn only_policy(&self) -> Option<&str> {
        let mut names = self.items.iter().filter_map(|i| match i {
            Item::Policy(b) => Some(b.name.node.as_str()),
            _ => None,
        });
        match (names.next(), names.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    }
}

/// Two files are equal when their items are; comments are layout.
impl PartialEq for File {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct Comment {
    /// The text after `#`, without the line break.
    pub text: String,
    pub span: Span,
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum Item {
    Policy(Block),
    Requirements(Block),
    Test(TestBlock),
    Properties(PropertiesBlock),
}

impl Item {
    pub fn span(&self) -> Span {
        match self {
            Item::Policy(b) | Item::Requirements(b) => b.span,
            Item::Test(t) => t.span,
            Item::Properties(p) => p.span,
        }
    }
}

/// The `requirements` blocks of a set of files, in order.
pub fn requirements_of(files: &[File]) -> Vec<&Block> {
    files
        .iter()
        .flat_map(|f| &f.items)
        .filter_map(|i| {
            if let Item::Requirements(b) = i {
                Some(b)
            } else {
                None
            }
        })
        .collect()
}

/// Every `policy` block of a set, in source order.
pub fn policies_of(files: &[File]) -> Vec<&Block> {
    files
        .iter()
        .flat_map(|f| &f.items)
        .filter_map(|i| match i {
            Item::Policy(b) => Some(b),
            _ => None,
        })
        .collect()
}

/// The default of a listed setting under several requirements blocks
/// (docs/language.md#requirements): the first entry, in block order, that
/// every block's list (of those that write one) holds; `None` when they
/// share none.
pub fn agreed_default<T: PartialEq + Clone>(
    requirements: &[&Block],
    list: impl Fn(&SectionKind) -> Option<&Vec<Spanned<T>>>,
) -> Option<Spanned<T>> {
    let lists: Vec<&Vec<Spanned<T>>> = requirements
        .iter()
        .filter_map(|r| r.sections.iter().find_map(|s| list(&s.kind)))
        .collect();
    lists
        .iter()
        .flat_map(|l| l.iter())
        .find(|v| lists.iter().all(|l| l.iter().any(|x| x.node == v.node)))
        .cloned()
}

/// A `policy` or `requirements` block.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub name: Spanned<String>,
    pub sections: Vec<Section>,
    pub span: Span,
}

impl Block {
    /// The statements of the block, every section's counted (a section
    /// without statements counts one); what `Limits::rules_per_policy`
    /// bounds.
    pub fn rule_count(&self) -> usize {
        self.sections
            .iter()
            .map(|s| match &s.kind {
                SectionKind::Network(Network::Block(v)) => v.len(),
                SectionKind::Network(_) => 1,
                SectionKind::Proxy(v) => v.len(),
                SectionKind::Permissions(v) => v.len(),
                SectionKind::Apps(v) => v.len(),
                SectionKind::Sandbox(x) => 1 + x.block.as_ref().map_or(0, Vec::len),
                SectionKind::Approvals(x) => 1 + x.granular.as_ref().map_or(0, Vec::len),
                SectionKind::Reviewer(_) | SectionKind::WebSearch(_) => 1,
                SectionKind::Mcp(v) => v.len(),
                SectionKind::Commands(v) => v.len(),
                SectionKind::Guardian(v) => v.len(),
                SectionKind::Log(v) => v.len(),
            })
            .sum()
    }
}

/// A section of a block, with the span of the whole section.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct Section {
    pub kind: SectionKind,
    pub span: Span,
    /// The span of the section's keyword (for "duplicate section" messages).
    pub keyword: Span,
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum SectionKind {
    Network(Network),
    Proxy(Vec<ProxyStmt>),
    Permissions(Vec<PermStmt>),
    Apps(Vec<AppsStmt>),
    Sandbox(SandboxSection),
    Approvals(ApprovalsSection),
    Reviewer(Vec<Spanned<Reviewer>>),
    WebSearch(Vec<Spanned<WebSearchMode>>),
    Mcp(Vec<McpStmt>),
    Commands(Vec<CommandRule>),
    Guardian(Vec<GuardianStmt>),
    Log(Vec<LogStmt>),
}

impl SectionKind {
    /// The section's keyword.
    pub fn keyword(&self) -> &'static str {
        match self {
            SectionKind::Network(_) => "network",
            SectionKind::Proxy(_) => "proxy",
            SectionKind::Permissions(_) => "permissions",
            SectionKind::Apps(_) => "apps",
            SectionKind::Sandbox(_) => "sandbox",
            SectionKind::Approvals(_) => "approvals",
            SectionKind::Reviewer(_) => "reviewer",
            SectionKind::WebSearch(_) => "web_search",
            SectionKind::Mcp(_) => "mcp",
            SectionKind::Commands(_) => "commands",
            SectionKind::Guardian(_) => "guardian",
            SectionKind::Log(_) => "log",
        }
    }
}

/// Every section keyword, for suggestions.
pub const SECTION_KEYWORDS: &[&str] = &[
    "network",
    "proxy",
    "permissions",
    "apps",
    "sandbox",
    "approvals",
    "reviewer",
    "web_search",
    "mcp",
    "commands",
    "guardian",
    "log",
];

// ------------------------------------------------------------------ network

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum Network {
    Off,
    Unrestricted,
    Block(Vec<NetStmt>),
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum NetStmt {
    Default(Spanned<Effect>),
    Dns(Spanned<Switch>),
    Local(Spanned<Effect>),
    Rule(NetRule),
}

/// `allow|deny domain|ip|cidr|socket TARGET [port PORTS]`.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct NetRule {
    pub effect: Effect,
    pub target: NetTarget,
    /// `None` = every port.
    pub ports: Option<Vec<PortRange>>,
    pub span: Span,
    /// The span of the target value.
    pub target_span: Span,
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum NetTarget {
    /// A domain pattern as written (normalised by the checker and compiler).
    Domain(String),
    Ip(IpAddr),
    Cidr(IpNet),
    Socket(SocketTarget),
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum SocketTarget {
    /// `allow socket *`.
    Any,
    Path(String),
}

/// An inclusive port range (`443` is `443-443`).
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Ord, PartialOrd, Serialize, Deserialize)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

/// `443` or `8000-8999`, as the language writes it.
impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

impl PortRange {
    pub fn contains(&self, port: u16) -> bool {
        self.lo <= port && port <= self.hi
    }
}

// -------------------------------------------------------------------- proxy

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum ProxyStmt {
    Socks5(Spanned<Switch>),
    Socks5Udp(Spanned<Switch>),
    Upstream(Spanned<Switch>),
    Listen(Spanned<ListenScope>),
}

impl ProxyStmt {
    pub fn span(&self) -> Span {
        match self {
            ProxyStmt::Socks5(s) | ProxyStmt::Socks5Udp(s) | ProxyStmt::Upstream(s) => s.span,
            ProxyStmt::Listen(s) => s.span,
        }
    }
}

// ------------------------------------------------------- permissions, apps

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum PermStmt {
    Default(Spanned<Effect>),
    Rule {
        effect: Effect,
        permissions: Vec<Spanned<Permission>>,
        span: Span,
    },
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct AppsStmt {
    pub names: Vec<Spanned<String>>,
    pub span: Span,
}

// ------------------------------------------------- sandbox and approvals

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct SandboxSection {
    /// One mode in a policy; the cap in requirements.
    pub modes: Vec<Spanned<SandboxMode>>,
    /// `Some` when a `{ ... }` block was written.
    pub block: Option<Vec<SandboxStmt>>,
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum SandboxStmt {
    Writable(Vec<Spanned<String>>, Span),
    Protect(Vec<Spanned<String>>, Span),
    /// `exclude "/tmp"`: a default root that is not writable.
    Exclude(Vec<Spanned<String>>, Span),
    /// `read PATTERN...`: readable, not writable.
    Read(Vec<Spanned<String>>, Span),
    /// `none PATTERN...`: neither readable nor writable.
    None(Vec<Spanned<String>>, Span),
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct ApprovalsSection {
    /// One mode in a policy; the allowed list in requirements.
    pub modes: Vec<Spanned<ApprovalMode>>,
    /// The `granular { ... }` block, when written.
    pub granular: Option<Vec<GranularStmt>>,
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct GranularStmt {
    pub category: Spanned<PromptCategory>,
    pub value: Spanned<Switch>,
    pub span: Span,
}

// ---------------------------------------------------------------------- mcp

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum McpStmt {
    Server {
        server: Spanned<String>,
        mode: Spanned<McpMode>,
        span: Span,
    },
    Tool {
        server: String,
        tool: String,
        target: Span,
        mode: Spanned<McpMode>,
        span: Span,
    },
}

// ----------------------------------------------------------------- commands

/// One position of a command pattern: a literal or `[alternatives]`.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct CommandWord {
    pub alternatives: Vec<String>,
    /// Whether it was written with brackets (kept by the formatter).
    pub bracketed: bool,
    pub span: Span,
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct CommandRule {
    pub effect: CommandEffect,
    pub pattern: Vec<CommandWord>,
    pub because: Option<Str>,
    pub span: Span,
}

// ----------------------------------------------------------------- guardian

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum Matcher {
    CommandRegex(Str),
    CommandPrefix(Vec<CommandWord>),
    Path(Vec<Spanned<String>>),
    Host(Vec<Spanned<String>>),
    Tool(Vec<Spanned<String>>),
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum GuardianStmt {
    Risk {
        level: Spanned<RiskLevel>,
        category: Spanned<RiskCategory>,
        matcher: Matcher,
        span: Span,
    },
    DenyCategory {
        category: Spanned<RiskCategory>,
        span: Span,
    },
    DenyAction {
        matcher: Matcher,
        span: Span,
    },
    Allow {
        levels: Vec<Spanned<RiskLevel>>,
        span: Span,
    },
    Authorize {
        level: Spanned<RiskLevel>,
        with: Spanned<AuthLevel>,
        span: Span,
    },
}

// ---------------------------------------------------------------------- log

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct LogStmt {
    pub fields: Vec<Spanned<LogField>>,
    pub span: Span,
}

// --------------------------------------------------------------- properties

/// `properties ["DESCRIPTION"] { ... }`: claims over every query of a
/// pattern, proved by `policyc prove` and `policyc test`.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct PropertiesBlock {
    pub description: Option<Str>,
    pub stmts: Vec<PropStmt>,
    pub span: Span,
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum PropStmt {
    /// `policy NAME`: the policy the following claims hold for (before
    /// any: every policy of the set).
    Policy(Spanned<String>),
    Claim(Claim),
}

/// `never|always OUTCOME PATTERN`.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// `always` (every query of the pattern is decided so) rather than
    /// `never` (no query of it is).
    pub always: bool,
    /// `allow`, `ask` or `deny`.
    pub outcome: Spanned<String>,
    pub pattern: Pattern,
    /// The pattern as written, for reports.
    pub pattern_text: String,
    pub span: Span,
}

/// A set of queries (docs/language.md#properties).
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum Pattern {
    /// `connect HOST[:PORTS]`, every transport.
    Connect {
        host: HostPattern,
        /// `None`: every port.
        ports: Option<Vec<PortRange>>,
    },
    /// `dns NAME-PATTERN`.
    Dns(String),
    /// `socket "PATH"` or `socket *`.
    Socket(Option<String>),
    Upstream,
    WebSearch,
    /// `tool PERMISSION` or `tool *`.
    Tool(Option<String>),
    /// `prompt CATEGORY` or `prompt *`.
    Prompt(Option<String>),
    /// `app NAME` or `app *`.
    App(Option<String>),
    /// `mcp SERVER/TOOL`, either part `*`, every annotation.
    Mcp {
        server: Option<String>,
        tool: Option<String>,
    },
    /// `write GLOB [in "WORKSPACE"]` (sampled).
    Write {
        glob: String,
        workspace: Option<String>,
    },
    /// `read GLOB [in "WORKSPACE"]` (sampled).
    Read {
        glob: String,
        workspace: Option<String>,
    },
    /// `exec WORD... [*]`: argv of exactly these words, or with `*`
    /// beginning with them (sampled).
    Exec {
        words: Vec<String>,
        rest: bool,
    },
}

/// The hosts of a `connect` pattern.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum HostPattern {
    /// `*`: every name and every address.
    Any,
    /// A domain pattern as rules write it (`x.com`, `*.x.com`, `**.x.com`).
    Domain(String),
    /// One address, canonical.
    Ip(std::net::IpAddr),
    /// A prefix.
    Cidr(ipnet::IpNet),
}

// -------------------------------------------------------------------- tests

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct TestBlock {
    pub description: Str,
    pub stmts: Vec<TestStmt>,
    pub span: Span,
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub enum TestStmt {
    /// `policy NAME`: the policy the following expectations run against.
    Policy(Spanned<String>),
    Expect(Expectation),
}

#[derive(Clone, Debug, Eq, Serialize, Deserialize)]
pub struct Expectation {
    /// The expected decision word (`allow`, `deny`, `ask`, ...).
    pub decision: Spanned<String>,
    pub query: crate::query::Query,
    /// The query as written, for reports.
    pub query_text: String,
    pub because: Option<Spanned<String>>,
    pub span: Span,
}

/// `query_text` is layout (how the query was spelled), not meaning.
impl PartialEq for Expectation {
    fn eq(&self, other: &Self) -> bool {
        self.decision == other.decision
            && self.query == other.query
            && self.because == other.because
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tables indexed by value rely on `index` being the position in `ALL`.
    #[test]
    fn index_is_the_position_in_all() {
        for (i, p) in Permission::ALL.iter().enumerate() {
            assert_eq!(p.index(), i);
        }
        for (i, c) in PromptCategory::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        for (i, l) in RiskLevel::ALL.iter().enumerate() {
            assert_eq!(l.index(), i);
        }
    }
}
