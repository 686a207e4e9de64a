//! Formatting a file that parses cleanly gives text that parses to the same
//! AST, keeps every comment, and formats to itself; and the library's checked
//! formatter (`fmt::format_source`) returns that same text.
#![no_main]
use gatehouse::source::{FileId, SourceFile};
use gatehouse::testing::parse_file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (ast, diags) = parse_file(FileId(0), text);
    if !diags.is_empty() {
        return;
    }
    let out = gatehouse::testing::format_file(&ast, &SourceFile::new("f", text));
    let (again, d2) = parse_file(FileId(0), &out);
    assert!(d2.is_empty(), "formatted text has errors: {d2:?}\n{out}");
    assert_eq!(ast, again, "formatting changed the AST:\n{text}\n---\n{out}");
    let texts = |f: &gatehouse::testing::ast::File| f.comments.iter().map(|c| c.text.trim().to_string()).collect::<Vec<_>>();
    assert_eq!(texts(&ast), texts(&again), "comments lost:\n{out}");
    assert_eq!(gatehouse::testing::format_file(&again, &SourceFile::new("f", out.as_str())), out, "not idempotent");
    // The library's own check (what `policyc fmt` and the browser use) agrees.
    let checked = gatehouse::fmt::format_source(FileId(0), &SourceFile::new("f", text));
    assert_eq!(checked.ok().as_deref(), Some(out.as_str()), "format_source refused:\n{text}");
});
