//! The language reference names every reason code the engine can give.

#![allow(clippy::unwrap_used)]

use gatehouse::Reason;

#[test]
fn the_language_reference_lists_every_reason_code() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/language.md")).unwrap();
    let missing: Vec<&str> = Reason::ALL
        .iter()
        .map(|r| r.as_str())
        .filter(|code| !doc.contains(&format!("| `{code}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "reason codes missing from the table in docs/language.md: {missing:?}"
    );
}
