//! Builds the typed AST from pest pairs: one function per grammar rule.
//!
//! Statements the grammar did not accept arrive as `bad_stmt`; they are
//! re-parsed with the statement rule of their block so that the error
//! points at the exact token, and an unknown leading keyword gets a
//! "did you mean".

use std::net::IpAddr;

use ipnet::IpNet;
use pest::Parser;
use pest::iterators::Pair;

use super::ast::*;
use super::error::SyntaxError;
use super::{PolicyParser, Rule, scan};
use crate::Limits;
use crate::diag::{Diagnostic, one_of};
use crate::query::{Annotations, Assessment, Query, ReviewOutcome, ReviewStatus, Via};
use crate::source::{FileId, Span};

type P<'i> = Pair<'i, Rule>;

/// Parses one policy file under the default [`Limits`]. The AST holds every
/// statement that could be understood; the diagnostics describe everything
/// that could not.
pub fn parse_file(file: FileId, text: &str) -> (File, Vec<Diagnostic>) {
    parse_file_with(file, text, &Limits::default())
}

/// [`parse_file`] under the given limits: a file over
/// [`Limits::source_bytes`] (`source_too_large`) or whose braces nest deeper
/// than [`Limits::nesting_depth`] (`too_deeply_nested`) is refused here,
/// before the grammar sees it, so that no entry point that parses (build,
/// check, fmt, the browser module) can be made to overflow the stack. The
/// grammar's recovery rule for braces is recursive, and pest guards its
/// stack only on some native targets.
pub fn parse_file_with(file: FileId, text: &str, limits: &Limits) -> (File, Vec<Diagnostic>) {
    let refuse = |code: &'static str, message: String, at: usize, help: &str| {
        let diag = Diagnostic::error(code, message, Span::new(file, at, at.saturating_add(1)))
            .with_help(Some(help.into()));
        (File::default(), vec![diag])
    };
    if text.len() > limits.source_bytes {
        return refuse(
            "source_too_large",
            format!(
                "this file is {} bytes, over the limit of {}",
                text.len(),
                limits.source_bytes
            ),
            0,
            "split the policies over several files",
        );
    }
    if let Some(at) = scan::too_deep(text, limits.nesting_depth) {
        return refuse(
            "too_deeply_nested",
            format!("braces nest more than {} deep here", limits.nesting_depth),
            at,
            "policies nest three deep (policy, section, block); look for an unclosed `{`",
        );
    }
    let mut b = Builder {
        file,
        diags: Vec::new(),
        base: 0,
    };
    let comments = scan::comments(file, text);
    let items = match PolicyParser::parse(Rule::file, text) {
        Ok(mut pairs) => match pairs.next() {
            Some(file_pair) => b.file(file_pair),
            None => Vec::new(),
        },
        Err(e) => {
            b.pest_error(&e, text, 0);
            Vec::new()
        }
    };
    (File { items, comments }, b.diags)
}

/// Parses one query in the text form (docs/language.md#tests-and-queries).
pub fn parse_query(text: &str) -> Result<Query, SyntaxError> {
    let mut b = Builder {
        file: FileId(0),
        diags: Vec::new(),
        base: 0,
    };
    let pairs = match PolicyParser::parse(Rule::query_line, text) {
        Ok(p) => p,
        Err(e) => {
            b.pest_error(&e, text, 0);
            return Err(b.take_first_error());
        }
    };
    let query = pairs.flatten().find(|p| p.as_rule() == Rule::query);
    match query.and_then(|q| b.query(q)) {
        Some(q) if b.diags.is_empty() => Ok(q),
        _ => Err(b.take_first_error()),
    }
}

/// What a block accepts, for recovery and suggestions.
struct Ctx {
    what: &'static str,
    keywords: &'static [&'static str],
    rule: Rule,
}

const FILE_CTX: Ctx = Ctx {
    what: "a file",
    keywords: &["policy", "requirements", "test"],
    rule: Rule::item,
};
const BLOCK_CTX: Ctx = Ctx {
    what: "a policy block",
    keywords: SECTION_KEYWORDS,
    rule: Rule::section,
};
const NETWORK_CTX: Ctx = Ctx {
    what: "a `network` block",
    keywords: &["default", "dns", "local", "allow", "deny"],
    rule: Rule::net_stmt,
};
const PROXY_CTX: Ctx = Ctx {
    what: "a `proxy` block",
    keywords: &["socks5", "socks5_udp", "upstream", "listen"],
    rule: Rule::proxy_stmt,
};
const PERM_CTX: Ctx = Ctx {
    what: "a `permissions` block",
    keywords: &["default", "allow", "deny"],
    rule: Rule::perm_stmt,
};
const APPS_CTX: Ctx = Ctx {
    what: "an `apps` block",
    keywords: &["deny"],
    rule: Rule::apps_stmt,
};
const SANDBOX_CTX: Ctx = Ctx {
    what: "a `sandbox` block",
    keywords: &["writable", "protect"],
    rule: Rule::sandbox_stmt,
};
const GRANULAR_CTX: Ctx = Ctx {
    what: "an `approvals granular` block",
    keywords: &[
        "sandbox_approval",
        "rules",
        "mcp_elicitations",
        "request_permissions",
        "skill_approval",
    ],
    rule: Rule::granular_stmt,
};
const MCP_CTX: Ctx = Ctx {
    what: "an `mcp` block",
    keywords: &["server", "tool"],
    rule: Rule::mcp_stmt,
};
const COMMANDS_CTX: Ctx = Ctx {
    what: "a `commands` block",
    keywords: &["allow", "prompt", "forbid"],
    rule: Rule::cmd_rule,
};
const GUARDIAN_CTX: Ctx = Ctx {
    what: "a `guardian` block",
    keywords: &["risk", "deny", "allow", "authorize"],
    rule: Rule::guardian_stmt,
};
const LOG_CTX: Ctx = Ctx {
    what: "a `log` block",
    keywords: &["mask"],
    rule: Rule::log_stmt,
};
const TEST_CTX: Ctx = Ctx {
    what: "a `test` block",
    keywords: &["policy", "expect"],
    rule: Rule::test_stmt,
};

const QUERY_KINDS: &[&str] = &[
    "connect",
    "dns",
    "resolved",
    "socket",
    "listen",
    "upstream",
    "tool",
    "app",
    "write",
    "exec",
    "mcp",
    "prompt",
    "review",
    "web_search",
];

/// The decision words an expectation may name.
pub(crate) const DECISION_WORDS: &[&str] = &[
    "allow",
    "deny",
    "ask",
    "review",
    "approved",
    "denied",
    "timed_out",
    "aborted",
    "cached",
    "disabled",
    "live",
    "indexed",
];

