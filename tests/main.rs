//! The library's integration tests, one binary: differential runs against
//! the reference evaluator, fail-closed proofs, limits, artifacts, logging,
//! the layer rules and the docs' examples. `policyc`'s own tests live in
//! `policyc/tests/`, the daemon's in `egress/tests/`.

#[path = "support/bless.rs"]
mod bless;
mod reference;

mod agent_differential;
mod artifact;
mod corpus;
mod diff;
mod diff_agent;
mod diff_files;
mod diff_review;
mod differential;
mod docs;
mod fail_closed;
mod fmt;
mod fuzz_regressions;
mod import;
mod import_claude;
mod import_fidelity;
mod layers;
mod limits;
mod live_update;
mod log;
mod no_alloc;
mod parse_plain;
mod properties;
mod rulings;
mod shell_words;
mod wasm_debug;
