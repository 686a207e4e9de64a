//! Builds the typed AST from pest pairs: one function per grammar rule.
//!
//! Statements the grammar did not accept arrive as `bad_stmt`; they are
//! re-parsed with the statement rule of their block so that the error
//! points at the exact token, and an unknown leading keyword gets a
//! "did you mean".
//!
//! One idea a file: this one holds the entry points and the blocks every
//! section shares; [`recover`] the contexts, the re-parsing of rejected
//! statements and the rule-name table of "expected ..." messages;
//! [`sections`] one lowering per section kind; [`query`] the query
//! language of `test` blocks and `policyc eval`; [`lex`] the lexical
//! helpers (ports, escapes).

mod lex;
mod plain;
mod property;
mod query;
mod recover;
mod sections;

use std::net::IpAddr;

use ipnet::IpNet;
use pest::Parser;
use pest::iterators::Pair;

use super::ast::*;
use super::error::SyntaxError;
use super::{PolicyParser, Rule, scan};
use crate::Limits;
use crate::diag::{Diagnostic, one_of};
use crate::query::{
    Annotations, Assessment, Query, QueryParseError, ReviewOutcome, ReviewStatus, Via,
};
use crate::source::{FileId, Span};
pub(crate) use lex::parse_port_range;
use lex::{unescape, widen};
use recover::*;
pub(crate) use recover::{DECISION_WORDS, QUERY_KINDS, block_keywords};

pub(super) type P<'i> = Pair<'i, Rule>;

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
    parse(file, text, limits, true)
}

/// [`parse_file`] with every `network` block's statements read by the
/// grammar, none by the hand reader (`plain.rs`): the oracle the reader is
/// tested against.
pub fn parse_file_by_grammar(file: FileId, text: &str) -> (File, Vec<Diagnostic>) {
    parse(file, text, &Limits::default(), false)
}

fn parse(file: FileId, text: &str, limits: &Limits, plain: bool) -> (File, Vec<Diagnostic>) {
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
        plain,
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
    if let Some((open, closer)) = scan::unclosed_brace(text) {
        b.unclosed(text, open, closer);
    }
    (File { items, comments }, b.diags)
}

impl Query {
    /// Reads one query in the text form of
    /// docs/language.md#tests-and-queries, as `test` blocks and
    /// `policyc eval` write it: `connect api.github.com:443 via https`,
    /// `exec git push origin main`, `write .git/hooks/pre-commit in /work`.
    pub fn parse(text: &str) -> Result<Query, QueryParseError> {
        parse_query(text).map_err(|e| QueryParseError::new(e.code(), e.to_string(), e.help()))
    }
}

impl std::str::FromStr for Query {
    type Err = QueryParseError;
    fn from_str(text: &str) -> Result<Query, QueryParseError> {
        Query::parse(text)
    }
}

/// Parses one query in the text form (docs/language.md#tests-and-queries).
pub fn parse_query(text: &str) -> Result<Query, SyntaxError> {
    let mut b = Builder {
        file: FileId(0),
        diags: Vec::new(),
        base: 0,
        plain: true,
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

pub(super) struct Builder {
    file: FileId,
    diags: Vec<Diagnostic>,
    /// Offset added to spans (non-zero while re-parsing a statement).
    base: usize,
    /// Whether plain `network` bodies are read by hand (`plain.rs`).
    plain: bool,
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
}

impl Builder {
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
            Rule::properties_block => self.properties_block(p).map(Item::Properties),
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
                Rule::bad_stmt => {
                    let at = self.base + c.as_span().start();
                    let text = c.as_str();
                    self.bad(c, &BLOCK_CTX);
                    // Read for its diagnostics only: kept, it would also
                    // be a duplicate of the section written correctly.
                    let _ = self.misspelled_section(text, at);
                }
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
                Rule::net_stmts | Rule::sandbox_block | Rule::granular_block
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
}
