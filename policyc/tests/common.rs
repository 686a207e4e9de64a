//! Running `policyc` as a user does, from the repository's root.

#![allow(dead_code)]

use std::process::{Command, Output};

pub use crate::bless::repo;

/// `policyc ARGS...` in the repository's root.
pub fn policyc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

/// `policyc ARGS...` in the repository's root, with `input` on stdin.
pub fn policyc_with_stdin(args: &[&str], input: &str) -> Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Compares `actual` with `tests/golden/NAME`.
pub fn golden(name: &str, actual: &str) {
    crate::bless::golden(
        &format!("tests/golden/{name}"),
        actual,
        "cargo test -p policyc",
    );
}
