//! `policyc diff` on two 10 000-rule policies (issue 57: under a second on
//! one core): 5 000 domain and 5 000 CIDR rules, a fifth of them with
//! ports, and the new side a pull request's worth of edits away (50 rules
//! removed, 50 added, 50 flipped between allow and deny).

#![allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse::source::SourceMap;
use gatehouse_benches::{Rng, domain, mixed_policy};
use std::hint::black_box;

/// The 10 000-rule policy, a fifth of its rules given ports.
fn old_policy() -> String {
    let ports = [
        " port 443",
        " port 80,443",
        " port 8000-8999",
        " port 22",
        " port 5432",
    ];
    mixed_policy(5_000)
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let ruled = l.trim_start().starts_with("allow ") || l.trim_start().starts_with("deny ");
            if ruled && i % 5 == 0 {
                format!("{l}{}\n", ports[i / 5 % ports.len()])
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// The old policy after a pull request's edits.
fn edited(old: &str) -> String {
    let mut rng = Rng::new(57);
    let mut lines: Vec<String> = old.lines().map(str::to_string).collect();
    let rules: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(" domain ") || lines[i].contains(" cidr "))
        .collect();
    for k in 0..50 {
        let i = rules[(rng.below(rules.len() as u64) as usize + k) % rules.len()];
        let l = lines[i].clone();
        lines[i] = if l.contains("allow ") {
            l.replacen("allow ", "deny ", 1)
        } else {
            l.replacen("deny ", "allow ", 1)
        };
    }
    for k in 0..50 {
        let i = rules[(rng.below(rules.len() as u64) as usize + 7 * k) % rules.len()];
        lines[i] = String::new();
    }
    let at = lines
        .iter()
        .position(|l| l.contains("default deny"))
        .unwrap()
        + 1;
    for _ in 0..50 {
        let d = domain(&mut rng);
        lines.insert(at, format!("    allow domain *.{d} port 443"));
    }
    lines.retain(|l| !l.is_empty());
    lines.join("\n") + "\n"
}

fn build(text: &str) -> gatehouse::Build {
    let mut sources = SourceMap::new();
    sources.add("bench.policy", text);
    let b = gatehouse::build(sources);
    assert!(!b.has_errors(), "{}", b.render());
    b
}

fn diff(c: &mut Criterion) {
    let old = old_policy();
    let new = edited(&old);
    let (a, b) = (build(&old), build(&new));
    let d = gatehouse::diff::diff(&a, &b).unwrap();
    let regions: usize = d.policies.iter().map(|p| p.regions.len()).sum();
    eprintln!(
        "diff bench: {} and {} lines, {regions} regions",
        old.lines().count(),
        new.lines().count()
    );
    let mut g = c.benchmark_group("diff");
    g.sample_size(10);
    g.bench_function("10k_rules_pr", |bench| {
        bench.iter(|| gatehouse::diff::diff(black_box(&a), black_box(&b)).unwrap())
    });
    g.bench_function("10k_rules_same", |bench| {
        bench.iter(|| gatehouse::diff::diff(black_box(&a), black_box(&a)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, diff);
criterion_main!(benches);
