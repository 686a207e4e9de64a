//! Queries: what may this sandbox do?
//!
//! A [`Query`] owns its parts: it is what `policyc eval`, `test` blocks and
//! the JSON interface carry. A [`QueryRef`] borrows them, for embedders on a
//! hot path that already hold the host or argv (see
//! [`Policy::decide_ref`](crate::Policy::decide_ref)); the typed methods of
//! [`Policy`](crate::Policy) (`connect`, `dns`, `exec`, ...) are the same
//! decisions without building a query at all.
//!
//! A query has three spellings, and each reads back as the same query:
//! the text form of docs/language.md#tests-and-queries ([`Query::parse`],
//! `FromStr`, and `Display`), the JSON form that `policyc eval --queries`
//! reads (`{"kind":"connect","host":...}`, [`Query::from_json`] and serde),
//! and the Rust value.
//!
//! ```
//! use gatehouse::{Query, Via};
//!
//! let q = Query::parse("connect api.github.com:443 via https")?;
//! assert_eq!(q, Query::Connect { host: "api.github.com".into(), port: 443, via: Via::Https });
//! assert_eq!(q.to_string().parse::<Query>()?, q);
//! assert_eq!(Query::parse("connect github.com").unwrap_err().to_string(), "`github.com` has no port");
//! # Ok::<(), gatehouse::QueryParseError>(())
//! ```

mod text;
mod wire;

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::vocab::{AuthLevel, PromptCategory, RiskCategory, RiskLevel};

pub(crate) use text::{quote_string, quote_word};

/// A query text that does not parse: [`Query::parse`] says why, with the
/// same code and help line that `policyc` prints for it.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct QueryParseError {
    code: &'static str,
    message: String,
    help: Option<String>,
}

impl QueryParseError {
    pub(crate) fn new(code: &'static str, message: String, help: Option<String>) -> Self {
        QueryParseError {
            code,
            message,
            help,
        }
    }
    /// The stable diagnostic code (`syntax_error`, `invalid_port`, ...).
    pub fn code(&self) -> &'static str {
        self.code
    }
    /// What to write instead, where there is something to say.
    pub fn help(&self) -> Option<&str> {
        self.help.as_deref()
    }
}

/// How a connection reaches the proxy (docs/language.md#network, `via`).
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// A plain HTTP request to the proxy (absolute-form), or a CONNECT tunnel
    /// that carries plain HTTP.
    Http,
    /// A CONNECT tunnel carrying TLS (the default).
    #[default]
    Https,
    /// A SOCKS5 CONNECT.
    Socks5,
    /// A SOCKS5 UDP ASSOCIATE datagram.
    Socks5Udp,
}

impl Via {
    /// Every transport, in the order the language lists them.
    pub const ALL: &'static [Via] = &[Via::Http, Via::Https, Via::Socks5, Via::Socks5Udp];
    /// The keyword, as written after `via`.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Http => "http",
            Via::Https => "https",
            Via::Socks5 => "socks5",
            Via::Socks5Udp => "socks5_udp",
        }
    }
    /// The transport a keyword names.
    pub fn parse(s: &str) -> Option<Via> {
        Via::ALL.iter().copied().find(|v| v.as_str() == s)
    }
}

/// MCP tool annotations; a missing hint is `None`.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Annotations {
    /// `destructiveHint`: the tool may destroy data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// `readOnlyHint`: the tool changes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// `openWorldHint`: the tool reaches beyond the sandbox (the web).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// The reviewer's own outcome.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewOutcome {
    /// The reviewer would let the action run.
    Allow,
    /// The reviewer would stop it.
    Deny,
}

/// How the review session ended.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    /// The review finished and gave an assessment.
    Ok,
    /// The review failed (an error, an unreadable answer).
    Failed,
    /// The review ran out of time.
    Timeout,
    /// The review was cancelled.
    Cancelled,
}

/// The auto-reviewer's assessment of an action (docs/language.md#guardian).
#[derive(Clone, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assessment {
    /// How risky the reviewer judged the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskLevel>,
    /// What kind of risk it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<RiskCategory>,
    /// How clearly the user asked for the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_authorization: Option<AuthLevel>,
    /// The reviewer's own verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ReviewOutcome>,
    /// How the review session ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ReviewStatus>,
}

