//! Recovery: what each block accepts, how a statement the grammar
//! rejected is re-parsed to point at the exact token (with a "did you
//! mean"), and the names of grammar rules in "expected ..." messages.

use super::*;

/// What a block accepts, for recovery and suggestions.
pub(super) struct Ctx {
    what: &'static str,
    keywords: &'static [&'static str],
    rule: Rule,
}

pub(super) const FILE_CTX: Ctx = Ctx {
    what: "a file",
    keywords: &["policy", "requirements", "test", "properties"],
    rule: Rule::item,
};
pub(super) const BLOCK_CTX: Ctx = Ctx {
    what: "a policy block",
    keywords: SECTION_KEYWORDS,
    rule: Rule::section,
};
pub(super) const NETWORK_CTX: Ctx = Ctx {
    what: "a `network` block",
    keywords: &["default", "dns", "local", "allow", "deny"],
    rule: Rule::net_stmt,
};
pub(super) const PROXY_CTX: Ctx = Ctx {
    what: "a `proxy` block",
    keywords: &["socks5", "socks5_udp", "upstream", "listen"],
    rule: Rule::proxy_stmt,
};
pub(super) const PERM_CTX: Ctx = Ctx {
    what: "a `permissions` block",
    keywords: &["default", "allow", "deny"],
    rule: Rule::perm_stmt,
};
pub(super) const APPS_CTX: Ctx = Ctx {
    what: "an `apps` block",
    keywords: &["deny"],
    rule: Rule::apps_stmt,
};
pub(super) const SANDBOX_CTX: Ctx = Ctx {
    what: "a `sandbox` block",
    keywords: &["writable", "protect", "exclude", "read", "none"],
    rule: Rule::sandbox_stmt,
};
pub(super) const GRANULAR_CTX: Ctx = Ctx {
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
pub(super) const MCP_CTX: Ctx = Ctx {
    what: "an `mcp` block",
    keywords: &["server", "tool"],
    rule: Rule::mcp_stmt,
};
pub(super) const COMMANDS_CTX: Ctx = Ctx {
    what: "a `commands` block",
    keywords: &["allow", "prompt", "forbid"],
    rule: Rule::cmd_rule,
};
pub(super) const GUARDIAN_CTX: Ctx = Ctx {
    what: "a `guardian` block",
    keywords: &["risk", "deny", "allow", "authorize"],
    rule: Rule::guardian_stmt,
};
pub(super) const LOG_CTX: Ctx = Ctx {
    what: "a `log` block",
    keywords: &["mask"],
    rule: Rule::log_stmt,
};
pub(super) const TEST_CTX: Ctx = Ctx {
    what: "a `test` block",
    keywords: &["policy", "expect"],
    rule: Rule::test_stmt,
};

pub(super) const PROPERTIES_CTX: Ctx = Ctx {
    what: "a `properties` block",
    keywords: &["policy", "never", "always"],
    rule: Rule::prop_stmt,
};

/// The statement keywords of a block, by the keyword that opens it
/// (`"file"` for the top level; `"approvals"` is its `granular` block).
pub(crate) fn block_keywords(block: &str) -> &'static [&'static str] {
    match block {
        "file" => FILE_CTX.keywords,
        "policy" | "requirements" => BLOCK_CTX.keywords,
        "network" => NETWORK_CTX.keywords,
        "proxy" => PROXY_CTX.keywords,
        "permissions" => PERM_CTX.keywords,
        "apps" => APPS_CTX.keywords,
        "sandbox" => SANDBOX_CTX.keywords,
        "approvals" => GRANULAR_CTX.keywords,
        "mcp" => MCP_CTX.keywords,
        "commands" => COMMANDS_CTX.keywords,
        "guardian" => GUARDIAN_CTX.keywords,
        "log" => LOG_CTX.keywords,
        "test" => TEST_CTX.keywords,
        "properties" => PROPERTIES_CTX.keywords,
        _ => &[],
    }
}

