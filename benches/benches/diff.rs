//! `policyc diff` on two 10 000-rule policies (issue 57: under a second on
//! one core): 5 000 domain and 5 000 CIDR rules, a fifth of them with
//! ports, and the new side a pull request's worth of edits away (50 rules
//! removed, 50 added, 50 flipped between allow and deny); and on two
//! 10 000-rule `commands` blocks the same way (programs real and made up,
//! bare and as paths, subcommands, flags), compared for every command
//! line.

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

/// A `commands` block of `n` distinct rules: 40 real programs (git, rm,
/// sed, sudo, ... — the built-in tests' among them) and made-up ones,
/// a few written as paths, each with a subcommand and often a flag or an
/// argument, effects mixed (half allow, a third prompt, the rest forbid).
fn commands_policy(n: usize, seed: u64) -> String {
    const PROGRAMS: &[&str] = &[
        "git",
        "npm",
        "cargo",
        "docker",
        "kubectl",
        "python3",
        "pip",
        "make",
        "curl",
        "wget",
        "rm",
        "sed",
        "find",
        "rg",
        "ls",
        "cat",
        "sudo",
        "env",
        "timeout",
        "ssh",
        "scp",
        "rsync",
        "tar",
        "go",
        "node",
        "yarn",
        "pnpm",
        "terraform",
        "helm",
        "aws",
        "gcloud",
        "az",
        "gh",
        "jq",
        "chmod",
        "chown",
        "mv",
        "cp",
        "base64",
        "/usr/bin/git",
    ];
    const SUBS: &[&str] = &[
        "status", "log", "diff", "push", "pull", "commit", "install", "run", "build", "test",
        "publish", "deploy", "apply", "delete", "get", "exec", "-rf", "-n", "-C", "--force", "add",
        "remove", "update", "init", "login", "logout", "show", "branch", "checkout", "reset",
    ];
    const ARGS: &[&str] = &[
        "--force",
        "-f",
        "--all",
        "origin",
        "main",
        "-y",
        "--dry-run",
        "--global",
        "-o",
        "1p",
        "/",
        ".",
        "x",
        "--prod",
        "-v",
        "--yes",
        "-exec",
        "--output",
        "prod",
        "staging",
    ];
    let mut rng = Rng::new(seed);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = String::from("policy p {\n  approvals untrusted\n  commands {\n");
    while seen.len() < n {
        let program = if rng.below(3) == 0 {
            format!("tool{}", rng.below(300))
        } else {
            PROGRAMS[rng.below(PROGRAMS.len() as u64) as usize].to_string()
        };
        let mut words = vec![
            program,
            SUBS[rng.below(SUBS.len() as u64) as usize].to_string(),
        ];
        if rng.below(3) > 0 {
            words.push(ARGS[rng.below(ARGS.len() as u64) as usize].to_string());
        }
        if rng.below(4) == 0 {
            words.push(format!("a{}", rng.below(50)));
        }
        let line = words.join(" ");
        if seen.insert(line.clone()) {
            let effect = match rng.below(6) {
                0..=2 => "allow",
                3 | 4 => "prompt",
                _ => "forbid",
            };
            out.push_str(&format!("    {effect} {line}\n"));
        }
    }
    out.push_str("  }\n}\n");
    out
}

/// The commands policy after a pull request's edits: 50 rules' effects
/// changed, 50 removed, 50 added.
fn edited_commands(old: &str) -> String {
    let mut rng = Rng::new(58);
    let mut lines: Vec<String> = old.lines().map(str::to_string).collect();
    let rules: Vec<usize> = (0..lines.len())
        .filter(|&i| {
            let t = lines[i].trim_start();
            t.starts_with("allow ") || t.starts_with("prompt ") || t.starts_with("forbid ")
        })
        .collect();
    for k in 0..50 {
        let i = rules[(rng.below(rules.len() as u64) as usize + k) % rules.len()];
        let l = lines[i].clone();
        lines[i] = if l.contains("allow ") {
            l.replacen("allow ", "forbid ", 1)
        } else {
            l.replacen("prompt ", "allow ", 1)
                .replacen("forbid ", "prompt ", 1)
        };
    }
    for k in 0..50 {
        let i = rules[(rng.below(rules.len() as u64) as usize + 7 * k) % rules.len()];
        lines[i] = String::new();
    }
    let at = lines.iter().position(|l| l.contains("commands {")).unwrap() + 1;
    for k in 0..50 {
        lines.insert(at, format!("    allow newtool{k} deploy --prod"));
    }
    lines.retain(|l| !l.is_empty());
    lines.join("\n") + "\n"
}

