//! gatehouse: an embedded policy-evaluation engine for the sandboxes that run AI agents.
pub mod diag;
pub mod normalize;
pub mod query;
pub mod source;
pub mod syntax;