pub(crate) const QUERY_KINDS: &[&str] = &[
    "connect",
    "dns",
    "resolved",
    "socket",
    "listen",
    "upstream",
    "tool",
    "app",
    "write",
    "read",
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

impl Builder {
    /// A section whose keyword is misspelled (`netwrok { ... }`), already
    /// reported as an unknown statement, read as the section it was meant
    /// to be, so that the statements inside are reported in the same run
    /// (their syntax and values; the checker never sees the section).
    /// `None` when the word is not close to a section keyword or the text
    /// does not parse as that section.
    pub(super) fn misspelled_section(&mut self, text: &str, at: usize) -> Option<Section> {
        let word: String = text
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if word.is_empty() || SECTION_KEYWORDS.contains(&word.as_str()) {
            return None;
        }
        let keyword = crate::diag::suggest(&word, SECTION_KEYWORDS.iter().copied())?;
        let rest = text.get(word.len()..)?;
        let fixed = format!("{keyword}{rest}");
        // Offsets in `fixed` past the keyword are offsets in the file once
        // shifted by the difference in length.
        let base = (at + word.len()).checked_sub(keyword.len())?;
        let mut pairs = PolicyParser::parse(Rule::section, &fixed).ok()?;
        let pair = pairs.next()?;
        if pair.as_str().len() != fixed.len() {
            return None;
        }
        let saved = std::mem::replace(&mut self.base, base);
        let section = self.section(pair);
        self.base = saved;
        section
    }

    /// A `{` left open: the errors the grammar reported at the end of the
    /// input (where it ran out of text) are replaced by one at the brace.
    pub(super) fn unclosed(&mut self, text: &str, open: usize, closer: Option<usize>) {
        let end = text.trim_end().len();
        let file = self.file;
        self.diags.retain(|d| {
            !(d.code == "syntax_error" && d.span.file == file && d.span.start as usize >= end)
        });
        let line = |at: usize| text.get(..at).map_or(0, |t| t.matches('\n').count()) + 1;
        let opener = text
            .get(..open)
            .and_then(|t| t.lines().last())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| format!(" of `{t}`"))
            .unwrap_or_default();
        let help = match closer {
            Some(c) => format!(
                "add a `}}` for the `{{`{opener}; the `}}` on line {} is indented like an outer block, so it probably closes that one",
                line(c)
            ),
            None => format!("add a `}}` for the `{{`{opener} before the end of the file"),
        };
        let e = SyntaxError::UnclosedBrace { help };
        let mut d = Diagnostic::error(e.code(), e.to_string(), Span::new(file, open, open + 1))
            .with_help(e.help());
        if let Some(c) = closer {
            d = d.with_label(Span::new(file, c, c + 1), "this `}` seems to close it");
        }
        self.diags.push(d);
    }

    /// Reports a statement the grammar did not accept.
    pub(super) fn bad(&mut self, p: P<'_>, ctx: &Ctx) {
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
    pub(super) fn pest_error(&mut self, e: &pest::error::Error<Rule>, text: &str, base: usize) {
        use pest::error::{ErrorVariant, InputLocation};
        let pos = match e.location {
            InputLocation::Pos(p) => p,
            InputLocation::Span((s, _)) => s,
        };
        let rest = text.get(pos..).unwrap_or("");
        if rest.starts_with('"') && crate::syntax::scan::unterminated_string(rest) {
            let span = Span::new(self.file, base + pos, base + pos + 1);
            self.err(SyntaxError::UnterminatedString, span);
            return;
        }
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
        let help = crate::diag::did_you_mean(&found_word, keywords.iter().copied())
            .or_else(|| crate::syntax::error::synonym(&found_word, &keywords));
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
}

/// A human description of a grammar rule, for "expected ..." messages.
pub(super) fn describe(r: Rule) -> &'static str {
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
        Rule::kw_read | Rule::q_read => "`read`",
        Rule::kw_none => "`none`",
        Rule::kw_home => "`home`",
        Rule::kw_protect => "`protect`",
        Rule::kw_exclude => "`exclude`",
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
