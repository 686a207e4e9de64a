//! Owned queries: what `policyc eval`, `test` blocks and the JSON interface
//! carry. Programs on the hot path call the borrowed methods of
//! [`crate::eval::Policy`] directly instead.
//!
//! The JSON form is the one `policyc eval --queries` reads (README) (`{"kind":"connect","host":...}`); the text
//! form is docs/language.md#tests-and-queries, parsed by [`crate::syntax::parse_query`] and
//! printed by `Display`.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::vocab::{AuthLevel, PromptCategory, RiskCategory, RiskLevel};

/// How a connection reaches the proxy (docs/language.md#network, `via`).
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

/// The auto-reviewer's assessment of an action (docs/language.md#guardian).
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
///
/// The JSON form is read through [`wire::Wire`], one flat struct, rather than
/// serde's internally tagged enums: the same strictness (every unknown or
/// misplaced field is an error) in a fraction of the code, which matters for
/// the browser build.
#[derive(Clone, Debug, Eq, PartialEq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
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

/// A query that borrows what it asks about, for embedders on the hot path
/// (a proxy deciding every request): hosts and paths stay where they are,
/// addresses are [`IpAddr`]s, and nothing is copied unless a decision log
/// wants the query written down ([`QueryRef::to_owned_query`]). Decided by
/// [`crate::eval::Policy::decide_ref`] and, logged,
/// [`crate::PolicySet::decide_ref_logged`], exactly as the owned form.
///
/// ```
/// use gatehouse::query::{QueryRef, Via};
/// let q = QueryRef::Connect { host: "api.github.com", port: 443, via: Via::Https };
/// assert_eq!(q.to_owned_query().to_string(), "connect api.github.com:443");
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum QueryRef<'a> {
    /// `connect HOST:PORT via VIA`.
    Connect { host: &'a str, port: u16, via: Via },
    /// `connect` to an address the caller holds (a socket's peer).
    ConnectAddr { addr: IpAddr, port: u16, via: Via },
    /// `dns NAME`.
    Dns { name: &'a str },
    /// `resolved NAME -> ADDRS [port P]`, the addresses parsed already.
    Resolved {
        host: &'a str,
        addrs: &'a [IpAddr],
        port: Option<u16>,
    },
    /// `socket PATH`.
    Socket { path: &'a str },
    /// `upstream`.
    Upstream,
    /// `tool PERMISSION`.
    Tool { permission: &'a str },
    /// `app PROGRAM`.
    App { program: &'a str },
    /// `exec ARGV`.
    Exec { argv: &'a [String], escalate: bool },
    /// Any other query, owned.
    Owned(&'a Query),
}

impl QueryRef<'_> {
    /// The owned form (what a decision log records).
    pub fn to_owned_query(&self) -> Query {
        match *self {
            QueryRef::Connect { host, port, via } => Query::Connect {
                host: host.to_string(),
                port: i64::from(port),
                via,
            },
            QueryRef::ConnectAddr { addr, port, via } => Query::Connect {
                host: match addr {
                    IpAddr::V4(a) => a.to_string(),
                    IpAddr::V6(a) => format!("[{a}]"),
                },
                port: i64::from(port),
                via,
            },
            QueryRef::Dns { name } => Query::Dns {
                name: name.to_string(),
            },
            QueryRef::Resolved { host, addrs, port } => Query::Resolved {
                host: host.to_string(),
                addrs: addrs.iter().map(IpAddr::to_string).collect(),
                port: port.map(i64::from),
            },
            QueryRef::Socket { path } => Query::Socket {
                path: path.to_string(),
            },
            QueryRef::Upstream => Query::Upstream,
            QueryRef::Tool { permission } => Query::Tool {
                permission: permission.to_string(),
            },
            QueryRef::App { program } => Query::App {
                program: program.to_string(),
            },
            QueryRef::Exec { argv, escalate } => Query::Exec {
                argv: argv.to_vec(),
                escalate,
            },
            QueryRef::Owned(q) => q.clone(),
        }
    }

    /// Whether the query is an agent action (`exec`, `write`, `mcp`,
    /// `prompt`), for which logs carry the tool-decision telemetry.
    pub fn is_agent_action(&self) -> bool {
        match self {
            QueryRef::Exec { .. } => true,
            QueryRef::Owned(q) => matches!(
                q,
                Query::Exec { .. } | Query::Write { .. } | Query::Mcp { .. } | Query::Prompt { .. }
            ),
            _ => false,
        }
    }
}

impl<'a> From<&'a Query> for QueryRef<'a> {
    fn from(q: &'a Query) -> Self {
        QueryRef::Owned(q)
    }
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

impl<'de> Deserialize<'de> for Query {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Query, D::Error> {
        wire::Wire::deserialize(d)?
            .into_query()
            .map_err(serde::de::Error::custom)
    }
}

mod wire {
    //! The JSON form of a query as one flat record: `kind` says which fields
    //! belong; any other field present is an error, as is a missing one.

    use serde::Deserialize;

    use super::{Annotations, Assessment, Query, Via};
    use crate::vocab::PromptCategory;

    #[derive(Clone, Copy, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub(super) enum Kind {
        Connect,
        Dns,
        Resolved,
        Socket,
        Listen,
        Upstream,
        Tool,
        App,
        Write,
        Exec,
        Mcp,
        Prompt,
        Review,
        WebSearch,
    }

    #[derive(Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Wire {
        kind: Option<Kind>,
        host: Option<String>,
        port: Option<i64>,
        via: Option<Via>,
        name: Option<String>,
        addrs: Option<Vec<String>>,
        path: Option<String>,
        addr: Option<String>,
        permission: Option<String>,
        program: Option<String>,
        workspace: Option<String>,
        argv: Option<Vec<String>>,
        escalate: Option<bool>,
        server: Option<String>,
        tool: Option<String>,
        annotations: Option<Annotations>,
        category: Option<PromptCategory>,
        action: Option<Box<Query>>,
        assessment: Option<Assessment>,
    }

    /// Takes a required field.
    fn req<T>(v: &mut Option<T>, name: &str) -> Result<T, String> {
        v.take().ok_or_else(|| format!("missing field `{name}`"))
    }

    impl Wire {
        pub(super) fn into_query(mut self) -> Result<Query, String> {
            let w = &mut self;
            let kind = req(&mut w.kind, "kind")?;
            let q = match kind {
                Kind::Connect => Query::Connect {
                    host: req(&mut w.host, "host")?,
                    port: req(&mut w.port, "port")?,
                    via: w.via.take().unwrap_or_default(),
                },
                Kind::Dns => Query::Dns {
                    name: req(&mut w.name, "name")?,
                },
                Kind::Resolved => Query::Resolved {
                    host: req(&mut w.host, "host")?,
                    addrs: req(&mut w.addrs, "addrs")?,
                    port: w.port.take(),
                },
                Kind::Socket => Query::Socket {
                    path: req(&mut w.path, "path")?,
                },
                Kind::Listen => Query::Listen {
                    addr: req(&mut w.addr, "addr")?,
                },
                Kind::Upstream => Query::Upstream,
                Kind::Tool => Query::Tool {
                    permission: req(&mut w.permission, "permission")?,
                },
                Kind::App => Query::App {
                    program: req(&mut w.program, "program")?,
                },
                Kind::Write => Query::Write {
                    path: req(&mut w.path, "path")?,
                    workspace: w.workspace.take(),
                },
                Kind::Exec => Query::Exec {
                    argv: req(&mut w.argv, "argv")?,
                    escalate: w.escalate.take().unwrap_or_default(),
                },
                Kind::Mcp => Query::Mcp {
                    server: req(&mut w.server, "server")?,
                    tool: req(&mut w.tool, "tool")?,
                    annotations: w.annotations.take().unwrap_or_default(),
                },
                Kind::Prompt => Query::Prompt {
                    category: req(&mut w.category, "category")?,
                },
                Kind::Review => Query::Review {
                    action: req(&mut w.action, "action")?,
                    assessment: w.assessment.take().unwrap_or_default(),
                },
                Kind::WebSearch => Query::WebSearch,
            };
            // Whatever the kind did not take does not belong to it.
            let left = [
                ("host", w.host.is_some()),
                ("port", w.port.is_some()),
                ("via", w.via.is_some()),
                ("name", w.name.is_some()),
                ("addrs", w.addrs.is_some()),
                ("path", w.path.is_some()),
                ("addr", w.addr.is_some()),
                ("permission", w.permission.is_some()),
                ("program", w.program.is_some()),
                ("workspace", w.workspace.is_some()),
                ("argv", w.argv.is_some()),
                ("escalate", w.escalate.is_some()),
                ("server", w.server.is_some()),
                ("tool", w.tool.is_some()),
                ("annotations", w.annotations.is_some()),
                ("category", w.category.is_some()),
                ("action", w.action.is_some()),
                ("assessment", w.assessment.is_some()),
            ];
            match left.iter().find(|(_, present)| *present) {
                Some((field, _)) => Err(format!("unknown field `{field}` for kind `{}`", q.kind())),
                None => Ok(q),
            }
        }
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
                    // `port` and `because` end the answers when bare.
                    let a = if matches!(a.as_str(), "port" | "because") {
                        quote_string(a)
                    } else {
                        quote_word(a)
                    };
                    write!(f, "{}{a}", if i == 0 { " " } else { ", " })?;
                }
                if let Some(p) = port {
                    write!(f, " port {p}")?;
                }
                Ok(())
            }
            Query::Socket { path } => write!(f, "socket {}", quote_string(path)),
            Query::Listen { addr } => {
                // Bare when it reads back as itself: a plain word, or one
                // bracketed address with a printable suffix (`[::1]:80`).
                let printable = addr
                    .chars()
                    .all(|c| c.is_ascii_graphic() && !"\"#;{}\\".contains(c));
                let bracketed = addr.starts_with('[')
                    && addr.matches('[').count() == 1
                    && addr.matches(']').count() == 1
                    && printable;
                let plain = quote_word(addr) == *addr || bracketed;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(json: &str) -> String {
        Query::from_json(json)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn json_form_is_strict() {
        assert_eq!(
            Query::from_json(r#"{"port":443,"host":"a.example","kind":"connect"}"#).ok(),
            Some(Query::Connect {
                host: "a.example".into(),
                port: 443,
                via: Via::Https
            })
        );
        assert!(
            err(r#"{"kind":"connect","host":"a","port":1,"name":"x"}"#)
                .contains("unknown field `name` for kind `connect`")
        );
        assert!(err(r#"{"kind":"connect","host":"a","port":1,"bogus":1}"#).contains("bogus"));
        assert!(err(r#"{"kind":"connect","host":"a"}"#).contains("missing field `port`"));
        assert!(err(r#"{"host":"a","port":1}"#).contains("missing field `kind`"));
        assert!(err(r#"{"kind":"teleport"}"#).contains("teleport"));
        assert!(err(r#"{"kind":"connect","host":"a","port":1,"port":2}"#).contains("duplicate"));
        assert!(err(r#"{"kind":"upstream","argv":[]}"#).contains("unknown field `argv`"));
        // Nested review actions are held to the same rules.
        assert!(
            err(r#"{"kind":"review","action":{"kind":"dns","name":"a","host":"b"}}"#)
                .contains("unknown field `host` for kind `dns`")
        );
    }

    #[test]
    fn json_round_trip() {
        let qs = [
            r#"{"kind":"exec","argv":["git","push"],"escalate":true}"#,
            r#"{"kind":"review","action":{"kind":"write","path":"/a","workspace":"/w"},"assessment":{"risk":"high"}}"#,
            r#"{"kind":"mcp","server":"s","tool":"t","annotations":{"destructive_hint":true}}"#,
            r#"{"kind":"resolved","host":"h","addrs":["1.2.3.4"],"port":80}"#,
            r#"{"kind":"web_search"}"#,
        ];
        for q in qs {
            let parsed = Query::from_json(q).ok();
            let again = parsed
                .as_ref()
                .and_then(|p| serde_json::to_string(p).ok())
                .and_then(|s| Query::from_json(&s).ok());
            assert!(parsed.is_some() && parsed == again, "{q}");
        }
    }
}
