//! The canonical printer (`policyc fmt`).
//!
//! Prints the AST in one layout: two-space indent, one statement a line,
//! IPv6 in RFC 5952 form, at most one blank line where the source had one.
//! Comments are put back by line: a comment alone on its line stays before the
//! next element, a trailing comment stays after the statement on its line.
//! The output parses to the same AST, and formatting formatted text changes
//! nothing. [`format_source`] checks the first on every call: it re-parses
//! its own output and refuses text that would mean something else, so no
//! caller (the CLI, the browser module, an editor) can write such text.

use crate::diag::Diagnostic;
use crate::query::{quote_string, quote_word};
use crate::source::{FileId, SourceFile, SourceMap, Span};
use crate::syntax::ast::*;
use crate::syntax::parse_file;

/// Why a file was not formatted.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The file has syntax errors (every diagnostic of the parse, errors
    /// and warnings, spans in the file given).
    #[error("the file has syntax errors")]
    Syntax(Vec<Diagnostic>),
    /// The formatter's own check failed: its output would parse to another
    /// AST, or lose a comment. An internal error, never the user's: the
    /// text is left as it is.
    #[error("formatting would change the file's meaning; left as it is (please report this)")]
    Unstable,
}

/// Parses `src` (file `id` in diagnostics), formats it, and checks the
/// result: the output must parse without diagnostics to the same AST with
/// the same comments.
///
/// ```
/// use gatehouse::source::SourceMap;
/// let mut map = SourceMap::new();
/// let id = map.add("a.policy", "policy a {network{allow domain x.example}}");
/// let src = map.get(id).expect("added");
/// let text = gatehouse::fmt::format_source(id, src)?;
/// assert_eq!(text, "policy a {\n  network {\n    allow domain x.example\n  }\n}\n");
/// # Ok::<(), gatehouse::fmt::FormatError>(())
/// ```
pub fn format_source(id: FileId, src: &SourceFile) -> Result<String, FormatError> {
    let (ast, diags) = parse_file(id, &src.text);
    if diags.iter().any(Diagnostic::is_error) {
        return Err(FormatError::Syntax(diags));
    }
    let formatted = format_file(&ast, src);
    let mut again = SourceMap::new();
    let id2 = again.add(src.name.clone(), formatted.clone());
    let (ast2, diags2) = parse_file(id2, &formatted);
    // Spans are kept out of AST equality; comments are compared by text.
    let same_comments = ast2.comments.len() == ast.comments.len()
        && ast2
            .comments
            .iter()
            .zip(&ast.comments)
            .all(|(a, b)| a.text.trim_end() == b.text.trim_end());
    if ast2 != ast || !diags2.is_empty() || !same_comments {
        return Err(FormatError::Unstable);
    }
    Ok(formatted)
}

/// Formats one parsed file. `src` must be the text `file` was parsed from.
/// This is the printer alone; [`format_source`] also checks its output.
pub(crate) fn format_file(file: &File, src: &SourceFile) -> String {
    let mut p = Printer {
        src,
        comments: &file.comments,
        used: vec![false; file.comments.len()],
        out: String::new(),
        indent: 0,
        last_line: 0,
    };
    for (i, item) in file.items.iter().enumerate() {
        if i > 0 {
            p.out.push('\n');
        }
        p.item(item);
    }
    p.flush_before(usize::MAX);
    p.out
}

struct Printer<'a> {
    src: &'a SourceFile,
    comments: &'a [Comment],
    used: Vec<bool>,
    out: String,
    indent: usize,
    /// The last source line printed (for blank-line preservation).
    last_line: usize,
}

fn name(n: &str) -> String {
    let ident = n.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ident {
        n.to_string()
    } else {
        quote_string(n)
    }
}

fn pattern(p: &str) -> String {
    let bare = !p.is_empty()
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '-' | '_'));
    if bare { p.to_string() } else { quote_string(p) }
}

fn string(s: &Str) -> String {
    if s.raw {
        format!("r\"{}\"", s.value)
    } else {
        quote_string(&s.value)
    }
}

fn ports(p: &Option<Vec<PortRange>>) -> String {
    match p {
        None => String::new(),
        Some(list) => {
            let items: Vec<String> = list.iter().map(PortRange::to_string).collect();
            format!(" port {}", items.join(","))
        }
    }
}

