//! Resource limits: what a policy or a query may cost before it is refused.
//!
//! A by-value configuration, as regex-automata's builders take theirs: copy
//! [`Limits::default`], change what you need, and pass it to
//! [`crate::build::build_with`] or [`crate::PolicySet::from_sources_with`].
//! Policy limits fail the build with a diagnostic; query limits travel with
//! the compiled policy and turn an oversized query into a deny.
//!
//! ```
//! use gatehouse::{Limits, PolicySet, source::SourceMap};
//! let limits = Limits { source_bytes: 64 * 1024, ..Limits::default() };
//! let mut sources = SourceMap::new();
//! sources.add("big.policy", &"# padding\n".repeat(10_000));
//! assert!(PolicySet::from_sources_with(sources, limits).is_err());
//! ```

use serde::{Deserialize, Serialize};

/// The limits of one build and of the queries its policies will decide.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Limits {
    /// Bytes of one policy file (`source_too_large`). Default 8 MiB.
    pub source_bytes: usize,
    /// Nested braces in one file (`too_deeply_nested`). The language itself
    /// nests three deep; the rest is what error recovery would have to walk.
    /// Default 64.
    pub nesting_depth: usize,
    /// Statements in one policy or requirements block (`too_many_rules`).
    /// Default 1 000 000.
    pub rules_per_policy: usize,
    /// The automaton built from a policy's guardian regular expressions
    /// (`regex_too_big`). Default 2 MiB, at most [`Limits::MAX_REGEX_BYTES`].
    pub regex_bytes: usize,
    /// Query limits, kept in each compiled policy.
    pub query: QueryLimits,
}

impl Limits {
    /// The largest automaton any build accepts (a compiled artifact rebuilds
    /// its automaton under this cap).
    pub const MAX_REGEX_BYTES: usize = 64 * 1024 * 1024;

    /// The regex limit in force (clamped to [`Limits::MAX_REGEX_BYTES`]).
    pub fn regex_bytes(&self) -> usize {
        self.regex_bytes.min(Self::MAX_REGEX_BYTES)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            source_bytes: 8 * 1024 * 1024,
            nesting_depth: 64,
            rules_per_policy: 1_000_000,
            regex_bytes: 2 * 1024 * 1024,
            query: QueryLimits::default(),
        }
    }
}

/// What one query may hold. Hosts are limited by DNS itself (253 octets,
/// labels of 63), not here.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueryLimits {
    /// Words of an `exec` argv (beyond: deny `invalid_command`). Default 10 000.
    pub argv_words: usize,
    /// Bytes of an `exec` argv, all words together (beyond: deny
    /// `invalid_command`). Default 1 MiB.
    pub argv_bytes: usize,
    /// Bytes of a shell wrapper's script that are split into commands;
    /// a longer script is judged as unknown (never more permissive).
    /// Default 64 KiB.
    pub script_bytes: usize,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            argv_words: 10_000,
            argv_bytes: 1024 * 1024,
            script_bytes: 64 * 1024,
        }
    }
}
