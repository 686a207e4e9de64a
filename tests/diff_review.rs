//! `gatehouse::diff` on `review` (issue 57) against brute force: pairs of
//! generated guardians without regular expressions (prefix rules with
//! alternatives and paths among their words, path globs, host patterns,
//! tools, deny rules, levels), and reviews of actions built to walk around
//! them — `..`, `.`, `//` and NUL in paths, programs by basename, hosts
//! in hostile spellings, wrappers — under every assessment. A review lies
//! in a region exactly when its decision differs (a wrapper's, sampled,
//! in none); every witness differs, for the reference evaluator too.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use gatehouse::diff::{Change, Kind};
use gatehouse::query::{Annotations, Assessment, Query, ReviewOutcome, ReviewStatus, Via};
use gatehouse::vocab::{AuthLevel, RiskCategory, RiskLevel};
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

use crate::diff::{engine, env, oracle, side};

/// Guardian rules without a regular expression.
const RULES: &[&str] = &[
    "risk high credential_probing path \"**/.ssh/**\" \"**/.env\"",
    "risk critical credential_probing path \"~/.aws/credentials\"",
    "risk medium security_weakening path \"/etc/*\"",
    "risk high destructive path \"**/.git/hooks/**\"",
    "risk low exfiltration path \"*.pem\" \"a/b\"",
    "risk high destructive command rm -rf",
    "risk critical destructive command [rm /bin/rm] [-rf -fr] /",
    "risk medium destructive command git [push pull] --force",
    "risk high security_weakening command chmod 777",
    "risk medium exfiltration command curl",
    "risk critical exfiltration command ./run.sh",
    "risk high destructive command sudo",
    "risk low destructive command cat ~/.ssh/id_rsa",
    "risk high destructive tool github/delete_repo",
    "risk medium destructive tool github/*",
    "risk low exfiltration tool */post",
    "risk low exfiltration host **.pastebin.com",
    "risk high exfiltration host *.example.com",
    "risk medium credential_probing host metadata.internal",
    "risk critical exfiltration host *",
    "deny category exfiltration",
    "deny category credential_probing",
    "deny command git push --force",
    "deny command env",
    "deny path \"**/id_rsa\"",
    "deny tool */delete_repo",
    "deny host evil.example.com",
    "allow medium",
    "allow low",
    "authorize high with high",
    "authorize high with low",
];

