//! Regressions for the check-level classes of issue 12 (the decision-level
//! ones are in `tests/data/rulings.policy`, replayed in both query forms by
//! `policyc/tests/cli_files.rs`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

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

fn codes(b: &gatehouse::Build) -> Vec<&'static str> {
    b.diagnostics.iter().map(|d| d.code).collect()
}

/// Issue 29, class 1: an IPv4-compatible `ip` rule is its IPv4 address for
/// the covered-rule lint too.
#[test]
fn covered_rule_lint_knows_compatible_addresses_are_ipv4() {
    let b = build(
        "policy p {\n  network {\n    default allow\n    deny cidr 10.0.0.0/8\n    deny ip ::10.0.0.5\n    deny ip ::a00:6\n  }\n}\n",
    );
    assert_eq!(
        codes(&b),
        ["covered_rule", "covered_rule"],
        "{}",
        b.render()
    );
    // A prefix inside `::/96` that reaches neither `::` nor `::1` never
    // matches: a warning with the IPv4 prefix to write.
    let b = build("policy p {\n  network {\n    deny cidr ::10.0.0.0/104\n  }\n}\n");
    assert_eq!(codes(&b), ["no_effect"], "{}", b.render());
    assert!(
        b.render().contains("write `cidr 10.0.0.0/8`"),
        "{}",
        b.render()
    );
    for quiet in [
        "::/96",
        "::/127",
        "::1/128",
        "::ffff:10.0.0.0/104",
        "fd00::/8",
    ] {
        let b = build(&format!(
            "policy p {{\n  network {{\n    deny cidr {quiet}\n  }}\n}}\n"
        ));
        assert!(b.diagnostics.is_empty(), "{quiet}: {}", b.render());
    }
}

/// Issue 29, ruling 3: requirements blocks whose lists share no value.
#[test]
fn requirements_lists_without_a_common_value_conflict() {
    for (a, b_, what) in [
        (
            "approvals untrusted on-request",
            "approvals never",
            "approval policy",
        ),
        ("reviewer user", "reviewer auto_review", "reviewer"),
        (
            "web_search cached",
            "web_search disabled live",
            "web search mode",
        ),
    ] {
        let text = format!(
            "requirements org {{\n  {a}\n}}\nrequirements team {{\n  {b_}\n}}\npolicy p {{ }}\n"
        );
        let b = build(&text);
        assert_eq!(
            error_codes(&b),
            ["requirement_conflict"],
            "{text}\n{}",
            b.render()
        );
        let d = b.diagnostics.first().expect("a diagnostic");
        assert!(d.message.contains("`org`, `team`"), "{}", d.message);
        assert!(d.message.contains(what), "{}", d.message);
        assert_eq!(d.labels.len(), 1, "{}", b.render());
    }
    // A common value: no conflict, and the silent policy takes it.
    let b = build(
        "requirements org {\n  approvals untrusted on-request\n}\nrequirements team {\n  approvals never on-request\n}\npolicy p { }\n",
    );
    assert!(b.diagnostics.is_empty(), "{}", b.render());
}

/// Issue 29, ruling 4: a `granular` default from the requirements comes
/// with every category off, and `check` says so.
#[test]
fn a_granular_default_from_requirements_warns() {
    let b = build(
        "requirements r {\n  approvals granular never\n}\npolicy p { }\npolicy q {\n  approvals never\n}\n",
    );
    assert_eq!(codes(&b), ["granular_default"], "{}", b.render());
    let d = b.diagnostics.first().expect("a diagnostic");
    assert!(d.message.contains("policy `p`"), "{}", d.message);
    assert!(
        d.help
            .as_deref()
            .unwrap_or("")
            .contains("approvals granular {"),
        "{}",
        b.render()
    );
}

/// Issue 29, ruling 5: requirements names are unique.
#[test]
fn two_requirements_blocks_of_one_name_are_an_error() {
    let b = build(
        "requirements r {\n  reviewer user\n}\nrequirements r {\n  sandbox read-only\n}\npolicy p { }\n",
    );
    assert_eq!(error_codes(&b), ["duplicate_name"], "{}", b.render());
    assert_eq!(b.diagnostics.first().map(|d| d.labels.len()), Some(1));
}

