//! Running `policyc` as a user does, and golden files, for the CLI tests.
//! Set `BLESS=1` to rewrite the golden files.

#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::process::{Command, Output};

/// `policyc ARGS...` in the repository's root.
pub fn policyc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Compares `actual` with `tests/golden/NAME` (rewrites it under `BLESS`).
pub fn golden(name: &str, actual: &str) {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        actual, want,
        "golden file {name} differs (BLESS=1 rewrites it)"
    );
}
