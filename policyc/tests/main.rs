//! `policyc`'s tests, one binary: the command line as a user runs it, its
//! help text against docs/cli.md, exports, imports and limits.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "../../tests/support/bless.rs"]
mod bless;
mod common;

mod cli;
mod cli_diff;
mod cli_files;
mod cli_help;
mod cli_init;
mod corpus;
mod export;
mod fail_closed;
mod hook;
mod import;
mod limits;
