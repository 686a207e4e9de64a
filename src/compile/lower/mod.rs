//! Lowering, one file per section family: each turns its sections of a
//! checked policy into the compiled tables ([`super::Compiler::policy`]
//! calls them in source order).

mod agent;
mod guardian;
mod network;
mod tools;

pub(super) use agent::approvals;
