//! Renderers: rustc-style text with a caret under the span, and JSON records.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Diagnostic, Severity};
use crate::source::{SourceMap, Span};

/// Renders diagnostics the way rustc does: message, location, the source
/// line with a caret under the span, then help and related locations.
pub fn render_human(diags: &[Diagnostic], sources: &SourceMap) -> String {
    let mut out = String::new();
    for d in diags {
        let _ = writeln!(out, "{}[{}]: {}", d.severity.as_str(), d.code, d.message);
        // One gutter width for every snippet of the diagnostic.
        let line_of = |span: crate::source::Span| {
            sources
                .get(span.file)
                .map_or(1, |f| f.line_col(span.start).line)
        };
        let gutter = std::iter::once(d.span)
            .chain(d.labels.iter().map(|l| l.span))
            .map(|s| line_of(s).to_string().len())
            .max()
            .unwrap_or(1);
        snippet(&mut out, sources, d.span, "-->", None, gutter);
        for label in &d.labels {
            snippet(
                &mut out,
                sources,
                label.span,
                ":::",
                Some(&label.message),
                gutter,
            );
        }
        if let Some(help) = &d.help {
            let _ = writeln!(out, "{} = help: {help}", " ".repeat(gutter));
        }
        out.push('\n');
    }
    let errors = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diags.len() - errors;
    if errors > 0 || warnings > 0 {
        let _ = writeln!(out, "{}", summary(errors, warnings));
    }
    out
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn summary(errors: usize, warnings: usize) -> String {
    match (errors, warnings) {
        (0, w) => plural(w, "warning"),
        (e, 0) => plural(e, "error"),
        (e, w) => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
    }
}

/// Writes one source snippet with a line-number gutter `gutter` wide.
fn snippet(
    out: &mut String,
    sources: &SourceMap,
    span: Span,
    arrow: &str,
    label: Option<&str>,
    gutter: usize,
) {
    let Some(file) = sources.get(span.file) else {
        return;
    };
    let start = file.line_col(span.start);
    let end = file.line_col(span.end);
    let full: Vec<char> = file
        .line_text(start.line)
        .replace('\t', " ")
        .chars()
        .collect();
    let mut width = if end.line == start.line {
        end.column.saturating_sub(start.column).max(1)
    } else {
        full.len().saturating_sub(start.column - 1).max(1)
    };
    // A very long line is shown as a window around the span.
    const WINDOW: usize = 120;
    let (from, column) = if full.len() > WINDOW && start.column > WINDOW / 2 {
        let from = (start.column - 1).saturating_sub(WINDOW / 2);
        (from, start.column - from + 3)
    } else {
        (0, start.column)
    };
    let shown: String = full.iter().skip(from).take(WINDOW).collect();
    let line_text = match (from > 0, full.len() > from + WINDOW) {
        (true, true) => format!("...{shown}..."),
        (true, false) => format!("...{shown}"),
        (false, true) => format!("{shown}..."),
        (false, false) => shown,
    };
    width = width.min(WINDOW);
    let pad = " ".repeat(gutter);
    let _ = writeln!(
        out,
        "{pad}{arrow} {}:{}:{}",
        file.name, start.line, start.column
    );
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{:>gutter$} | {}", start.line, line_text);
    let marker = if label.is_some() { "-" } else { "^" };
    let _ = write!(
        out,
        "{pad} | {}{}",
        " ".repeat(column - 1),
        marker.repeat(width)
    );
    if let Some(l) = label {
        let _ = write!(out, " {l}");
    }
    out.push('\n');
}

/// The JSON form of one diagnostic (README, `policyc`).
#[derive(Clone, Debug, Serialize)]
pub struct JsonDiagnostic {
    /// `error` or `warning`.
    pub severity: Severity,
    /// The stable code.
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
    /// The source's name.
    pub file: String,
    /// Where the span starts: the line, from 1.
    pub line: usize,
    /// Where the span starts: the column, from 1, in characters.
    pub column: usize,
    /// Where the span ends: the line.
    pub end_line: usize,
    /// Where the span ends: the column, one past its last character.
    pub end_column: usize,
    /// What to do about it.
    pub help: Option<String>,
    /// Secondary locations (for example the requirement a policy violates).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<JsonRelated>,
    /// Byte offsets of the span, for editors (the WASM glue fills them in;
    /// `policyc check --format json` leaves them out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// One past the span's last byte (see `start`).
    pub end: Option<u32>,
}

/// A secondary location of a [`JsonDiagnostic`].
#[derive(Clone, Debug, Serialize)]
pub struct JsonRelated {
    /// What is there.
    pub message: String,
    /// The source's name.
    pub file: String,
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
}

/// Diagnostics as JSON records with resolved positions.
pub fn to_json_records(diags: &[Diagnostic], sources: &SourceMap) -> Vec<JsonDiagnostic> {
    diags
        .iter()
        .map(|d| {
            let (file, s, e) = match sources.get(d.span.file) {
                Some(f) => (
                    f.name.clone(),
                    f.line_col(d.span.start),
                    f.line_col(d.span.end),
                ),
                None => (String::new(), Default::default(), Default::default()),
            };
            let related = d
                .labels
                .iter()
                .filter_map(|l| {
                    let f = sources.get(l.span.file)?;
                    let p = f.line_col(l.span.start);
                    Some(JsonRelated {
                        message: l.message.clone(),
                        file: f.name.clone(),
                        line: p.line,
                        column: p.column,
                    })
                })
                .collect();
            JsonDiagnostic {
                severity: d.severity,
                code: d.code,
                message: d.message.clone(),
                file,
                line: s.line,
                column: s.column,
                end_line: e.line,
                end_column: e.column,
                help: d.help.clone(),
                related,
                start: None,
                end: None,
            }
        })
        .collect()
}

/// Diagnostics as one JSON array.
pub fn render_json(diags: &[Diagnostic], sources: &SourceMap) -> String {
    serde_json::to_string_pretty(&to_json_records(diags, sources))
        .unwrap_or_else(|_| "[]".to_string())
}
