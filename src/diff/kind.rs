//! The query kinds a diff compares, and which of them it compares for
//! every query.

use serde::Serialize;

use crate::query::Query;

/// The query kinds a diff covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `connect HOST:PORT via V`.
    Connect,
    /// `dns NAME`.
    Dns,
    /// `socket PATH`.
    Socket,
    /// `upstream`.
    Upstream,
    /// `tool PERMISSION`.
    Tool,
    /// `prompt CATEGORY`.
    Prompt,
    /// `web_search`.
    WebSearch,
    /// `mcp SERVER/TOOL [annotations]`.
    Mcp,
    /// `app PROGRAM`.
    App,
    /// `write PATH` (sampled).
    Write,
    /// `read PATH` (sampled).
    Read,
    /// `exec ARGV`, every command line but a shell wrapper's.
    Exec,
    /// `exec` of a shell wrapper's script (`bash -lc SCRIPT`, and the
    /// shells whose scripts are unknown: sampled).
    Script,
    /// `review ACTION with ASSESSMENT`, every action but a shell
    /// wrapper's (sampled when a guardian has a regular expression).
    Review,
    /// `review` of a command line shaped `PROGRAM -c|-lc SCRIPT` (its
    /// script is text in an infinite language: sampled).
    ReviewScript,
    /// `resolved NAME -> ADDRESSES`.
    Resolved,
    /// `listen ADDRESS:PORT`.
    Listen,
}

impl Kind {
    /// Every kind a diff compares: [`Kind::EXACT`], then [`Kind::SAMPLED`].
    pub const ALL: [Kind; 17] = [
        Kind::Connect,
        Kind::Dns,
        Kind::Socket,
        Kind::Upstream,
        Kind::Tool,
        Kind::Prompt,
        Kind::WebSearch,
        Kind::Mcp,
        Kind::App,
        Kind::Write,
        Kind::Read,
        Kind::Exec,
        Kind::Script,
        Kind::Review,
        Kind::ReviewScript,
        Kind::Resolved,
        Kind::Listen,
    ];

    /// The kinds compared for every query: a query whose decision changed
    /// lies in a region.
    #[cfg(feature = "exact-files")]
    pub const EXACT: &'static [Kind] = &[
        Kind::Connect,
        Kind::Dns,
        Kind::Socket,
        Kind::Upstream,
        Kind::Tool,
        Kind::Prompt,
        Kind::WebSearch,
        Kind::Mcp,
        Kind::App,
        Kind::Write,
        Kind::Read,
        Kind::Exec,
        Kind::Review,
        Kind::Resolved,
        Kind::Listen,
    ];
    /// The kinds compared for every query (`write`, `read` and `review`
    /// need the `exact-files` feature).
    #[cfg(not(feature = "exact-files"))]
    pub const EXACT: &'static [Kind] = &[
        Kind::Connect,
        Kind::Dns,
        Kind::Socket,
        Kind::Upstream,
        Kind::Tool,
        Kind::Prompt,
        Kind::WebSearch,
        Kind::Mcp,
        Kind::App,
        Kind::Exec,
        Kind::Resolved,
        Kind::Listen,
    ];

    /// The query keyword (`script` for [`Kind::Script`], whose queries
    /// are `exec`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Connect => "connect",
            Kind::Dns => "dns",
            Kind::Socket => "socket",
            Kind::Upstream => "upstream",
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::WebSearch => "web_search",
            Kind::Mcp => "mcp",
            Kind::App => "app",
            Kind::Write => "write",
            Kind::Read => "read",
            Kind::Exec => "exec",
            Kind::Script => "script",
            Kind::Review => "review",
            Kind::ReviewScript => "review_script",
            Kind::Resolved => "resolved",
            Kind::Listen => "listen",
        }
    }

    /// The kinds compared on queries drawn from both sides' rules and the
    /// shared vocabulary: every region found is real (its witness changes)
    /// and marked `sampled`, but a change no drawn query meets is missed.
    #[cfg(feature = "exact-files")]
    pub const SAMPLED: &'static [Kind] = &[Kind::Script, Kind::ReviewScript];
    /// The kinds compared on drawn queries.
    #[cfg(not(feature = "exact-files"))]
    pub const SAMPLED: &'static [Kind] = &[
        Kind::Write,
        Kind::Read,
        Kind::Script,
        Kind::Review,
        Kind::ReviewScript,
    ];

    /// The kind a query is compared as (`exec` of a shell wrapper's
    /// script is [`Kind::Script`]).
    pub fn of(q: &Query) -> Kind {
        match q {
            Query::Connect { .. } => Kind::Connect,
            Query::Dns { .. } => Kind::Dns,
            Query::Socket { .. } => Kind::Socket,
            Query::Upstream => Kind::Upstream,
            Query::Tool { .. } => Kind::Tool,
            Query::Prompt { .. } => Kind::Prompt,
            Query::WebSearch => Kind::WebSearch,
            Query::Mcp { .. } => Kind::Mcp,
            Query::App { .. } => Kind::App,
            Query::Write { .. } => Kind::Write,
            Query::Read { .. } => Kind::Read,
            Query::Exec { argv, .. } if crate::eval::wrapper_script(argv).is_some() => Kind::Script,
            Query::Exec { .. } => Kind::Exec,
            Query::Review { action, .. } => match &**action {
                Query::Exec { argv, .. } if crate::eval::wrapper_shaped(argv) => Kind::ReviewScript,
                _ => Kind::Review,
            },
            Query::Resolved { .. } => Kind::Resolved,
            Query::Listen { .. } => Kind::Listen,
        }
    }

    /// Whether the kind is compared for every query (`write` and `read`
    /// are, unless a policy's file rules are too many for the comparison:
    /// [`super::PolicyDiff::files_sampled`]; `exec` is, unless its command rules
    /// are: [`super::PolicyDiff::exec_sampled`]; `review` is, unless a
    /// guardian has a regular expression: [`super::PolicyDiff::review_sampled`]).
    pub fn is_exact(self) -> bool {
        !Kind::SAMPLED.contains(&self)
    }
}
