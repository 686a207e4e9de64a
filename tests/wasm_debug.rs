//! The browser build is compiled with `-Zfmt-debug=shallow` (wasm/build.sh),
//! under which a derived `Debug` prints only the type's name. So no message
//! that the engine or the browser glue can show may use `Debug` formatting:
//! this test reads the sources (outside their `#[cfg(test)]` modules) and
//! refuses `:?}`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            // The CLI never runs in the browser.
            if p.file_name().is_some_and(|n| n == "bin") {
                continue;
            }
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs")
            // A module of unit tests on its own (`tests.rs`, `lib_tests.rs`):
            // its parent includes it under `#[cfg(test)]`.
            && !p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n == "tests.rs" || n.ends_with("_tests.rs")
            })
        {
            out.push(p);
        }
    }
}

#[test]
fn no_debug_formatting_in_browser_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("wasm/src"), &mut files);
    assert!(files.len() > 30, "{}", files.len());
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (i, line) in code.lines().enumerate() {
            let l = line.trim_start();
            if l.starts_with("//") {
                continue;
            }
            if line.contains(":?}") || line.contains(":#?}") {
                found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "Debug formatting in browser code:\n{}",
        found.join("\n")
    );
}
