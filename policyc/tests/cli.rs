//! `policyc` as a user runs it: exit codes, JSON decisions, golden
//! diagnostics. Set `BLESS=1` to rewrite the golden files.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common::{golden, policyc, repo, stderr, stdout};
use std::process::Output;

/// The shipped valid policies (`examples/mistakes/` holds files that must fail).
pub(crate) fn valid() -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(format!("{}/policies", crate::common::repo().display()))
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "policy"))
            .map(|p| format!("policies/{}", p.file_name().unwrap().to_string_lossy()))
            .collect();
    v.sort();
    v
}

fn eval_valid(extra: &[&str]) -> Output {
    let files = valid();
    let mut args: Vec<&str> = vec!["eval"];
    args.extend(files.iter().map(String::as_str));
    args.extend(extra);
    policyc(&args)
}

/// Spec §15 (network, tool and app rows), plus more of §3–§8.
const ROWS: &[(&str, &str, &str, &str)] = &[
    (
        "coding-agent",
        "connect github.com:443",
        "allow",
        "allowed_by_rule",
    ),
    (
        "coding-agent",
        "connect api.github.com:443",
        "deny",
        "not_allowed",
    ),
    (
        "coding-agent",
        "connect GitHub.COM.:443",
        "allow",
        "allowed_by_rule",
    ),
    (
        "research",
        "connect 169.254.169.254:80",
        "deny",
        "local_address",
    ),
    (
        "research",
        "connect 2130706433:80",
        "deny",
        "ambiguous_ip_literal",
    ),
    (
        "research",
        "connect [::ffff:10.1.2.3]:443",
        "deny",
        "denied_by_rule",
    ),
    (
        "research",
        "resolved anything.example -> 93.184.215.14, 10.0.0.7",
        "deny",
        "denied_by_rule",
    ),
    (
        "research",
        "resolved rebind.example -> 127.0.0.1",
        "deny",
        "non_public_resolution",
    ),
    (
        "research",
        "dns competitor.example.com",
        "deny",
        "denied_by_rule",
    ),
    ("observer", "tool input.control", "deny", "denied_by_rule"),
    ("observer", "tool screen.read", "allow", "default_allow"),
    (
        "coding-agent",
        "dns exfil.attacker.example",
        "deny",
        "not_allowed",
    ),
    (
        "coding-agent",
        "connect 169.254.169.254:80",
        "deny",
        "local_address",
    ),
    (
        "auto",
        "connect api.zerotwo.ai:443",
        "allow",
        "allowed_by_rule",
    ),
    ("auto", "connect example.com:443", "deny", "denied_by_rule"),
    (
        "kiosk",
        "app \"C:\\\\Program Files\\\\Mozilla Firefox\\\\firefox.exe\"",
        "deny",
        "denied_by_rule",
    ),
    ("kiosk", "app /usr/bin/vim", "allow", "default_allow"),
];

