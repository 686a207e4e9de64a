//! Importers: other systems' own formats as gatehouse policy text.
//!
//! Each importer writes `.policy` text, with comments naming the source keys
//! and lines, that decides every query as the source system would (see
//! `docs/importing.md` for the mapping tables). Before it answers, it runs
//! the checker over its own output (`validated`): text that `policyc
//! check` would refuse is never returned as a success, and each such error
//! is reported at the source line the output line came from.

pub mod claude;
pub mod srt;
pub mod zerocode;
pub mod zoo;

/// How serious an import note is.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub enum Severity {
    /// Imported, but not quite as the source system would decide.
    Warning,
    /// Not imported: the output would decide wrongly.
    Error,
}

/// Which input a note is about: an import may read several files.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Ord, PartialOrd)]
#[non_exhaustive]
pub enum Input {
    /// The main input (the config, the document, the settings file).
    Config,
    /// A profile file layered over the config (`--profile FILE`).
    Profile,
    /// The managed requirements (`--requirements FILE`).
    Requirements,
    /// One of several settings files, by its place in the list given
    /// (`policyc import claude-code FILE...`, from 0).
    Settings(u16),
}

/// A warning or error about the input, with its line.
#[derive(Clone, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub struct Note {
    /// How serious.
    pub severity: Severity,
    /// The file it is about.
    pub input: Input,
    /// The input's line, from 1 (0 when it is about the whole input).
    pub line: usize,
    /// What happened.
    pub message: String,
}

impl Note {
    pub(crate) fn new(severity: Severity, input: Input, line: usize, message: String) -> Note {
        Note {
            severity,
            input,
            line,
            message,
        }
    }
}

/// An import's result.
#[derive(Clone, Debug)]
pub struct Import {
    /// The policy text written.
    pub text: String,
    /// Every warning and error about the input, sorted by input and line.
    pub notes: Vec<Note>,
}

impl Import {
    /// Whether any note is an error.
    pub fn has_errors(&self) -> bool {
        self.notes.iter().any(|n| n.severity == Severity::Error)
    }
}

/// The line of the first `"needle"` (quoted as JSON writes it) at or
/// after line `from` of a JSON text, else `from`: best effort, as a parsed
/// JSON value keeps no positions (the srt and Claude Code importers).
pub(crate) fn json_line_of(text: &str, needle: &str, from: usize) -> usize {
    let quoted = serde_json::to_string(needle).unwrap_or_default();
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, l)| l.contains(&quoted))
        .map_or(from, |(i, _)| i + 1)
}

/// Checks an importer's output as `policyc check` would and returns the
/// import with the checker's findings added as notes: errors refuse the
/// import. An output line that names its source as `(line N)` in its
/// comment (and `requirements` when it came from the requirements file)
/// sends the note to that line; otherwise it is about the whole input.
pub(crate) fn validated(text: String, notes: Vec<Note>) -> Import {
    validated_by(text, notes, &source_of)
}

/// [`validated`], with the importer's own reading of an output line's
/// comment (which input, which line).
pub(crate) fn validated_by(
    text: String,
    mut notes: Vec<Note>,
    source_of: &dyn Fn(&str) -> (Input, usize),
) -> Import {
    if !notes.iter().any(|n| n.severity == Severity::Error) {
        let mut sources = crate::source::SourceMap::new();
        let id = sources.add("imported.policy", text.as_str());
        let b = crate::build::build(sources);
        if let Some(src) = b.sources.get(id) {
            for d in &b.diagnostics {
                let at = src.line_col(d.span.start);
                let out_line = src.line_text(at.line);
                let (input, line) = source_of(out_line);
                let severity = if d.is_error() {
                    Severity::Error
                } else {
                    Severity::Warning
                };
                let help = d
                    .help
                    .as_ref()
                    .map(|h| format!(" (help: {h})"))
                    .unwrap_or_default();
                let why = match (d.is_error(), d.code) {
                    (true, "requirement_violation") => "conflicts with the requirements",
                    (true, _) => "cannot be expressed",
                    (false, _) => "imported with a warning",
                };
                // A label points at the other side (the requirement broken).
                let other = d
                    .labels
                    .first()
                    .map(|l| source_of(src.line_text(src.line_col(l.span.start).line)))
                    .filter(|(_, line)| *line > 0)
                    .map(|(input, line)| {
                        let file = match input {
                            Input::Requirements => "the requirements",
                            Input::Profile => "the profile file",
                            Input::Settings(k) if k > 0 => "another settings file",
                            _ => "the config",
                        };
                        format!(" (see line {line} of {file})")
                    })
                    .unwrap_or_default();
                notes.push(Note::new(
                    severity,
                    input,
                    line,
                    format!(
                        "{why}: `{}` → {}: {}{help}{other}",
                        out_line.trim().split("  #").next().unwrap_or("").trim(),
                        d.code,
                        d.message
                    ),
                ));
            }
        }
    }
    notes.sort_by_key(|n| (n.input, n.line));
    notes.dedup();
    // Written in `policyc fmt`'s layout, so that the formatting hook passes
    // on the first commit after an import (issue 37, item 2).
    let text = canonical(text);
    Import { text, notes }
}

/// `text` as `policyc fmt` writes it (comments kept); unchanged should it
/// not parse (the import is refused then anyway).
fn canonical(text: String) -> String {
    let mut sources = crate::source::SourceMap::new();
    let id = sources.add("imported.policy", text.as_str());
    match sources
        .get(id)
        .map(|src| crate::fmt::format_source(id, src))
    {
        Some(Ok(formatted)) => formatted,
        _ => text,
    }
}

/// The input and line an output line names in its comment: `(line N)`, in
/// the requirements file when the comment says `requirements`.
fn source_of(out_line: &str) -> (Input, usize) {
    let Some((_, comment)) = out_line.split_once('#') else {
        return (Input::Config, 0);
    };
    let input = if comment.contains("requirements") {
        Input::Requirements
    } else if comment.contains("profile file") {
        Input::Profile
    } else {
        Input::Config
    };
    let line = comment
        .rsplit_once("(line ")
        .and_then(|(_, rest)| rest.split(')').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    (input, line)
}
