//! One lowering per section kind, from pest pairs to the AST.

use super::*;

impl Builder {
    // ------------------------------------------------------------ network

    pub(super) fn network(&mut self, p: P<'_>) -> Option<Network> {
        let mode = p.into_inner().nth(1)?;
        match mode.as_rule() {
            Rule::network_block => {
                let mut out = Vec::new();
                for body in mode.into_inner() {
                    if body.as_rule() == Rule::net_plain {
                        // The only body there is: taken whole, not copied.
                        let stmts = self.net_plain(body);
                        if out.is_empty() {
                            out = stmts;
                        } else {
                            out.extend(stmts);
                        }
                    } else {
                        out.extend(self.stmts(body, &NETWORK_CTX, Rule::net_stmt, Self::net_stmt));
                    }
                }
                Some(Network::Block(out))
            }
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

    pub(super) fn net_stmt(&mut self, p: P<'_>) -> Option<NetStmt> {
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

    pub(super) fn net_rule(&mut self, p: P<'_>) -> Option<NetRule> {
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

    pub(super) fn ip(&mut self, text: &str, span: Span) -> Option<IpAddr> {
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

    pub(super) fn cidr(&mut self, text: &str, span: Span) -> Option<IpNet> {
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

    pub(super) fn ports(&mut self, p: P<'_>) -> Option<Vec<PortRange>> {
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

    pub(super) fn proxy_stmt(&mut self, p: P<'_>) -> Option<ProxyStmt> {
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

    pub(super) fn perm_stmt(&mut self, p: P<'_>) -> Option<PermStmt> {
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

    pub(super) fn apps_stmt(&mut self, p: P<'_>) -> Option<AppsStmt> {
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

    pub(super) fn sandbox(&mut self, p: P<'_>) -> Option<SandboxSection> {
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

    pub(super) fn sandbox_stmt(&mut self, p: P<'_>) -> Option<SandboxStmt> {
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
        Some(match kw.as_rule() {
            Rule::kw_writable => SandboxStmt::Writable(values, span),
            Rule::kw_exclude => SandboxStmt::Exclude(values, span),
            Rule::kw_read => SandboxStmt::Read(values, span),
            Rule::kw_none => SandboxStmt::None(values, span),
            _ => SandboxStmt::Protect(values, span),
        })
    }

    pub(super) fn approvals(&mut self, p: P<'_>) -> Option<ApprovalsSection> {
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

    pub(super) fn granular_stmt(&mut self, p: P<'_>) -> Option<GranularStmt> {
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

    pub(super) fn mcp_stmt(&mut self, p: P<'_>) -> Option<McpStmt> {
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

    pub(super) fn cmd_word(&mut self, p: P<'_>) -> Option<CommandWord> {
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

    pub(super) fn cmd_rule(&mut self, p: P<'_>) -> Option<CommandRule> {
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

    pub(super) fn guardian_stmt(&mut self, p: P<'_>) -> Option<GuardianStmt> {
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

    pub(super) fn matcher(&mut self, p: P<'_>) -> Option<Matcher> {
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

    pub(super) fn log_stmt(&mut self, p: P<'_>) -> Option<LogStmt> {
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

    pub(super) fn test_block(&mut self, p: P<'_>) -> Option<TestBlock> {
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

    pub(super) fn test_stmt(&mut self, p: P<'_>) -> Option<TestStmt> {
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
}
