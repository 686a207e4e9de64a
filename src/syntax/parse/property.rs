//! `properties` blocks: `policy NAME` lines and claims, `never|always
//! OUTCOME PATTERN`, the pattern read by hand so that a diagnostic points
//! at the word inside it that is wrong (docs/language.md#properties).

use super::*;
use crate::normalize::pattern::DomainPattern;
use crate::syntax::ast::{Claim, HostPattern, Pattern, PropStmt, PropertiesBlock};

/// The outcomes a claim can name.
const OUTCOMES: &[&str] = &["allow", "ask", "deny"];

/// The kinds a pattern can be over.
const KINDS: &[&str] = &[
    "connect",
    "dns",
    "socket",
    "upstream",
    "web_search",
    "tool",
    "prompt",
    "app",
    "mcp",
    "write",
    "read",
    "exec",
];

/// A word of a pattern: its value (a quoted one unescaped) and where it
/// lies in the file.
struct Word {
    text: String,
    quoted: bool,
    span: Span,
}

impl Builder {
    pub(super) fn properties_block(&mut self, p: P<'_>) -> Option<PropertiesBlock> {
        let span = self.span(&p);
        let mut description = None;
        let mut stmts = Vec::new();
        for c in p.into_inner().skip(1) {
            match c.as_rule() {
                Rule::string => description = self.string(c),
                Rule::prop_stmt => stmts.extend(self.prop_stmt(c)),
                Rule::bad_stmt => self.bad(c, &PROPERTIES_CTX),
                _ => {}
            }
        }
        Some(PropertiesBlock {
            description,
            stmts,
            span,
        })
    }

    fn prop_stmt(&mut self, p: P<'_>) -> Option<PropStmt> {
        let span = self.span(&p);
        let inner = p.into_inner().next()?;
        if inner.as_rule() == Rule::t_policy {
            return Some(PropStmt::Policy(self.name(inner.into_inner().nth(1)?)?));
        }
        let mut it = inner.into_inner();
        let quantifier = it.next()?;
        let always = match quantifier.as_str() {
            "always" => true,
            "never" => false,
            other => {
                let qspan = self.span(&quantifier);
                self.err(
                    SyntaxError::UnknownValue {
                        what: "quantifier",
                        found: other.to_string(),
                        expected: vec!["never", "always"],
                    },
                    qspan,
                );
                return None;
            }
        };
        let word = it.next()?;
        let wspan = self.span(&word);
        let outcome = if OUTCOMES.contains(&word.as_str()) {
            Some(Spanned::new(word.as_str().to_string(), wspan))
        } else {
            self.err(
                SyntaxError::UnknownValue {
                    what: "outcome",
                    found: word.as_str().to_string(),
                    expected: OUTCOMES.to_vec(),
                },
                wspan,
            );
            None
        };
        let pat = it.next()?;
        let at = self.base + pat.as_span().start();
        let text = pat.as_str().trim_end();
        let pattern = self.pattern(text, at);
        Some(PropStmt::Claim(Claim {
            always,
            outcome: outcome?,
            pattern: pattern?,
            pattern_text: text.to_string(),
            span,
        }))
    }

    fn bad_pattern(&mut self, message: String, help: Option<String>, span: Span) {
        self.err(SyntaxError::InvalidProperty { message, help }, span);
    }

