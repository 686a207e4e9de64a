//! gatehouse: an embedded policy-evaluation engine for the sandboxes that
//! run AI agents.
//!
//! The pipeline, one module per stage:
//!
//! source text → [`syntax`] (pest grammar, AST with spans) → [`check`]
//! (diagnostics) → [`compile`] (an immutable [`PolicySet`]: a domain label
//! automaton, address intervals, exact-match tables) → [`eval`] (the hot path)
//! → [`store`] (an arc-swap handle for live updates). [`normalize`] is shared by
//! all of them; [`fmt`] prints the canonical layout; [`build()`] runs the
//! whole pipeline.
//!
//! ```
//! use gatehouse::query::Via;
//! use gatehouse::store::PolicyStore;
//! use gatehouse::{Outcome, PolicySet, Reason};
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
//! let mut bad = gatehouse::source::SourceMap::new();
//! bad.add("agent.policy", "policy agent { network { allow domian github.com } }");
//! assert!(store.update(bad).is_err());
//! let current = store.load();
//! assert!(current.policy("agent").expect("still there").dns("github.com").is_allow());
//! # Ok::<(), gatehouse::Error>(())
//! ```
#![forbid(unsafe_code)]
#[cfg(feature = "arbitrary")]
pub mod arbitrary;
pub mod artifact;
pub mod build;
pub mod check;
pub mod compile;
pub mod decision;
pub mod diag;
pub mod digest;
pub mod eval;
pub mod export;
pub mod fmt;
#[cfg(feature = "import")]
pub mod import;
pub mod limits;
pub mod log;
pub mod normalize;
pub mod query;
pub(crate) mod regexes;
#[doc(hidden)]
pub mod samples;
pub mod source;
pub mod store;
pub mod syntax;
pub mod vocab;

pub use build::{Build, Error, build, build_with};

/// What the naive reference evaluator in `tests/` shares with the engine —
/// the shell splitter, the known-safe tables, the guardian's path globs —
/// so that the two differ only where they mean to. Not part of the API: it
/// changes without notice.
#[doc(hidden)]
pub mod testing {
    pub use crate::compile::guardian::Glob;
    pub use crate::eval::known_safe::{basename, is_known_safe, trusted_name};
    pub use crate::eval::shell::{Script, loose_words, split};
}
pub use compile::{Policy, PolicySet};
pub use eval::{Decision, Outcome, Reason};
pub use limits::Limits;
