//! The one golden-file writer of the workspace's tests: every crate's tests
//! include this file (`#[path]`), so `BLESS=1` means the same everywhere.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

/// The repository's root, found upwards from the crate under test.
pub fn repo() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("grammar/policy.pest").is_file() {
        assert!(
            dir.pop(),
            "no repository root above {}",
            env!("CARGO_MANIFEST_DIR")
        );
    }
    dir
}

/// Compares `actual` with the file at `path` (relative to the repository's
/// root); `BLESS=1` rewrites the file first. `how` says which command
/// regenerates it, for the failure message.
pub fn golden(path: &str, actual: &str, how: &str) {
    let full = repo().join(path);
    if std::env::var_os("BLESS").is_some() {
        if let Some(dir) = full.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&full, actual).unwrap();
    }
    let want = std::fs::read_to_string(&full).unwrap_or_default();
    assert!(
        want == actual,
        "{path} differs from what the test produced; `BLESS=1 {how}` rewrites it\n--- expected\n{want}\n--- actual\n{actual}"
    );
}
