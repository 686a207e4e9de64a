//! The guardian's regex automata, built under size limits: shared by the
//! checker (which reports a pattern that does not build) and the compiler
//! (which builds them all into one automaton).

use regex_automata::MatchKind;
use regex_automata::meta::Regex;

/// The default limit of the guardian's automaton (`Limits::regex_bytes`
/// sets the one in force).
#[cfg(test)]
pub const NFA_SIZE_LIMIT: usize = 2 * 1024 * 1024;
/// The lazy DFA's cache of each automaton.
pub const CACHE_CAPACITY: usize = 2 * 1024 * 1024;

/// Why the guardian's patterns do not build.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
pub enum RegexError {
    /// A `\p{..}` class, which no build supports.
    #[error(
        "`{0}` uses a Unicode property class (`\\p{{...}}` or `\\P{{...}}`), which guardian \
         patterns do not support; write the class out, for example `[a-zA-Z]`"
    )]
    PropertyClass(String),
    /// Over the automaton's size limit (bytes).
    #[error("too big: the automaton may use at most {} KiB", .0 / 1024)]
    TooBig(usize),
    /// Not a regular expression: regex-syntax's own words.
    #[error("{0}")]
    Syntax(String),
}

/// Builds the automaton for a list of patterns, with the limits above.
pub(crate) fn build_regex(patterns: &[String], size_limit: usize) -> Result<Regex, RegexError> {
    if let Some(p) = patterns.iter().find(|p| has_property_class(p)) {
        return Err(RegexError::PropertyClass(p.clone()));
    }
    Regex::builder()
        .configure(
            Regex::config()
                .match_kind(MatchKind::All)
                .nfa_size_limit(Some(size_limit))
                .hybrid_cache_capacity(CACHE_CAPACITY),
        )
        .build_many(patterns)
        .map_err(|e| {
            if let Some(limit) = e.size_limit() {
                RegexError::TooBig(limit)
            } else if let Some(se) = e.syntax_error() {
                // The last line of regex-syntax's report says what is wrong.
                let text = se.to_string();
                RegexError::Syntax(
                    text.lines()
                        .rev()
                        .find_map(|l| l.strip_prefix("error: "))
                        .unwrap_or(&text)
                        .to_string(),
                )
            } else {
                RegexError::Syntax(e.to_string())
            }
        })
}

/// Whether a pattern names a Unicode property class (`\p{..}`, `\pL`,
/// `\P{..}`). Their tables (general categories, scripts, ages, binary
/// properties) are left out of every build so that the browser module stays
/// small and every build accepts the same patterns; `\w`, `\d`, `\s`, `\b`
/// and `(?i)` stay Unicode-aware. In regex syntax every backslash escapes the
/// character after it, so one left-to-right pass finds them exactly.
fn has_property_class(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.next(), Some('p' | 'P')) {
            return true;
        }
    }
    false
}
