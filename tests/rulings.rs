//! Regressions for the check-level classes of issue 12 (the decision-level
//! ones are in `tests/data/rulings.policy`, replayed in both query forms by
//! `tests/cli.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use gatehouse::source::SourceMap;

fn build(text: &str) -> gatehouse::Build {
    let mut sources = SourceMap::new();
    sources.add("t.policy", text);
    gatehouse::build(sources)
}

fn error_codes(b: &gatehouse::Build) -> Vec<&'static str> {
    b.diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.code)
        .collect()
}

/// Every form of domain pattern (exact, `*.`, `**.`, `*`) against every
/// other, on related and unrelated names: a requirement's allow rule covers
/// a policy's allow rule exactly when every name the policy's pattern can
/// match, the requirement's matches too (spec §12: "a pattern covers
/// itself").
#[test]
fn requirement_coverage_matrix() {
    let forms = |base: &str| vec![base.to_string(), format!("*.{base}"), format!("**.{base}")];
    let mut patterns = vec!["*".to_string()];
    for base in ["example.com", "api.example.com", "other.com"] {
        patterns.extend(forms(base));
    }
    // Expected coverage, read off the spec's sentence by hand.
    let covers = |req: &str, pol: &str| -> bool {
        if req == "*" || req == pol {
            return true;
        }
        if pol == "*" {
            return false;
        }
        let (rk, rb) = split(req);
        let (_, pb) = split(pol);
        let strictly_under = pb.ends_with(&format!(".{rb}"));
        match rk {
            "" => false,
            "*." => strictly_under,
            _ => pb == rb || strictly_under,
        }
    };
    let mut checked = 0;
    for req in &patterns {
        for pol in &patterns {
            let text = format!(
                "requirements r {{\n  network {{ allow domain {req} }}\n}}\n\
                 policy p {{\n  network {{ allow domain {pol} }}\n}}\n"
            );
            let b = build(&text);
            let violated = error_codes(&b).contains(&"requirement_violation");
            assert_eq!(
                !violated,
                covers(req, pol),
                "requirement `{req}`, policy `{pol}`:\n{}",
                b.render()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 100);
}

fn split(p: &str) -> (&str, &str) {
    if let Some(b) = p.strip_prefix("**.") {
        ("**.", b)
    } else if let Some(b) = p.strip_prefix("*.") {
        ("*.", b)
    } else {
        ("", p)
    }
}

#[test]
fn a_partial_wildcard_in_a_guardian_tool_pattern_is_an_error() {
    for bad in [
        "*/delete_*",
        "git*/delete_repo",
        "github/*_repo",
        "*/*x",
        "**/x",
    ] {
        let text = format!("policy p {{\n  guardian {{\n    deny tool {bad}\n  }}\n}}\n");
        let b = build(&text);
        assert_eq!(error_codes(&b), ["invalid_tool_pattern"], "{bad}");
        let d = b.diagnostics.first().expect("a diagnostic");
        assert!(d.message.contains(&format!("`{bad}`")), "{}", d.message);
        assert!(b.render().contains("help:"), "{}", b.render());
    }
    // The same inside a risk rule and a requirements block.
    let b = build("policy p {\n  guardian {\n    risk high destructive tool */drop_*\n  }\n}\n");
    assert_eq!(error_codes(&b), ["invalid_tool_pattern"]);
    let b = build("requirements r {\n  guardian {\n    deny tool gh/del*\n  }\n}\npolicy p { }\n");
    assert_eq!(error_codes(&b), ["invalid_tool_pattern"]);
    for good in ["*/delete_repo", "github/*", "*/*", "github/delete_repo"] {
        let text = format!("policy p {{\n  guardian {{\n    deny tool {good}\n  }}\n}}\n");
        let b = build(&text);
        assert!(error_codes(&b).is_empty(), "{good}: {}", b.render());
    }
}

#[test]
fn covered_rule_lint_knows_mapped_prefixes_are_ipv4() {
    // `::/0` covers IPv6 only, so it does not cover a mapped prefix.
    let b = build(
        "policy p {\n  network {\n    default allow\n    deny cidr ::/0\n    deny cidr ::ffff:10.0.0.0/104\n  }\n}\n",
    );
    assert!(b.diagnostics.is_empty(), "{}", b.render());
    // A mapped prefix is its IPv4 prefix, so `10.0.0.0/8` covers it.
    let b = build(
        "policy p {\n  network {\n    default allow\n    deny cidr 10.0.0.0/8\n    deny cidr ::ffff:10.1.0.0/112\n  }\n}\n",
    );
    let codes: Vec<_> = b.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["covered_rule"], "{}", b.render());
}
