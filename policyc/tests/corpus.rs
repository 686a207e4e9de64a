//! The decision corpus (`tests/corpus/*.jsonl`, see `tests/corpus.rs`)
//! through `policyc eval`, one process per policy, every query streamed in
//! its text form: the outcome, the reason and the deciding rule's
//! `file:line` must be the corpus's.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::repo;

#[test]
fn policyc_eval_decides_every_case_of_the_corpus() {
    let mut groups: BTreeMap<(String, String), Vec<BTreeMap<String, Value>>> = BTreeMap::new();
    let mut files: Vec<_> = std::fs::read_dir(repo().join("tests/corpus"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            let case: BTreeMap<String, Value> = serde_json::from_str(line).unwrap();
            let key = (
                case["set"].as_str().unwrap().to_string(),
                case["policy"].as_str().unwrap().to_string(),
            );
            groups.entry(key).or_default().push(case);
        }
    }
    let mut total = 0;
    for ((set, policy), cases) in groups {
        let input: String = cases
            .iter()
            .map(|c| format!("{}\n", c["query"].as_str().unwrap()))
            .collect();
        let out = crate::common::policyc_with_stdin(
            &["eval", &set, "--policy", &policy, "--queries", "-"],
            &input,
        );
        assert_eq!(out.status.code(), Some(0), "{set} {policy}");
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), cases.len(), "{set} {policy}");
        for (case, line) in cases.iter().zip(lines) {
            let v: Value = serde_json::from_str(line).unwrap();
            let rule = match &v["rule"] {
                Value::Null => Value::Null,
                r => Value::String(format!("{}:{}", r["file"].as_str().unwrap(), r["line"])),
            };
            assert_eq!(
                (&v["decision"], &v["reason"], &rule),
                (&case["decision"], &case["reason"], &case["rule"]),
                "{set} {policy}: `{}`",
                case["query"]
            );
            total += 1;
        }
    }
    assert!(total > 500, "only {total} cases");
}
