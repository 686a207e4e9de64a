//! `policyc diff` over `write` and `read`, against brute force: pairs of
//! generated agent policies (file rules of every kind: literal and glob,
//! anchored at the root, the workspace and the home, nested; every
//! sandbox mode), and every path of a set built around each rule's path —
//! itself, a child, a grandchild, its parent, case variants, glob
//! instances, `.git` below each root at several depths — and random ones,
//! in the workspace and home the diff binds, decided by the compiled
//! engine and the reference evaluator: a query lies in a region exactly
//! when its decision changed, with the region's decisions; every witness
//! changes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::BTreeSet;

use gatehouse::diff::{Key, SAMPLE_HOME, SAMPLE_WORKSPACE};
use gatehouse::query::Query;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::diff::{engine, oracle, side};

/// Segments that rules name or that globs match or almost match.
const SEGMENTS: &[&str] = &[
    "a",
    "b.env",
    ".env",
    "x.pem",
    "key",
    "kay",
    "src",
    "main.rs",
    "lib.rs",
    "vendor",
    "docs",
    "secrets",
    "public",
    "tmp",
    "out",
    "cache",
    ".cache",
    ".ssh",
    "id_rsa",
    ".git",
    ".GIT",
    "hooks",
    "config",
    "objects",
    "pre-commit",
    ".secrets",
    ".agents",
    ".zerocode",
    "Cargo.lock",
    "etc",
    "shadow",
    "w",
    "build",
    "é.env",
    "[x]",
];

/// The paths around every rule and root, and random ones.
pub(crate) fn paths(rng: &mut TestRng, random: usize) -> Vec<String> {
    let roots = [
        "/".to_string(),
        SAMPLE_WORKSPACE.to_string(),
        SAMPLE_HOME.to_string(),
        "/tmp".into(),
        "/tmp/cache".into(),
        "/var/cache/build".into(),
        "/etc".into(),
        "/w".into(),
        "/w/src/vendor".into(),
        format!("{SAMPLE_WORKSPACE}/secrets"),
        format!("{SAMPLE_WORKSPACE}/secrets/public"),
        format!("{SAMPLE_WORKSPACE}/secrets/tmp"),
        format!("{SAMPLE_WORKSPACE}/out"),
        format!("{SAMPLE_WORKSPACE}/docs"),
        format!("{SAMPLE_WORKSPACE}/src"),
        format!("{SAMPLE_HOME}/.ssh"),
        format!("{SAMPLE_HOME}/.cache"),
    ];
    let mut out = BTreeSet::new();
    for r in &roots {
        out.insert(r.clone());
        let base = r.trim_end_matches('/');
        for a in SEGMENTS {
            out.insert(format!("{base}/{a}"));
            for b in ["hooks", "config", "x", "k9y", "m.rs", ".env"] {
                out.insert(format!("{base}/{a}/{b}"));
            }
            out.insert(format!("{base}/sub/{a}/hooks/pre-commit"));
        }
        if let Some((parent, _)) = base.rsplit_once('/') {
            out.insert(if parent.is_empty() {
                "/".into()
            } else {
                parent.to_string()
            });
        }
    }
    for _ in 0..random {
        let root = &roots[rng.random_range(0..roots.len())];
        let depth = rng.random_range(1..5);
        let mut p = root.trim_end_matches('/').to_string();
        for _ in 0..depth {
            p.push('/');
            p.push_str(SEGMENTS[rng.random_range(0..SEGMENTS.len())]);
        }
        out.insert(p);
    }
    out.into_iter().collect()
}

#[test]
fn file_regions_are_exactly_the_paths_whose_decision_changed() {
    let pairs = crate::diff::env("GATEHOUSE_DIFF_PAIRS", 12) as u32;
    let mut runner = TestRunner::new(Config {
        cases: pairs,
        ..Config::default()
    });
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let agents = crate::agent_differential::policy();
    let paths = paths(&mut rng, crate::diff::env("GATEHOUSE_DIFF_RANDOM", 100));
    let generated: Vec<(String, String)> = (0..pairs)
        .map(|_| {
            let a = agents.new_tree(&mut runner).unwrap().current();
            let b = agents.new_tree(&mut runner).unwrap().current();
            (a.text(), b.text())
        })
        .collect();
    // Two workers over the pairs.
    let (left, right) = generated.split_at(generated.len() / 2);
    let ((r1, t1, c1), (r2, t2, c2)) = std::thread::scope(|s| {
        let l = s.spawn(|| check(left, &paths));
        let r = check(right, &paths);
        (l.join().unwrap(), r)
    });
    let (regions, tried, changed) = (r1 + r2, t1 + t2, c1 + c2);
    eprintln!(
        "diff (files): {pairs} pairs, {regions} exact regions, {tried} queries, {changed} changed"
    );
    assert!(changed > 0 && regions > 0);
}

/// Checks each pair against every path; (regions, queries, changed).
fn check(pairs: &[(String, String)], paths: &[String]) -> (usize, usize, usize) {
    let (mut regions, mut tried, mut changed) = (0, 0, 0);
    for (a, b) in pairs {
        let (old, new) = (side(a), side(b));
        let diff = gatehouse::diff::diff(&old.build, &new.build).unwrap();
        let ctx = || format!("old:\n{}\nnew:\n{}", old.text, new.text);
        let p = &diff.policies[0];
        assert!(!p.files_sampled(), "{}", ctx());
        for r in p.regions.iter().filter(|r| !r.sampled) {
            regions += 1;
            assert_ne!(
                engine(&old, &r.witness),
                engine(&new, &r.witness),
                "witness {}\n{}",
                r.witness,
                ctx()
            );
        }
        for path in paths {
            for write in [true, false] {
                let (workspace, home) = (
                    Some(SAMPLE_WORKSPACE.to_string()),
                    Some(SAMPLE_HOME.to_string()),
                );
                let q = if write {
                    Query::Write {
                        path: path.clone(),
                        workspace,
                        home,
                    }
                } else {
                    Query::Read {
                        path: path.clone(),
                        workspace,
                        home,
                    }
                };
                tried += 1;
                let (x, y) = (engine(&old, &q), engine(&new, &q));
                changed += usize::from(x != y);
                let region = diff.region_of("p", &q);
                assert_eq!(
                    region.is_some(),
                    x != y,
                    "query `{q}`: old {x:?} new {y:?}, region {:?}\n{}",
                    region.map(|r| &r.description),
                    ctx()
                );
                if let Some(r) = region {
                    assert!(!r.sampled);
                    assert_eq!(
                        (x, y),
                        (Key::of(&r.old), Key::of(&r.new)),
                        "query `{q}` in `{}`\n{}",
                        r.description,
                        ctx()
                    );
                }
                // What the reference sees change is in a region too (one
                // query in eight: the reference is slow on files).
                if tried % 8 == 0
                    && let (Some(rx), Some(ry)) = (oracle(&old, &q), oracle(&new, &q))
                    && rx.0 != ry.0
                {
                    assert!(region.is_some(), "query `{q}`\n{}", ctx());
                }
            }
        }
    }
    (regions, tried, changed)
}
