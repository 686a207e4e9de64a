//! Importers: the seed systems' own formats as gatehouse policy text.
//!
//! Each importer writes `.policy` text that `policyc check` accepts, with
//! comments naming the source keys, and that decides every query as the
//! source system would (see `docs/importing.md` for the mapping tables).

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

/// A warning or error about the input, with its line.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Note {
    /// How serious.
    pub severity: Severity,
    /// The input's line, from 1 (0 when it is about the whole input).
    pub line: usize,
    /// What happened.
    pub message: String,
}

/// An import's result.
#[derive(Clone, Debug)]
pub struct Import {
    /// The policy text written.
    pub text: String,
    /// Every warning and error about the input.
    pub notes: Vec<Note>,
}

impl Import {
    /// Whether any note is an error.
    pub fn has_errors(&self) -> bool {
        self.notes.iter().any(|n| n.severity == Severity::Error)
    }
}
