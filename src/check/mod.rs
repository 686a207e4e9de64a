//! Check: names, shapes and meaning, across every file of a set.
//!
//! Errors are everything the compiler would otherwise have to guess about;
//! warnings are rules that can never decide anything. Every problem of every
//! file is reported in one run.

mod files;
mod lints;
mod network;
mod requirements;

use std::collections::HashMap;

use crate::diag::{Diagnostic, did_you_mean};
use crate::source::Span;
use crate::syntax::ast::*;

/// Errors of the check phase.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    #[error("policy `{0}` is defined more than once")]
    DuplicatePolicy(String),
    #[error("requirements block `{0}` is defined more than once")]
    DuplicateName(String),
    #[error("section `{0}` appears more than once in this block")]
    DuplicateSection(&'static str),
    #[error("`{0}` is set more than once in this block")]
    DuplicateSetting(String),
    #[error("`deny domain *` is not allowed")]
    DenyDomainStar,
    #[error("`deny socket *` is not allowed")]
    DenySocketStar,
    #[error("{0}")]
    Pattern(crate::normalize::pattern::PatternError),
    #[error("`{0}` is not an absolute, normal socket path")]
    SocketPath(String),
    #[error("a policy takes exactly one {0}")]
    OneValue(&'static str),
    #[error("`approvals granular` needs a `{{ ... }}` block")]
    GranularBlockMissing,
    #[error("a `{{ ... }}` block goes with `approvals granular` only")]
    GranularBlockUnexpected,
    #[error("`approvals granular` must set `{0}`")]
    GranularMissing(&'static str),
    #[error("a `because` text must not be blank")]
    BlankBecause,
    #[error("`allow {0}` is not allowed in a guardian")]
    GuardianAllowLevel(&'static str),
    #[error("`{0}` is not a normal path")]
    WritablePath(String),
    #[error("`{0}` is a glob; a writable root is one path")]
    WritableGlob(String),
    #[error("invalid file pattern: {0}")]
    FilePattern(crate::normalize::FilePatternError),
    #[error("`{0}` is not a single file name")]
    ProtectName(String),
    #[error("`{0}` is not a default writable root")]
    ExcludeRoot(String),
    #[error("invalid regular expression: {0}")]
    Regex(crate::regexes::RegexError),
    #[error("the guardian's regular expressions together exceed the automaton size limit")]
    RegexTooBig,
    #[error("only `high` risk takes an authorization level")]
    AuthorizeLevel,
    #[error("`{0}` is not a tool written SERVER/TOOL")]
    ToolPattern(String),
    #[error("`{0}` has a partial `*`: a wildcard stands only for a whole server or tool name")]
    ToolWildcard(String),
    #[error("no policy named `{0}`")]
    UnknownPolicy(String),
    #[error("this test does not say which policy it runs against")]
    TestWithoutPolicy,
    #[error("unknown reason code `{0}`")]
    UnknownReason(String),
}

impl CheckError {
    pub fn code(&self) -> &'static str {
        match self {
            CheckError::DuplicatePolicy(_) => "duplicate_policy",
            CheckError::DuplicateName(_) => "duplicate_name",
            CheckError::DuplicateSection(_) => "duplicate_section",
            CheckError::DuplicateSetting(_) => "duplicate_setting",
            CheckError::DenyDomainStar => "deny_domain_star",
            CheckError::DenySocketStar => "deny_socket_star",
            CheckError::Pattern(crate::normalize::pattern::PatternError::BadWildcard {
                ..
            }) => "bad_wildcard",
            CheckError::Pattern(crate::normalize::pattern::PatternError::Address { .. }) => {
                "address_as_domain"
            }
            CheckError::Pattern(_) => "invalid_pattern",
            CheckError::SocketPath(_) => "invalid_socket_path",
            CheckError::OneValue(_) => "one_value",
            CheckError::GranularBlockMissing | CheckError::GranularBlockUnexpected => {
                "granular_block"
            }
            CheckError::GranularMissing(_) => "granular_missing",
            CheckError::BlankBecause => "blank_because",
            CheckError::GuardianAllowLevel(_) => "guardian_allow_level",
            CheckError::WritablePath(_) => "invalid_writable_root",
            CheckError::WritableGlob(_) => "writable_glob",
            CheckError::FilePattern(_) => "invalid_file_pattern",
            CheckError::ProtectName(_) => "invalid_protected_name",
            CheckError::ExcludeRoot(_) => "invalid_exclude",
            CheckError::Regex(crate::regexes::RegexError::TooBig(_)) => "regex_too_big",
            CheckError::Regex(_) => "invalid_regex",
            CheckError::RegexTooBig => "regex_too_big",
            CheckError::AuthorizeLevel => "authorize_level",
            CheckError::ToolPattern(_) | CheckError::ToolWildcard(_) => "invalid_tool_pattern",
            CheckError::UnknownPolicy(_) => "unknown_policy",
            CheckError::TestWithoutPolicy => "test_without_policy",
            CheckError::UnknownReason(_) => "unknown_reason",
        }
    }

    pub fn help(&self) -> Option<String> {
        use crate::normalize::pattern::PatternError as PE;
        Some(match self {
            CheckError::DuplicatePolicy(_) => "policy names are unique across every file of the set".into(),
            CheckError::DuplicateName(_) => "requirements names are unique across every file of the set: rename one, or merge the two blocks".into(),
            CheckError::DuplicateSection(_) => "merge the two sections into one".into(),
            CheckError::DuplicateSetting(s) => format!("keep one `{s}` statement"),
            CheckError::DenyDomainStar => {
                "`default deny` already denies what no rule allows; deny specific domains instead".into()
            }
            CheckError::DenySocketStar => "sockets are denied unless allowed; remove this rule".into(),
            CheckError::Pattern(PE::BadWildcard { suggestion: Some(s), .. }) => format!("did you mean {s}?"),
            CheckError::Pattern(PE::BadWildcard { .. }) => {
                "a wildcard may only be a leading `*.` or `**.`, or a lone `*`".into()
            }
            CheckError::Pattern(PE::Address { pattern, cidr: false }) => format!("write `ip {pattern}`"),
            CheckError::Pattern(PE::Address { pattern, cidr: true }) => format!("write `cidr {pattern}`"),
            CheckError::Pattern(PE::Invalid { why, .. }) => format!("{}: write a name like `example.com`", why.detail()),
            CheckError::SocketPath(_) => {
                "write an absolute path with no `.` or `..` segment, no `//` and no trailing `/`".into()
            }
            CheckError::OneValue(_) => "lists of allowed values belong in `requirements` blocks".into(),
            CheckError::GranularBlockMissing => {
                "write `approvals granular { sandbox_approval on; rules on; mcp_elicitations on }`".into()
            }
            CheckError::GranularBlockUnexpected => "remove the block, or write `approvals granular`".into(),
            CheckError::GranularMissing(c) => format!("add `{c} on` or `{c} off`"),
            CheckError::BlankBecause => "say why, or drop the `because` clause".into(),
            CheckError::GuardianAllowLevel(_) => {
                "`allow` names `low` and `medium`; high risk goes through `authorize high with LEVEL`, and critical is never approved"
                    .into()
            }
            CheckError::WritablePath(_) => {
                "write an absolute path (\"/var/cache/build\"), one in the workspace (\"build\") or in the home (\"~/.cache\"), with no `..`".into()
            }
            CheckError::WritableGlob(_) => {
                "globs only take access away (`read` or `none`); write each writable directory as a path".into()
            }
            CheckError::FilePattern(crate::normalize::FilePatternError::Climbs(_)) => {
                "write the path the pattern means, without `..`".into()
            }
            CheckError::FilePattern(crate::normalize::FilePatternError::OtherHome(_)) => {
                "write the other home's absolute path, such as \"/home/bob/.ssh\"".into()
            }
            CheckError::FilePattern(crate::normalize::FilePatternError::OpenClass(_)) => {
                "close the class with `]`, as in \"[a-z]\"".into()
            }
            CheckError::FilePattern(_) => {
                "write a path: absolute (\"/etc/shadow\"), in the workspace (\"secrets\") or the home (\"~/.ssh\"); globs `*`, `?`, `[a-z]`, `**`".into()
            }
            CheckError::ProtectName(_) => "protect a name directly under every writable root, such as \".secrets\"".into(),
            CheckError::ExcludeRoot(_) => "`/tmp` is the one default root besides the workspace: write `exclude \"/tmp\"`".into(),
            CheckError::Regex(crate::regexes::RegexError::TooBig(_)) => {
                "split or simplify the expression, or raise the build's `regex_bytes` limit".into()
            }
            CheckError::Regex(_) => "regular expressions use the syntax of the Rust `regex` crate; write them as r\"...\"".into(),
            CheckError::RegexTooBig => format!(
                "the automaton may use at most the build's `regex_bytes` limit ({} KiB by default); split or simplify the expressions",
                crate::Limits::default().regex_bytes / 1024
            ),
            CheckError::AuthorizeLevel => "write `authorize high with LEVEL`".into(),
            CheckError::ToolPattern(_) => "for example `tool github/delete_repo`, `tool github/*` or `tool */delete_repo`".into(),
            CheckError::ToolWildcard(_) => "`*` matches a whole name (`tool github/*`, `tool */delete_repo`); list partial names one by one: `tool github/delete_repo github/delete_branch`".into(),
            CheckError::UnknownReason(r) => {
                return did_you_mean(r, crate::decision::Reason::ALL.iter().map(|r| r.as_str()))
                    .or_else(|| Some("docs/language.md lists every reason code".into()));
            }
            CheckError::UnknownPolicy(_) | CheckError::TestWithoutPolicy => return None,
        })
    }
}

pub(crate) fn error(e: CheckError, span: Span) -> Diagnostic {
    let help = e.help();
    Diagnostic::error(e.code(), e.to_string(), span).with_help(help)
}

/// Checks every file of a set; returns errors and warnings.
pub fn check(files: &[File]) -> Vec<Diagnostic> {
    check_with(files, &crate::Limits::default())
}

/// [`check`] under the given limits (the regex automaton's size).
pub fn check_with(files: &[File], limits: &crate::Limits) -> Vec<Diagnostic> {
    let regex_bytes = limits.regex_bytes();
    let mut diags = Vec::new();
    let mut policies: HashMap<&str, Span> = HashMap::new();
    let mut requirement_names: HashMap<&str, Span> = HashMap::new();
    for file in files {
        for item in &file.items {
            match item {
                Item::Policy(b) => {
                    let name = b.name.node.as_str();
                    if let Some(first) = policies.get(name) {
                        diags.push(
                            error(CheckError::DuplicatePolicy(name.to_string()), b.name.span)
                                .with_label(*first, "first defined here"),
                        );
                    } else {
                        policies.insert(name, b.name.span);
                    }
                    block(b, false, regex_bytes, &mut diags);
                }
                Item::Requirements(b) => {
                    let name = b.name.node.as_str();
                    if let Some(first) = requirement_names.get(name) {
                        diags.push(
                            error(CheckError::DuplicateName(name.to_string()), b.name.span)
                                .with_label(*first, "first defined here"),
                        );
                    } else {
                        requirement_names.insert(name, b.name.span);
                    }
                    block(b, true, regex_bytes, &mut diags);
                    requirements::check_block(b, &mut diags);
                }
                Item::Test(_) | Item::Properties(_) => {}
            }
        }
    }
    let reqs = requirements_of(files);
    let all = policies_of(files);
    for p in &all {
        for r in &reqs {
            requirements::check_policy(p, r, &mut diags);
        }
    }
    requirements::check_set(&reqs, &all, &mut diags);
    // In source order: the order the help of `test_without_policy` lists.
    let names: Vec<&str> = all.iter().map(|b| b.name.node.as_str()).collect();
    for file in files {
        for item in &file.items {
            if let Item::Test(t) = item {
                let own = file.only_policy();
                test_block(t, &names, own, &mut diags);
            }
            if let Item::Properties(p) = item {
                for s in &p.stmts {
                    if let PropStmt::Policy(n) = s
                        && !names.contains(&n.node.as_str())
                    {
                        let help = did_you_mean(&n.node, names.iter().copied());
                        diags.push(
                            error(CheckError::UnknownPolicy(n.node.clone()), n.span)
                                .with_help(help),
                        );
                    }
                }
            }
        }
    }
    crate::diag::sort(&mut diags);
    diags
}

/// A test block's policies and expectations. Without `policy NAME`, a
/// test is decided by the only policy its own file defines, else by the
/// set's only policy (`own`, `names`).
fn test_block(t: &TestBlock, names: &[&str], own: Option<&str>, diags: &mut Vec<Diagnostic>) {
    let mut current = own.or(if names.len() == 1 {
        names.first().copied()
    } else {
        None
    });
    for s in &t.stmts {
        match s {
            TestStmt::Policy(p) => {
                if names.contains(&p.node.as_str()) {
                    current = Some(p.node.as_str());
                } else {
                    let help = did_you_mean(&p.node, names.iter().copied());
                    diags.push(
                        error(CheckError::UnknownPolicy(p.node.clone()), p.span).with_help(help),
                    );
                    current = Some("");
                }
            }
            TestStmt::Expect(e) => {
                if let Some(b) = &e.because {
                    let known = crate::decision::Reason::ALL
                        .iter()
                        .any(|r| r.as_str() == b.node);
                    if !known {
                        diags.push(error(CheckError::UnknownReason(b.node.clone()), b.span));
                    }
                }
                if current.is_none() {
                    let mut listed = names.get(..5).unwrap_or(names).to_vec();
                    if names.len() > 5 {
                        listed.push("…");
                    }
                    diags.push(error(CheckError::TestWithoutPolicy, e.span).with_help(Some(
                        format!(
                            "the set holds several policies ({}) and this file defines none or several of its own; write `policy NAME` in the test, before its expectations",
                            listed.join(", ")
                        ),
                    )));
                    current = Some("");
                }
            }
        }
    }
}

/// Checks one block; `requirements` blocks hold lists of allowed values.
fn block(b: &Block, requirements: bool, regex_bytes: usize, diags: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<&'static str, Span> = HashMap::new();
    for s in &b.sections {
        let kw = s.kind.keyword();
        if let Some(first) = seen.get(kw) {
            diags.push(
                error(CheckError::DuplicateSection(kw), s.keyword)
                    .with_label(*first, "first written here"),
            );
            continue;
        }
        seen.insert(kw, s.keyword);
        match &s.kind {
            SectionKind::Network(Network::Block(stmts)) => network::check(stmts, diags),
            SectionKind::Network(_) => {}
            SectionKind::Proxy(stmts) => {
                let mut once = Once::default();
                for st in stmts {
                    let key = match st {
                        ProxyStmt::Socks5(_) => "socks5",
                        ProxyStmt::Socks5Udp(_) => "socks5_udp",
                        ProxyStmt::Upstream(_) => "upstream",
                        ProxyStmt::Listen(_) => "listen",
                    };
                    once.see(key, st.span(), diags);
                }
            }
            SectionKind::Permissions(stmts) => {
                let mut once = Once::default();
                for st in stmts {
                    if let PermStmt::Default(v) = st {
                        once.see("default", v.span, diags);
                    }
                }
                lints::permissions(stmts, diags);
            }
            _ if requirements
                && matches!(
                    s.kind,
                    SectionKind::Sandbox(_)
                        | SectionKind::Approvals(_)
                        | SectionKind::Reviewer(_)
                        | SectionKind::WebSearch(_)
                ) => {}
            SectionKind::Sandbox(sb) => {
                one_value(&sb.modes, "sandbox mode", s.span, diags);
                sandbox_block_effect(sb, diags);
                files::lint(sb, diags);
                for st in sb.block.iter().flatten() {
                    match st {
                        SandboxStmt::Writable(v, _) => {
                            for p in v {
                                match crate::normalize::FilePattern::parse(&p.node) {
                                    Ok(f) if f.is_literal() => {}
                                    Ok(_) => diags.push(error(
                                        CheckError::WritableGlob(p.node.clone()),
                                        p.span,
                                    )),
                                    Err(_) => diags.push(error(
                                        CheckError::WritablePath(p.node.clone()),
                                        p.span,
                                    )),
                                }
                            }
                        }
                        SandboxStmt::Read(v, _) | SandboxStmt::None(v, _) => {
                            for p in v {
                                if let Err(e) = crate::normalize::FilePattern::parse(&p.node) {
                                    diags.push(error(CheckError::FilePattern(e), p.span));
                                }
                            }
                        }
                        SandboxStmt::Protect(v, _) => {
                            for p in v.iter().filter(|p| {
                                p.node.is_empty()
                                    || p.node.contains(['/', '\\', '\0'])
                                    || p.node == "."
                                    || p.node == ".."
                            }) {
                                diags.push(error(CheckError::ProtectName(p.node.clone()), p.span));
                            }
                        }
                        SandboxStmt::Exclude(v, _) => {
                            for p in v.iter().filter(|p| p.node != "/tmp") {
                                diags.push(error(CheckError::ExcludeRoot(p.node.clone()), p.span));
                            }
                        }
                    }
                }
            }
            SectionKind::Approvals(a) => {
                one_value(&a.modes, "approval policy", s.span, diags);
                approvals(a, s.span, diags);
            }
            SectionKind::Reviewer(r) => one_value(r, "reviewer", s.span, diags),
            SectionKind::WebSearch(w) => one_value(w, "web search mode", s.span, diags),
            SectionKind::Commands(rules) => {
                for r in rules {
                    if let Some(b) = &r.because {
                        if b.value.trim().is_empty() {
                            diags.push(error(CheckError::BlankBecause, b.span));
                        }
                    }
                }
                lints::commands(rules, diags);
            }
            SectionKind::Guardian(stmts) => guardian(stmts, s.keyword, regex_bytes, diags),
            SectionKind::Mcp(stmts) => {
                let mut once = Once::default();
                for st in stmts {
                    match st {
                        McpStmt::Server { server, span, .. } => {
                            once.see(format!("server {}", server.node), *span, diags)
                        }
                        McpStmt::Tool {
                            server, tool, span, ..
                        } => once.see(format!("tool {server}/{tool}"), *span, diags),
                    }
                }
            }
            SectionKind::Apps(_) | SectionKind::Log(_) => {}
        }
    }
}

/// A `{ ... }` block after `sandbox read-only` or `sandbox
/// danger-full-access`: writable roots, protected names and `exclude` mean
/// something under `workspace-write` only.
fn sandbox_block_effect(sb: &SandboxSection, diags: &mut Vec<Diagnostic>) {
    let Some(mode) = sb.modes.first() else {
        return;
    };
    if mode.node == SandboxMode::WorkspaceWrite {
        return;
    }
    let read_only = mode.node == SandboxMode::ReadOnly;
    for st in sb.block.iter().flatten() {
        let (what, span) = match st {
            SandboxStmt::Writable(_, span) => ("writable", *span),
            SandboxStmt::Protect(_, span) => ("protect", *span),
            SandboxStmt::Exclude(_, span) => ("exclude", *span),
            // `none` (and `read` beneath it) still decide reads.
            SandboxStmt::Read(..) | SandboxStmt::None(..) if read_only => continue,
            SandboxStmt::Read(_, span) => ("read", *span),
            SandboxStmt::None(_, span) => ("none", *span),
        };
        let why = if read_only {
            "nothing is writable without a prompt"
        } else {
            "every read and write is allowed"
        };
        diags.push(
            Diagnostic::warning(
                "no_effect",
                format!(
                    "`{what}` has no effect under `sandbox {}`: {why}",
                    mode.node
                ),
                span,
            )
            .with_label(mode.span, "this mode")
            .with_help(Some(
                "remove the statement, or write `sandbox workspace-write { ... }`".into(),
            )),
        );
    }
}

fn guardian(
    stmts: &[GuardianStmt],
    keyword: Span,
    regex_bytes: usize,
    diags: &mut Vec<Diagnostic>,
) {
    let mut patterns = Vec::new();
    let mut matcher = |m: &Matcher, diags: &mut Vec<Diagnostic>| match m {
        Matcher::CommandRegex(s) => {
            match crate::regexes::build_regex(std::slice::from_ref(&s.value), regex_bytes) {
                Ok(_) => patterns.push(s.value.clone()),
                Err(e) => diags.push(error(CheckError::Regex(e), s.span)),
            }
        }
        Matcher::Host(v) => {
            for h in v {
                if let Err(e) = crate::normalize::pattern::DomainPattern::parse(&h.node) {
                    diags.push(error(CheckError::Pattern(e), h.span));
                }
            }
        }
        Matcher::Tool(v) => {
            for t in v {
                let ok = t
                    .node
                    .split_once('/')
                    .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty() && !b.contains('/'));
                let partial = t
                    .node
                    .split('/')
                    .any(|part| part != "*" && part.contains('*'));
                if !ok {
                    diags.push(error(CheckError::ToolPattern(t.node.clone()), t.span));
                } else if partial {
                    diags.push(error(CheckError::ToolWildcard(t.node.clone()), t.span));
                }
            }
        }
        Matcher::CommandPrefix(_) | Matcher::Path(_) => {}
    };
    let mut once = Once::default();
    for st in stmts {
        match st {
            GuardianStmt::Allow { span, .. } => once.see("allow", *span, diags),
            GuardianStmt::Authorize { span, .. } => once.see("authorize", *span, diags),
            _ => {}
        }
    }
    for st in stmts {
        match st {
            GuardianStmt::Allow { levels, .. } => {
                for l in levels {
                    if matches!(l.node, RiskLevel::High | RiskLevel::Critical) {
                        diags.push(error(
                            CheckError::GuardianAllowLevel(l.node.as_str()),
                            l.span,
                        ));
                    }
                }
            }
            GuardianStmt::Authorize { level, .. } if level.node != RiskLevel::High => {
                diags.push(error(CheckError::AuthorizeLevel, level.span));
            }
            GuardianStmt::Risk { matcher: m, .. } | GuardianStmt::DenyAction { matcher: m, .. } => {
                matcher(m, diags)
            }
            _ => {}
        }
    }
    if crate::regexes::build_regex(&patterns, regex_bytes).is_err() {
        diags.push(error(CheckError::RegexTooBig, keyword));
    }
}

fn one_value<T>(
    values: &[Spanned<T>],
    what: &'static str,
    span: Span,
    diags: &mut Vec<Diagnostic>,
) {
    if values.len() != 1 {
        let at = values.get(1).map_or(span, |v| v.span);
        diags.push(error(CheckError::OneValue(what), at));
    }
}

fn approvals(a: &ApprovalsSection, span: Span, diags: &mut Vec<Diagnostic>) {
    let granular = a
        .modes
        .first()
        .is_some_and(|m| m.node == ApprovalMode::Granular);
    match (&a.granular, granular) {
        (None, true) => diags.push(error(CheckError::GranularBlockMissing, span)),
        (Some(_), false) => diags.push(error(CheckError::GranularBlockUnexpected, span)),
        (Some(stmts), true) => {
            let mut once = Once::default();
            for g in stmts {
                once.see(g.category.node.as_str(), g.span, diags);
            }
            for required in [
                PromptCategory::SandboxApproval,
                PromptCategory::Rules,
                PromptCategory::McpElicitations,
            ] {
                if !stmts.iter().any(|g| g.category.node == required) {
                    diags.push(error(CheckError::GranularMissing(required.as_str()), span));
                }
            }
        }
        (None, false) => {}
    }
}

/// Reports settings written twice in one section.
#[derive(Default)]
struct Once(HashMap<String, Span>);

impl Once {
    fn see(&mut self, key: impl Into<String>, span: Span, diags: &mut Vec<Diagnostic>) {
        let key = key.into();
        match self.0.get(&key) {
            Some(first) => diags.push(
                error(CheckError::DuplicateSetting(key), span).with_label(*first, "first set here"),
            ),
            None => {
                self.0.insert(key, span);
            }
        }
    }
}