struct Builder {
    file: FileId,
    diags: Vec<Diagnostic>,
    /// Offset added to spans (non-zero while re-parsing a statement).
    base: usize,
}

impl Builder {
    /// The span of a pair, without the blanks and comment that pest's
    /// implicit skip leaves at its end (an optional part that did not match
    /// does not give them back).
    fn span(&self, p: &P<'_>) -> Span {
        let s = p.as_span();
        let text = p.as_str();
        let last_line = text.rfind('\n').map_or(0, |i| i + 1);
        let cut = scan::comments(self.file, text)
            .iter()
            .map(|c| c.span.start as usize)
            .find(|&c| c >= last_line)
            .unwrap_or(text.len());
        let len = text
            .get(..cut)
            .map_or(cut, |t| t.trim_end_matches([' ', '\t']).len());
        Span::new(
            self.file,
            self.base + s.start(),
            self.base + s.start() + len,
        )
    }

    fn err(&mut self, e: SyntaxError, span: Span) {
        let help = e.help();
        self.diags
            .push(Diagnostic::error(e.code(), e.to_string(), span).with_help(help));
    }

    fn internal(&mut self, p: &P<'_>) {
        let span = self.span(p);
        self.err(SyntaxError::Internal, span);
    }

    fn take_first_error(&mut self) -> SyntaxError {
        let d = self.diags.first();
        SyntaxError::InvalidQuery {
            message: d.map_or_else(|| "invalid query".into(), |d| d.message.clone()),
            help: d.and_then(|d| d.help.clone()),
        }
    }

    // ---------------------------------------------------------- recovery

    /// Reports a statement the grammar did not accept.
    fn bad(&mut self, p: P<'_>, ctx: &Ctx) {
        let text = p.as_str();
        let start = self.base + p.as_span().start();
        let first: String = text
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            .collect();
        if first.is_empty() && text.trim() == "}" {
            let span = Span::new(self.file, start, start + 1);
            self.err(
                SyntaxError::Unexpected {
                    found: "`}`".into(),
                    expected: format!("one of {}", one_of(ctx.keywords)),
                    help: Some("this closing brace has no opening brace".into()),
                },
                span,
            );
            return;
        }
        if !first.is_empty() && !ctx.keywords.contains(&first.as_str()) {
            let span = Span::new(self.file, start, start + first.len());
            self.err(
                SyntaxError::UnknownStatement {
                    found: first,
                    context: ctx.what,
                    expected: ctx.keywords.to_vec(),
                },
                span,
            );
            return;
        }
        // Every statement rule ends at `eos` (a separator, `}` or the end),
        // so it either fails where the line goes wrong or stops at a `}`.
        match PolicyParser::parse(ctx.rule, text) {
            Err(e) => self.pest_error(&e, text, start),
            Ok(pairs) => {
                let end = pairs.last().map_or(0, |p| p.as_span().end());
                let rest = text.get(end..).unwrap_or("");
                let skipped = rest.len() - rest.trim_start().len();
                let (at, found) = if rest.trim().is_empty() {
                    (0, text.trim())
                } else {
                    (end + skipped, rest.trim())
                };
                let span = Span::new(self.file, start + at, start + text.len());
                self.err(
                    SyntaxError::Unexpected {
                        found: format!("`{found}`"),
                        expected: "the end of the statement".into(),
                        help: Some("end a statement with a new line or `;`".into()),
                    },
                    span,
                );
            }
        }
    }

