//! The whole pipeline in one call: sources → parse → check → compile.

use crate::Limits;
use crate::compile::{CompileError, PolicySet};
use crate::diag::{Diagnostic, render_human};
use crate::source::SourceMap;
use crate::syntax::ast::File;
use crate::syntax::parse_file_with;

/// Everything the pipeline produced for a set of sources: the sources,
/// every diagnostic, and the compiled set when there was no error. Unlike
/// [`PolicySet::from_sources`], which refuses a set with errors, a build
/// keeps them all, for `policyc check`, an editor or a binding to show.
///
/// ```
/// use gatehouse::{SourceMap, build};
///
/// let mut sources = SourceMap::new();
/// sources.add("a.policy", "policy a {\n  network {\n    allow domian github.com\n  }\n}\n");
/// let b = build(sources);
/// assert!(b.has_errors() && b.set.is_none());
/// assert_eq!(b.diagnostics[0].code, "syntax_error");
/// assert_eq!(b.diagnostics[0].help.as_deref(), Some("did you mean `domain`?"));
/// assert!(b.render().contains("a.policy:3:11"));
/// ```
#[derive(Debug)]
pub struct Build {
    /// The sources it was built from, to render the diagnostics against.
    pub sources: SourceMap,
    /// One AST per source file, in order.
    pub(crate) files: Vec<File>,
    /// Every error and warning of every phase, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
    /// The compiled set, when there was no error.
    pub set: Option<PolicySet>,
}

impl Build {
    /// Whether any diagnostic is an error (a set with errors is not
    /// compiled).
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
    /// Diagnostics rendered for a terminal.
    pub fn render(&self) -> String {
        render_human(&self.diagnostics, &self.sources)
    }
}

/// Runs parse, check and compile over every file of the set, under the
/// default [`Limits`].
pub fn build(sources: SourceMap) -> Build {
    build_with(sources, Limits::default())
}

/// [`build`] under the given limits: an oversized file, too deep a nesting
/// or too many rules fail fast with a diagnostic.
pub fn build_with(sources: SourceMap, limits: Limits) -> Build {
    let mut diagnostics = Vec::new();
    let mut files = Vec::new();
    for (id, f) in sources.files() {
        let (ast, diags) = parse_file_with(id, &f.text, &limits);
        diagnostics.extend(diags);
        files.push(ast);
    }
    for file in &files {
        for item in &file.items {
            let block = match item {
                crate::syntax::ast::Item::Policy(b) | crate::syntax::ast::Item::Requirements(b) => {
                    b
                }
                _ => continue,
            };
            let rules = block.rule_count();
            if rules > limits.rules_per_policy {
                diagnostics.push(
                    Diagnostic::error(
                        "too_many_rules",
                        format!(
                            "`{}` has {rules} statements, over the limit of {}",
                            block.name.node, limits.rules_per_policy
                        ),
                        block.name.span,
                    )
                    .with_help(Some(
                        "split it into several policies, or raise `Limits::rules_per_policy`"
                            .into(),
                    )),
                );
            }
        }
    }
    diagnostics.extend(crate::check::check_with(&files, &limits));
    crate::diag::sort(&mut diagnostics);
    let mut b = Build {
        sources,
        files,
        diagnostics,
        set: None,
    };
    if !b.has_errors() {
        match crate::compile::compile_with(&b.sources, &b.files, &limits) {
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
#[non_exhaustive]
pub enum Error {
    /// The sources have errors; `rendered` shows them as `policyc check` does.
    #[error("the policy set has errors:\n{rendered}")]
    Invalid {
        /// Every error and warning, sorted by position.
        diagnostics: Vec<Diagnostic>,
        /// The diagnostics rendered for a terminal.
        rendered: String,
    },
    /// The compiler found itself inconsistent (a bug): the set is refused.
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
        Self::from_sources_with(sources, Limits::default())
    }

    /// [`PolicySet::from_sources`] under the given limits.
    pub fn from_sources_with(sources: SourceMap, limits: Limits) -> Result<PolicySet, Error> {
        let b = build_with(sources, limits);
        match b.set {
            Some(set) if !b.has_errors() => Ok(set),
            _ => Err(Error::Invalid {
                rendered: b.render(),
                diagnostics: b.diagnostics,
            }),
        }
    }
}
