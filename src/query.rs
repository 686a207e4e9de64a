//! Owned queries: what `policyc eval`, `test` blocks and the JSON interface
//! carry. Programs on the hot path call the borrowed methods of
//! [`crate::eval::Policy`] directly instead.
//!
//! The JSON form is interfaces §2 (`{"kind":"connect","host":...}`); the text
//! form is language spec §13, parsed by [`crate::syntax::parse_query`] and
//! printed by `Display`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::syntax::ast::{AuthLevel, PromptCategory, RiskCategory, RiskLevel};

/// How a connection reaches the proxy (language spec §3, `via`).
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    Http,
    #[default]
    Https,
    Socks5,
    Socks5Udp,
}

impl Via {
    pub const ALL: &'static [Via] = &[Via::Http, Via::Https, Via::Socks5, Via::Socks5Udp];
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Http => "http",
            Via::Https => "https",
            Via::Socks5 => "socks5",
            Via::Socks5Udp => "socks5_udp",
        }
    }
    pub fn parse(s: &str) -> Option<Via> {
        Via::ALL.iter().copied().find(|v| v.as_str() == s)
    }
}

/// MCP tool annotations; a missing hint is `None`.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Annotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// The reviewer's own outcome.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewOutcome {
    Allow,
    Deny,
}

/// How the review session ended.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    Ok,
    Failed,
    Timeout,
    Cancelled,
}

/// The auto-reviewer's assessment of an action (language spec §11).
#[derive(Clone, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assessment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<RiskCategory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_authorization: Option<AuthLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ReviewOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ReviewStatus>,
}

/// One question to a policy.
///
/// Ports are kept as written (`i64`) so that an out-of-range port is a
/// decision (`invalid_port`), not a malformed query.
#[derive(Clone, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Query {
    Connect {
        host: String,
        port: i64,
        #[serde(default)]
        via: Via,
    },
    Dns {
        name: String,
    },
    Resolved {
        host: String,
        addrs: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<i64>,
    },
    Socket {
        path: String,
    },
    Listen {
        addr: String,
    },
    Upstream,
    Tool {
        permission: String,
    },
    App {
        program: String,
    },
    Write {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace: Option<String>,
    },
    Exec {
        argv: Vec<String>,
        #[serde(default)]
        escalate: bool,
    },
    Mcp {
        server: String,
        tool: String,
        #[serde(default)]
        annotations: Annotations,
    },
    Prompt {
        category: PromptCategory,
    },
    Review {
        action: Box<Query>,
        #[serde(default)]
        assessment: Assessment,
    },
    WebSearch,
}

impl Query {
    /// The query's kind, as in the JSON form.
    pub fn kind(&self) -> &'static str {
        match self {
            Query::Connect { .. } => "connect",
            Query::Dns { .. } => "dns",
            Query::Resolved { .. } => "resolved",
            Query::Socket { .. } => "socket",
            Query::Listen { .. } => "listen",
            Query::Upstream => "upstream",
            Query::Tool { .. } => "tool",
            Query::App { .. } => "app",
            Query::Write { .. } => "write",
            Query::Exec { .. } => "exec",
            Query::Mcp { .. } => "mcp",
            Query::Prompt { .. } => "prompt",
            Query::Review { .. } => "review",
            Query::WebSearch => "web_search",
        }
    }

    /// Parses one JSON query object.
    pub fn from_json(text: &str) -> Result<Query, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// Quotes a word for the text form when it is not a plain bare word.
pub(crate) fn quote_word(w: &str) -> String {
    let bare = !w.is_empty()
        && w.chars().all(|c| {
            c.is_ascii_graphic()
                && !matches!(c, '"' | '#' | ';' | '{' | '}' | ',' | '[' | ']' | '\\')
        })
        && !matches!(w, "because" | "with" | "escalate" | "in");
    if bare { w.to_string() } else { quote_string(w) }
}

