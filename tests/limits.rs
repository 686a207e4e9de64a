//! Limits: oversized input fails fast and closed, with a clear diagnostic
//! or decision, never a crash.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use gatehouse::PolicySet;
use gatehouse::source::SourceMap;

#[test]
fn a_source_over_the_limit_is_refused_with_a_diagnostic() {
    let mut text = String::from("policy p {\n  network {\n");
    while text.len() <= gatehouse::build::MAX_SOURCE_BYTES {
        text.push_str("    allow domain filler-domain-name-to-make-this-file-large.example\n");
    }
    text.push_str("  }\n}\n");
    let mut sources = SourceMap::new();
    sources.add("huge.policy", text);
    let b = gatehouse::build(sources);
    assert!(b.set.is_none());
    assert_eq!(b.diagnostics.len(), 1);
    assert_eq!(b.diagnostics[0].code, "source_too_large");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let text = format!("policy p {}", "{".repeat(200_000));
    let mut sources = SourceMap::new();
    sources.add("deep.policy", text);
    let b = gatehouse::build(sources);
    assert!(b.has_errors());
    // The rendered snippet is a window around the span, not the whole line.
    assert!(
        b.render().len() < 2_000,
        "{} bytes of diagnostics",
        b.render().len()
    );
}

#[test]
fn oversized_commands_are_denied_or_treated_as_unknown() {
    let set = PolicySet::from_source(
        "p.policy",
        "policy p {\n  commands {\n    prompt git push\n  }\n}\n",
    )
    .unwrap();
    let p = set.single().unwrap();
    let huge: Vec<String> = std::iter::once("echo".to_string())
        .chain((0..10_001).map(|i| i.to_string()))
        .collect();
    assert_eq!(p.exec(&huge, false).reason.as_str(), "invalid_command");
    let long = vec!["x".repeat(1024 * 1024 + 1)];
    assert_eq!(p.exec(&long, false).reason.as_str(), "invalid_command");
    // A script over 64 KiB is unknown: its `git push` still raises the prompt.
    let script = format!("{}; git push", "true; ".repeat(20_000));
    let argv = vec!["bash".to_string(), "-lc".to_string(), script];
    let d = p.exec(&argv, false);
    assert_eq!(
        (d.outcome.as_str(), d.reason.as_str()),
        ("ask", "prompt_rule")
    );
    // A host over 253 octets is never a host.
    let host = format!("{}.example", "a".repeat(260));
    assert_eq!(
        p.connect(&host, 443, gatehouse::query::Via::Https)
            .reason
            .as_str(),
        "invalid_host"
    ); // validation first, under every mode
    let set = PolicySet::from_source("q.policy", "policy q { network { default allow } }").unwrap();
    assert_eq!(
        set.single()
            .unwrap()
            .connect(&host, 443, gatehouse::query::Via::Https)
            .reason
            .as_str(),
        "invalid_host"
    );
}