/// Issue 29, ruling 6: each setting once per section.
#[test]
fn a_setting_written_twice_in_a_section_is_an_error() {
    for (section, key) in [
        (
            "mcp {\n    server fs auto\n    server fs prompt\n  }",
            "server fs",
        ),
        (
            "mcp {\n    tool fs/write prompt\n    tool fs/write approve\n  }",
            "tool fs/write",
        ),
        ("guardian {\n    allow low\n    allow medium\n  }", "allow"),
        (
            "guardian {\n    authorize high with low\n    authorize high with high\n  }",
            "authorize",
        ),
        (
            "network {\n    default deny\n    default allow\n  }",
            "default",
        ),
        ("proxy {\n    socks5 on\n    socks5 off\n  }", "socks5"),
    ] {
        let text = format!("policy p {{\n  {section}\n}}\n");
        let b = build(&text);
        assert_eq!(
            error_codes(&b),
            ["duplicate_setting"],
            "{text}\n{}",
            b.render()
        );
        let d = b.diagnostics.first().expect("a diagnostic");
        assert!(d.message.contains(&format!("`{key}`")), "{}", d.message);
    }
    // Different servers and tools are different settings.
    let b = build(
        "policy p {\n  mcp {\n    server fs auto\n    server gh prompt\n    tool fs/write prompt\n    tool fs/read approve\n  }\n}\n",
    );
    assert!(b.diagnostics.is_empty(), "{}", b.render());
}

/// Issue 29, ruling 7: a sandbox block outside workspace-write does nothing.
#[test]
fn a_sandbox_block_outside_workspace_write_has_no_effect() {
    for mode in ["read-only", "danger-full-access"] {
        let text = format!(
            "policy p {{\n  sandbox {mode} {{ writable \"/var/x\"; protect \".s\"; exclude \"/tmp\" }}\n}}\n"
        );
        let b = build(&text);
        assert_eq!(codes(&b), ["no_effect"; 3], "{}", b.render());
        for (d, what) in b.diagnostics.iter().zip(["writable", "protect", "exclude"]) {
            assert!(d.message.contains(&format!("`{what}`")), "{}", d.message);
            assert!(d.message.contains(mode), "{}", d.message);
        }
    }
    let b = build("policy p {\n  sandbox workspace-write { writable \"/var/x\" }\n}\n");
    assert!(b.diagnostics.is_empty(), "{}", b.render());
}

/// The decision-level regressions of issues 29 and 51 (`tests/data/rulings-29*`, `rulings-51`),
/// replayed through the library (`Build::tests`); `policyc/tests/cli_files.rs` replays
/// them through `policyc eval`.
#[test]
fn issue_29_regressions_hold_through_the_library() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut ran = 0;
    for set in [
        "tests/data/rulings-29.policy",
        "tests/data/rulings-29-agreed",
        "tests/data/rulings-29-granular",
        "tests/data/rulings-51.policy",
    ] {
        let path = std::path::Path::new(root).join(set);
        let mut files: Vec<std::path::PathBuf> = if path.is_dir() {
            std::fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect()
        } else {
            vec![path]
        };
        files.sort();
        let mut sources = SourceMap::new();
        for f in &files {
            sources.add(f.display().to_string(), std::fs::read_to_string(f).unwrap());
        }
        let b = gatehouse::build(sources);
        let set_ = b
            .set
            .as_ref()
            .unwrap_or_else(|| panic!("{set}: {}", b.render()));
        for case in b.tests() {
            let policy = case.policy_in(set_).expect("a policy");
            let d = policy.decide(&case.query);
            assert!(
                case.passes(&d),
                "{}:{} `{}`: {} because {}",
                case.file,
                case.line,
                case.query_text,
                d.outcome.as_str(),
                d.reason.as_str()
            );
            ran += 1;
        }
    }
    assert!(ran >= 30, "{ran}");
}