/// A guardian as the shipped ones are, without regular expressions: path
/// rules on credentials and hooks, command prefixes, hosts and tools.
const GUARDIAN: &str = r#"policy agent {
  guardian {
    risk high credential_probing path "**/.ssh/**" "**/.aws/credentials" "**/.env" "**/*.pem"
    risk high security_weakening path "**/.git/hooks/**" "**/.bashrc" "**/.zshrc"
    risk high destructive command rm -rf
    risk critical destructive command [rm /bin/rm] [-rf -fr] /
    risk high exfiltration command [scp rsync]
    risk medium exfiltration command curl
    risk high security_weakening command chmod 777
    risk low exfiltration host **.pastebin.com *.ngrok.io
    risk high destructive tool github/delete_repo
    deny category exfiltration
    deny command git push --force
    deny tool */delete_repo
    authorize high with medium
  }
}
"#;

/// The claims `policyc prove` checks in the bench, for every policy.
const PROPERTIES: &str = r#"
properties "the agent stays inside" {
  never allow connect 169.254.169.254:*
  never allow connect cidr 10.0.0.0/8
  always deny dns *.internal
  never allow connect *.amazonaws.com:22
  never allow write ".git/hooks/**"
  never allow exec rm -rf *
}
"#;

/// Every claim of `b` proved for every policy of `b`: what `policyc
/// prove` does.
fn prove_all(b: &gatehouse::Build) -> usize {
    let set = b.set.as_ref().unwrap();
    let mut proved = 0;
    for case in b.properties() {
        for p in set.policies() {
            if matches!(b.prove(&case, p), gatehouse::diff::Verdict::Proved { .. }) {
                proved += 1;
            }
        }
    }
    proved
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
    let mut kinds: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in d.policies.iter().flat_map(|p| &p.regions) {
        *kinds.entry(r.kind.as_str()).or_default() += 1;
    }
    eprintln!(
        "diff bench: {} and {} lines, {regions} regions {kinds:?}",
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
    let old = commands_policy(10_000, 11);
    let new = edited_commands(&old);
    let (a, b) = (build(&old), build(&new));
    let d = gatehouse::diff::diff(&a, &b).unwrap();
    let regions: usize = d.policies.iter().map(|p| p.regions.len()).sum();
    assert!(d.policies.iter().all(|p| !p.exec_sampled()));
    eprintln!(
        "diff bench (commands): {} and {} lines, {regions} regions",
        old.lines().count(),
        new.lines().count()
    );
    g.bench_function("10k_command_rules_pr", |bench| {
        bench.iter(|| gatehouse::diff::diff(black_box(&a), black_box(&b)).unwrap())
    });
    // A guardian edited: reviews compared for every action.
    let new = GUARDIAN.replace(
        "    deny category exfiltration\n",
        "    deny category exfiltration\n    risk critical credential_probing path \"~/.aws/*\"\n",
    );
    let (a, b) = (build(GUARDIAN), build(&new));
    let d = gatehouse::diff::diff(&a, &b).unwrap();
    assert!(d.policies.iter().all(|p| !p.review_sampled()));
    eprintln!(
        "diff bench (guardian): {} regions",
        d.policies.iter().map(|p| p.regions.len()).sum::<usize>()
    );
    g.bench_function("guardian_pr", |bench| {
        bench.iter(|| gatehouse::diff::diff(black_box(&a), black_box(&b)).unwrap())
    });
    // `policyc prove`: six claims over each 10 000-rule policy.
    for (name, text) in [
        ("prove_10k_rules", old_policy()),
        ("prove_10k_command_rules", commands_policy(10_000, 11)),
    ] {
        let b = build(&(text + PROPERTIES));
        eprintln!("{name}: {} claims proved", prove_all(&b));
        g.bench_function(name, |bench| bench.iter(|| prove_all(black_box(&b))));
    }
    // The fixed cost: a policy with no rules against itself.
    let a = build("policy agent {\n}\n");
    g.bench_function("empty", |bench| {
        bench.iter(|| gatehouse::diff::diff(black_box(&a), black_box(&a)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, diff);
criterion_main!(benches);