    /// Turns a pest error into a diagnostic at the exact position.
    fn pest_error(&mut self, e: &pest::error::Error<Rule>, text: &str, base: usize) {
        use pest::error::{ErrorVariant, InputLocation};
        let pos = match e.location {
            InputLocation::Pos(p) => p,
            InputLocation::Span((s, _)) => s,
        };
        let rest = text.get(pos..).unwrap_or("");
        let found_word: String = rest
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '{' | '}' | ',' | '#'))
            .collect();
        let (found, len) = if rest.is_empty() {
            ("end of input".to_string(), 0)
        } else if rest.starts_with(['\n', '\r']) {
            ("end of line".to_string(), 1)
        } else if found_word.is_empty() {
            let c = rest.chars().next().unwrap_or(' ');
            (format!("`{c}`"), c.len_utf8())
        } else {
            (format!("`{found_word}`"), found_word.len())
        };
        let mut expected: Vec<&'static str> = Vec::new();
        if let ErrorVariant::ParsingError { positives, .. } = &e.variant {
            for r in positives {
                let d = describe(*r);
                if !expected.contains(&d) {
                    expected.push(d);
                }
            }
        }
        let mut keywords: Vec<&str> = expected
            .iter()
            .filter_map(|d| d.strip_prefix('`').and_then(|d| d.strip_suffix('`')))
            .collect();
        if let ErrorVariant::ParsingError { positives, .. } = &e.variant {
            if positives
                .iter()
                .any(|r| matches!(r, Rule::query | Rule::review_action))
            {
                keywords.extend(QUERY_KINDS);
            }
        }
        let help = crate::diag::did_you_mean(&found_word, keywords.iter().copied());
        let expected_text = match expected.as_slice() {
            [] => "a statement".to_string(),
            [one] => (*one).to_string(),
            many => {
                let (last, rest) = many.split_last().map_or((&"", &[][..]), |(l, r)| (l, r));
                format!("{} or {last}", rest.join(", "))
            }
        };
        let span = Span::new(self.file, base + pos, base + pos + len);
        self.err(
            SyntaxError::Unexpected {
                found,
                expected: expected_text,
                help,
            },
            span,
        );
    }

    // ------------------------------------------------------------- files

    fn file(&mut self, p: P<'_>) -> Vec<Item> {
        let mut items = Vec::new();
        for child in p.into_inner() {
            match child.as_rule() {
                Rule::item => {
                    if let Some(i) = child.into_inner().next().and_then(|i| self.item(i)) {
                        items.push(i);
                    }
                }
                Rule::bad_item => self.bad(child, &FILE_CTX),
                _ => {}
            }
        }
        items
    }

    fn item(&mut self, p: P<'_>) -> Option<Item> {
        match p.as_rule() {
            Rule::policy_block => self.block(p).map(Item::Policy),
            Rule::requirements_block => self.block(p).map(Item::Requirements),
            Rule::test_block => self.test_block(p).map(Item::Test),
            _ => {
                self.internal(&p);
                None
            }
        }
    }

    fn block(&mut self, p: P<'_>) -> Option<Block> {
        let span = self.span(&p);
        let mut name = None;
        let mut sections = Vec::new();
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::name => name = self.name(c),
                Rule::section => sections.extend(self.section(c)),
                Rule::bad_stmt => self.bad(c, &BLOCK_CTX),
                _ => {}
            }
        }
        Some(Block {
            name: name?,
            sections,
            span,
        })
    }

    fn name(&mut self, p: P<'_>) -> Option<Spanned<String>> {
        let span = self.span(&p);
        let inner = p.into_inner().next()?;
        let value = match inner.as_rule() {
            Rule::string => self.string(inner)?.value,
            _ => inner.as_str().to_string(),
        };
        Some(Spanned::new(value, span))
    }

    fn string(&mut self, p: P<'_>) -> Option<Str> {
        let span = self.span(&p);
        let raw = p.as_rule() == Rule::raw_string;
        let inner = p.into_inner().next();
        let text = inner.as_ref().map_or("", |i| i.as_str());
        if raw {
            return Some(Str {
                value: text.to_string(),
                raw: true,
                span,
            });
        }
        match unescape(text) {
            Ok(value) => Some(Str {
                value,
                raw: false,
                span,
            }),
            Err(message) => {
                self.err(SyntaxError::BadEscape { message }, span);
                None
            }
        }
    }

    /// A `value` (string, raw string or bare token): its text, span and
    /// whether it was quoted.
    fn value(&mut self, p: P<'_>) -> Option<(String, Span, bool)> {
        let span = self.span(&p);
        let inner = match p.as_rule() {
            Rule::value | Rule::word => p.into_inner().next()?,
            _ => p,
        };
        match inner.as_rule() {
            Rule::string | Rule::raw_string => self.string(inner).map(|s| (s.value, span, true)),
            _ => Some((inner.as_str().to_string(), span, false)),
        }
    }

    fn keyword<T: Copy>(
        &mut self,
        p: &P<'_>,
        what: &'static str,
        parse: fn(&str) -> Option<T>,
        spellings: &[&'static str],
    ) -> Option<Spanned<T>> {
        let span = self.span(p);
        match parse(p.as_str()) {
            Some(v) => Some(Spanned::new(v, span)),
            None => {
                self.err(
                    SyntaxError::UnknownValue {
                        what,
                        found: p.as_str().to_string(),
                        expected: spellings.to_vec(),
                    },
                    span,
                );
                None
            }
        }
    }

    // ---------------------------------------------------------- sections

    fn section(&mut self, p: P<'_>) -> Option<Section> {
        let span = self.span(&p);
        let inner = p.into_inner().next()?;
        let keyword = inner
            .clone()
            .into_inner()
            .next()
            .map_or(span, |k| self.span(&k));
        let kind = match inner.as_rule() {
            Rule::network_section => SectionKind::Network(self.network(inner)?),
            Rule::proxy_section => SectionKind::Proxy(self.stmts(
                inner,
                &PROXY_CTX,
                Rule::proxy_stmt,
                Self::proxy_stmt,
            )),
            Rule::permissions_section => SectionKind::Permissions(self.stmts(
                inner,
                &PERM_CTX,
                Rule::perm_stmt,
                Self::perm_stmt,
            )),
            Rule::apps_section => {
                SectionKind::Apps(self.stmts(inner, &APPS_CTX, Rule::apps_stmt, Self::apps_stmt))
            }
            Rule::sandbox_section => SectionKind::Sandbox(self.sandbox(inner)?),
            Rule::approvals_section => SectionKind::Approvals(self.approvals(inner)?),
            Rule::reviewer_section => {
                SectionKind::Reviewer(self.idents(inner, "reviewer", Reviewer::parse, &{
                    Reviewer::spellings()
                }))
            }
            Rule::web_search_section => SectionKind::WebSearch(self.idents(
                inner,
                "web search mode",
                WebSearchMode::parse,
                &WebSearchMode::spellings(),
            )),
            Rule::mcp_section => {
                SectionKind::Mcp(self.stmts(inner, &MCP_CTX, Rule::mcp_stmt, Self::mcp_stmt))
            }
            Rule::commands_section => SectionKind::Commands(self.stmts(
                inner,
                &COMMANDS_CTX,
                Rule::cmd_rule,
                Self::cmd_rule,
            )),
            Rule::guardian_section => SectionKind::Guardian(self.stmts(
                inner,
                &GUARDIAN_CTX,
                Rule::guardian_stmt,
                Self::guardian_stmt,
            )),
            Rule::log_section => {
                SectionKind::Log(self.stmts(inner, &LOG_CTX, Rule::log_stmt, Self::log_stmt))
            }
            _ => {
                self.internal(&inner);
                return None;
            }
        };
        Some(Section {
            kind,
            span,
            keyword,
        })
    }

    /// The statements of a block: good ones built by `f`, bad ones reported.
    fn stmts<T>(
        &mut self,
        p: P<'_>,
        ctx: &Ctx,
        rule: Rule,
        f: fn(&mut Self, P<'_>) -> Option<T>,
    ) -> Vec<T> {
        let mut out = Vec::new();
        for c in p.into_inner() {
            let r = c.as_rule();
            if r == rule {
                out.extend(f(self, c));
            } else if r == Rule::bad_stmt {
                self.bad(c, ctx);
            } else if matches!(
                r,
                Rule::network_block | Rule::sandbox_block | Rule::granular_block
            ) {
                out.extend(self.stmts(c, ctx, rule, f));
            }
        }
        out
    }

    fn idents<T: Copy>(
        &mut self,
        p: P<'_>,
        what: &'static str,
        parse: fn(&str) -> Option<T>,
        spellings: &[&'static str],
    ) -> Vec<Spanned<T>> {
        p.into_inner()
            .filter(|c| c.as_rule() == Rule::ident)
            .filter_map(|c| self.keyword(&c, what, parse, spellings))
            .collect()
    }

    // ------------------------------------------------------------ network

    fn network(&mut self, p: P<'_>) -> Option<Network> {
        let mode = p.into_inner().nth(1)?;
        match mode.as_rule() {
            Rule::network_block => Some(Network::Block(self.stmts(
                mode,
                &NETWORK_CTX,
                Rule::net_stmt,
                Self::net_stmt,
            ))),
            _ => match mode.as_str() {
                "off" => Some(Network::Off),
                "unrestricted" => Some(Network::Unrestricted),
                found => {
                    let span = self.span(&mode);
                    self.err(
                        SyntaxError::UnknownValue {
                            what: "network mode",
                            found: found.to_string(),
                            expected: vec!["off", "unrestricted", "{"],
                        },
                        span,
                    );
                    None
                }
            },
        }
    }

    fn net_stmt(&mut self, p: P<'_>) -> Option<NetStmt> {
        let inner = p.into_inner().next()?;
        match inner.as_rule() {
            Rule::net_setting => {
                let mut it = inner.into_inner();
                let kw = it.next()?;
                let val = it.next()?;
                match kw.as_rule() {
                    Rule::kw_dns => self
                        .keyword(&val, "dns setting", Switch::parse, &["on", "off"])
                        .map(NetStmt::Dns),
                    Rule::kw_local => self
                        .keyword(&val, "local setting", Effect::parse, &["deny", "allow"])
                        .map(|v| NetStmt::Local(widen(v, self.span(&kw)))),
                    _ => self
                        .keyword(&val, "default", Effect::parse, &["deny", "allow"])
                        .map(|v| NetStmt::Default(widen(v, self.span(&kw)))),
                }
                .map(|s| match s {
                    NetStmt::Dns(v) => NetStmt::Dns(widen(v, self.span(&kw))),
                    other => other,
                })
            }
            Rule::net_rule => self.net_rule(inner).map(NetStmt::Rule),
            _ => None,
        }
    }

    fn net_rule(&mut self, p: P<'_>) -> Option<NetRule> {
        let span = self.span(&p);
        let mut it = p.into_inner();
        let effect = if it.next()?.as_str() == "allow" {
            Effect::Allow
        } else {
            Effect::Deny
        };
        let rule = it.next()?;
        let kind = rule.as_rule();
        let mut parts = rule.into_inner().skip(1);
        let target_pair = parts.next()?;
        let target_span = self.span(&target_pair);
        let ports = match parts.next() {
            Some(pc) => Some(self.ports(pc)?),
            None => None,
        };
        let target = match kind {
            Rule::domain_rule => {
                let (text, _, quoted) = self.value(target_pair)?;
                if !quoted && !text.is_ascii() {
                    self.err(
                        SyntaxError::UnquotedNonAscii {
                            what: "domain pattern",
                            text: text.clone(),
                        },
                        target_span,
                    );
                }
                NetTarget::Domain(text)
            }
            Rule::ip_rule => NetTarget::Ip(self.ip(target_pair.as_str(), target_span)?),
            Rule::cidr_rule => NetTarget::Cidr(self.cidr(target_pair.as_str(), target_span)?),
            Rule::socket_rule => {
                let (text, _, quoted) = self.value(target_pair)?;
                if !quoted && text == "*" {
                    NetTarget::Socket(SocketTarget::Any)
                } else {
                    NetTarget::Socket(SocketTarget::Path(text))
                }
            }
            _ => return None,
        };
        Some(NetRule {
            effect,
            target,
            ports,
            span,
            target_span,
        })
    }

    fn ip(&mut self, text: &str, span: Span) -> Option<IpAddr> {
        match text.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                let help = if text.contains('/') {
                    format!("a prefix is written with `cidr`: `cidr {text}`")
                } else if text.split('.').any(|o| o.len() > 1 && o.starts_with('0')) {
                    "write IPv4 as a plain dotted quad without leading zeros (they read as octal elsewhere)".into()
                } else if text.contains('%') {
                    "zone ids (`%eth0`) are not part of an address".into()
                } else {
                    "write a dotted-quad IPv4 address (`10.0.0.5`) or an IPv6 address (`fd00::1`)"
                        .into()
                };
                self.err(
                    SyntaxError::InvalidIp {
                        text: text.to_string(),
                        help,
                    },
                    span,
                );
                None
            }
        }
    }

    fn cidr(&mut self, text: &str, span: Span) -> Option<IpNet> {
        let Some((addr, len)) = text.split_once('/') else {
            self.err(
                SyntaxError::InvalidCidr {
                    text: text.to_string(),
                    help: format!("a prefix needs a length (`{text}/24`); a single address is written `ip {text}`"),
                },
                span,
            );
            return None;
        };
        let ip = self.ip(addr, span)?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len = match len.parse::<u8>() {
            Ok(l) if l <= max && !len.starts_with('+') && (len == "0" || !len.starts_with('0')) => {
                l
            }
            _ => {
                self.err(
                    SyntaxError::InvalidCidr {
                        text: text.to_string(),
                        help: format!("the prefix length must be a number from 0 to {max}"),
                    },
                    span,
                );
                return None;
            }
        };
        let net = IpNet::new(ip, len).ok()?;
        if net.network() != ip {
            self.err(
                SyntaxError::CidrHostBits {
                    text: text.to_string(),
                    network: net.trunc().to_string(),
                },
                span,
            );
            return None;
        }
        Some(net)
    }

    fn ports(&mut self, p: P<'_>) -> Option<Vec<PortRange>> {
        let list = p.into_inner().nth(1)?;
        let mut out = Vec::new();
        let mut ok = true;
        for item in list.into_inner() {
            let span = self.span(&item);
            match parse_port_range(item.as_str()) {
                Ok(r) => out.push(r),
                Err((message, help)) => {
                    ok = false;
                    self.err(SyntaxError::InvalidPort { message, help }, span);
                }
            }
        }
        ok.then_some(out)
    }

    // -------------------------------------------------------------- proxy

    fn proxy_stmt(&mut self, p: P<'_>) -> Option<ProxyStmt> {
        let span = self.span(&p);
        let mut it = p.into_inner();
        let kw = it.next()?;
        let val = it.next()?;
        let sw = |b: &mut Self, what| {
            b.keyword(&val, what, Switch::parse, &["on", "off"])
                .map(|v| Spanned::new(v.node, span))
        };
        match kw.as_rule() {
            Rule::kw_socks5 => sw(self, "socks5 setting").map(ProxyStmt::Socks5),
            Rule::kw_socks5_udp => sw(self, "socks5_udp setting").map(ProxyStmt::Socks5Udp),
            Rule::kw_upstream => sw(self, "upstream setting").map(ProxyStmt::Upstream),
            _ => self
                .keyword(
                    &val,
                    "listen scope",
                    ListenScope::parse,
                    &["loopback", "any"],
                )
                .map(|v| ProxyStmt::Listen(Spanned::new(v.node, span))),
        }
    }

    // -------------------------------------------------- permissions, apps

    fn perm_stmt(&mut self, p: P<'_>) -> Option<PermStmt> {
        let span = self.span(&p);
        let mut it = p.into_inner();
        let first = it.next()?;
        if first.as_rule() == Rule::kw_default {
            let v = it.next()?;
            return self
                .keyword(&v, "default", Effect::parse, &["allow", "deny"])
                .map(|v| PermStmt::Default(Spanned::new(v.node, span)));
        }
        let effect = if first.as_str() == "allow" {
            Effect::Allow
        } else {
            Effect::Deny
        };
        let spellings = Permission::spellings();
        let mut permissions = Vec::new();
        for c in it {
            permissions.extend(self.keyword(&c, "permission", Permission::parse, &spellings));
        }
        (!permissions.is_empty()).then_some(PermStmt::Rule {
            effect,
            permissions,
            span,
        })
    }

    fn apps_stmt(&mut self, p: P<'_>) -> Option<AppsStmt> {
        let span = self.span(&p);
        let mut names = Vec::new();
        for c in p.into_inner().skip(1) {
            let s = self.span(&c);
            match c.as_rule() {
                Rule::string => names.push(Spanned::new(self.string(c)?.value, s)),
                _ => names.push(Spanned::new(c.as_str().to_string(), s)),
            }
        }
        Some(AppsStmt { names, span })
    }

    // ---------------------------------------------- sandbox and approvals

    fn sandbox(&mut self, p: P<'_>) -> Option<SandboxSection> {
        let mut modes = Vec::new();
        let mut block = None;
        let spellings = SandboxMode::spellings();
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::ident => {
                    modes.extend(self.keyword(&c, "sandbox mode", SandboxMode::parse, &spellings))
                }
                Rule::sandbox_block => {
                    block =
                        Some(self.stmts(c, &SANDBOX_CTX, Rule::sandbox_stmt, Self::sandbox_stmt))
                }
                _ => {}
            }
        }
        (!modes.is_empty()).then_some(SandboxSection { modes, block })
    }

    fn sandbox_stmt(&mut self, p: P<'_>) -> Option<SandboxStmt> {
        let span = self.span(&p);
        let mut it = p.into_inner();
        let kw = it.next()?;
        let mut values = Vec::new();
        for c in it {
            let s = self.span(&c);
            let v = if c.as_rule() == Rule::string {
                self.string(c)?.value
            } else {
                c.as_str().to_string()
            };
            values.push(Spanned::new(v, s));
        }
        Some(if kw.as_rule() == Rule::kw_writable {
            SandboxStmt::Writable(values, span)
        } else {
            SandboxStmt::Protect(values, span)
        })
    }

    fn approvals(&mut self, p: P<'_>) -> Option<ApprovalsSection> {
        let mut modes = Vec::new();
        let mut granular = None;
        let spellings = ApprovalMode::spellings();
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::ident => modes.extend(self.keyword(
                    &c,
                    "approval policy",
                    ApprovalMode::parse,
                    &spellings,
                )),
                Rule::granular_block => {
                    granular =
                        Some(self.stmts(c, &GRANULAR_CTX, Rule::granular_stmt, Self::granular_stmt))
                }
                _ => {}
            }
        }
        (!modes.is_empty()).then_some(ApprovalsSection { modes, granular })
    }

    fn granular_stmt(&mut self, p: P<'_>) -> Option<GranularStmt> {
        let span = self.span(&p);
        let mut it = p.into_inner();
        let cat = it.next()?;
        let val = it.next()?;
        let category = self.keyword(
            &cat,
            "prompt category",
            PromptCategory::parse,
            &PromptCategory::spellings(),
        );
        let value = self.keyword(&val, "switch", Switch::parse, &["on", "off"]);
        Some(GranularStmt {
            category: category?,
            value: value?,
            span,
        })
    }

    // ---------------------------------------------------------------- mcp

    fn mcp_stmt(&mut self, p: P<'_>) -> Option<McpStmt> {
        let span = self.span(&p);
        let mut it = p.into_inner();
        let kw = it.next()?;
        let target = it.next()?;
        let mode_pair = it.next()?;
        let mode = self.keyword(
            &mode_pair,
            "mcp mode",
            McpMode::parse,
            &McpMode::spellings(),
        )?;
        if kw.as_rule() == Rule::kw_server {
            return Some(McpStmt::Server {
                server: self.name(target)?,
                mode,
                span,
            });
        }
        let tspan = self.span(&target);
        match target.as_str().split_once('/') {
            Some((s, t)) if !s.is_empty() && !t.is_empty() && !t.contains('/') => {
                Some(McpStmt::Tool {
                    server: s.to_string(),
                    tool: t.to_string(),
                    target: tspan,
                    mode,
                    span,
                })
            }
            _ => {
                self.err(
                    SyntaxError::Unexpected {
                        found: format!("`{}`", target.as_str()),
                        expected: "a tool written SERVER/TOOL".into(),
                        help: Some("for example `tool github/delete_repo prompt`".into()),
                    },
                    tspan,
                );
                None
            }
        }
    }

    // ----------------------------------------------------------- commands

    fn cmd_word(&mut self, p: P<'_>) -> Option<CommandWord> {
        let span = self.span(&p);
        let inner = p.into_inner().next()?;
        if inner.as_rule() == Rule::alternatives {
            let mut alternatives = Vec::new();
            for w in inner.into_inner() {
                alternatives.push(self.value(w)?.0);
            }
            return Some(CommandWord {
                alternatives,
                bracketed: true,
                span,
            });
        }
        let (w, _, _) = self.value(inner)?;
        Some(CommandWord {
            alternatives: vec![w],
            bracketed: false,
            span,
        })
    }

    fn cmd_rule(&mut self, p: P<'_>) -> Option<CommandRule> {
        let span = self.span(&p);
        let mut effect = None;
        let mut pattern = Vec::new();
        let mut because = None;
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::cmd_effect => {
                    effect = CommandEffect::parse(c.as_str().trim());
                }
                Rule::cmd_word => pattern.push(self.cmd_word(c)?),
                Rule::because => because = Some(self.string(c.into_inner().nth(1)?)?),
                _ => {}
            }
        }
        Some(CommandRule {
            effect: effect?,
            pattern,
            because,
            span,
        })
    }

    // ----------------------------------------------------------- guardian

    fn guardian_stmt(&mut self, p: P<'_>) -> Option<GuardianStmt> {
        let span = self.span(&p);
        let inner = p.into_inner().next()?;
        let rule = inner.as_rule();
        let mut it = inner.into_inner().skip(1);
        match rule {
            Rule::g_risk => {
                let level = it.next()?;
                let cat = it.next()?;
                let level = self.keyword(
                    &level,
                    "risk level",
                    RiskLevel::parse,
                    &RiskLevel::spellings(),
                );
                let category = self.keyword(
                    &cat,
                    "risk category",
                    RiskCategory::parse,
                    &RiskCategory::spellings(),
                );
                let matcher = self.matcher(it.next()?);
                Some(GuardianStmt::Risk {
                    level: level?,
                    category: category?,
                    matcher: matcher?,
                    span,
                })
            }
            Rule::g_deny_category => {
                let cat = it.nth(1)?;
                let category = self.keyword(
                    &cat,
                    "risk category",
                    RiskCategory::parse,
                    &RiskCategory::spellings(),
                )?;
                Some(GuardianStmt::DenyCategory { category, span })
            }
            Rule::g_deny_action => Some(GuardianStmt::DenyAction {
                matcher: self.matcher(it.next()?)?,
                span,
            }),
            Rule::g_allow => {
                let levels: Vec<_> = it
                    .filter_map(|c| {
                        self.keyword(&c, "risk level", RiskLevel::parse, &RiskLevel::spellings())
                    })
                    .collect();
                Some(GuardianStmt::Allow { levels, span })
            }
            Rule::g_authorize => {
                let level = it.next()?;
                let with = it.nth(1)?;
                let level = self.keyword(
                    &level,
                    "risk level",
                    RiskLevel::parse,
                    &RiskLevel::spellings(),
                );
                let with = self.keyword(
                    &with,
                    "authorization level",
                    AuthLevel::parse,
                    &AuthLevel::spellings(),
                );
                Some(GuardianStmt::Authorize {
                    level: level?,
                    with: with?,
                    span,
                })
            }
            _ => None,
        }
    }

    fn matcher(&mut self, p: P<'_>) -> Option<Matcher> {
        let inner = p.into_inner().next()?;
        let rule = inner.as_rule();
        let parts = inner.into_inner().skip(1);
        match rule {
            Rule::m_command_re => {
                let s = parts.into_iter().next()?;
                Some(Matcher::CommandRegex(self.string(s)?))
            }
            Rule::m_command => {
                let mut words = Vec::new();
                for w in parts {
                    words.push(self.cmd_word(w)?);
                }
                Some(Matcher::CommandPrefix(words))
            }
            Rule::m_path | Rule::m_host | Rule::m_tool => {
                let mut values = Vec::new();
                for v in parts {
                    let (t, s, _) = self.value(v)?;
                    values.push(Spanned::new(t, s));
                }
                Some(match rule {
                    Rule::m_path => Matcher::Path(values),
                    Rule::m_host => Matcher::Host(values),
                    _ => Matcher::Tool(values),
                })
            }
            _ => None,
        }
    }

    // ---------------------------------------------------------------- log

    fn log_stmt(&mut self, p: P<'_>) -> Option<LogStmt> {
        let span = self.span(&p);
        let spellings = LogField::spellings();
        let fields: Vec<_> = p
            .into_inner()
            .skip(1)
            .filter_map(|c| self.keyword(&c, "log field", LogField::parse, &spellings))
            .collect();
        Some(LogStmt { fields, span })
    }

    // -------------------------------------------------------------- tests

    fn test_block(&mut self, p: P<'_>) -> Option<TestBlock> {
        let span = self.span(&p);
        let mut it = p.into_inner().skip(1);
        let description = self.string(it.next()?)?;
        let mut stmts = Vec::new();
        for c in it {
            match c.as_rule() {
                Rule::test_stmt => stmts.extend(self.test_stmt(c)),
                Rule::bad_stmt => self.bad(c, &TEST_CTX),
                _ => {}
            }
        }
        Some(TestBlock {
            description,
            stmts,
            span,
        })
    }

    fn test_stmt(&mut self, p: P<'_>) -> Option<TestStmt> {
        let span = self.span(&p);
        let inner = p.into_inner().next()?;
        if inner.as_rule() == Rule::t_policy {
            return Some(TestStmt::Policy(self.name(inner.into_inner().nth(1)?)?));
        }
        let mut it = inner.into_inner().skip(1);
        let dec = it.next()?;
        let dspan = self.span(&dec);
        let decision = if DECISION_WORDS.contains(&dec.as_str()) {
            Some(Spanned::new(dec.as_str().to_string(), dspan))
        } else {
            self.err(
                SyntaxError::UnknownValue {
                    what: "decision",
                    found: dec.as_str().to_string(),
                    expected: DECISION_WORDS.to_vec(),
                },
                dspan,
            );
            None
        };
        let q = it.next()?;
        let query_text = q.as_str().trim().to_string();
        let query = self.query(q);
        let because = it
            .nth(1)
            .map(|r| Spanned::new(r.as_str().to_string(), self.span(&r)));
        Some(TestStmt::Expect(Expectation {
            decision: decision?,
            query: query?,
            query_text,
            because,
            span,
        }))
    }

    // ------------------------------------------------------------ queries

    fn query(&mut self, p: P<'_>) -> Option<Query> {
        let inner = if p.as_rule() == Rule::query {
            p.into_inner().next()?
        } else {
            p
        };
        let span = self.span(&inner);
        let rule = inner.as_rule();
        let mut it = inner.into_inner();
        it.next(); // the keyword
        let q = match rule {
            Rule::q_connect => {
                let target = it.next()?;
                let (host, port) = self.target(target)?;
                let via = match it.nth(1) {
                    Some(v) => match Via::parse(v.as_str()) {
                        Some(v) => v,
                        None => {
                            let s = self.span(&v);
                            let spellings: Vec<&str> =
                                Via::ALL.iter().map(|v| v.as_str()).collect();
                            self.err(
                                SyntaxError::UnknownValue {
                                    what: "via",
                                    found: v.as_str().into(),
                                    expected: spellings,
                                },
                                s,
                            );
                            return None;
                        }
                    },
                    None => Via::Https,
                };
                Query::Connect { host, port, via }
            }
            Rule::q_dns => Query::Dns {
                name: self.value(it.next()?)?.0,
            },
            Rule::q_resolved => {
                let host = self.value(it.next()?)?.0;
                let mut addrs = Vec::new();
                let mut port = None;
                for c in it {
                    match c.as_rule() {
                        Rule::answer => {
                            let a = c.into_inner().next()?;
                            let text = if a.as_rule() == Rule::string {
                                self.string(a)?.value
                            } else {
                                a.as_str().to_string()
                            };
                            addrs.push(text);
                        }
                        Rule::port_item => port = c.as_str().parse::<i64>().ok(),
                        _ => {}
                    }
                }
                Query::Resolved { host, addrs, port }
            }
            Rule::q_socket => Query::Socket {
                path: self.value(it.next()?)?.0,
            },
            Rule::q_listen => {
                let a = it.next()?;
                let addr = if a.as_rule() == Rule::string {
                    self.string(a)?.value
                } else {
                    a.as_str().to_string()
                };
                Query::Listen { addr }
            }

            Rule::q_upstream => Query::Upstream,
            Rule::q_tool => Query::Tool {
                permission: self.value(it.next()?)?.0,
            },

            Rule::q_app => Query::App {
                program: self.value(it.next()?)?.0,
            },
            Rule::q_write => {
                let path = self.value(it.next()?)?.0;
                let workspace = match it.nth(1) {
                    Some(w) => Some(self.value(w)?.0),
                    None => None,
                };
                Query::Write { path, workspace }
            }
            Rule::q_exec => {
                let mut argv = Vec::new();
                let mut escalate = false;
                for c in it {
                    match c.as_rule() {
                        Rule::word => argv.push(self.value(c)?.0),
                        Rule::kw_escalate => escalate = true,
                        _ => {}
                    }
                }
                Query::Exec { argv, escalate }
            }
            Rule::q_mcp => {
                let target = it.next()?;
                let tspan = self.span(&target);
                let target_text = if target.as_rule() == Rule::string {
                    self.string(target)?.value
                } else {
                    target.as_str().to_string()
                };
                let Some((server, tool)) = target_text.split_once('/') else {
                    self.err(
                        SyntaxError::InvalidQuery {
                            message: format!("`{target_text}` is not SERVER/TOOL"),
                            help: Some(
                                "for example `mcp github/delete_repo destructive=true`".into(),
                            ),
                        },
                        tspan,
                    );
                    return None;
                };
                let mut annotations = Annotations::default();
                for kv in it {
                    let s = self.span(&kv);
                    let (k, v) = kv.as_str().split_once('=')?;
                    let b = self.bool_value(v, s)?;
                    match k {
                        "destructive" | "destructive_hint" => {
                            annotations.destructive_hint = Some(b)
                        }
                        "read_only" | "read_only_hint" => annotations.read_only_hint = Some(b),
                        "open_world" | "open_world_hint" => annotations.open_world_hint = Some(b),
                        _ => {
                            self.err(
                                SyntaxError::UnknownValue {
                                    what: "annotation",
                                    found: k.into(),
                                    expected: vec!["destructive", "read_only", "open_world"],
                                },
                                s,
                            );
                            return None;
                        }
                    }
                }
                Query::Mcp {
                    server: server.to_string(),
                    tool: tool.to_string(),
                    annotations,
                }
            }
            Rule::q_prompt => {
                let c = it.next()?;
                let cat = self.keyword(
                    &c,
                    "prompt category",
                    PromptCategory::parse,
                    &PromptCategory::spellings(),
                )?;
                Query::Prompt { category: cat.node }
            }
            Rule::q_review => {
                let action = it.next()?;
                let action = self.query(action.into_inner().next()?)?;
                let mut a = Assessment::default();
                for kv in it.filter(|p| p.as_rule() == Rule::kv) {
                    let s = self.span(&kv);
                    let (k, v) = kv.as_str().split_once('=')?;
                    let ok = match k {
                        "risk" => RiskLevel::parse(v).map(|x| a.risk = Some(x)),
                        "category" => RiskCategory::parse(v).map(|x| a.category = Some(x)),
                        "auth" | "user_authorization" => {
                            AuthLevel::parse(v).map(|x| a.user_authorization = Some(x))
                        }
                        "outcome" => match v {
                            "allow" => Some(ReviewOutcome::Allow),
                            "deny" => Some(ReviewOutcome::Deny),
                            _ => None,
                        }
                        .map(|o| a.outcome = Some(o)),
                        "status" => match v {
                            "ok" => Some(ReviewStatus::Ok),
                            "failed" => Some(ReviewStatus::Failed),
                            "timeout" => Some(ReviewStatus::Timeout),
                            "cancelled" => Some(ReviewStatus::Cancelled),
                            _ => None,
                        }
                        .map(|st| a.status = Some(st)),
                        _ => None,
                    };
                    if ok.is_none() {
                        self.err(
                            SyntaxError::InvalidQuery {
                                message: format!("`{}` is not a review field", kv.as_str()),
                                help: Some(
                                    "review fields: risk=LEVEL category=CATEGORY auth=LEVEL outcome=allow|deny status=ok|failed|timeout|cancelled"
                                        .into(),
                                ),
                            },
                            s,
                        );
                        return None;
                    }
                }
                Query::Review {
                    action: Box::new(action),
                    assessment: a,
                }
            }
            Rule::q_web_search => Query::WebSearch,
            _ => {
                self.err(
                    SyntaxError::UnknownValue {
                        what: "query",
                        found: String::new(),
                        expected: QUERY_KINDS.to_vec(),
                    },
                    span,
                );
                return None;
            }
        };
        Some(q)
    }

    fn bool_value(&mut self, v: &str, span: Span) -> Option<bool> {
        match v {
            "true" => Some(true),
            "false" => Some(false),
            _ => {
                self.err(
                    SyntaxError::InvalidQuery {
                        message: format!("`{v}` is not `true` or `false`"),
                        help: None,
                    },
                    span,
                );
                None
            }
        }
    }

    /// `HOST:PORT`, `[IPV6]:PORT` or `"HOST":PORT`.
    fn target(&mut self, p: P<'_>) -> Option<(String, i64)> {
        let span = self.span(&p);
        let (host, port_text) = if p.as_rule() == Rule::quoted_target {
            let mut it = p.into_inner();
            let host = self.string(it.next()?)?.value;
            (host, it.next()?.as_str().to_string())
        } else {
            let text = p.as_str().to_string();
            if text.starts_with('"') {
                self.err(
                    SyntaxError::InvalidQuery {
                        message: format!("`{text}` has no port"),
                        help: Some(
                            "write HOST:PORT, for example `github.com:443` or `\"a host\":443`"
                                .into(),
                        ),
                    },
                    span,
                );
                return None;
            }
            match split_host_port(&text) {
                Ok((h, p)) => (h.to_string(), p.to_string()),
                Err((message, help)) => {
                    self.err(
                        SyntaxError::InvalidQuery {
                            message,
                            help: Some(help),
                        },
                        span,
                    );
                    return None;
                }
            }
        };
        match port_text.parse::<i64>() {
            Ok(port) if port_text.bytes().all(|b| b.is_ascii_digit()) => Some((host, port)),
            _ => {
                self.err(
                    SyntaxError::InvalidQuery {
                        message: format!("`{port_text}` is not a port number"),
                        help: Some("write HOST:PORT, for example `github.com:443`".into()),
                    },
                    span,
                );
                None
            }
        }
    }
}

