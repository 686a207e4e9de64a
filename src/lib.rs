//! gatehouse: an embedded policy-evaluation engine for the sandboxes that
//! run AI agents.
//!
//! Inside, a pipeline of private stages: source text → parse (a pest
//! grammar, an AST with spans) → check (every diagnostic in one run) →
//! compile (an immutable [`PolicySet`]: a domain label automaton, address
//! intervals, exact-match tables) → evaluate (the hot path) → a
//! [`PolicyStore`] for live updates. What an embedder sees is a small
//! facade:
//!
//! | for | use |
//! |---|---|
//! | building from sources | [`PolicySet::from_source`], [`PolicySet::from_sources`], or [`build()`] to keep the [`Build`]'s diagnostics; [`Limits`] bounds the input |
//! | building from artifacts | [`PolicySet::to_artifact`], [`PolicySet::from_artifact`] ([`artifact`]) |
//! | deciding | [`Policy`]'s typed methods (`connect`, `dns`, `exec`, `write`, ...) or a [`Query`] / [`QueryRef`]; a [`Decision`] with its [`Outcome`], [`Reason`] and [`RuleId`] |
//! | diagnostics | [`diag::Diagnostic`], rendered by [`diag::render_human`] and [`diag::render_json`] |
//! | live updates | [`PolicyStore`] |
//! | decision logs | [`log::DecisionSink`], [`log::JsonLinesSink`], [`log::BackgroundSink`] |
//! | policy tests | [`Build::tests`] and [`TestCase`] |
//! | the formatter, the importers, the nftables export | [`fmt`], `import` (feature `import`), [`export`] |
//! | hostile input, normalised as the engine does | [`normalize`] |
//!
//! `gatehouse::testing` is doc-hidden: it is what this repository's own
//! tests, benchmarks and fuzz targets share with the engine (the AST for
//! the reference evaluator, the stages one by one), not an API.
//!
//! ```
//! use gatehouse::{Outcome, PolicySet, PolicyStore, Reason, SourceMap, Via};
//!
//! let set = PolicySet::from_source(
//!     "agent.policy",
//!     "policy agent {\n  network {\n    allow domain github.com\n    deny cidr 10.0.0.0/8\n  }\n}\n",
//! )?;
//! let agent = set.policy("agent").expect("compiled");
//!
//! // Hot path: borrowed input, no allocation, the deciding rule named.
//! let d = agent.connect("GitHub.COM.", 443, Via::Https);
//! assert_eq!((d.outcome, d.reason), (Outcome::Allow, Reason::AllowedByRule));
//! let rule = set.rule(d.rule.expect("a rule decided")).expect("known rule");
//! assert_eq!((rule.line, rule.source), (3, "allow domain github.com"));
//!
//! // Hostile spellings are normalised once, then decided.
//! assert_eq!(agent.connect("[::ffff:10.1.2.3]", 443, Via::Https).reason, Reason::DeniedByRule);
//! assert_eq!(agent.connect("2130706433", 80, Via::Https).reason, Reason::AmbiguousIpLiteral);
//!
//! // Live updates: readers load lock-free; a policy that does not compile
//! // is refused and the old one stays in force.
//! let store = PolicyStore::new(set);
//! let mut bad = SourceMap::new();
//! bad.add("agent.policy", "policy agent { network { allow domian github.com } }");
//! assert!(store.update(bad).is_err());
//! let current = store.load();
//! assert!(current.policy("agent").expect("still there").dns("github.com").is_allow());
//! # Ok::<(), gatehouse::Error>(())
//! ```
// No `unsafe` but one block, allowed where it stands: the SSE2 call of the
// host scanner (`src/normalize/scan.rs`), whose only precondition is a
// feature every x86-64 processor has; docs/performance.md gives the reason
// and its tests hold it to the portable scanner.
#![deny(unsafe_code)]
#![deny(missing_docs)]

// The stages of the pipeline, bottom first (`tests/layers.rs` keeps every
// import pointing down). They are private: what an embedder needs of them
// is re-exported below, and the rest may change freely.
mod build;
mod check;
mod compile;
mod decision;
mod digest;
mod eval;
pub(crate) mod regexes;
mod samples;
mod suite;
mod syntax;

