//! Limits: oversized input fails fast and closed, with a clear diagnostic
//! or decision, never a crash.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use gatehouse::limits::QueryLimits;
use gatehouse::source::SourceMap;
use gatehouse::{Limits, PolicySet};

#[test]
fn a_source_over_the_limit_is_refused_with_a_diagnostic() {
    let mut text = String::from("policy p {\n  network {\n");
    while text.len() <= Limits::default().source_bytes {
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
    assert_eq!(b.diagnostics.len(), 1);
    assert_eq!(b.diagnostics[0].code, "too_deeply_nested");
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

fn build_with(text: &str, limits: Limits) -> gatehouse::Build {
    let mut sources = SourceMap::new();
    sources.add("p.policy", text);
    gatehouse::build_with(sources, limits)
}

fn codes(b: &gatehouse::Build) -> Vec<&'static str> {
    b.diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn every_limit_is_configurable_by_value() {
    let text = "policy p {\n  network {\n    allow domain a.example\n    allow domain b.example\n    deny ip 10.0.0.1\n  }\n  guardian {\n    risk high destructive command ~ r\"(a|b|c|d|e|f){1,50}x{1,50}\"\n  }\n}\n";
    // Within the defaults it builds.
    assert!(build_with(text, Limits::default()).set.is_some());

    let b = build_with(
        text,
        Limits {
            source_bytes: 64,
            ..Limits::default()
        },
    );
    assert_eq!(codes(&b), ["source_too_large"]);
    assert!(b.set.is_none());

    let b = build_with(
        text,
        Limits {
            nesting_depth: 1,
            ..Limits::default()
        },
    );
    assert_eq!(codes(&b), ["too_deeply_nested"]);
    assert_eq!(b.diagnostics[0].span.start, 21); // the `{` after `network`

    let b = build_with(
        text,
        Limits {
            rules_per_policy: 3,
            ..Limits::default()
        },
    );
    assert_eq!(codes(&b), ["too_many_rules"]);
    assert!(b.set.is_none());
    assert!(
        build_with(
            text,
            Limits {
                rules_per_policy: 4,
                ..Limits::default()
            }
        )
        .set
        .is_some()
    );

    let b = build_with(
        text,
        Limits {
            regex_bytes: 1024,
            ..Limits::default()
        },
    );
    // Too big is its own code, whether one expression or all of them
    // together exceed the limit (the kind is typed, not read off a message).
    assert_eq!(codes(&b), ["regex_too_big"]);
    assert!(b.set.is_none());
}

#[test]
fn query_limits_travel_with_the_compiled_policy() {
    let text = "policy p {\n  commands {\n    allow echo\n    prompt git push\n  }\n}\n";
    let tight = Limits {
        query: QueryLimits {
            argv_words: 3,
            argv_bytes: 40,
            script_bytes: 10,
        },
        ..Limits::default()
    };
    let mut sources = SourceMap::new();
    sources.add("p.policy", text);
    let set = PolicySet::from_sources_with(sources, tight).unwrap();
    let p = set.single().unwrap();
    let argv = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        p.exec(&argv(&["echo", "a", "b"]), false).outcome.as_str(),
        "allow"
    );
    assert_eq!(
        p.exec(&argv(&["echo", "a", "b", "c"]), false)
            .reason
            .as_str(),
        "invalid_command"
    );
    assert_eq!(
        p.exec(&argv(&["echo", &"x".repeat(40)]), false)
            .reason
            .as_str(),
        "invalid_command"
    );
    // A script over the limit is unknown: never allowed outright, and its
    // `git push` still raises the prompt.
    let d = p.exec(&argv(&["bash", "-lc", "echo hi; git push"]), false);
    assert_eq!(
        (d.outcome.as_str(), d.reason.as_str()),
        ("ask", "prompt_rule")
    );
    // The limits survive a compiled artifact.
    let bytes = set.to_artifact().unwrap();
    let back = PolicySet::from_artifact(&bytes).unwrap();
    let q = back.single().unwrap();
    assert_eq!(
        q.exec(&argv(&["echo", "a", "b", "c"]), false)
            .reason
            .as_str(),
        "invalid_command"
    );
}