fn words(ws: &[CommandWord]) -> String {
    ws.iter()
        .map(|w| {
            let alts: Vec<String> = w.alternatives.iter().map(|a| quote_word(a)).collect();
            if w.bracketed {
                format!("[{}]", alts.join(" "))
            } else {
                alts.join(" ")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn values(vs: &[Spanned<String>], f: fn(&str) -> String) -> String {
    vs.iter().map(|v| f(&v.node)).collect::<Vec<_>>().join(" ")
}

fn matcher(m: &Matcher) -> String {
    match m {
        Matcher::CommandRegex(s) => format!("command ~ {}", string(s)),
        Matcher::CommandPrefix(w) => format!("command {}", words(w)),
        Matcher::Path(v) => format!("path {}", values(v, quote_string)),
        Matcher::Host(v) => format!("host {}", values(v, pattern)),
        Matcher::Tool(v) => format!("tool {}", values(v, |s| s.to_string())),
    }
}

fn joined<T: std::fmt::Display>(vs: &[Spanned<T>]) -> String {
    vs.iter()
        .map(|v| v.node.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

impl Printer<'_> {
    fn line_of(&self, offset: u32) -> usize {
        self.src.line_col(offset).line
    }

    fn blank_before(&mut self, line: usize) {
        if self.last_line > 0
            && line > self.last_line + 1
            && self.src.line_text(line - 1).trim().is_empty()
            && !self.out.ends_with("{\n")
            && !self.out.ends_with("\n\n")
            && !self.out.is_empty()
        {
            self.out.push('\n');
        }
    }

    /// Prints the standalone comments that come before `line`.
    fn flush_before(&mut self, line: usize) {
        for (i, c) in self.comments.iter().enumerate() {
            if self.used.get(i).copied().unwrap_or(true) {
                continue;
            }
            let cl = self.line_of(c.span.start);
            if cl >= line {
                break;
            }
            if let Some(u) = self.used.get_mut(i) {
                *u = true;
            }
            self.blank_before(cl);
            self.out.push_str(&"  ".repeat(self.indent));
            self.out.push('#');
            self.out.push_str(c.text.trim_end());
            self.out.push('\n');
            self.last_line = cl;
        }
    }

    /// Prints one line for the element at `span`, with its trailing comment.
    fn emit(&mut self, text: &str, span: Span) {
        let start = self.line_of(span.start);
        let end = self.line_of(span.end.saturating_sub(1).max(span.start));
        self.flush_before(start);
        self.blank_before(start);
        self.out.push_str(&"  ".repeat(self.indent));
        self.out.push_str(text);
        self.trailing(span.end);
        self.out.push('\n');
        self.last_line = end;
    }

    /// Appends the trailing comment that belongs to code ending at
    /// `code_end`: the first comment after it with only blanks, `;` or `}`
    /// in between on the same line (a comment belongs to the last code
    /// before it on its line).
    fn trailing(&mut self, code_end: u32) {
        for (i, c) in self.comments.iter().enumerate() {
            if self.used.get(i).copied().unwrap_or(true) || c.span.start < code_end {
                continue;
            }
            let between = self
                .src
                .text
                .get(code_end as usize..c.span.start as usize)
                .unwrap_or("\n");
            if between
                .chars()
                .all(|ch| matches!(ch, ' ' | '\t' | ';' | '}'))
            {
                if let Some(u) = self.used.get_mut(i) {
                    *u = true;
                }
                self.out.push_str("  #");
                self.out.push_str(c.text.trim_end());
            }
            return;
        }
    }

    /// The offset just after the `{` that opens the block starting at
    /// `from` (strings skipped).
    fn after_open_brace(&self, from: u32) -> u32 {
        let text = self.src.text.as_bytes();
        let mut i = from as usize;
        let mut in_string = false;
        while let Some(&b) = text.get(i) {
            match (b, in_string) {
                (b'\\', true) => i += 1,
                (b'"', _) => in_string = !in_string,
                (b'{', false) => return (i + 1) as u32,
                _ => {}
            }
            i += 1;
        }
        from + 1
    }

    /// `header {`, the body, `}`; `header {}` when empty.
    fn block(&mut self, header: &str, span: Span, empty: bool, body: impl FnOnce(&mut Self)) {
        if empty && !self.has_comments_inside(span) {
            self.emit(&format!("{header} {{}}"), span);
            return;
        }
        let open = Span {
            end: self.after_open_brace(span.start),
            ..span
        };
        self.emit(&format!("{header} {{"), open);
        self.indent += 1;
        body(self);
        let close_line = self.line_of(span.end.saturating_sub(1));
        self.flush_before(close_line);
        self.indent -= 1;
        let close = Span {
            start: span.end.saturating_sub(1),
            ..span
        };
        self.out.push_str(&"  ".repeat(self.indent));
        self.out.push('}');
        self.trailing(span.end);
        self.out.push('\n');
        self.last_line = self.line_of(close.start);
    }

    fn has_comments_inside(&self, span: Span) -> bool {
        self.comments
            .iter()
            .any(|c| c.span.start > span.start && c.span.start < span.end)
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Policy(b) => self.block_item("policy", b),
            Item::Requirements(b) => self.block_item("requirements", b),
            Item::Test(t) => {
                let header = format!("test {}", string(&t.description));
                self.block(&header, t.span, t.stmts.is_empty(), |p| {
                    for s in &t.stmts {
                        match s {
                            TestStmt::Policy(n) => {
                                p.emit(&format!("policy {}", name(&n.node)), n.span)
                            }
                            TestStmt::Expect(e) => {
                                let mut text = format!("expect {} {}", e.decision.node, e.query);
                                if let Some(b) = &e.because {
                                    text.push_str(&format!(" because {}", b.node));
                                }
                                p.emit(&text, e.span);
                            }
                        }
                    }
                });
            }
            Item::Properties(t) => {
                let header = match &t.description {
                    Some(d) => format!("properties {}", string(d)),
                    None => "properties".to_string(),
                };
                self.block(&header, t.span, t.stmts.is_empty(), |p| {
                    for s in &t.stmts {
                        match s {
                            PropStmt::Policy(n) => {
                                p.emit(&format!("policy {}", name(&n.node)), n.span)
                            }
                            PropStmt::Claim(c) => {
                                let q = if c.always { "always" } else { "never" };
                                let text = format!("{q} {} {}", c.outcome.node, c.pattern_text);
                                p.emit(&text, c.span);
                            }
                        }
                    }
                });
            }
        }
    }

    fn block_item(&mut self, kw: &str, b: &Block) {
        let header = format!("{kw} {}", name(&b.name.node));
        self.block(&header, b.span, b.sections.is_empty(), |p| {
            for s in &b.sections {
                p.section(s);
            }
        });
    }

    fn section(&mut self, s: &Section) {
        let span = s.span;
        match &s.kind {
            SectionKind::Network(Network::Off) => self.emit("network off", span),
            SectionKind::Network(Network::Unrestricted) => self.emit("network unrestricted", span),
            SectionKind::Network(Network::Block(stmts)) => {
                self.block("network", span, stmts.is_empty(), |p| {
                    for st in stmts {
                        let (text, sp) = match st {
                            NetStmt::Default(v) => (format!("default {}", v.node), v.span),
                            NetStmt::Dns(v) => (format!("dns {}", v.node), v.span),
                            NetStmt::Local(v) => (format!("local {}", v.node), v.span),
                            NetStmt::Rule(r) => {
                                let target = match &r.target {
                                    NetTarget::Domain(d) => format!("domain {}", pattern(d)),
                                    NetTarget::Ip(ip) => format!("ip {ip}"),
                                    NetTarget::Cidr(c) => format!("cidr {c}"),
                                    NetTarget::Socket(SocketTarget::Any) => "socket *".to_string(),
                                    NetTarget::Socket(SocketTarget::Path(path)) => {
                                        format!("socket {}", quote_string(path))
                                    }
                                };
                                (format!("{} {target}{}", r.effect, ports(&r.ports)), r.span)
                            }
                        };
                        p.emit(&text, sp);
                    }
                })
            }
            SectionKind::Proxy(stmts) => self.block("proxy", span, stmts.is_empty(), |p| {
                for st in stmts {
                    let text = match st {
                        ProxyStmt::Socks5(v) => format!("socks5 {}", v.node),
                        ProxyStmt::Socks5Udp(v) => format!("socks5_udp {}", v.node),
                        ProxyStmt::Upstream(v) => format!("upstream {}", v.node),
                        ProxyStmt::Listen(v) => format!("listen {}", v.node),
                    };
                    p.emit(&text, st.span());
                }
            }),
            SectionKind::Permissions(stmts) => {
                self.block("permissions", span, stmts.is_empty(), |p| {
                    for st in stmts {
                        match st {
                            PermStmt::Default(v) => p.emit(&format!("default {}", v.node), v.span),
                            PermStmt::Rule {
                                effect,
                                permissions,
                                span,
                            } => p.emit(&format!("{effect} {}", joined(permissions)), *span),
                        }
                    }
                })
            }
            SectionKind::Apps(stmts) => self.block("apps", span, stmts.is_empty(), |p| {
                for st in stmts {
                    p.emit(&format!("deny {}", values(&st.names, quote_word)), st.span);
                }
            }),
            SectionKind::Sandbox(sb) => {
                let header = format!("sandbox {}", joined(&sb.modes));
                match &sb.block {
                    None => self.emit(&header, span),
                    Some(stmts) => self.block(&header, span, stmts.is_empty(), |p| {
                        for st in stmts {
                            match st {
                                SandboxStmt::Writable(v, sp) => {
                                    p.emit(&format!("writable {}", values(v, quote_string)), *sp)
                                }
                                SandboxStmt::Protect(v, sp) => {
                                    p.emit(&format!("protect {}", values(v, quote_string)), *sp)
                                }
                                SandboxStmt::Exclude(v, sp) => {
                                    p.emit(&format!("exclude {}", values(v, quote_string)), *sp)
                                }
                                SandboxStmt::Read(v, sp) => {
                                    p.emit(&format!("read {}", values(v, quote_string)), *sp)
                                }
                                SandboxStmt::None(v, sp) => {
                                    p.emit(&format!("none {}", values(v, quote_string)), *sp)
                                }
                            }
                        }
                    }),
                }
            }
            SectionKind::Approvals(a) => {
                let header = format!("approvals {}", joined(&a.modes));
                match &a.granular {
                    None => self.emit(&header, span),
                    Some(stmts) => self.block(&header, span, stmts.is_empty(), |p| {
                        for g in stmts {
                            p.emit(&format!("{} {}", g.category.node, g.value.node), g.span);
                        }
                    }),
                }
            }
            SectionKind::Reviewer(r) => self.emit(&format!("reviewer {}", joined(r)), span),
            SectionKind::WebSearch(w) => self.emit(&format!("web_search {}", joined(w)), span),
            SectionKind::Mcp(stmts) => self.block("mcp", span, stmts.is_empty(), |p| {
                for st in stmts {
                    match st {
                        McpStmt::Server { server, mode, span } => p.emit(
                            &format!("server {} {}", name(&server.node), mode.node),
                            *span,
                        ),
                        McpStmt::Tool {
                            server,
                            tool,
                            mode,
                            span,
                            ..
                        } => p.emit(&format!("tool {server}/{tool} {}", mode.node), *span),
                    }
                }
            }),
            SectionKind::Commands(rules) => self.block("commands", span, rules.is_empty(), |p| {
                for r in rules {
                    let mut text = format!("{} {}", r.effect, words(&r.pattern));
                    if let Some(b) = &r.because {
                        text.push_str(&format!(" because {}", string(b)));
                    }
                    p.emit(&text, r.span);
                }
            }),
            SectionKind::Guardian(stmts) => self.block("guardian", span, stmts.is_empty(), |p| {
                for st in stmts {
                    let (text, sp) = match st {
                        GuardianStmt::Risk {
                            level,
                            category,
                            matcher: m,
                            span,
                        } => (
                            format!("risk {} {} {}", level.node, category.node, matcher(m)),
                            *span,
                        ),
                        GuardianStmt::DenyCategory { category, span } => {
                            (format!("deny category {}", category.node), *span)
                        }
                        GuardianStmt::DenyAction { matcher: m, span } => {
                            (format!("deny {}", matcher(m)), *span)
                        }
                        GuardianStmt::Allow { levels, span } => {
                            (format!("allow {}", joined(levels)), *span)
                        }
                        GuardianStmt::Authorize { level, with, span } => (
                            format!("authorize {} with {}", level.node, with.node),
                            *span,
                        ),
                    };
                    p.emit(&text, sp);
                }
            }),
            SectionKind::Log(stmts) => self.block("log", span, stmts.is_empty(), |p| {
                for st in stmts {
                    p.emit(&format!("mask {}", joined(&st.fields)), st.span);
                }
            }),
        }
    }
}
