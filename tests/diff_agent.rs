//! `gatehouse::diff` on the agent's kinds (issue 57) against brute force:
//! pairs of generated agent policies (sandbox, approvals, reviewer, mcp,
//! commands, guardian), every MCP call, prompt and web search, and command
//! lines from every generated rule's prefixes with tails and random ones;
//! a query lies in a region exactly when its decision differs (a shell
//! wrapper's script, sampled, in none).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::BTreeSet;

use gatehouse::diff::{Change, Kind};
use gatehouse::query::Query;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRng, TestRunner};

use crate::diff::{engine, env, oracle, side};

/// The agent's finite kinds (`mcp` over every server, tool and annotation
/// combination; `prompt`; `web_search`) on pairs of generated agent
/// policies (sandbox, approvals, reviewer, mcp, commands, guardian), the
/// same way: a query lies in a region exactly when its decision differs.
/// Every MCP call to these servers' sample tools under every combination
/// of annotations, every prompt category, and a web search.
pub(crate) fn agent_queries(servers: &[&str]) -> Vec<Query> {
    let mut queries = Vec::new();
    for s in servers {
        for t in ["delete_repo", "post", "list", "other"] {
            for a in 0..27 {
                queries.push(Query::Mcp {
                    server: (*s).into(),
                    tool: t.into(),
                    annotations: gatehouse::diff::annotations(a),
                });
            }
        }
    }
    for c in gatehouse::vocab::PromptCategory::ALL {
        queries.push(Query::Prompt { category: *c });
    }
    queries.push(Query::WebSearch);
    queries
}

/// Words for command lines: every word of the generated command rules,
/// the words the built-in tests single out, and plain ones.
const EXEC_WORDS: &[&str] = &[
    "x",
    "/",
    "origin",
    "main",
    "-rf",
    "-f",
    "-fr",
    "--force",
    "--fo",
    "-r",
    "-o",
    "-ofile",
    "--output",
    "--out=x",
    "-z",
    "-nz",
    "--pre",
    "-exec",
    "-delete",
    "-fprint=x",
    "-n",
    "1p",
    "1,5p",
    "p",
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "--list",
    "-a",
    "-d",
    "push",
    "pull",
    "--format=%(refname)",
    "-C",
    "-Cdir",
    "--no-pager",
    "-c",
    "--paginate",
    "--exec",
    "rm",
    "/bin/rm",
    "sudo",
    "env",
    "FOO=1",
    "timeout",
    "5",
    "nice",
    "-m",
    "pytest",
    "build",
    "-la",
    "publish",
    "--",
    "",
];

/// Programs: each generated rule's, bare, in a system directory and
/// elsewhere, the built-in tests' (known-safe, `rm`, wrappers, shells),
/// and others.
const EXEC_PROGRAMS: &[&str] = &[
    "git",
    "/usr/bin/git",
    "/bin/git",
    "./git",
    "/tmp/git",
    "rm",
    "/bin/rm",
    "./rm",
    "sudo",
    "/usr/bin/sudo",
    "env",
    "timeout",
    "nice",
    "cargo",
    "/usr/bin/cargo",
    "./cargo",
    "/usr/bin/make",
    "/bin/make",
    "python",
    "python3",
    "/usr/bin/python3",
    "/tmp/python3",
    "curl",
    "ls",
    "/bin/ls",
    "./ls",
    "cat",
    "sed",
    "/bin/sed",
    "find",
    "rg",
    "base64",
    "echo",
    "chmod",
    "bash",
    "sh",
    "/bin/bash",
    "./bash",
    "dash",
    "zsh",
    "make",
    "",
];