// The public modules: each is a part of the facade.
#[cfg(feature = "arbitrary")]
pub mod arbitrary;
pub mod artifact;
#[cfg(feature = "bundle")]
pub mod bundle;
pub mod diag;
#[cfg(feature = "diff")]
pub mod diff;
pub mod export;
pub mod fmt;
#[cfg(feature = "import")]
pub mod import;
pub mod limits;
pub mod log;
pub mod normalize;
pub mod outline;
pub mod query;
pub mod source;
pub mod store;
pub mod vocab;

pub use build::{Build, Error, build, build_with};
pub use compile::{
    CompileError, Inconsistency, NetworkMode, NetworkRule, NetworkTarget, NetworkView, Place,
    Policy, PolicySet, PortSpan, SelectError,
};
pub use decision::{Decision, Escalation, Outcome, Reason, RuleId, RuleRef};
pub use eval::{BoundFileRule, DecisionReport, FileAccess, FileSandbox, FileView, Workspace};
pub use limits::{Limits, QueryLimits};
pub use query::{Query, QueryParseError, QueryRef, Via};
pub use source::SourceMap;
pub use store::{PolicyStore, Snapshot};
pub use suite::{Expected, TestCase};

/// What the tests, benchmarks and fuzz targets of this repository share
/// with the engine: the stages one by one (to time or fuzz each), the AST
/// (for the naive reference evaluator, which must read the same policies),
/// the shell splitter, the known-safe tables and the guardian's path globs
/// (so that the reference and the engine differ only where they mean to).
///
/// Not part of the API: it changes without notice, and `cargo doc` does
/// not show it. An embedder builds with [`build()`] or [`PolicySet`].
#[doc(hidden)]
pub mod testing {
    pub use crate::check::check;
    pub use crate::compile::compile;
    pub use crate::compile::guardian::Glob;
    pub use crate::eval::known_safe::{basename, is_known_safe, trusted_name};
    pub use crate::eval::shell::{Script, split};
    pub use crate::eval::words::{Word as ShellWord, read as read_words, texts as script_words};
    /// The formatter over a parsed file (what `fmt::format_source` runs
    /// after parsing), for the round-trip tests.
    pub fn format_file(file: &ast::File, src: &crate::source::SourceFile) -> String {
        crate::fmt::format_file(file, src)
    }
    pub use crate::samples::{
        CIDRS, COMMAND_RULES, COMMAND_WRAPPERS, GUARDIAN, IPS, MCP_RULES, NAMES, REQUIREMENTS,
        TAILS, partly_quoted,
    };
    pub use crate::syntax::{ast, parse_file, parse_file_by_grammar};

    /// An artifact's payload (the set's binary encoding, inflated): what the
    /// revision digests. `None` for bytes that are not a sound artifact.
    pub fn artifact_payload(artifact: &[u8]) -> Option<Vec<u8>> {
        crate::artifact::inflate(artifact.get(52..)?).ok()
    }

    /// What [`PolicySet::from_artifact`](crate::PolicySet::from_artifact)
    /// does with a payload once it is inflated (the fuzz target's way past
    /// the checksum and the compression).
    pub fn load_payload(
        payload: &[u8],
    ) -> Result<crate::PolicySet, crate::artifact::ArtifactError> {
        crate::artifact::load_payload(payload)
    }

    /// An artifact around any payload: the header, the checksum, the
    /// payload compressed as an artifact stores it.
    pub fn seal_payload(payload: &[u8]) -> Vec<u8> {
        crate::artifact::seal(payload)
    }

    /// An artifact's payload in its serde form as JSON, to be changed and
    /// sealed again by [`forge_artifact`] (tests of what a load refuses).
    pub fn artifact_json(artifact: &[u8]) -> Option<serde_json::Value> {
        crate::compile::PolicySet::payload_json(&artifact_payload(artifact)?).ok()
    }

    /// An artifact with a correct header and checksum around the payload
    /// whose serde form is `json`, however inconsistent its tables.
    pub fn forge_artifact(json: serde_json::Value) -> Option<Vec<u8>> {
        let payload = crate::compile::PolicySet::json_payload(json).ok()?;
        Some(crate::artifact::seal(&payload))
    }
}