/// Moves a keyword-valued statement's span to start at its keyword.
fn widen<T>(v: Spanned<T>, keyword: Span) -> Spanned<T> {
    Spanned {
        span: keyword.to(v.span),
        node: v.node,
    }
}

/// Splits `HOST:PORT` for a query, with the message and help of a refusal.
fn split_host_port(text: &str) -> Result<(&str, &str), (String, String)> {
    use crate::normalize::HostPortError;
    crate::normalize::split_host_port(text).map_err(|e| match e {
        HostPortError::UnbracketedIpv6 => (
            format!("`{text}` is ambiguous: an IPv6 address needs brackets"),
            "write [IPV6]:PORT, for example `[::1]:443`".into(),
        ),
        _ if text.starts_with('[') => (
            format!("`{text}` has no port"),
            "write [IPV6]:PORT, for example `[::1]:443`".into(),
        ),
        _ => (
            format!("`{text}` has no port"),
            "write HOST:PORT, for example `github.com:443`".into(),
        ),
    })
}

/// `443` or `8000-8999`, each from 1 to 65535.
pub(crate) fn parse_port_range(text: &str) -> Result<PortRange, (String, Option<String>)> {
    let one = |s: &str| -> Result<u16, (String, Option<String>)> {
        match s.parse::<u32>() {
            Ok(0) => Err((
                "port `0` is never a destination".into(),
                Some("ports run from 1 to 65535".into()),
            )),
            Ok(n) if n <= 65535 && !(s.len() > 1 && s.starts_with('0')) => Ok(n as u16),
            Ok(n) if n <= 65535 => Err((
                format!("port `{s}` has a leading zero"),
                Some(format!("write `{n}`")),
            )),
            _ => Err((
                format!("port `{s}` is out of range"),
                Some("ports run from 1 to 65535".into()),
            )),
        }
    };
    match text.split_once('-') {
        None => one(text).map(|p| PortRange { lo: p, hi: p }),
        Some((a, b)) => {
            let (lo, hi) = (one(a)?, one(b)?);
            if lo > hi {
                Err((
                    format!("port range `{text}` is reversed"),
                    Some(format!("did you mean `{hi}-{lo}`?")),
                ))
            } else {
                Ok(PortRange { lo, hi })
            }
        }
    }
}

