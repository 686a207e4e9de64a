//! The whole pipeline in one call: sources → parse → check → compile.

use crate::compile::{CompileError, PolicySet, compile};
use crate::diag::{Diagnostic, render_human};
use crate::source::SourceMap;
use crate::syntax::ast::File;
use crate::syntax::parse_file;

/// Everything the pipeline produced for a set of sources.
#[derive(Debug)]
pub struct Build {
    pub sources: SourceMap,
    /// One AST per source file, in order.
    pub files: Vec<File>,
    /// Every error and warning of every phase, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
    /// The compiled set, when there was no error.
    pub set: Option<PolicySet>,
}

impl Build {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
    /// Diagnostics rendered for a terminal.
    pub fn render(&self) -> String {
        render_human(&self.diagnostics, &self.sources)
    }
}

/// The largest policy file read (8 MiB): anything larger fails fast with a
/// diagnostic instead of being parsed.
pub const MAX_SOURCE_BYTES: usize = 8 * 1024 * 1024;

/// Runs parse, check and compile over every file of the set.
pub fn build(sources: SourceMap) -> Build {
    let mut diagnostics = Vec::new();
    let mut files = Vec::new();
    for (id, f) in sources.files() {
        if f.text.len() > MAX_SOURCE_BYTES {
            let span = crate::source::Span::new(id, 0, 0);
            diagnostics.push(
                Diagnostic::error(
                    "source_too_large",
                    format!(
                        "`{}` is {} bytes, over the limit of {MAX_SOURCE_BYTES}",
                        f.name,
                        f.text.len()
                    ),
                    span,
                )
                .with_help(Some("split the policies over several files".into())),
            );
            files.push(File::default());
            continue;
        }
        let (ast, diags) = parse_file(id, &f.text);
        diagnostics.extend(diags);
        files.push(ast);
    }
    diagnostics.extend(crate::check::check(&files));
    crate::diag::sort(&mut diagnostics);
    let mut b = Build {
        sources,
        files,
        diagnostics,
        set: None,
    };
    if !b.has_errors() {
        match compile(&b.sources, &b.files) {
            Ok(set) => b.set = Some(set),
            Err(e) => {
                let span = crate::source::Span::default();
                b.diagnostics
                    .push(Diagnostic::error("internal", e.to_string(), span));
            }
        }
    }
    b
}

/// A policy set that could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The sources have errors; `rendered` shows them as `policyc check` does.
    #[error("the policy set has errors:\n{rendered}")]
    Invalid {
        diagnostics: Vec<Diagnostic>,
        rendered: String,
    },
    #[error(transparent)]
    Compile(#[from] CompileError),
}

impl PolicySet {
    /// Compiles one source text (named `name` in diagnostics).
    pub fn from_source(name: &str, text: &str) -> Result<PolicySet, Error> {
        let mut sources = SourceMap::new();
        sources.add(name, text);
        Self::from_sources(sources)
    }

    /// Compiles a set of sources; refuses it if any has an error.
    pub fn from_sources(sources: SourceMap) -> Result<PolicySet, Error> {
        let b = build(sources);
        match b.set {
            Some(set) if !b.has_errors() => Ok(set),
            _ => Err(Error::Invalid {
                rendered: b.render(),
                diagnostics: b.diagnostics,
            }),
        }
    }
}
