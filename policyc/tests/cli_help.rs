//! The command line as a newcomer meets it: `--help` everywhere, completions,
//! the README and docs/cli.md generated from the same definitions, parser
//! recovery on the common mistakes, and the CI formats (GitHub annotations,
//! JUnit, JSON, coverage). Set `BLESS=1` to rewrite the golden files.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common::{golden, policyc, stderr, stdout};

/// Every command, as `policyc` words, read from the `Commands:` lists of
/// `--help` itself (depth first), so a new command cannot be left out.
fn commands() -> Vec<Vec<String>> {
    fn walk(words: &[String], out: &mut Vec<Vec<String>>) {
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let h = help(&args);
        let Some(list) = h.split("\nCommands:\n").nth(1) else {
            return;
        };
        for line in list.lines().take_while(|l| !l.trim().is_empty()) {
            let Some(name) = line.split_whitespace().next() else {
                continue;
            };
            if name == "help" {
                continue;
            }
            let mut sub = words.to_vec();
            sub.push(name.to_string());
            out.push(sub.clone());
            walk(&sub, out);
        }
    }
    let mut out = Vec::new();
    walk(&[], &mut out);
    out
}

fn help(words: &[&str]) -> String {
    let mut args = words.to_vec();
    args.push("--help");
    let o = policyc(&args);
    assert_eq!(o.status.code(), Some(0), "{words:?}: {}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{words:?}");
    stdout(&o)
}

