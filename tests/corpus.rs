//! One decision corpus, replayed by every engine: `tests/corpus/*.jsonl`.
//!
//! Each line is one case, engine-independent data: the policy set (a file
//! or a folder of the repository), the policy, the query in its text form,
//! the outcome, the reason and the deciding rule (`file:line`, or `null`
//! for a default). The cases are the `expect` lines of the sets below —
//! every example of docs/language.md (`tests/data/docs-language/`), the
//! regression sets of `tests/data/`, the shipped policies — so a person
//! wrote each outcome; the rule is the engine's, checked by the reference.
//!
//! Replayed here by the engine (the corpus must equal what the engine says
//! of every `expect`; `BLESS=1` rewrites it) and by the reference evaluator
//! (reading the corpus, not the test blocks); by `policyc eval`
//! (`policyc/tests/corpus.rs`), the WASM build under node
//! (`wasm/tests/corpus.test.mjs`) and the Python binding
//! (`bindings/python/tests/test_corpus.py`), each part of `.ci/run`. A
//! changed outcome in the corpus fails every one of them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::BTreeMap;

use gatehouse::testing::ast::{Block, Item};
use gatehouse::{Query, SourceMap};
use serde_json::{Value, json};

use crate::bless::{golden, repo};
use crate::reference::RefPolicy;

/// The policy sets whose `expect` lines make the corpus. The shipped
/// policies are added file by file.
const SETS: &[&str] = &[
    "tests/data/docs-language",
    "tests/data/spec.policy",
    "tests/data/spec-agent.policy",
    "tests/data/spec-requirements",
    "tests/data/rulings.policy",
    "tests/data/rulings-29.policy",
    "tests/data/rulings-29-agreed",
    "tests/data/rulings-29-granular",
    "tests/data/rulings-51.policy",
    "tests/data/adversarial.policy",
    "tests/data/messy.policy",
    "examples/enterprise",
];

fn sets() -> Vec<String> {
    let mut out: Vec<String> = SETS.iter().map(|s| s.to_string()).collect();
    let mut shipped: Vec<String> = std::fs::read_dir(repo().join("policies"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".policy"))
        .map(|n| format!("policies/{n}"))
        .collect();
    shipped.sort();
    out.extend(shipped);
    out
}

/// The corpus file of a set: `tests/corpus/` and the set's path without
/// `tests/data/` and `.policy`, `/` as `.`.
fn corpus_file(set: &str) -> String {
    let name = set
        .trim_start_matches("tests/data/")
        .trim_end_matches(".policy")
        .replace('/', ".");
    format!("tests/corpus/{name}.jsonl")
}

/// The files of a set, as (repository-relative name, text), sorted.
fn files(set: &str) -> Vec<(String, String)> {
    let full = repo().join(set);
    let mut names: Vec<String> = if full.is_dir() {
        std::fs::read_dir(&full)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".policy"))
            .map(|n| format!("{set}/{n}"))
            .collect()
    } else {
        vec![set.to_string()]
    };
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(repo().join(&n)).unwrap();
            (n, text)
        })
        .collect()
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).unwrap_or(text).matches('\n').count() + 1
}

#[test]
fn the_engine_decides_every_case_of_the_corpus() {
    let mut total = 0;
    for set in sets() {
        let mut sources = SourceMap::new();
        for (name, text) in files(&set) {
            sources.add(name, text);
        }
        let b = gatehouse::build(sources);
        assert!(!b.has_errors(), "{set}:\n{}", b.render());
        let policies = b.set.as_ref().unwrap();
        let mut out = String::new();
        for case in b.tests() {
            let p = case.policy_in(policies).unwrap();
            let d = p.decide(&case.query);
            assert!(
                case.passes(&d),
                "{}:{}: the engine disagrees with the expectation",
                case.file,
                case.line
            );
            let r = policies.report(p, &d);
            let rule = r.rule.map(|r| format!("{}:{}", r.file, r.line));
            let line = json!({
                "set": set,
                "policy": p.name(),
                "query": case.query.to_string(),
                "decision": r.decision,
                "reason": r.reason,
                "rule": rule,
            });
            // The text form reads back as the same query.
            assert_eq!(
                Query::parse(&case.query.to_string()).ok().as_ref(),
                Some(&case.query),
                "{}:{}",
                case.file,
                case.line
            );
            out.push_str(&line.to_string());
            out.push('\n');
            total += 1;
        }
        golden(&corpus_file(&set), &out, "cargo test --test main corpus");
    }
    assert!(total > 500, "only {total} cases");
}

/// Every corpus line, as (set, fields).
pub fn corpus() -> Vec<BTreeMap<String, Value>> {
    let mut out = Vec::new();
    for set in sets() {
        let text = std::fs::read_to_string(repo().join(corpus_file(&set))).unwrap();
        for line in text.lines() {
            out.push(serde_json::from_str(line).unwrap());
        }
    }
    out
}

#[test]
fn the_reference_evaluator_decides_every_case_of_the_corpus() {
    let mut by_set: BTreeMap<String, Vec<BTreeMap<String, Value>>> = BTreeMap::new();
    for case in corpus() {
        by_set
            .entry(case["set"].as_str().unwrap().to_string())
            .or_default()
            .push(case);
    }
    let (mut total, mut rules) = (0, 0);
    for (set, cases) in by_set {
        let files = files(&set);
        let asts: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, (_, text))| {
                let (ast, diags) =
                    gatehouse::testing::parse_file(gatehouse::source::FileId(i as u32), text);
                assert!(diags.is_empty(), "{set}");
                ast
            })
            .collect();
        let blocks = |want: fn(&Item) -> Option<&Block>| -> Vec<&Block> {
            asts.iter()
                .flat_map(|a| &a.items)
                .filter_map(want)
                .collect()
        };
        let policies = blocks(|i| match i {
            Item::Policy(b) => Some(b),
            _ => None,
        });
        let reqs = blocks(|i| match i {
            Item::Requirements(b) => Some(b),
            _ => None,
        });
        for case in cases {
            let name = case["policy"].as_str().unwrap();
            let block = policies
                .iter()
                .find(|b| b.name.node == name)
                .unwrap_or_else(|| panic!("{set}: no policy {name}"));
            let oracle = RefPolicy {
                block,
                reqs: reqs.clone(),
            };
            let text = case["query"].as_str().unwrap();
            let q = Query::parse(text).unwrap();
            let r = oracle
                .decide(&q)
                .unwrap_or_else(|| panic!("{set}: the reference cannot decide `{text}`"));
            assert_eq!(
                (r.outcome, r.reason),
                (
                    case["decision"].as_str().unwrap(),
                    case["reason"].as_str().unwrap()
                ),
                "{set} {name}: `{text}`"
            );
            // The deciding rule: the reference gives the statement's offset;
            // the block that holds it names the file.
            if let Some(at) = r.rule_at {
                let want = case["rule"].as_str();
                let got: Vec<String> = files
                    .iter()
                    .map(|(f, t)| format!("{f}:{}", line_of(t, at as usize)))
                    .collect();
                assert!(
                    want.is_some_and(|w| got.iter().any(|g| g == w)),
                    "{set} {name}: `{text}`: the reference's rule is at one of {got:?}, the corpus says {want:?}"
                );
                rules += 1;
            }
            total += 1;
        }
    }
    assert!(total > 500 && rules > 200, "{total} cases, {rules} rules");
}
