//! gatehouse: an embedded policy-evaluation engine for the sandboxes that run AI agents.
#![forbid(unsafe_code)]
pub mod build;
pub mod check;
pub mod compile;
pub mod diag;
pub mod eval;
pub mod fmt;
pub mod normalize;
pub mod query;
pub mod source;
pub mod store;
pub mod syntax;

pub use build::{Build, Error, build};
pub use compile::{Policy, PolicySet};
pub use eval::{Decision, Outcome, Reason};