#[test]
fn every_command_answers_help_with_its_options_and_an_example() {
    let commands = commands();
    for words in [
        "keygen",
        "verify",
        "export cilium",
        "export srt",
        "import srt",
    ] {
        assert!(
            commands.iter().any(|c| c.join(" ") == words),
            "{words} missing from {commands:?}"
        );
    }
    for words in &commands {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let words = &words[..];
        let h = help(words);
        assert!(h.contains("Usage: policyc "), "{words:?}:\n{h}");
        // Leaf commands show an example; groups list their commands.
        if h.contains("Commands:") {
            continue;
        }
        assert!(h.contains("Options:"), "{words:?}:\n{h}");
        assert!(
            h.contains(&format!("Examples:\n  policyc {}", words.join(" "))),
            "{words:?} has no example:\n{h}"
        );
    }
    let top = help(&[]);
    for words in commands.iter().filter(|w| w.len() == 1) {
        assert!(top.contains(&format!("\n  {} ", words[0])), "{words:?}");
    }
    let v = policyc(&["--version"]);
    assert_eq!(
        stdout(&v),
        format!("policyc {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// docs/cli.md is `--help` of every command, so it cannot drift.
#[test]
fn docs_cli_md_is_generated_from_help() {
    let mut doc = String::from(
        "# The `policyc` command line\n\n\
         <!-- Generated from `policyc --help` by policyc/tests/cli_help.rs; \
         `BLESS=1 cargo test -p policyc docs_cli` rewrites it. -->\n\n\
         Every command prints this with `--help`. Shell completions: \
         `policyc completions bash|zsh|fish`.\n",
    );
    for words in std::iter::once(Vec::new()).chain(commands()) {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let title = if words.is_empty() {
            "policyc".to_string()
        } else {
            format!("policyc {}", words.join(" "))
        };
        doc.push_str(&format!("\n## {title}\n\n```text\n{}```\n", help(&words)));
    }
    crate::bless::golden("docs/cli.md", &doc, "cargo test -p policyc docs_cli");
}

#[test]
fn the_readme_command_block_is_policyc_help() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/..", "/README.md")).unwrap();
    let block = format!("```text\n$ policyc --help\n{}```", help(&[]));
    assert!(
        readme.contains(&block),
        "README.md's `policyc` block must be exactly:\n{block}"
    );
}

#[test]
fn completions_generate_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef policyc"),
        ("fish", "complete -c policyc"),
    ] {
        let o = policyc(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let s = stdout(&o);
        assert!(s.contains(marker), "{shell}: {s}");
        for word in ["check", "deny-warnings", "coverage", "sarif"] {
            assert!(s.contains(word), "{shell} lacks {word}");
        }
    }
    let o = policyc(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("[possible values: bash, zsh, fish]"));
}

#[test]
fn usage_errors_name_the_subcommand_not_the_whole_usage() {
    let o = policyc(&["check", "--formt", "json", "policies"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("a similar argument exists: '--format'"), "{e}");
    assert!(e.contains("Usage: policyc check"), "{e}");
    assert!(!e.contains("policyc eval"), "{e}");
    let o = policyc(&["import", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let o = policyc(&["export", "nft", "policies/egress-demo.policy"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'nftables'"), "{}", stderr(&o));
    // A usage error that only the command can see names its own help.
    let o = policyc(&[
        "eval",
        "policies/",
        "--policy",
        "coding-agnet",
        "--query",
        "upstream",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("did you mean `coding-agent`?"), "{e}");
    assert!(e.contains("try 'policyc eval --help'"), "{e}");
}

/// The common mistakes, each reported at its place, in one run.
#[test]
fn common_mistakes_are_all_reported_in_one_run() {
    let o = policyc(&["check", "tests/data/cli/common-mistakes.policy"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    golden("common_mistakes.txt", &e);
    let o = policyc(&[
        "check",
        "--format",
        "json",
        "tests/data/cli/common-mistakes.policy",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let got: Vec<(u64, u64, &str)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["line"].as_u64().unwrap(),
                d["column"].as_u64().unwrap(),
                d["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (4, 3, "unknown_statement"),   // `netwrok {`
            (6, 11, "syntax_error"),       // `domian`, inside the misspelled section
            (8, 22, "unknown_permission"), // `shell.exce`
            (13, 18, "unterminated_string"),
            (19, 23, "invalid_query"), // a URL where HOST:PORT goes
            (20, 47, "unknown_reason"),
            (24, 11, "unclosed_brace"), // at the brace, not at the end of the file
        ]
    );
    assert!(e.contains("did you mean `network`?"), "{e}");
    assert!(e.contains("did you mean `not_allowed`?"), "{e}");
    assert!(e.contains("write `github.com:443`"), "{e}");
}

#[test]
fn check_policies_reads_no_invalid_example_and_exclude_skips() {
    let o = policyc(&["check", "--deny-warnings", "policies/"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("ok: "), "{}", stdout(&o));
    let o = policyc(&["check", "examples/"]);
    assert_eq!(o.status.code(), Some(1));
    let o = policyc(&[
        "check",
        "--exclude",
        "mistakes",
        "--exclude",
        "examples/enterprise/**",
        "--exclude",
        "examples/host/**",
        "--exclude",
        "examples/diff/**",
        "examples/",
    ]);
    // Nothing left to read is an error, not an `ok` (issue 37, item 7).
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).starts_with("error: no .policy file in examples/ once --exclude has applied\n"),
        "{}",
        stderr(&o)
    );
    let empty = std::env::temp_dir().join(format!("gatehouse-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    for cmd in ["check", "test", "fmt"] {
        let o = policyc(&[cmd, empty.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("error: no .policy file in"),
            "{}",
            stderr(&o)
        );
    }
    let _ = std::fs::remove_dir(&empty);
    // examples/host is a set of its own (the enterprise requirements
    // would govern its policies if they were read as one set).
    let o = policyc(&[
        "check",
        "--exclude",
        "mistakes",
        "--exclude",
        "examples/host/**",
        "--exclude",
        "examples/diff/**",
        "examples/",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "ok: 2 policies in 2 files\n");
}

#[test]
fn github_annotations_golden() {
    let o = policyc(&[
        "check",
        "--format",
        "github",
        "tests/data/cli/common-mistakes.policy",
        "tests/data/lints.policy",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    golden("check.github.txt", &out);
    for line in out.lines() {
        assert!(
            line.starts_with("::error file=") || line.starts_with("::warning file="),
            "{line}"
        );
    }
}

#[test]
fn sarif_has_a_result_per_diagnostic_with_its_region() {
    let o = policyc(&[
        "check",
        "--format",
        "sarif",
        "tests/data/cli/common-mistakes.policy",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    golden("check.sarif", &stdout(&o));
    assert_eq!(v["version"], "2.1.0");
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    let r = &results[6];
    assert_eq!(r["ruleId"], "unclosed_brace");
    let region = &r["locations"][0]["physicalLocation"]["region"];
    assert_eq!(
        (region["startLine"].as_u64(), region["startColumn"].as_u64()),
        (Some(24), Some(11))
    );
}

#[test]
fn junit_and_json_test_reports() {
    let o = policyc(&["test", "--format", "junit", "tests/data/cli/tested.policy"]);
    assert_eq!(o.status.code(), Some(1));
    golden("test.junit.xml", &stdout(&o));
    let o = policyc(&[
        "test",
        "--format",
        "json",
        "--coverage",
        "tests/data/cli/tested.policy",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["passed"].as_u64(), v["failed"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(v["cases"][1]["passed"], false);
    assert_eq!(v["cases"][1]["actual"]["reason"], "allowed_by_rule");
    let c = &v["coverage"];
    assert_eq!(
        (c["rules"].as_u64(), c["decided"].as_u64()),
        (Some(3), Some(2))
    );
    let never = &c["files"][0]["never_decided"];
    assert_eq!(never[0]["line"], 4);
    assert_eq!(never[0]["source"], "allow domain b.example");
}

#[test]
fn coverage_of_the_shipped_policies_and_fail_under() {
    let o = policyc(&["test", "--coverage", "policies/"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains("\ncoverage: "), "{out}");
    assert!(
        out.contains("policies/coding-agent.policy: 4 of 4"),
        "{out}"
    );
    let o = policyc(&["test", "--coverage", "--fail-under", "75", "policies/"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = policyc(&["test", "--coverage", "--fail-under", "99.5", "policies/"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("under --fail-under 99.5%"),
        "{}",
        stderr(&o)
    );
    // --fail-under means nothing without --coverage.
    let o = policyc(&["test", "--fail-under", "50", "policies/"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn test_warns_when_there_is_no_test() {
    let o = policyc(&["test", "tests/data/cli/untested.policy"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "0 passed, 0 failed\n");
    assert!(
        stderr(&o).starts_with("warning: no `test` block"),
        "{}",
        stderr(&o)
    );
}
