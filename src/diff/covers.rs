//! Whether a query lies in a claim's pattern (docs/language.md#properties):
//! hosts as the engine normalises them, command lines the engine judges,
//! paths as a file rule covers them. `PropertyCase::covers` answers with
//! it, and the proofs' witnesses are checked against it in the tests.

use crate::normalize::pattern::DomainPattern;
use crate::normalize::{Host, HostBuf, canonical_ip, normalize_split};
use crate::query::Query;
use crate::syntax::ast::{HostPattern, Pattern};

use super::prove::{SAMPLE_HOME, SAMPLE_WORKSPACE};

/// Whether the host of a `connect` lies in the pattern's hosts: the host
/// as the engine normalises it (case, trailing dot, IDN, numeric
/// spellings, mapped forms); a host it refuses lies in no pattern.
pub(crate) fn host_in(p: &Pattern, q: &Query) -> bool {
    let (Pattern::Connect { host, .. }, Query::Connect { host: h, .. }) = (p, q) else {
        return false;
    };
    let mut buf = HostBuf::new();
    let Ok(split) = normalize_split(h, &mut buf) else {
        return false;
    };
    match (host, split.host) {
        (HostPattern::Any, _) => true,
        (HostPattern::Domain(d), Host::Name(n)) => {
            DomainPattern::parse(d).is_ok_and(|d| d.matches_name(n))
        }
        (HostPattern::Ip(a), Host::Ip(ip)) => canonical_ip(*a) == canonical_ip(ip),
        (HostPattern::Cidr(n), Host::Ip(ip)) => {
            crate::normalize::addr::canonical_net(*n).contains(&canonical_ip(ip))
        }
        _ => false,
    }
}

/// A name as the engine normalises it; `None` for one it refuses.
fn name_of(name: &str) -> Option<String> {
    let mut buf = HostBuf::new();
    match normalize_split(name, &mut buf).ok()?.host {
        Host::Name(n) => Some(n.to_string()),
        Host::Ip(_) => None,
    }
}

/// Whether a query lies in the pattern (for the kinds decided exactly;
/// the sampled kinds' queries are drawn from the pattern).
pub(crate) fn in_pattern(p: &Pattern, q: &Query) -> bool {
    match (p, q) {
        (Pattern::Connect { ports, .. }, Query::Connect { port, .. }) => {
            host_in(p, q)
                && (1..=65535).contains(port)
                && ports.as_ref().is_none_or(|list| {
                    list.iter()
                        .any(|r| (i64::from(r.lo)..=i64::from(r.hi)).contains(port))
                })
        }
        (Pattern::Dns(d), Query::Dns { name }) => {
            name_of(name).is_some_and(|n| DomainPattern::parse(d).is_ok_and(|d| d.matches_name(&n)))
        }
        // `socket *`: every normal absolute path.
        (Pattern::Socket(s), Query::Socket { path }) => match s {
            Some(s) => s == path,
            None => crate::normalize::is_normal_absolute_path(path),
        },
        (Pattern::Upstream, Query::Upstream) | (Pattern::WebSearch, Query::WebSearch) => true,
        (Pattern::Tool(t), Query::Tool { permission }) => {
            t.as_ref().is_none_or(|t| t == permission)
        }
        (Pattern::Prompt(c), Query::Prompt { category }) => {
            c.as_deref().is_none_or(|c| c == category.as_str())
        }
        (Pattern::App(n), Query::App { program }) => n.as_ref().is_none_or(|n| {
            program
                .rsplit('/')
                .next()
                .is_some_and(|last| last.eq_ignore_ascii_case(n))
        }),
        (
            Pattern::Mcp { server, tool },
            Query::Mcp {
                server: s, tool: t, ..
            },
        ) => server.as_ref().is_none_or(|x| x == s) && tool.as_ref().is_none_or(|x| x == t),
        // The command lines the engine judges (not `invalid_command`)
        // that are the words, or with `*` begin with them.
        (Pattern::Exec { words, rest }, Query::Exec { argv, .. }) => {
            crate::eval::argv_valid(&crate::limits::QueryLimits::default(), argv)
                && if *rest {
                    argv.starts_with(words)
                } else {
                    argv == words
                }
        }
        (
            Pattern::Write { glob, workspace },
            Query::Write {
                path,
                workspace: qw,
                home,
            },
        )
        | (
            Pattern::Read { glob, workspace },
            Query::Read {
                path,
                workspace: qw,
                home,
            },
        ) => file_covers(
            glob,
            workspace.as_deref(),
            path,
            qw.as_deref(),
            home.as_deref(),
        ),
        _ => false,
    }
}

/// Whether a `write`/`read` query lies in a claim's glob: asked in the
/// claim's workspace (default [`SAMPLE_WORKSPACE`]) with the sample home,
/// its path covered by the glob as a file rule covers it.
fn file_covers(
    glob: &str,
    workspace: Option<&str>,
    path: &str,
    query_ws: Option<&str>,
    home: Option<&str>,
) -> bool {
    use crate::normalize::glob::{Anchor, FilePattern};
    let ws = workspace.unwrap_or(SAMPLE_WORKSPACE);
    if query_ws != Some(ws) || home != Some(SAMPLE_HOME) {
        return false;
    }
    let (Ok(pattern), Some(path)) = (
        FilePattern::parse(glob),
        crate::normalize::normalize_absolute_path(path),
    ) else {
        return false;
    };
    let base = match pattern.anchor() {
        Anchor::Root => "/",
        Anchor::Workspace => ws,
        Anchor::Home => SAMPLE_HOME,
    };
    let segs = |p: &str| -> Vec<String> {
        p.split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let (base, path) = (segs(base), segs(&path));
    let (base, path): (Vec<&str>, Vec<&str>) = (
        base.iter().map(String::as_str).collect(),
        path.iter().map(String::as_str).collect(),
    );
    pattern.covers(&base, &path)
}
