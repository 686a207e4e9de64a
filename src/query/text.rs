//! The text form of a query (docs/language.md#tests-and-queries), as
//! `Display` prints it: every query prints as text that reads back as the
//! same query.

use std::fmt;

use super::{Query, ReviewOutcome, ReviewStatus, Via};

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
            Query::Write {
                path,
                workspace,
                home,
            }
            | Query::Read {
                path,
                workspace,
                home,
            } => {
                write!(f, "{} {}", self.kind(), quote_string(path))?;
                if let Some(w) = workspace {
                    write!(f, " in {}", quote_string(w))?;
                }
                if let Some(h) = home {
                    write!(f, " home {}", quote_string(h))?;
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
