//! Importers: the seed systems' own formats as gatehouse policy text.
//!
//! Each importer writes `.policy` text that `policyc check` accepts, with
//! comments naming the source keys, and that decides every query as the
//! source system would (see `docs/importing.md` for the mapping tables).

pub mod zerocode;
pub mod zoo;

/// How serious an import note is.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Severity {
    Warning,
    Error,
}

/// A warning or error about the input, with its line.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Note {
    pub severity: Severity,
    pub line: usize,
    pub message: String,
}

/// An import's result.
#[derive(Clone, Debug)]
pub struct Import {
    pub text: String,
    pub notes: Vec<Note>,
}

impl Import {
    pub fn has_errors(&self) -> bool {
        self.notes.iter().any(|n| n.severity == Severity::Error)
    }
}
