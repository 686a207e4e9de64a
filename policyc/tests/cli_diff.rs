//! `policyc diff` (issue 57) as a user runs it: the example of
//! docs/diff.md, printed exactly as the doc shows it; the JSON and
//! Markdown forms; the exit codes; `--base` against a git history.

use crate::common::{policyc, stderr, stdout};

const OLD: &str = "examples/diff/old.policy";
const NEW: &str = "examples/diff/new.policy";

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn in_root(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

#[test]
fn the_docs_example_is_what_it_prints() {
    let o = in_root(&["diff", OLD, NEW]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = std::fs::read_to_string(root().join("docs/diff.md")).unwrap();
    let marker = format!("`policyc diff {OLD} {NEW}` prints\n\n```\n");
    let at = doc.find(&marker).expect("docs/diff.md shows the example") + marker.len();
    let shown = &doc[at..at + doc[at..].find("```\n").unwrap()];
    assert_eq!(stdout(&o), shown, "docs/diff.md's example is out of date");
    // And the proof's.
    let o = in_root(&["prove", "--implies", NEW, OLD]);
    let marker = format!("$ policyc prove --implies {NEW} {OLD}\n");
    let at = doc.find(&marker).expect("docs/diff.md shows prove") + marker.len();
    let shown = &doc[at..at + doc[at..].find("```\n").unwrap()];
    assert_eq!(
        stdout(&o),
        shown,
        "docs/diff.md's prove example is out of date"
    );
}

/// Files are compared for every path and commands for every command line
/// (regions not sampled), a shell wrapper's scripts on drawn queries
/// (sampled); each witness is decided as the region says
/// on each side (asked through `policyc eval`).
#[test]
fn file_and_command_regions() {
    let dir = std::env::temp_dir().join(format!("gatehouse-diff-sampled-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let old = dir.join("old.policy");
    let new = dir.join("new.policy");
    std::fs::write(
        &old,
        "policy p {\n  sandbox workspace-write {\n    none \"~/.ssh\"\n  }\n  commands {\n    prompt git push\n  }\n}\n",
    )
    .unwrap();
    std::fs::write(
        &new,
        "policy p {\n  sandbox workspace-write {\n    writable \"~/.cache\"\n    none \"**/*.env\"\n  }\n  commands {\n    allow git push\n    forbid rm -rf\n  }\n}\n",
    )
    .unwrap();
    let (o, n) = (old.to_str().unwrap(), new.to_str().unwrap());
    let out = policyc(&["diff", "--format", "json", o, n]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let regions = v["policies"][0]["regions"].as_array().unwrap();
    let kinds: std::collections::BTreeSet<&str> = regions
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["exec", "read", "script", "write"].into_iter().collect(),
        "{regions:?}"
    );
    for r in regions {
        assert_eq!(r["sampled"], r["kind"] == "script", "{r}");
        let q = r["witness"].as_str().unwrap();
        let decide = |path: &str| {
            let e = policyc(&["eval", path, "--query", q]);
            let d: serde_json::Value = serde_json::from_slice(&e.stdout).unwrap();
            (d["decision"].clone(), d["reason"].clone())
        };
        let (before, after) = (decide(o), decide(n));
        assert_ne!(before, after, "{q}");
        assert_eq!(before.0, r["old"]["decision"], "{q}");
        assert_eq!(after.0, r["new"]["decision"], "{q}");
    }
    // The opening of `git push` is found for every command line, and of
    // `./git push` (the old prompt rule applied to any `git`, the new
    // allow rule only to one in a system directory); scripts are sampled.
    let text = stdout(&policyc(&["diff", o, n]));
    assert!(
        text.contains(
            "opens  exec git push with or without escalate and every command line decided by the same rules"
        ),
        "{text}"
    );
    assert!(
        text.contains("opens  exec ./git push without escalate and every command line"),
        "{text}"
    );
    assert!(text.contains("sampled (drawn queries, not every one): script, review_script"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Past the file DFA's bounds (here, globs spanning any depth), `write`
/// and `read` are sampled, and the output says so for that policy.
#[test]
fn too_many_file_rules_are_sampled_and_said_so() {
    let dir = std::env::temp_dir().join(format!("gatehouse-diff-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules: String = (0..8)
        .map(|i| format!("    none \"**/k{i}*.env\"\n"))
        .collect();
    let old = dir.join("old.policy");
    let new = dir.join("new.policy");
    std::fs::write(
        &old,
        format!("policy p {{\n  sandbox workspace-write {{\n{rules}  }}\n}}\n"),
    )
    .unwrap();
    std::fs::write(
        &new,
        format!(
            "policy p {{\n  sandbox workspace-write {{\n{rules}    none \"**/*.pem\"\n  }}\n}}\n"
        ),
    )
    .unwrap();
    let (o, n) = (old.to_str().unwrap(), new.to_str().unwrap());
    let text = stdout(&policyc(&["diff", o, n]));
    assert!(
        text.contains(
            "policy p: write and read sampled: its file rules are too many for the exact comparison"
        ),
        "{text}"
    );
    assert!(
        text.contains("closes write \"/workspace/project/x.pem\""),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&policyc(&["diff", "--format", "json", o, n]).stdout).unwrap();
    assert_eq!(v["files_sampled"], serde_json::json!(["p"]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The properties example of docs/diff.md, as it prints: proved against
/// the old policy, refuted (with the rule) against the new one.
#[test]
fn the_docs_properties_example_is_what_it_prints() {
    let doc = std::fs::read_to_string(root().join("docs/diff.md")).unwrap();
    let props = "examples/diff/properties.policy";
    for (side, code) in [(OLD, 0), (NEW, 1)] {
        let o = in_root(&["prove", side, props]);
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
        let marker = format!("$ policyc prove {side} {props}\n");
        let at = doc.find(&marker).expect("docs/diff.md shows prove PATH") + marker.len();
        let shown = &doc[at..at + doc[at..].find("```\n").unwrap()];
        assert_eq!(
            stdout(&o),
            shown,
            "docs/diff.md's properties example is out of date"
        );
    }
    // Every claim of the example is proved: --fail-on unproved passes.
    let o = in_root(&["prove", "--fail-on", "unproved", OLD, props]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A claim a shell wrapper's script may follow is only sampled, and
    // fails the run under --fail-on unproved.
    let dir = std::env::temp_dir().join(format!("gatehouse-prove-script-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("script.policy");
    std::fs::write(&script, "properties {\n  never deny exec sh -c *\n}\n").unwrap();
    let script = script.to_str().unwrap();
    let o = in_root(&["prove", OLD, script]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("not refuted (sampled "),
        "{}",
        stdout(&o)
    );
    let o = in_root(&["prove", "--fail-on", "unproved", OLD, script]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
    // JSON: one record per claim and policy.
    let o = in_root(&["prove", "--format", "json", NEW, props]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let verdicts: Vec<&str> = v["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        verdicts,
        ["refuted", "proved", "proved", "proved", "proved", "proved"]
    );
    assert_eq!(
        v["properties"][0]["counterexample"]["query"],
        "connect 169.254.169.254:443 via http"
    );
    // `policyc test` runs them too: the refuted claim fails it.
    let o = in_root(&["test", NEW, props]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("counterexample: connect 169.254.169.254:443 via http"),
        "{}",
        stdout(&o)
    );
    let o = in_root(&["test", OLD, props]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).ends_with("properties: 6 proved, 0 refuted, 0 not refuted (sampled)\n"),
        "{}",
        stdout(&o)
    );
}

/// Past the command trie's bound (here, one rule of five positions with
/// ten alternatives each: 111 110 prefixes), `exec` is sampled, and the
/// output says so for that policy.
#[test]
fn too_many_command_prefixes_are_sampled_and_said_so() {
    let dir = std::env::temp_dir().join(format!("gatehouse-diff-cmds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let alts = |c: char| {
        let v: Vec<String> = (0..10).map(|i| format!("{c}{i}")).collect();
        format!("[{}]", v.join(" "))
    };
    let rule: Vec<String> = "abcde".chars().map(alts).collect();
    let old = dir.join("old.policy");
    let new = dir.join("new.policy");
    let text = |extra: &str| {
        format!(
            "policy p {{\n  commands {{\n    allow {}\n{extra}  }}\n}}\n",
            rule.join(" ")
        )
    };
    std::fs::write(&old, text("")).unwrap();
    std::fs::write(&new, text("    forbid git push\n")).unwrap();
    let (o, n) = (old.to_str().unwrap(), new.to_str().unwrap());
    let text = stdout(&policyc(&["diff", o, n]));
    assert!(
        text.contains(
            "policy p: exec sampled: its command rules make too many prefixes for the exact comparison"
        ),
        "{text}"
    );
    assert!(text.contains("closes exec git push"), "{text}");
    let v: serde_json::Value =
        serde_json::from_slice(&policyc(&["diff", "--format", "json", o, n]).stdout).unwrap();
    assert_eq!(v["exec_sampled"], serde_json::json!(["p"]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_markdown_and_exit_codes() {
    let o = in_root(&["diff", "--format", "json", OLD, NEW]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["opens"], true);
    // Three regions open for connect and dns, and two for `resolved`: an
    // allowed name answering with the newly allowed metadata address, and
    // the newly allowed names answering at all. Nothing is sampled.
    assert_eq!(v["summary"]["opened"], 5);
    let regions = v["policies"][0]["regions"].as_array().unwrap();
    assert!(regions.iter().all(|r| r["sampled"] == false), "{regions:?}");
    let r = &v["policies"][0]["regions"][0];
    assert_eq!(r["change"], "opens");
    assert_eq!(r["kind"], "connect");
    assert_eq!(r["sampled"], false);
    assert_eq!(r["new"]["rule"]["line"], 5);
    assert!(r["witness"].as_str().unwrap().starts_with("connect "));
    assert_eq!(v["not_compared"], serde_json::json!([]));
    assert_eq!(v["sampled"], serde_json::json!(["script", "review_script"]));
    assert!(v["compared"].as_array().unwrap().contains(&"review".into()));
    assert_eq!(v["review_sampled"], serde_json::json!([]));
    let resolved: Vec<&serde_json::Value> = regions
        .iter()
        .filter(|r| r["kind"] == "resolved" && r["change"] == "opens")
        .collect();
    assert_eq!(resolved.len(), 2, "{resolved:?}");
    assert!(
        resolved
            .iter()
            .any(|r| r["witness"] == "resolved github.com -> 169.254.169.254"),
        "{resolved:?}"
    );
    // Markdown for a pull request; --fail-on opened fails it.
    let o = in_root(&[
        "diff",
        "--format",
        "markdown",
        "--fail-on",
        "opened",
        OLD,
        NEW,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o)
            .contains("| **opens** | `connect *.amazonaws.com port 443 (except s3.amazonaws.com)`")
    );
    // The reverse only closes: --fail-on opened passes, changed fails.
    assert_eq!(
        in_root(&["diff", "--fail-on", "opened", NEW, OLD])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        in_root(&["diff", "--fail-on", "changed", NEW, OLD])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        in_root(&["diff", "--fail-on", "changed", OLD, OLD])
            .status
            .code(),
        Some(0)
    );
    // Usage, and a side that does not build.
    assert_eq!(policyc(&["diff", OLD]).status.code(), Some(2));
    let d = std::env::temp_dir().join(format!("gatehouse-diff-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let broken = d.join("broken.policy");
    std::fs::write(&broken, "policy agent { network { allow nonsense } }\n").unwrap();
    let o = in_root(&["diff", OLD, broken.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("does not build"), "{}", stderr(&o));
}

#[test]
fn base_reads_the_old_side_from_git() {
    let d = std::env::temp_dir().join(format!("gatehouse-diff-git-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("policies")).unwrap();
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(["-c", "user.email=t@t", "-c", "user.name=t"])
            .args(args)
            .current_dir(&d)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    };
    git(&["init", "-q"]);
    std::fs::copy(root().join(OLD), d.join("policies/agent.policy")).unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "old"]);
    std::fs::copy(root().join(NEW), d.join("policies/agent.policy")).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(["diff", "--base", "HEAD", "--fail-on", "opened", "policies/"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("opens  connect 169.254.169.254\n"), "{out}");
    assert!(
        out.contains("now allow (allowed_by_rule, policies/agent.policy:7:5)"),
        "{out}"
    );
    assert!(out.contains("was deny (local_address)"), "{out}");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(["diff", "--base", "--upload-pack=x", "policies/"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn prove_equivalence_and_implication_with_a_counterexample() {
    let o = in_root(&["prove", "--equivalent", OLD, OLD]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("policy agent: proved: A and B are equivalent over connect, dns")
    );
    assert!(stdout(&o).contains("sampled (drawn queries, not every one): script, review_script"));
    let o = in_root(&["prove", "--equivalent", OLD, NEW]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("refuted: not equivalent\n  counterexample: connect "),
        "{out}"
    );
    // Adding rules that allow: the old policy implies the new, not the reverse.
    assert_eq!(
        in_root(&["prove", "--implies", OLD, NEW]).status.code(),
        Some(0)
    );
    let o = in_root(&["prove", "--format", "json", "--implies", NEW, OLD]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["policies"][0]["proved"], false);
    let cx = &v["policies"][0]["counterexample"];
    assert!(cx["a"].as_str().unwrap().starts_with("allow"), "{cx}");
    assert!(!cx["b"].as_str().unwrap().starts_with("allow"), "{cx}");
    // The counterexample really is one: eval agrees on both sides.
    let q = cx["query"].as_str().unwrap();
    let a = in_root(&["eval", NEW, "--query", q]);
    let b = in_root(&["eval", OLD, "--query", q]);
    assert!(
        stdout(&a).contains("\"decision\":\"allow\""),
        "{}",
        stdout(&a)
    );
    assert!(
        stdout(&b).contains("\"decision\":\"deny\""),
        "{}",
        stdout(&b)
    );
    // Kinds not compared are no proof under --fail-on unproved.
    assert_eq!(
        in_root(&["prove", "--fail-on", "unproved", "--equivalent", OLD, OLD])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(policyc(&["prove"]).status.code(), Some(2));
    // Paths alone prove their properties; a set with none says so.
    let o = in_root(&["prove", OLD]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("no `properties` block"),
        "{}",
        stderr(&o)
    );
    // Paths and a claim between two sets do not mix.
    assert_eq!(
        policyc(&["prove", OLD, "--equivalent", OLD, NEW])
            .status
            .code(),
        Some(2)
    );
}

/// Every shipped policy against itself: nothing changes, for every policy
/// of the folder, and `--fail-on changed` passes.
#[test]
fn the_shipped_policies_against_themselves_change_nothing() {
    let o = in_root(&["diff", "--fail-on", "changed", "policies/", "policies/"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let policies: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("policy ") && !l.contains(" sampled: "))
        .collect();
    assert!(policies.len() > 5, "{out}");
    assert!(policies.iter().all(|l| l.ends_with(": no change")), "{out}");
    // A guardian with regular expressions is said to be sampled.
    assert!(
        out.contains("policy reviewed: review sampled: a guardian has a regular expression"),
        "{out}"
    );
    assert!(
        out.contains("0 regions opened, 0 closed, 0 changed reason; 0 policies added, 0 removed")
    );
}
