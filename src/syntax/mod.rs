//! Syntax: source text → typed AST with spans.
//!
//! The pest grammar (`grammar/policy.pest`) is the one syntax definition; its
//! types never leave this module. [`parse_file`] returns the AST together with
//! every syntax diagnostic of the file (parsing recovers at statement level),
//! and `parse_query` reads the text form of a query (as `Query::parse`).

pub mod ast;
mod error;
mod parse;
pub(crate) mod scan;

pub(crate) use parse::{DECISION_WORDS, QUERY_KINDS, block_keywords};
pub use parse::{parse_file, parse_file_by_grammar, parse_file_with};
pub(crate) use scan::{Lexeme, Raw, scan};

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/policy.pest"]
pub(crate) struct PolicyParser;
