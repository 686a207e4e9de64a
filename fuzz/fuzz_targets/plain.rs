//! The hand reader of plain `network` bodies (src/syntax/parse/plain.rs)
//! against the grammar: any text parsed both ways gives the same network
//! sections (spans included: `Span`'s `==` ignores them, so they are
//! compared as printed) and the same diagnostics, in the same order. The
//! rest of the AST is built by the same code either way.
#![no_main]
use gatehouse::testing::ast::{File, Item, SectionKind};
use libfuzzer_sys::fuzz_target;

fn networks(f: &File) -> String {
    let mut out = String::new();
    for item in &f.items {
        if let Item::Policy(b) | Item::Requirements(b) = item {
            for s in &b.sections {
                if let SectionKind::Network(n) = &s.kind {
                    out.push_str(&format!("{n:?} {:?}\n", s.span));
                }
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if !text.contains("network") {
        return;
    }
    let id = gatehouse::source::FileId(0);
    let (fast, fast_diags) = gatehouse::testing::parse_file(id, text);
    let (slow, slow_diags) = gatehouse::testing::parse_file_by_grammar(id, text);
    assert_eq!(networks(&fast), networks(&slow), "the reader and the grammar differ");
    assert_eq!(format!("{fast_diags:?}"), format!("{slow_diags:?}"), "their diagnostics differ");
    assert_eq!(fast.items.len(), slow.items.len());
});