/// Command lines for brute force: every generated rule's prefixes and
/// whole words (with each program spelling) followed by each of a few
/// tails, and `random` random ones of up to six words from the shared
/// vocabulary; each with and without `escalate`.
pub(crate) fn exec_queries(rng: &mut TestRng, random: usize) -> Vec<Query> {
    let mut argvs: BTreeSet<Vec<String>> = BTreeSet::new();
    let tails: &[&[&str]] = &[
        &[],
        &["x"],
        &["-rf", "/"],
        &["-f"],
        &["--force"],
        &["rm", "-rf", "x"],
        &["-o", "f"],
        &["status"],
        &["-C", "d", "status"],
        &["1p", "f"],
        &["-exec", "x"],
        &["--list"],
    ];
    for rule in gatehouse::testing::COMMAND_RULES {
        let words: Vec<&str> = rule
            .split(" because ")
            .next()
            .unwrap()
            .split_whitespace()
            .skip(1)
            .collect();
        // `[a b]` alternatives: the first of each.
        let words: Vec<String> = words
            .iter()
            .map(|w| w.trim_start_matches('[').trim_end_matches(']').to_string())
            .filter(|w| !w.is_empty())
            .collect();
        for k in 1..=words.len() {
            let name = words[0].rsplit('/').next().unwrap().to_string();
            for program in [
                words[0].clone(),
                name.clone(),
                format!("/usr/bin/{name}"),
                format!("./{name}"),
            ] {
                for tail in tails {
                    let argv: Vec<String> = std::iter::once(program.clone())
                        .chain(words[1..k].iter().cloned())
                        .chain(tail.iter().map(|t| t.to_string()))
                        .collect();
                    argvs.insert(argv);
                }
            }
        }
    }
    for _ in 0..random {
        let len = rng.random_range(0..6);
        let mut argv = vec![EXEC_PROGRAMS[rng.random_range(0..EXEC_PROGRAMS.len())].to_string()];
        for _ in 0..len {
            argv.push(EXEC_WORDS[rng.random_range(0..EXEC_WORDS.len())].to_string());
        }
        argvs.insert(argv);
    }
    argvs
        .into_iter()
        .flat_map(|argv| {
            [false, true].map(|escalate| Query::Exec {
                argv: argv.clone(),
                escalate,
            })
        })
        .collect()
}

#[test]
fn agent_regions_are_exactly_the_queries_whose_decision_changed() {
    let pairs = env("GATEHOUSE_DIFF_PAIRS", 12) as u32 * 4;
    let mut runner = TestRunner::new(Config {
        cases: pairs,
        ..Config::default()
    });
    let agents = crate::agent_differential::policy();
    let mut rng = TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha);
    let random = env("GATEHOUSE_DIFF_RANDOM", 100);
    let mut queries = agent_queries(&["github", "slack", "other", "GitHub"]);
    queries.extend(exec_queries(&mut rng, random));
    let (mut regions, mut sampled) = (0, 0);
    for _ in 0..pairs {
        let a = agents.new_tree(&mut runner).unwrap().current();
        let b = agents.new_tree(&mut runner).unwrap().current();
        let (old, new) = (side(&a.text()), side(&b.text()));
        let diff = gatehouse::diff::diff(&old.build, &new.build).unwrap();
        let ctx = || format!("old:\n{}\nnew:\n{}", old.text, new.text);
        for r in &diff.policies[0].regions {
            regions += 1;
            sampled += usize::from(r.sampled);
            // Sampled exactly for the kinds not decided for every query.
            let review_sampled = diff.policies[0].review_sampled() && r.kind == Kind::Review;
            assert_eq!(
                r.sampled,
                !r.kind.is_exact() || review_sampled,
                "{}",
                r.description
            );
            // A changed outcome is a change for the reference too.
            if let (Some(x), Some(y)) = (oracle(&old, &r.witness), oracle(&new, &r.witness))
                && r.change != Change::Reason
            {
                assert_ne!(x.0, y.0, "witness {}\n{}", r.witness, ctx());
            }
            assert_ne!(
                engine(&old, &r.witness),
                engine(&new, &r.witness),
                "{}",
                ctx()
            );
        }
        for q in &queries {
            // A shell wrapper's script is sampled: no region holds it.
            if !Kind::of(q).is_exact() {
                continue;
            }
            let (x, y) = (engine(&old, q), engine(&new, q));
            let region = diff.region_of("p", q);
            assert_eq!(
                region.is_some(),
                x != y,
                "query `{q}`: old {x:?} new {y:?}, region {:?}\n{}",
                region.map(|r| &r.description),
                ctx()
            );
            if let (Some(rx), Some(ry)) = (oracle(&old, q), oracle(&new, q))
                && rx != ry
            {
                assert!(
                    region.is_some(),
                    "query `{q}`: reference {rx:?} -> {ry:?}\n{}",
                    ctx()
                );
            }
        }
    }
    eprintln!(
        "diff (agent kinds): {pairs} pairs of {} queries, {regions} regions, {sampled} sampled",
        queries.len()
    );
}