#[test]
fn spec_rows_hold_in_the_text_form() {
    for (policy, query, decision, reason) in ROWS {
        let o = eval_valid(&["--policy", policy, "--query", query]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{query}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert_eq!(
            (v["decision"].as_str(), v["reason"].as_str()),
            (Some(*decision), Some(*reason)),
            "{policy}: {query}"
        );
        assert_eq!(v["policy"], *policy);
    }
}

#[test]
fn spec_rows_hold_in_the_json_form() {
    for (policy, text, decision, reason) in ROWS {
        let q = gatehouse::Query::parse(text).unwrap();
        let json = serde_json::to_string(&q).unwrap();
        let o = eval_valid(&["--policy", policy, "--query", &json]);
        let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert_eq!(
            (v["decision"].as_str(), v["reason"].as_str()),
            (Some(*decision), Some(*reason)),
            "{policy}: {json}"
        );
    }
}

#[test]
fn eval_streams_one_decision_per_line_and_names_the_rule() {
    let o = policyc(&[
        "eval",
        "policies/coding-agent.policy",
        "--query",
        "connect github.com:443",
        "--query",
        r#"{"kind":"connect","host":"api.github.com","port":443}"#,
        "--query",
        r#"{"kind":"tool","permission":"shell.exec"}"#,
    ]);
    golden("eval_coding_agent.jsonl", &stdout(&o));
    assert_eq!(o.status.code(), Some(0));
}

/// `eval` formats each distinct decision once and reuses it: a repeated
/// decision must print the same line, and two rules with the same outcome
/// and reason must still be told apart. Lines may end in CRLF.
#[test]
fn a_stream_repeats_decisions_exactly_and_tells_rules_apart() {
    let dir = std::env::temp_dir().join(format!("gatehouse-eval-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let queries = dir.join("q.jsonl");
    let one = r#"{"kind":"connect","host":"pypi.org","port":443}"#;
    let two = r#"{"kind":"connect","host":"github.com","port":443}"#;
    let body = format!("{one}\r\n{two}\r\nnot a query\r\n{one}\n{two}\n{one}");
    std::fs::write(&queries, body).unwrap();
    let o = policyc(&[
        "eval",
        "policies/coding-agent.policy",
        "--queries",
        queries.to_str().unwrap(),
    ]);
    let lines: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert!(
        lines[0].contains("\"source\":\"allow domain pypi.org\""),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("allowed_by_rule") && lines[1] != lines[0],
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("{\"error\":"));
    assert_eq!(lines[3], lines[0]);
    assert_eq!(lines[4], lines[1]);
    assert_eq!(lines[5], lines[0]);
    assert_eq!(o.status.code(), Some(3));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_malformed_query_line_is_an_error_line_and_exit_3() {
    let o = policyc(&[
        "eval",
        "policies/coding-agent.policy",
        "--query",
        "conect x:1",
        "--query",
        "connect github.com:443",
        "--query",
        "{\"kind\":\"connect\"}",
    ]);
    let lines: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("{\"error\":"));
    assert!(lines[1].contains("allowed_by_rule"));
    assert!(lines[2].starts_with("{\"error\":"));
    assert_eq!(o.status.code(), Some(3));
}

#[test]
fn check_reports_all_six_mistakes_with_carets_and_help() {
    let o = policyc(&["check", "examples/mistakes/many-mistakes.policy"]);
    assert_eq!(o.status.code(), Some(1));
    // Human diagnostics are not the command's result: standard error.
    assert!(stdout(&o).is_empty());
    let out = stderr(&o);
    golden("many_mistakes.txt", &out);
    assert_eq!(out.matches("error[").count(), 6, "{out}");
    assert_eq!(out.matches("= help:").count(), 6, "{out}");
    assert!(out.contains("6 errors"));
}

#[test]
fn check_json_has_the_documented_fields() {
    let o = policyc(&[
        "check",
        "--format",
        "json",
        "examples/mistakes/many-mistakes.policy",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 6);
    for d in arr {
        for f in [
            "severity",
            "code",
            "message",
            "file",
            "line",
            "column",
            "end_line",
            "end_column",
            "help",
        ] {
            assert!(d.get(f).is_some(), "missing {f} in {d}");
        }
    }
    assert_eq!(arr[0]["line"], 4);
    assert_eq!(arr[0]["column"], 5);
    assert_eq!(arr[0]["code"], "unknown_statement");
}

#[test]
fn clean_policies_check_test_and_format_cleanly() {
    let files = valid();
    let run = |cmd: &[&str]| {
        let mut args = cmd.to_vec();
        args.extend(files.iter().map(String::as_str));
        policyc(&args)
    };
    for cmd in [
        &["check", "--deny-warnings"][..],
        &["test"],
        &["fmt", "--check"],
    ] {
        let o = run(cmd);
        assert_eq!(o.status.code(), Some(0), "{cmd:?}: {}", stdout(&o));
    }
    assert!(stdout(&run(&["test"])).contains(" passed, 0 failed"));
}

#[test]
fn a_failing_expectation_shows_expected_actual_and_rule() {
    let dir = std::env::temp_dir().join(format!("gatehouse-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("t.policy");
    std::fs::write(&f, "policy p {\n  network {\n    deny domain x.example\n  }\n}\ntest \"t\" {\n  expect allow connect x.example:443\n}\n").unwrap();
    let o = policyc(&["test", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("expected: allow connect x.example:443"),
        "{out}"
    );
    assert!(
        out.contains("actual:   deny because denied_by_rule"),
        "{out}"
    );
    assert!(out.contains("deny domain x.example"), "{out}");
    assert!(out.contains("0 passed, 1 failed"), "{out}");
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(policyc(&[]).status.code(), Some(2));
    assert_eq!(policyc(&["chek", "policies"]).status.code(), Some(2));
    assert_eq!(eval_valid(&["--query", "upstream"]).status.code(), Some(2)); // several policies
    assert_eq!(
        policyc(&["check", "--formt", "json", "policies"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn lints_warn_and_deny_warnings_fails() {
    let o = policyc(&["check", "tests/data/lints.policy"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "ok: 5 policies in 1 file (25 warnings)\n");
    let out = stderr(&o);
    golden("lints.txt", &out);
    for code in [
        "covered_rule",
        "dead_allow",
        "no_effect_on_local",
        "allow_under_default_allow",
        "contradictory_rules",
        "dead_rule",
        "localhost_without_address",
        "covered_file_rule",
        "duplicate_file_rule",
        "shadowed_file_rule",
        "no_effect",
    ] {
        assert!(
            out.contains(&format!("warning[{code}]")),
            "{code} missing:\n{out}"
        );
    }
    assert!(out.contains("25 warnings"), "{out}");
    // A `read` that opens reads below a `none` is never reported.
    assert!(!out.contains("`read \"secrets/public\"`"), "{out}");
    // Exact local exceptions are never reported as covered or useless.
    assert!(!out.contains(":12:5") && !out.contains(":24:5"), "{out}");
    let o = policyc(&["check", "--deny-warnings", "tests/data/lints.policy"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn the_spec_examples_of_sections_3_to_8_hold() {
    let o = policyc(&["test", "tests/data/spec.policy"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("74 passed, 0 failed"), "{out}");
}

/// Every file in `examples/mistakes/` fails `policyc check` with the
/// diagnostics recorded in `tests/golden/invalid_codes.txt`.
#[test]
fn invalid_policies_fail_with_the_right_codes() {
    let mut report = String::new();
    let mut files: Vec<_> = std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/..",
        "/examples/mistakes"
    ))
    .unwrap()
    .map(|e| e.unwrap().path())
    .collect();
    files.sort();
    for f in files {
        let rel = format!(
            "examples/mistakes/{}",
            f.file_name().unwrap().to_string_lossy()
        );
        let o = policyc(&["check", "--format", "json", &rel]);
        assert_eq!(o.status.code(), Some(1), "{rel} must fail");
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        for d in v.as_array().unwrap() {
            report.push_str(&format!(
                "{rel}:{}:{} {} {}\n",
                d["line"],
                d["column"],
                d["severity"].as_str().unwrap(),
                d["code"].as_str().unwrap()
            ));
        }
    }
    golden("invalid_codes.txt", &report);
}

/// A test block without `policy NAME` in a file that defines exactly one
/// policy is that policy's, however many policies the set holds (issue 37,
/// item 1): the README's own example runs beside the shipped policies, as
/// the documented pre-commit hooks run it. A test in a file of several
/// policies (or none) still has to name one, and the help lists them.
#[test]
fn a_test_binds_to_the_only_policy_of_its_file() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let example = readme
        .split("## The language in one example")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .unwrap();
    let dir = std::env::temp_dir().join(format!("gatehouse-bind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mine = dir.join("mine.policy");
    std::fs::write(&mine, example).unwrap();
    let mine = mine.to_str().unwrap();
    for cmd in ["check", "test"] {
        let out = policyc(&[cmd, "policies/", mine]);
        assert!(
            out.status.success(),
            "{cmd}: {}{}",
            stdout(&out),
            stderr(&out)
        );
    }
    // Its two expectations ran, beside the shipped ones.
    let passed = |o: &Output| {
        let text = stdout(o);
        let n = text.split(" passed, 0 failed").next().unwrap_or_default();
        n.rsplit(char::is_whitespace)
            .next()
            .unwrap_or_default()
            .parse::<usize>()
            .unwrap()
    };
    let base = passed(&policyc(&["test", "policies/"]));
    assert_eq!(passed(&policyc(&["test", "policies/", mine])), base + 2);

    // Two policies in the file: the test must say which.
    let two = dir.join("two.policy");
    std::fs::write(
        &two,
        "policy one {\n  network off\n}\npolicy two {\n  network off\n}\n\
         test \"t\" {\n  expect deny connect a.test:443\n}\n",
    )
    .unwrap();
    let out = policyc(&["check", "policies/", two.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out) + &stdout(&out);
    assert!(err.contains("test_without_policy"), "{err}");
    assert!(err.contains("write `policy NAME` in the test"), "{err}");
    assert!(err.contains("(kiosk, coding-agent, "), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 37, item 7: what a newcomer writes from other systems' habits gets
/// the keyword gatehouse uses (`allow host x` → `domain`), a URL in a rule
/// the same "is a URL" help as in a query, and `policyc fmt -` formats
/// stdin to stdout, as editors pipe it.
#[test]
fn newcomers_words_get_the_keyword_and_stdin_is_formatted() {
    let dir = std::env::temp_dir().join(format!("gatehouse-words-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("words.policy");
    std::fs::write(
        &file,
        "policy w {\n  network {\n    allow host x.test\n    deny subnet 10.0.0.0/8\n    \
         permit domain y.test\n    allow domain https://z.test:8443/path\n    allow domain http://plain.test/\n  }\n}\n",
    )
    .unwrap();
    let o = policyc(&["check", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let text = stderr(&o) + &stdout(&o);
    for want in [
        "did you mean `domain`? (gatehouse calls it `domain`)",
        "did you mean `cidr`?",
        "did you mean `allow`?",
        "`https://z.test:8443/path` is a URL; a rule takes a host, not a URL: write `domain z.test port 8443`",
        "write `domain plain.test port 80`",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);

    let fmt = crate::common::policyc_with_stdin;
    let messy = "policy a {network{allow domain \"x.example\"}}\n";
    let o = fmt(&["fmt", "-"], messy);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "policy a {\n  network {\n    allow domain x.example\n  }\n}\n"
    );
    assert_eq!(fmt(&["fmt", "--check", "-"], messy).status.code(), Some(1));
    assert_eq!(
        fmt(&["fmt", "--check", "-"], &stdout(&o)).status.code(),
        Some(0)
    );
    let broken = fmt(
        &["fmt", "-"],
        "policy a {\n  network {\n    allow host x\n  }\n}\n",
    );
    assert_eq!(broken.status.code(), Some(1));
    assert_eq!(stdout(&broken), "");
    assert!(
        stderr(&broken).contains("<stdin>:3:11"),
        "{}",
        stderr(&broken)
    );
}

/// The README's first command prints what the README shows, and the
/// `not_allowed` denial it explains next carries `escalation: ask` under
/// the default approvals (issue 37, item 7).
#[test]
fn the_readme_first_command_prints_what_it_shows() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let shown = readme
        .split("It prints one JSON decision per query")
        .nth(1)
        .and_then(|s| s.split("```json\n").nth(1))
        .and_then(|s| s.split("\n```").next())
        .unwrap();
    let o = policyc(&[
        "eval",
        "policies/coding-agent.policy",
        "--query",
        "connect github.com:443",
    ]);
    assert_eq!(stdout(&o).trim_end(), shown);
    let o = policyc(&[
        "eval",
        "policies/coding-agent.policy",
        "--query",
        "connect example.com:443",
    ]);
    let d: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (&d["decision"], &d["reason"], &d["escalation"]),
        (
            &serde_json::json!("deny"),
            &serde_json::json!("not_allowed"),
            &serde_json::json!("ask")
        )
    );
    assert!(readme.contains("\"escalation\":\"ask\""));
}