/// One question to a policy.
///
/// ```
/// use gatehouse::{PolicySet, Query};
///
/// let set = PolicySet::from_source("p.policy", "policy p {\n  network {\n    allow domain github.com\n  }\n}\n")?;
/// let p = set.single().expect("one policy");
/// let text = Query::parse("connect github.com:443")?;
/// let json = Query::from_json(r#"{"kind":"connect","host":"github.com","port":443}"#)?;
/// assert_eq!(text, json);
/// assert!(p.decide(&json).is_allow());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Ports are kept as written (`i64`) so that an out-of-range port is a
/// decision (`invalid_port`), not a malformed query.
///
/// The JSON form is read through one flat struct (`wire::Wire`) rather than
/// serde's internally tagged enums: the same strictness (every unknown or
/// misplaced field is an error) in a fraction of the code, which matters for
/// the browser build.
#[derive(Clone, Debug, Eq, PartialEq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Query {
    /// `connect HOST:PORT [via VIA]`: may the sandbox open this connection?
    Connect {
        /// A name or an address literal, as the agent spelled it.
        host: String,
        /// The destination port.
        port: i64,
        /// How the connection reaches the proxy.
        #[serde(default)]
        via: Via,
    },
    /// `dns NAME`: may the resolver answer this name?
    Dns {
        /// The name asked for.
        name: String,
    },
    /// `resolved NAME -> ADDR, ... [port P]`: may the sandbox use these
    /// addresses, which a name resolved to?
    Resolved {
        /// The name that was resolved.
        host: String,
        /// The addresses of the answer, as text.
        addrs: Vec<String>,
        /// The port to be dialled, where known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<i64>,
    },
    /// `socket PATH`: may the sandbox connect to this unix socket?
    Socket {
        /// The socket's absolute path.
        path: String,
    },
    /// `listen ADDR`: may the sandbox bind and listen here?
    Listen {
        /// The address (and port) to bind.
        addr: String,
    },
    /// `upstream`: may the proxy chain to an upstream proxy?
    Upstream,
    /// `tool PERMISSION`: is this permission granted?
    Tool {
        /// The permission's name (`shell.exec`, `fs.write`, ...).
        permission: String,
    },
    /// `app PROGRAM`: may the sandbox run this app?
    App {
        /// The app's name.
        program: String,
    },
    /// `write PATH [in WORKSPACE] [home HOME]`: may the agent write this
    /// file?
    Write {
        /// The path written, absolute or relative to the workspace.
        path: String,
        /// The workspace root the write happens in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace: Option<String>,
        /// The home directory `~` rules are relative to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        home: Option<String>,
    },
    /// `read PATH [in WORKSPACE] [home HOME]`: may the agent read this file?
    Read {
        /// The path read, absolute.
        path: String,
        /// The workspace root the read happens in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace: Option<String>,
        /// The home directory `~` rules are relative to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        home: Option<String>,
    },
    /// `exec ARGV... [escalate]`: may the agent run this command?
    Exec {
        /// The command and its arguments.
        argv: Vec<String>,
        /// Whether it asks to run outside the sandbox.
        #[serde(default)]
        escalate: bool,
    },
    /// `mcp SERVER TOOL [hints]`: may the agent call this MCP tool?
    Mcp {
        /// The MCP server's name.
        server: String,
        /// The tool's name on that server.
        tool: String,
        /// The tool's annotations, as the server declared them.
        #[serde(default)]
        annotations: Annotations,
    },
    /// `prompt CATEGORY`: may the agent ask the user in this category, or
    /// is it decided without asking?
    Prompt {
        /// What the agent would ask about.
        category: PromptCategory,
    },
    /// `review ACTION [assessment]`: what becomes of an action after the
    /// auto-reviewer's assessment?
    Review {
        /// The action reviewed.
        action: Box<Query>,
        /// What the reviewer said of it.
        #[serde(default)]
        assessment: Assessment,
    },
    /// `web_search`: may the agent search the web?
    WebSearch,
}

/// A query that borrows what it asks about, for embedders on the hot path
/// (a proxy deciding every request): hosts and paths stay where they are,
/// addresses are [`IpAddr`]s, and nothing is copied unless a decision log
/// wants the query written down ([`QueryRef::to_owned_query`]). Decided by
/// [`Policy::decide_ref`](crate::Policy::decide_ref) and, logged,
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
    Connect {
        /// A name or an address literal, as the agent spelled it.
        host: &'a str,
        /// The destination port.
        port: u16,
        /// How the connection reaches the proxy.
        via: Via,
    },
    /// `connect` to an address the caller holds (a socket's peer).
    ConnectAddr {
        /// The destination address.
        addr: IpAddr,
        /// The destination port.
        port: u16,
        /// How the connection reaches the proxy.
        via: Via,
    },
    /// `dns NAME`.
    Dns {
        /// The name asked for.
        name: &'a str,
    },
    /// `resolved NAME -> ADDRS [port P]`, the addresses parsed already.
    Resolved {
        /// The name that was resolved.
        host: &'a str,
        /// The addresses of the answer.
        addrs: &'a [IpAddr],
        /// The port to be dialled, where known.
        port: Option<u16>,
    },
    /// `socket PATH`.
    Socket {
        /// The socket's absolute path.
        path: &'a str,
    },
    /// `upstream`.
    Upstream,
    /// `tool PERMISSION`.
    Tool {
        /// The permission's name.
        permission: &'a str,
    },
    /// `app PROGRAM`.
    App {
        /// The app's name.
        program: &'a str,
    },
    /// `exec ARGV`.
    Exec {
        /// The command and its arguments.
        argv: &'a [String],
        /// Whether it asks to run outside the sandbox.
        escalate: bool,
    },
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
                Query::Exec { .. }
                    | Query::Write { .. }
                    | Query::Read { .. }
                    | Query::Mcp { .. }
                    | Query::Prompt { .. }
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
            Query::Read { .. } => "read",
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

// serde's traits are defined in serde_core, which serde (a public
// dependency) re-exports; the lint does not follow the re-export.
#[allow(exported_private_dependencies)]
impl<'de> Deserialize<'de> for Query {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Query, D::Error> {
        wire::Wire::deserialize(d)?
            .into_query()
            .map_err(serde::de::Error::custom)
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