fn guardian(rng: &mut TestRng) -> String {
    let n = rng.random_range(0..7);
    let mut lines: Vec<&str> = (0..n)
        .map(|_| RULES[rng.random_range(0..RULES.len())])
        .collect();
    // `allow` and `authorize` once each.
    let mut once = std::collections::BTreeSet::new();
    lines.sort_unstable();
    lines.retain(|l| {
        let head = l.split_whitespace().next().unwrap_or_default();
        !(head == "allow" || head == "authorize") || once.insert(head)
    });
    format!(
        "policy p {{\n  guardian {{\n{}\n  }}\n}}\n",
        lines
            .iter()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// Words of paths that walk around the globs.
const PATHS: &[&str] = &[
    "~/.ssh/id_rsa",
    "~/.ssh/..",
    "~/.ssh/../.aws/credentials",
    "~/x/../.aws/credentials",
    "~/.aws/./credentials",
    "~//.aws/credentials",
    "~/.aws/credentials/",
    "/etc/passwd",
    "/etc/x/..",
    "/etc/../etc/shadow",
    "//etc/hosts",
    "/./etc/x",
    "/..",
    "/",
    "",
    ".",
    "..",
    "../a/b",
    "a/b",
    "a/./b",
    "a/c/../b",
    "./a/b",
    "k.pem",
    "x/../k.pem",
    ".pem",
    "w/.git/hooks/pre-commit",
    "w/.git/hooks",
    "w/.git/x/../hooks/y",
    "w/.env",
    ".env",
    "~/.env/..",
    "a\0/../b",
    "~/.ssh\0",
    "/x/id_rsa",
    "id_rsa",
    "~/id_rsa/..",
];

const PROGRAMS: &[&str] = &[
    "rm",
    "/bin/rm",
    "/usr/bin/rm",
    "./rm",
    "x/../rm",
    "git",
    "/usr/bin/git",
    "chmod",
    "curl",
    "./run.sh",
    "run.sh",
    "/w/run.sh",
    "././run.sh",
    "sudo",
    "env",
    "cat",
    "ls",
    "bash",
    "sh",
    "gh-word",
];

const WORDS: &[&str] = &[
    "-rf",
    "-fr",
    "/",
    "push",
    "pull",
    "--force",
    "777",
    "~/.ssh/id_rsa",
    "x",
    "-c",
    "-lc",
    "ls",
    "rm -rf /",
    "git push --force",
];

const HOSTS: &[&str] = &[
    "paste.pastebin.com",
    "pastebin.com",
    "PASTEBIN.com.",
    "a.example.com",
    "example.com",
    "evil.example.com",
    "EVIL.example.com",
    "metadata.internal",
    "x.metadata.internal",
    "10.0.0.1",
    "[::1]",
    "169.254.169.254",
    "0x7f.1",
    "a b.example.com",
    "bücher.example.com",
    "github.com",
];

fn actions(rng: &mut TestRng, random: usize) -> Vec<Query> {
    let mut out = Vec::new();
    for p in PATHS {
        out.push(Query::Write {
            path: (*p).into(),
            workspace: Some("/w".into()),
            home: Some("/home/a".into()),
        });
        out.push(Query::Exec {
            argv: vec!["cat".into(), (*p).into()],
            escalate: false,
        });
    }
    for h in HOSTS {
        out.push(Query::Connect {
            host: (*h).into(),
            port: 443,
            via: Via::Https,
        });
        out.push(Query::Dns { name: (*h).into() });
    }
    for s in ["github", "slack", "GitHub"] {
        for t in ["delete_repo", "post", "list"] {
            out.push(Query::Mcp {
                server: s.into(),
                tool: t.into(),
                annotations: Annotations::default(),
            });
        }
    }
    out.push(Query::Upstream);
    for _ in 0..random {
        let mut argv = vec![PROGRAMS[rng.random_range(0..PROGRAMS.len())].to_string()];
        for _ in 0..rng.random_range(0..5) {
            let w = if rng.random_bool(0.3) {
                PATHS[rng.random_range(0..PATHS.len())]
            } else {
                WORDS[rng.random_range(0..WORDS.len())]
            };
            argv.push(w.to_string());
        }
        out.push(Query::Exec {
            argv,
            escalate: false,
        });
    }
    out
}

/// A spread of assessments: every risk and status, each category and
/// authorization, the reviewer's own verdict both ways.
fn assessments() -> Vec<Assessment> {
    let mut out = Vec::new();
    for risk in RiskLevel::ALL {
        for (i, auth) in AuthLevel::ALL.iter().enumerate() {
            for outcome in [ReviewOutcome::Allow, ReviewOutcome::Deny] {
                out.push(Assessment {
                    risk: Some(*risk),
                    category: RiskCategory::ALL.get(i).copied(),
                    user_authorization: Some(*auth),
                    outcome: Some(outcome),
                    status: Some(ReviewStatus::Ok),
                });
            }
        }
    }
    out.push(Assessment::default());
    out.push(Assessment {
        status: Some(ReviewStatus::Failed),
        ..Assessment::default()
    });
    out
}

#[test]
fn review_regions_are_exactly_the_reviews_whose_decision_changed() {
    let pairs = env("GATEHOUSE_DIFF_PAIRS", 3);
    let random = env("GATEHOUSE_DIFF_RANDOM", 150);
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let assessments = assessments();
    let (mut regions, mut queries, mut sampled) = (0, 0, 0);
    for _ in 0..pairs {
        let (a, b) = (guardian(&mut rng), guardian(&mut rng));
        let (old, new) = (side(&a), side(&b));
        let diff = gatehouse::diff::diff(&old.build, &new.build).unwrap();
        let p = &diff.policies[0];
        assert!(!p.review_sampled(), "no regular expression:\n{a}\n{b}");
        let ctx = || format!("old:\n{a}\nnew:\n{b}");
        for r in &p.regions {
            regions += 1;
            sampled += usize::from(r.sampled);
            assert_eq!(r.sampled, !r.kind.is_exact(), "{}", r.description);
            assert_ne!(
                engine(&old, &r.witness),
                engine(&new, &r.witness),
                "{}",
                ctx()
            );
            if let (Some(x), Some(y)) = (oracle(&old, &r.witness), oracle(&new, &r.witness))
                && r.change != Change::Reason
            {
                assert_ne!(x.0, y.0, "witness {}\n{}", r.witness, ctx());
            }
        }
        for action in actions(&mut rng, random) {
            for assessment in &assessments {
                let q = Query::Review {
                    action: Box::new(action.clone()),
                    assessment: assessment.clone(),
                };
                queries += 1;
                let (x, y) = (engine(&old, &q), engine(&new, &q));
                if Kind::of(&q) == Kind::ReviewScript {
                    assert!(diff.region_of("p", &q).is_none());
                    continue;
                }
                let region = diff.region_of("p", &q);
                assert_eq!(
                    region.is_some(),
                    x != y,
                    "review `{q}`: old {x:?} new {y:?}, region {:?}\n{}",
                    region.map(|r| &r.description),
                    ctx()
                );
                if let (Some(rx), Some(ry)) = (oracle(&old, &q), oracle(&new, &q)) {
                    assert_eq!(rx != ry, x != y, "review `{q}`: reference\n{}", ctx());
                }
            }
        }
    }
    eprintln!(
        "diff (review): {pairs} pairs, {queries} reviews, {regions} regions, {sampled} sampled"
    );
}

/// A guardian with a regular expression is sampled, and says so.
#[test]
fn a_regular_expression_samples_reviews() {
    let a = "policy p {\n  guardian {\n    risk high destructive command ~ r\"rm\\s\"\n  }\n}\n";
    let b = "policy p {\n  guardian {\n    risk high destructive command rm\n  }\n}\n";
    let (old, new) = (side(a), side(b));
    let diff = gatehouse::diff::diff(&old.build, &new.build).unwrap();
    assert!(diff.policies[0].review_sampled());
    let (old, new) = (side(b), side(b));
    let diff = gatehouse::diff::diff(&old.build, &new.build).unwrap();
    assert!(!diff.policies[0].review_sampled());
    assert!(diff.policies[0].regions.is_empty());
}