    /// The words of a pattern, quoted ones unescaped.
    fn words(&mut self, text: &str, at: usize) -> Option<Vec<Word>> {
        let mut out = Vec::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
                i += 1;
                continue;
            }
            let start = i;
            let quoted = bytes.get(i) == Some(&b'"');
            if quoted {
                i += 1;
                while let Some(&b) = bytes.get(i) {
                    i += 1;
                    match b {
                        b'\\' => i += 1,
                        b'"' => break,
                        _ => {}
                    }
                }
            } else {
                while bytes.get(i).is_some_and(|b| !b.is_ascii_whitespace()) {
                    i += 1;
                }
            }
            let end = i.min(bytes.len());
            let raw = text.get(start..end).unwrap_or("");
            let span = Span::new(self.file, at + start, at + end);
            let value = if quoted {
                let inner = raw
                    .strip_prefix('"')
                    .and_then(|r| r.strip_suffix('"'))
                    .unwrap_or("");
                match lex::unescape(inner) {
                    Ok(v) => v,
                    Err(message) => {
                        self.err(SyntaxError::BadEscape { message }, span);
                        return None;
                    }
                }
            } else {
                raw.to_string()
            };
            out.push(Word {
                text: value,
                quoted,
                span,
            });
        }
        Some(out)
    }

    /// `KIND ARGS...` as a [`Pattern`]; `None` after a diagnostic.
    fn pattern(&mut self, text: &str, at: usize) -> Option<Pattern> {
        let words = self.words(text, at)?;
        let (kind, args) = words.split_first()?;
        let one = |b: &mut Builder, what: &str| -> Option<Option<&Word>> {
            match args {
                [] => {
                    b.bad_pattern(
                        format!("`{}` needs {what}", kind.text),
                        Some(format!("write `{} *` for every one", kind.text)),
                        kind.span,
                    );
                    None
                }
                [w] => Some((w.text != "*" || w.quoted).then_some(w)),
                [_, extra, ..] => {
                    b.bad_pattern(
                        format!("`{}` takes one {what}", kind.text),
                        None,
                        extra.span.to(args.last().map_or(extra.span, |l| l.span)),
                    );
                    None
                }
            }
        };
        let none = |b: &mut Builder| -> Option<()> {
            match args.first() {
                None => Some(()),
                Some(w) => {
                    b.bad_pattern(
                        format!("`{}` takes nothing after it", kind.text),
                        None,
                        w.span,
                    );
                    None
                }
            }
        };
        Some(match kind.text.as_str() {
            "connect" => self.connect_pattern(kind, args)?,
            "dns" => {
                let w = one(self, "a name pattern")?;
                let text = w.map_or("*".to_string(), |w| w.text.to_ascii_lowercase());
                if let Err(e) = DomainPattern::parse(&text) {
                    let span = w.map_or(kind.span, |w| w.span);
                    self.bad_pattern(format!("`{text}`: {e}"), None, span);
                    return None;
                }
                Pattern::Dns(text)
            }
            "socket" => Pattern::Socket(one(self, "a socket path")?.map(|w| w.text.clone())),
            "upstream" => {
                none(self)?;
                Pattern::Upstream
            }
            "web_search" => {
                none(self)?;
                Pattern::WebSearch
            }
            "tool" => {
                let w = one(self, "a permission")?;
                if let Some(w) = w {
                    let ok = crate::vocab::Permission::parse(&w.text).is_some();
                    self.closed("permission", w, ok, crate::vocab::Permission::spellings())?;
                }
                Pattern::Tool(w.map(|w| w.text.clone()))
            }
            "prompt" => {
                let w = one(self, "a prompt category")?;
                if let Some(w) = w {
                    let ok = crate::vocab::PromptCategory::parse(&w.text).is_some();
                    let words = crate::vocab::PromptCategory::spellings();
                    self.closed("prompt category", w, ok, words)?;
                }
                Pattern::Prompt(w.map(|w| w.text.clone()))
            }
            "app" => Pattern::App(one(self, "a program name")?.map(|w| w.text.clone())),
            "mcp" => {
                let w = one(self, "SERVER/TOOL")?;
                let part = |s: &str| (s != "*").then(|| s.to_string());
                match w {
                    None => Pattern::Mcp {
                        server: None,
                        tool: None,
                    },
                    Some(w) => match w.text.split_once('/') {
                        Some((s, t)) if !s.is_empty() && !t.is_empty() => Pattern::Mcp {
                            server: part(s),
                            tool: part(t),
                        },
                        // A server alone: every tool of it.
                        None if !w.text.is_empty() => Pattern::Mcp {
                            server: part(&w.text),
                            tool: None,
                        },
                        _ => {
                            self.bad_pattern(
                                format!("`{}` is not SERVER/TOOL", w.text),
                                Some("write `github/delete_repo`, `github` (every tool of it) or `*`".into()),
                                w.span,
                            );
                            return None;
                        }
                    },
                }
            }
            "write" | "read" => {
                let (glob, workspace) = match args {
                    [g] => (g, None),
                    [g, kw, ws] if kw.text == "in" && !kw.quoted => (g, Some(ws.text.clone())),
                    _ => {
                        let span = args.first().map_or(kind.span, |f| {
                            f.span.to(args.last().map_or(f.span, |l| l.span))
                        });
                        self.bad_pattern(
                            format!(
                                "`{}` takes a path glob and, after `in`, a workspace",
                                kind.text
                            ),
                            Some(format!(
                                "write `{} \".git/**\"` or `{} \"/etc/**\"`",
                                kind.text, kind.text
                            )),
                            span,
                        );
                        return None;
                    }
                };
                if glob.text.is_empty() {
                    self.bad_pattern("an empty path".into(), None, glob.span);
                    return None;
                }
                let glob = glob.text.clone();
                if kind.text == "write" {
                    Pattern::Write { glob, workspace }
                } else {
                    Pattern::Read { glob, workspace }
                }
            }
            "exec" => {
                let rest = args.last().is_some_and(|w| w.text == "*" && !w.quoted);
                let words: Vec<String> = args
                    .get(..args.len() - usize::from(rest))
                    .unwrap_or_default()
                    .iter()
                    .map(|w| w.text.clone())
                    .collect();
                if words.is_empty() && !rest {
                    self.bad_pattern(
                        "`exec` needs the command's words".into(),
                        Some("write `exec rm -rf *` (`*` last: any further words)".into()),
                        kind.span,
                    );
                    return None;
                }
                Pattern::Exec { words, rest }
            }
            "resolved" | "listen" | "review" => {
                self.bad_pattern(
                    format!("properties over `{}` queries are not supported", kind.text),
                    Some(format!("a pattern is over one of: {}", KINDS.join(", "))),
                    kind.span,
                );
                return None;
            }
            other => {
                self.err(
                    SyntaxError::UnknownValue {
                        what: "query kind",
                        found: other.to_string(),
                        expected: KINDS.to_vec(),
                    },
                    kind.span,
                );
                return None;
            }
        })
    }

    /// A word of a closed vocabulary, or a diagnostic naming its words.
    fn closed(
        &mut self,
        what: &'static str,
        w: &Word,
        ok: bool,
        expected: Vec<&'static str>,
    ) -> Option<()> {
        if !ok {
            self.err(
                SyntaxError::UnknownValue {
                    what,
                    found: w.text.clone(),
                    expected,
                },
                w.span,
            );
            return None;
        }
        Some(())
    }

    /// `connect HOST[:PORTS] [port PORTS]`, `connect domain|ip|cidr X [port PORTS]`.
    fn connect_pattern(&mut self, kind: &Word, args: &[Word]) -> Option<Pattern> {
        let (target, rest) = match args {
            [k, x, rest @ ..]
                if !k.quoted && matches!(k.text.as_str(), "domain" | "ip" | "cidr") =>
            {
                let host = match k.text.as_str() {
                    "domain" => self.domain_host(x)?,
                    "ip" => HostPattern::Ip(self.p_ip(x, &x.text)?),
                    _ => HostPattern::Cidr(self.p_cidr(x, &x.text)?),
                };
                ((host, None), rest)
            }
            [t, rest @ ..] => (self.short_target(t)?, rest),
            [] => {
                self.bad_pattern(
                    "`connect` needs a host".into(),
                    Some("write `connect 169.254.169.254:*`, `connect cidr 10.0.0.0/8` or `connect *.internal:443`".into()),
                    kind.span,
                );
                return None;
            }
        };
        let (host, mut ports) = target;
        match rest {
            [] => {}
            [kw, list] if kw.text == "port" && !kw.quoted && ports.is_none() => {
                ports = self.p_ports(list)?;
            }
            [first, ..] => {
                let span = first.span.to(rest.last().map_or(first.span, |l| l.span));
                self.bad_pattern(
                    "unexpected words after the host".into(),
                    Some("ports go after `:` or `port`: `connect 10.0.0.1:22` or `connect cidr 10.0.0.0/8 port 22`".into()),
                    span,
                );
                return None;
            }
        }
        Some(Pattern::Connect { host, ports })
    }

    /// `*`, `[V6]:PORTS`, `IP`, `PREFIX`, `NAME-PATTERN`, each with an
    /// optional `:PORTS` (`*`: every port).
    fn short_target(&mut self, t: &Word) -> Option<(HostPattern, Option<Vec<PortRange>>)> {
        let text = t.text.as_str();
        if let Some(inner) = text.strip_prefix('[') {
            let Some((addr, after)) = inner.split_once(']') else {
                self.bad_pattern(format!("`{text}`: no closing `]`"), None, t.span);
                return None;
            };
            let ip = self.p_ip(t, addr)?;
            let ports = match after {
                "" => None,
                p => match p.strip_prefix(':') {
                    Some(p) => self.port_text(t, p)?,
                    None => {
                        self.bad_pattern(
                            format!("`{text}`: expected `:PORTS` after `]`"),
                            None,
                            t.span,
                        );
                        return None;
                    }
                },
            };
            return Some((HostPattern::Ip(ip), ports));
        }
        if text == "*" {
            return Some((HostPattern::Any, None));
        }
        // A bare IPv6 address or prefix holds colons of its own.
        if let Ok(ip) = text.parse::<std::net::IpAddr>() {
            return Some((
                HostPattern::Ip(crate::normalize::addr::canonical_ip(ip)),
                None,
            ));
        }
        if text.contains('/') && text.contains("::") {
            return Some((HostPattern::Cidr(self.p_cidr(t, text)?), None));
        }
        let (host, ports) = match text.rsplit_once(':') {
            Some((h, p)) => (h, self.port_text(t, p)?),
            None => (text, None),
        };
        let pattern = if host == "*" {
            HostPattern::Any
        } else if host.contains('/') {
            HostPattern::Cidr(self.p_cidr(t, host)?)
        } else if let Ok(ip) = host.parse::<std::net::IpAddr>() {
            HostPattern::Ip(crate::normalize::addr::canonical_ip(ip))
        } else {
            self.domain_text(t, host)?
        };
        Some((pattern, ports))
    }

    fn domain_host(&mut self, w: &Word) -> Option<HostPattern> {
        self.domain_text(w, &w.text)
    }

    fn domain_text(&mut self, w: &Word, text: &str) -> Option<HostPattern> {
        let lower = text.to_ascii_lowercase();
        match DomainPattern::parse(&lower) {
            Ok(DomainPattern::Any) => Some(HostPattern::Any),
            Ok(_) => Some(HostPattern::Domain(lower)),
            Err(e) => {
                self.bad_pattern(format!("`{text}`: {e}"), None, w.span);
                None
            }
        }
    }

    fn p_ip(&mut self, w: &Word, text: &str) -> Option<std::net::IpAddr> {
        match text.parse::<std::net::IpAddr>() {
            Ok(ip) => Some(crate::normalize::addr::canonical_ip(ip)),
            Err(_) => {
                self.err(
                    SyntaxError::InvalidIp {
                        text: text.to_string(),
                        help: "write an address such as 169.254.169.254 or [fd00::1]".into(),
                    },
                    w.span,
                );
                None
            }
        }
    }

    fn p_cidr(&mut self, w: &Word, text: &str) -> Option<ipnet::IpNet> {
        match text.parse::<ipnet::IpNet>() {
            Ok(n) if n.trunc() == n => Some(n),
            Ok(n) => {
                self.err(
                    SyntaxError::CidrHostBits {
                        text: text.to_string(),
                        network: n.trunc().to_string(),
                    },
                    w.span,
                );
                None
            }
            Err(_) => {
                self.err(
                    SyntaxError::InvalidCidr {
                        text: text.to_string(),
                        help: "write a prefix such as 10.0.0.0/8 or fd00::/8".into(),
                    },
                    w.span,
                );
                None
            }
        }
    }

    /// `PORTS` after `port`.
    fn p_ports(&mut self, w: &Word) -> Option<Option<Vec<PortRange>>> {
        self.port_text(w, &w.text)
    }

    /// `*` (every port: `None`) or `443,8000-8999`.
    fn port_text(&mut self, w: &Word, text: &str) -> Option<Option<Vec<PortRange>>> {
        if text == "*" {
            return Some(None);
        }
        let mut out = Vec::new();
        for item in text.split(',') {
            match lex::parse_port_range(item) {
                Ok(r) => out.push(r),
                Err((message, help)) => {
                    self.err(SyntaxError::InvalidPort { message, help }, w.span);
                    return None;
                }
            }
        }
        Some(Some(out))
    }
}
