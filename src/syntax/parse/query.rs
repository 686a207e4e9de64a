//! The query language (`test` blocks, `policyc eval --query`).

use super::*;

impl Builder {
    // ------------------------------------------------------------ queries

    pub(super) fn query(&mut self, p: P<'_>) -> Option<Query> {
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
            Rule::q_write | Rule::q_read => {
                let read = rule == Rule::q_read;
                let path = self.value(it.next()?)?.0;
                let (mut workspace, mut home) = (None, None);
                while let Some(kw) = it.next() {
                    let v = Some(self.value(it.next()?)?.0);
                    if kw.as_rule() == Rule::kw_home {
                        home = v;
                    } else {
                        workspace = v;
                    }
                }
                if read {
                    Query::Read {
                        path,
                        workspace,
                        home,
                    }
                } else {
                    Query::Write {
                        path,
                        workspace,
                        home,
                    }
                }
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

    pub(super) fn bool_value(&mut self, v: &str, span: Span) -> Option<bool> {
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
    pub(super) fn target(&mut self, p: P<'_>) -> Option<(String, i64)> {
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

/// Splits `HOST:PORT` for a query, with the message and help of a refusal.
pub(super) fn split_host_port(text: &str) -> Result<(&str, &str), (String, String)> {
    use crate::normalize::HostPortError;
    if let Some((scheme, rest)) = text.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let example = match crate::normalize::split_host_port(authority) {
            Ok((h, p)) => format!("{h}:{p}"),
            Err(_) => {
                let port =
                    if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("ws") {
                        80
                    } else {
                        443
                    };
                format!("{authority}:{port}")
            }
        };
        return Err((
            format!("`{text}` is a URL; a query takes a host and a port, not a URL"),
            format!(
                "write `{example}`: the decision is about the connection, whatever is sent over it"
            ),
        ));
    }
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