/// Resolves the escapes of a double-quoted string.
fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('u') => {
                let rest: String = chars.by_ref().take_while(|c| *c != '}').collect();
                let hex = rest.trim_start_matches('{');
                match u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => return Err(format!("`\\u{{{hex}}}` is not a Unicode scalar value")),
                }
            }
            other => {
                return Err(format!(
                    "unknown escape `\\{}`",
                    other.map(String::from).unwrap_or_default()
                ));
            }
        }
    }
    Ok(out)
}

/// A human description of a grammar rule, for "expected ..." messages.
fn describe(r: Rule) -> &'static str {
    match r {
        Rule::kw_policy | Rule::t_policy => "`policy`",
        Rule::kw_requirements => "`requirements`",
        Rule::kw_test => "`test`",
        Rule::kw_network => "`network`",
        Rule::kw_proxy => "`proxy`",
        Rule::kw_default => "`default`",
        Rule::kw_dns | Rule::q_dns => "`dns`",
        Rule::kw_local => "`local`",
        Rule::kw_allow => "`allow`",
        Rule::kw_deny => "`deny`",
        Rule::kw_prompt | Rule::q_prompt => "`prompt`",
        Rule::kw_forbid => "`forbid`",
        Rule::kw_domain | Rule::domain_rule => "`domain`",
        Rule::kw_ip | Rule::ip_rule => "`ip`",
        Rule::kw_cidr | Rule::cidr_rule => "`cidr`",
        Rule::kw_socket | Rule::socket_rule | Rule::q_socket => "`socket`",
        Rule::kw_port | Rule::port_clause => "`port`",
        Rule::kw_socks5 => "`socks5`",
        Rule::kw_socks5_udp => "`socks5_udp`",
        Rule::kw_upstream | Rule::q_upstream => "`upstream`",
        Rule::kw_listen | Rule::q_listen => "`listen`",
        Rule::kw_writable => "`writable`",
        Rule::kw_protect => "`protect`",
        Rule::kw_server => "`server`",
        Rule::kw_tool | Rule::q_tool | Rule::m_tool => "`tool`",
        Rule::kw_because | Rule::because => "`because`",
        Rule::kw_risk | Rule::g_risk => "`risk`",
        Rule::kw_category => "`category`",
        Rule::kw_command | Rule::m_command | Rule::m_command_re => "`command`",
        Rule::kw_path | Rule::m_path => "`path`",
        Rule::kw_host | Rule::m_host => "`host`",
        Rule::kw_authorize | Rule::g_authorize => "`authorize`",
        Rule::kw_with => "`with`",
        Rule::kw_mask => "`mask`",
        Rule::kw_expect | Rule::t_expect => "`expect`",
        Rule::kw_connect | Rule::q_connect => "`connect`",
        Rule::kw_resolved | Rule::q_resolved => "`resolved`",
        Rule::kw_app | Rule::q_app => "`app`",
        Rule::kw_write | Rule::q_write => "`write`",
        Rule::kw_in => "`in`",
        Rule::kw_exec | Rule::q_exec => "`exec`",
        Rule::kw_escalate => "`escalate`",
        Rule::kw_via => "`via`",
        Rule::kw_review | Rule::q_review => "`review`",
        Rule::kw_mcp | Rule::q_mcp => "`mcp`",
        Rule::kw_web_search | Rule::q_web_search => "`web_search`",
        Rule::name => "a name",
        Rule::ident => "a word",
        Rule::string | Rule::str_inner => "a string",
        Rule::raw_string => "a raw string",
        Rule::value | Rule::bare | Rule::word | Rule::free_word_tok | Rule::cmd_word => "a value",
        Rule::ports | Rule::port_item => "a port",
        Rule::EOI => "the end of the input",
        Rule::query | Rule::review_action => "a query (`connect`, `dns`, `exec`, ...)",
        Rule::net_stmt | Rule::net_setting | Rule::net_rule | Rule::effect => "a network statement",
        Rule::section => "a section",
        Rule::kv => "KEY=VALUE",
        Rule::alternatives => "`[`",
        _ => "more input",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_checked() {
        assert_eq!(parse_port_range("443"), Ok(PortRange { lo: 443, hi: 443 }));
        assert_eq!(parse_port_range("80-90"), Ok(PortRange { lo: 80, hi: 90 }));
        assert!(parse_port_range("0").is_err());
        assert!(parse_port_range("70000").is_err());
        assert!(parse_port_range("9-3").is_err());
        assert!(parse_port_range("080").is_err());
    }

    #[test]
    fn host_port_splitting() {
        assert_eq!(split_host_port("a.b:443"), Ok(("a.b", "443")));
        assert_eq!(split_host_port("[::1]:443"), Ok(("[::1]", "443")));
        assert!(split_host_port("::1:443").is_err());
        assert!(split_host_port("a.b").is_err());
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape(r#"a\"b\\c\n\u{e9}"#), Ok("a\"b\\c\né".to_string()));
        assert!(unescape(r"\q").is_err());
        assert!(unescape(r"\u{d800}").is_err());
    }
}
