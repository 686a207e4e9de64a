//! The word classes against the engine's own matching, every word of up
//! to five segments over the segments that matter.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::compile::guardian::Glob;
use crate::normalize::path::lexical_path;

fn globs(list: &[&str]) -> Vec<Vec<String>> {
    list.iter()
        .map(|g| g.split('/').map(String::from).collect())
        .collect()
}

/// The class of a word, by the engine's own matching.
fn class_of(list: &[&str], word: &str) -> Vec<bool> {
    let lex = lexical_path(word);
    list.iter()
        .map(|g| {
            let g = Glob::new(g);
            g.matches(word) || g.matches(&lex)
        })
        .collect()
}

#[test]
fn every_word_falls_in_a_found_class_and_each_witness_is_its_own() {
    let list = ["**/.ssh/**", "~/.aws/credentials", "/etc/*", "a/b", "*.pem"];
    let words = classes(&globs(&list), &["git".into()]).unwrap();
    let found: HashSet<Vec<bool>> = words.iter().map(|w| w.globs.clone()).collect();
    for w in &words {
        assert_eq!(class_of(&list, &w.text), w.globs, "{:?}", w.text);
    }
    for word in [
        "~/.aws/credentials",
        "~/x/../.aws/credentials",
        "~/.aws/./credentials",
        "/etc/passwd",
        "/etc/x/..",
        "/etc/../etc/x",
        "a/b",
        "a/c/../b",
        "./a/b",
        "k.pem",
        "x/../k.pem",
        "~/.ssh/..",
        "/x/.ssh/../../etc/y",
        "~/.ssh/../.aws/credentials",
        "",
        "/",
        "..",
        "../a/b",
        "a\0/../b",
    ] {
        assert!(found.contains(&class_of(&list, word)), "{word:?}");
    }
}

/// Every word of up to five segments over the segments that matter
/// (and a NUL) lies in a found class, with the same name tests.
#[test]
fn exhaustive_short_words() {
    let list = [
        "**/.ssh/*",
        "~/.aws/credentials",
        "/etc/*",
        "a",
        "x/**/y",
        "*",
    ];
    let names = ["git".to_string(), "./run".to_string()];
    let words = classes(&globs(&list), &names).unwrap();
    let key = |w: &str| {
        let base = crate::normalize::path::basename(w);
        let pathlike = w.contains('/') || w.starts_with('.') || w.starts_with('~');
        let program = names.iter().any(|n| n == w || n == base);
        (class_of(&list, w), pathlike, program)
    };
    let found: HashSet<(Vec<bool>, bool, bool)> = words
        .iter()
        .map(|w| (w.globs.clone(), w.pathlike, w.program))
        .collect();
    for w in &words {
        assert_eq!(
            key(&w.text),
            (w.globs.clone(), w.pathlike, w.program),
            "{:?}",
            w.text
        );
    }
    let segs = [
        "",
        ".",
        "..",
        "~",
        "a",
        ".ssh",
        ".aws",
        "credentials",
        "etc",
        "x",
        "y",
        "git",
        "run",
        "a\0",
    ];
    let mut frontier: Vec<String> = segs.iter().map(|s| s.to_string()).collect();
    for _ in 0..4 {
        let mut next = Vec::new();
        for w in &frontier {
            assert!(found.contains(&key(w)), "{w:?}");
            if w.len() < 14 {
                for s in [
                    "",
                    "..",
                    "~",
                    "a",
                    ".ssh",
                    ".aws",
                    "credentials",
                    "etc",
                    "y",
                    "git",
                ] {
                    next.push(format!("{w}/{s}"));
                }
            }
        }
        frontier = next;
    }
}

/// The globs of the shipped policies' guardians and a generated one
/// fit the walk's bounds.
#[test]
fn realistic_guardians_fit() {
    for list in [
        &[
            "**/.ssh/**",
            "**/.aws/credentials",
            "**/.env",
            "**/*.pem",
            "**/.git/hooks/**",
            "**/.bashrc",
            "**/.zshrc",
        ][..],
        &[
            "**/.ssh/**",
            "**/.env",
            "/etc/*",
            "~/.aws/credentials",
            "**/.git/hooks/**",
            "*.pem",
            "a/b",
            "**/id_rsa",
        ],
    ] {
        let words = classes(&globs(list), &["rm".into(), "env".into()]);
        assert!(words.is_some_and(|w| w.len() > list.len()), "{list:?}");
    }
}

#[test]
fn a_word_and_its_lexical_form_matching_different_globs_is_a_class() {
    // `~/.ssh/..` is written under .ssh and means the home: both
    // globs at once, which no normal word does.
    let list = ["~/.ssh/*", "~"];
    let words = classes(&globs(&list), &[]).unwrap();
    assert!(words.iter().any(|w| w.globs == [true, true]), "{words:?}");
}

#[test]
fn programs_by_name_and_basename() {
    let words = classes(&[], &["git".into(), "/usr/bin/git".into()]).unwrap();
    let texts: Vec<&str> = words
        .iter()
        .filter(|w| w.program)
        .map(|w| w.text.as_str())
        .collect();
    assert!(texts.contains(&"git"), "{texts:?}");
    assert!(texts.contains(&"/usr/bin/git"), "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.ends_with("/git") && *t != "/usr/bin/git")
    );
}
