//! One diagnostic model for every phase, and its renderers.
//!
//! Each phase has its own typed error enum (`thiserror`): lowercase messages
//! with the user's input in backticks, detail in a help line. They all become
//! a [`Diagnostic`] with a span, so `policyc check`, the playground and the
//! library report the same thing the same way.

mod ci;
mod render;

use serde::Serialize;

pub use ci::{render_github, render_sarif};
pub use render::{JsonDiagnostic, render_human, render_json, to_json_records};

use crate::source::Span;

/// How bad a diagnostic is: an error refuses the set, a warning does not.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Ord, PartialOrd, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Severity {
    /// Worth a look; the set still compiles.
    Warning,
    /// The set is refused.
    Error,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// A secondary location, such as the requirement a policy line violates.
///
/// Equality compares the location too ([`Span`]'s own equality does not,
/// so that it stays out of AST equality).
#[derive(Clone, Debug)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What is there.
    pub message: String,
}

impl PartialEq for Label {
    fn eq(&self, other: &Self) -> bool {
        self.span.range() == other.span.range() && self.message == other.message
    }
}
impl Eq for Label {}

/// One error or warning, with its location. Two diagnostics are equal only
/// when they say the same thing at the same place.
///
/// Messages are lowercase, quote the user's input in backticks, and come
/// with a help line where there is something to suggest; `render_human`
/// prints them as `policyc check` does, with the file, line, column and a
/// caret under the span.
///
/// ```
/// use gatehouse::diag::{Severity, render_human};
/// use gatehouse::{SourceMap, build};
///
/// let mut sources = SourceMap::new();
/// sources.add("a.policy", "policy a {\n  network {\n    allow domain github.com:443\n  }\n}\n");
/// let b = build(sources);
/// let d = &b.diagnostics[0];
/// assert_eq!((d.severity, d.code), (Severity::Error, "invalid_pattern"));
/// assert!(d.help.is_some());
/// assert!(render_human(&b.diagnostics, &b.sources).contains("a.policy:3:"));
/// ```
#[derive(Clone, Debug)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A stable snake_case code (`unknown_statement`, `covered_rule`, ...).
    pub code: &'static str,
    /// What is wrong, in one line.
    pub message: String,
    /// Where: the caret goes under it.
    pub span: Span,
    /// What to do about it, or a did-you-mean.
    pub help: Option<String>,
    /// Other places that explain it.
    pub labels: Vec<Label>,
}

impl PartialEq for Diagnostic {
    fn eq(&self, other: &Self) -> bool {
        self.span.range() == other.span.range()
            && (
                self.severity,
                self.code,
                &self.message,
                &self.help,
                &self.labels,
            ) == (
                other.severity,
                other.code,
                &other.message,
                &other.help,
                &other.labels,
            )
    }
}
impl Eq for Diagnostic {}

impl Diagnostic {
    /// An error.
    pub fn error(code: &'static str, message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            span,
            help: None,
            labels: Vec::new(),
        }
    }
    /// A warning.
    pub fn warning(code: &'static str, message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            code,
            message: message.into(),
            span,
            help: None,
            labels: Vec::new(),
        }
    }
    /// The same, with a help line.
    pub fn with_help(mut self, help: Option<String>) -> Self {
        self.help = help;
        self
    }
    /// The same, with one more labelled place.
    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }
    /// Whether it is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics by file and position, errors first at the same place.
/// Stable: diagnostics at the same place keep their order.
pub(crate) fn sort(diags: &mut Vec<Diagnostic>) {
    // One packed key per diagnostic (file, start, errors first, then the
    // original index for stability), sorted with the plain `u128` sort the
    // engine already has: the browser build carries one sort less.
    let mut keys: Vec<u128> = diags
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let sev = match d.severity {
                Severity::Error => 0u128,
                Severity::Warning => 1,
            };
            (u128::from(d.span.file.0) << 96)
                | (u128::from(d.span.start) << 64)
                | (sev << 32)
                | i as u128
        })
        .collect();
    keys.sort_unstable();
    let mut old: Vec<Option<Diagnostic>> = diags.drain(..).map(Some).collect();
    diags.extend(keys.iter().filter_map(|k| {
        old.get_mut((*k & 0xffff_ffff) as usize)
            .and_then(Option::take)
    }));
}

/// "did you mean `x`?" for the candidate closest to `found`, if any is close.
pub fn did_you_mean<'a>(
    found: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    suggest(found, candidates).map(|s| format!("did you mean `{s}`?"))
}

/// The candidate closest to `found` by edit distance, if it is close enough
/// to be a plausible typo.
pub(crate) fn suggest<'a>(
    found: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = found.to_ascii_lowercase();
    let limit = (found.chars().count() / 3).max(1) + usize::from(found.len() > 6);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, c), c))
        .filter(|(d, c)| *d <= limit && *d < c.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance with adjacent transpositions counted as one edit.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // rows[i][j]: distance between a[..i] and b[..j], kept for two rows back.
    let mut prev2: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let at = |row: &[usize], k: usize| row.get(k).copied().unwrap_or(usize::MAX / 2);
            let cost = usize::from(ca != cb);
            let mut best = (at(&prev, j) + cost)
                .min(at(&prev, j + 1) + 1)
                .min(at(&cur, j) + 1);
            let swapped = i > 0 && j > 0 && a.get(i - 1) == Some(cb) && b.get(j - 1) == Some(ca);
            if swapped {
                best = best.min(at(&prev2, j - 1) + 1);
            }
            cur.push(best);
        }
        prev2 = std::mem::replace(&mut prev, cur);
    }
    prev.last().copied().unwrap_or(0)
}

/// "`a`, `b` or `c`".
pub(crate) fn one_of(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("`{s}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_catch_typos_but_not_noise() {
        assert_eq!(
            suggest("dfault", ["default", "dns", "local"]),
            Some("default")
        );
        assert_eq!(suggest("netwrok", ["network", "proxy"]), Some("network"));
        assert_eq!(
            suggest("shell.exce", ["shell.exec", "files.read"]),
            Some("shell.exec")
        );
        assert_eq!(suggest("zzz", ["default", "dns", "local"]), None);
        assert_eq!(edit_distance("ab", "ba"), 1);
    }

    #[test]
    fn one_of_reads_like_english() {
        assert_eq!(one_of(&["a"]), "`a`");
        assert_eq!(one_of(&["a", "b", "c"]), "`a`, `b` or `c`");
    }
}

#[cfg(test)]
mod equality_tests {
    use super::*;
    use crate::source::FileId;

    #[test]
    fn diagnostics_at_different_places_differ() {
        let at = |start| Diagnostic::error("x", "m", Span::new(FileId(0), start, start + 1));
        assert_eq!(at(3), at(3));
        assert_ne!(at(3), at(4));
        let other_file = Diagnostic::error("x", "m", Span::new(FileId(1), 3, 4));
        assert_ne!(at(3), other_file);
        let labelled = |start| at(0).with_label(Span::new(FileId(0), start, start + 1), "here");
        assert_ne!(labelled(1), labelled(2));
    }
}
