//! The formatter: canonical output (golden), AST preserved, comments kept,
//! idempotent — on a messy file and on random layouts.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use gatehouse::source::{FileId, SourceFile};
use gatehouse::testing::parse_file;
use proptest::prelude::*;

fn fmt(text: &str) -> String {
    let (ast, diags) = parse_file(FileId(0), text);
    assert!(diags.is_empty(), "{diags:?}\n{text}");
    gatehouse::testing::format_file(&ast, &SourceFile::new("x", text))
}

fn assert_faithful(text: &str) -> String {
    let out = fmt(text);
    let (a, _) = parse_file(FileId(0), text);
    let (b, d) = parse_file(FileId(0), &out);
    assert!(d.is_empty(), "formatted text has errors: {d:?}\n{out}");
    assert_eq!(a, b, "formatting changed the AST:\n{out}");
    let texts = |f: &gatehouse::testing::ast::File| {
        f.comments
            .iter()
            .map(|c| c.text.trim().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(texts(&a), texts(&b), "comments lost or reordered:\n{out}");
    assert_eq!(fmt(&out), out, "fmt is not idempotent");
    out
}

#[test]
fn a_messy_file_gets_the_canonical_layout() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/messy.policy"
    ))
    .unwrap();
    let out = assert_faithful(&text);
    crate::bless::golden(
        "tests/golden/messy.formatted.policy",
        &out,
        "cargo test --test main fmt",
    );
    assert!(
        out.contains("allow ip ::ffff:10.0.0.5"),
        "IPv6 in RFC 5952 form:\n{out}"
    );
}

#[test]
fn shipped_policies_are_formatted() {
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/policies")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "policy") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                assert_faithful(&text),
                text,
                "{} is not formatted",
                path.display()
            );
        }
    }
}

const STATEMENTS: &[&str] = &[
    "default deny",
    "default allow",
    "dns off",
    "local allow",
    "allow domain github.com",
    "deny domain *.evil.example port 443",
    "allow domain **.pypi.org port 80,443",
    "allow ip 10.0.0.5",
    "deny cidr 10.0.0.0/8",
    "allow cidr fd00::/8 port 8000-8999",
    "allow socket \"/var/run/docker.sock\"",
    "allow socket *",
    "allow domain \"bücher.example\"",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Random layouts of random statements: separators, blank lines,
    /// comments, indentation.
    #[test]
    fn formatting_preserves_meaning_and_comments(
        stmts in prop::collection::vec((0..STATEMENTS.len(), 0..4u8, 0..3u8, 0..4usize), 0..10),
        header_comment in any::<bool>(),
    ) {
        let mut text = String::new();
        if header_comment {
            text.push_str("# header\n");
        }
        text.push_str("policy p {\n  network {");
        for (i, (s, sep, comment, indent)) in stmts.iter().enumerate() {
            text.push_str(match sep { 0 => "\n", 1 => ";", 2 => "\n\n", _ => "\n\n\n" });
            text.push_str(&" ".repeat(*indent));
            text.push_str(STATEMENTS[*s]);
            match comment {
                1 => text.push_str(&format!("  # note {i}")),
                2 => text.push_str(&format!("\n# line {i}")),
                _ => {}
            }
        }
        text.push_str("\n  }\n}\n");
        assert_faithful(&text);
    }
}
