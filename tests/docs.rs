//! The language reference names every reason code the engine can give.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

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

/// Every `docs/language.md#ID` that a comment in the code cites is an
/// anchor of the reference, and no comment cites the spec's section numbers
/// (a document outside the repository).
#[test]
fn code_comments_cite_anchors_that_exist() {
    let root = env!("CARGO_MANIFEST_DIR");
    let doc = std::fs::read_to_string(format!("{root}/docs/language.md")).unwrap();
    let mut files = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(format!("{root}/src"))];
    dirs.push(std::path::PathBuf::from(format!("{root}/egress/src")));
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut bad = Vec::new();
    let mut cited = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find("docs/language.md#") {
                let after = &rest[at + "docs/language.md#".len()..];
                let id: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                cited += 1;
                if !doc.contains(&format!("<a id=\"{id}\"></a>")) {
                    bad.push(format!("{}:{}: #{id}", f.display(), i + 1));
                }
                rest = after;
            }
            if line.contains("spec §") || line.contains("interfaces §") {
                bad.push(format!(
                    "{}:{}: cites a spec section number",
                    f.display(),
                    i + 1
                ));
            }
        }
    }
    assert!(cited > 20, "only {cited} citations found");
    assert!(bad.is_empty(), "{bad:#?}");
}