/// A double-quoted string literal with the language's escapes.
pub(crate) fn quote_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `HOST:PORT` in the text form, reading back as exactly this host string:
/// `[::1]:443` stays bracketed, a bare IPv6 host is quoted (`"::1":443`).
fn host_port(host: &str, port: i64) -> String {
    let bracketed = host.starts_with('[')
        && host.ends_with(']')
        && host.matches('[').count() == 1
        && !host.contains(|c: char| c.is_whitespace() || "\"#;{}".contains(c));
    if bracketed {
        format!("{host}:{port}")
    } else if host.contains(':') {
        format!("{}:{port}", quote_string(host))
    } else {
        format!("{}:{port}", quote_word(host))
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Query::Connect { host, port, via } => {
                write!(f, "connect {}", host_port(host, *port))?;
                if *via != Via::Https {
                    write!(f, " via {}", via.as_str())?;
                }
                Ok(())
            }
            Query::Dns { name } => write!(f, "dns {}", quote_word(name)),
            Query::Resolved { host, addrs, port } => {
                write!(f, "resolved {} ->", quote_word(host))?;
                for (i, a) in addrs.iter().enumerate() {
                    write!(f, "{}{}", if i == 0 { " " } else { ", " }, quote_word(a))?;
                }
                if let Some(p) = port {
                    write!(f, " port {p}")?;
                }
                Ok(())
            }
            Query::Socket { path } => write!(f, "socket {}", quote_string(path)),
            Query::Listen { addr } => {
                let plain = !addr.is_empty()
                    && !addr.contains(|c: char| c.is_whitespace() || "\"#;{}".contains(c));
                if plain {
                    write!(f, "listen {addr}")
                } else {
                    write!(f, "listen {}", quote_string(addr))
                }
            }
            Query::Upstream => f.write_str("upstream"),
            Query::Tool { permission } => write!(f, "tool {}", quote_word(permission)),
            Query::App { program } => write!(f, "app {}", quote_word(program)),
            Query::Write { path, workspace } => {
                write!(f, "write {}", quote_string(path))?;
                if let Some(w) = workspace {
                    write!(f, " in {}", quote_string(w))?;
                }
                Ok(())
            }
            Query::Exec { argv, escalate } => {
                f.write_str("exec")?;
                for w in argv {
                    write!(f, " {}", quote_word(w))?;
                }
                if *escalate {
                    f.write_str(" escalate")?;
                }
                Ok(())
            }
            Query::Mcp {
                server,
                tool,
                annotations,
            } => {
                let target = format!("{server}/{tool}");
                let plain = target
                    .chars()
                    .all(|c| c.is_ascii_graphic() && !"\"#;{},=[]".contains(c));
                if plain {
                    write!(f, "mcp {target}")?;
                } else {
                    write!(f, "mcp {}", quote_string(&target))?;
                }
                for (k, v) in [
                    ("destructive", annotations.destructive_hint),
                    ("read_only", annotations.read_only_hint),
                    ("open_world", annotations.open_world_hint),
                ] {
                    if let Some(v) = v {
                        write!(f, " {k}={v}")?;
                    }
                }
                Ok(())
            }
            Query::Prompt { category } => write!(f, "prompt {category}"),
            Query::Review { action, assessment } => {
                write!(f, "review {action} with")?;
                if let Some(r) = assessment.risk {
                    write!(f, " risk={r}")?;
                }
                if let Some(c) = assessment.category {
                    write!(f, " category={c}")?;
                }
                if let Some(a) = assessment.user_authorization {
                    write!(f, " auth={a}")?;
                }
                if let Some(o) = assessment.outcome {
                    write!(
                        f,
                        " outcome={}",
                        if o == ReviewOutcome::Allow {
                            "allow"
                        } else {
                            "deny"
                        }
                    )?;
                }
                if let Some(s) = assessment.status {
                    let s = match s {
                        ReviewStatus::Ok => "ok",
                        ReviewStatus::Failed => "failed",
                        ReviewStatus::Timeout => "timeout",
                        ReviewStatus::Cancelled => "cancelled",
                    };
                    write!(f, " status={s}")?;
                }
                Ok(())
            }
            Query::WebSearch => f.write_str("web_search"),
        }
    }
}
