//! The crate's modules form one-way layers: every `crate::` path in `src/`
//! (outside comments and test modules) points to a module of a lower
//! stage, so that a newcomer can read the pipeline bottom-up and no stage
//! depends on a later one. A new module must be given its stage here.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::BTreeMap;
use std::path::Path;

/// The stages, bottom first. A module may use only modules of a lower
/// stage (its own submodules aside).
const STAGES: &[&[&str]] = &[
    // The vocabulary and the plumbing every stage uses.
    &["vocab", "digest", "source", "limits", "samples"],
    // Normalisation, diagnostics, and the decision type with its reason
    // codes and rule ids.
    &["normalize", "diag", "decision"],
    // Queries, and the guardian's regex building.
    &["query", "regexes"],
    // Source to AST.
    &["syntax"],
    // AST to diagnostics.
    &["check"],
    // Checked AST to compiled policies.
    &["compile"],
    // Compiled policies to decisions.
    &["eval"],
    // What is built on a whole engine.
    &["artifact", "log", "build", "fmt", "outline"],
    // What reads a whole build: its tests, exports, and the importers and
    // generators that write sources for it.
    &["suite", "export", "import", "arbitrary", "bundle", "diff"],
    // Live updates of built sets.
    &["store"],
];

fn stage(module: &str) -> Option<usize> {
    STAGES.iter().position(|s| s.contains(&module))
}

/// `crate::NAME` references of a file, outside comments and `#[cfg(test)]`
/// modules.
fn references(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let mut out = Vec::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            // A module (`crate::compile::...`) or an item of the facade
            // (`crate::Limits`), resolved to its module by `facade()`.
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
            rest = after;
        }
        // `use crate::{a::x, b::y}`
        if let Some(i) = line.find("crate::{") {
            for part in line[i + 8..].split([',', '}']) {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() && part.trim().contains("::") {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// The items `src/lib.rs` re-exports at the crate root (`pub use
/// MODULE::{A, B};`), each with the module it comes from, so that a path
/// such as `crate::Limits` is held to the stage of `limits`.
fn facade() -> BTreeMap<String, String> {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let mut out = BTreeMap::new();
    // Each statement whole, over however many lines `rustfmt` gave it.
    for chunk in lib.split(';') {
        let Some(at) = chunk
            .lines()
            .find(|l| l.starts_with("pub use "))
            .and_then(|l| chunk.find(l))
        else {
            continue;
        };
        let rest: String = chunk[at..]
            .trim_start_matches("pub use ")
            .split_whitespace()
            .collect();
        let rest = rest.as_str();
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
            let item = item.trim();
            if !item.is_empty() {
                out.insert(item.to_string(), module.to_string());
            }
        }
    }
    out
}

/// The module a referenced name belongs to: a module is itself, a facade
/// item its module; `None` for a root item the facade does not list.
fn module_of(name: &str, facade: &BTreeMap<String, String>) -> Option<String> {
    if name.starts_with(|c: char| c.is_ascii_lowercase()) {
        Some(name.to_string())
    } else {
        facade.get(name).cloned()
    }
}

fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name()
                .is_some_and(|n| n != "target" && n != "node_modules" && n != "pkg")
            {
                walk(&p, files);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
}

#[test]
fn every_import_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut checked = 0;
    let facade = facade();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" {
            continue; // the facade re-exports from every stage
        }
        let Some(own) = stage(&top) else {
            panic!(
                "`src/{}`: module `{top}` has no stage in tests/layers.rs",
                rel.display()
            );
        };
        for name in references(&std::fs::read_to_string(f).unwrap()) {
            let Some(target) = module_of(&name, &facade) else {
                wrong
                    .entry(format!("src/{}", rel.display()))
                    .or_default()
                    .push(format!("{name} (not in the facade)"));
                continue;
            };
            if target == top {
                continue;
            }
            checked += 1;
            match stage(&target) {
                Some(s) if s < own => {}
                _ => wrong
                    .entry(format!("src/{}", rel.display()))
                    .or_default()
                    .push(target),
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} references found: is the scan broken?"
    );
    assert!(
        wrong.is_empty(),
        "imports that point up or sideways (module -> modules):\n{wrong:#?}"
    );
}

#[test]
fn the_scan_sees_imports() {
    let text = "use crate::compile::Policy;\nuse crate::{query::Query, vocab::Effect};\n// crate::eval in a comment\nlet x = crate::normalize::host(y); // crate::store\nlet l = crate::Limits::default();\n#[cfg(test)]\nmod tests { use crate::store; }";
    let mut found = references(text);
    found.sort();
    assert_eq!(found, ["Limits", "compile", "normalize", "query", "vocab"]);
    // A facade item is held to its module's stage.
    let facade = facade();
    assert_eq!(module_of("Limits", &facade).as_deref(), Some("limits"));
    assert_eq!(module_of("PolicySet", &facade).as_deref(), Some("compile"));
    assert_eq!(module_of("Nowhere", &facade), None);
}

/// No file of `src/` is longer than 700 lines unless its first lines say
/// why ("Longer than 700 lines").
#[test]
fn files_a_newcomer_can_hold_in_their_head() {
    // Every Rust file of the workspace: the library, the command line, the
    // daemon, the bindings and benches, and every crate's tests.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src", "tests", "policyc", "egress", "wasm", "bindings", "benches", "run", "otel",
    ] {
        walk(&root.join(dir), &mut files);
    }
    assert!(files.len() > 150, "{} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let n = text.lines().count();
            let head: String = text.lines().take(20).collect::<Vec<_>>().join("\n");
            (n > 700 && !head.contains("Longer than 700 lines"))
                .then(|| format!("{}: {n} lines", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "{long:#?}");
}
