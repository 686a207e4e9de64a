//! Properties (`properties { never allow connect 169.254.169.254:* }`)
//! checked by brute force: generated policies, each with claims drawn from
//! the shared vocabulary, every claim proved by `Build::prove` and then
//! tried on every query of a set built from every rule's boundaries and
//! random hosts, decided by the compiled engine and the reference
//! evaluator. A proof has no counterexample in the set; a counterexample
//! is one (it lies in the pattern and breaks the claim on both
//! evaluators); a claim over a sampled kind is never reported proved.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use gatehouse::diff::{PropertyCase, Verdict, outcome_class};
use gatehouse::query::{Query, Via};
use gatehouse::testing::{CIDRS, IPS, NAMES};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::diff::{PORTS, SOCKETS, Side, addrs, engine, names, oracle, side};
use crate::differential::policy;

const VIAS: [Via; 4] = [Via::Http, Via::Https, Via::Socks5, Via::Socks5Udp];

/// A claim's pattern, drawn from the vocabulary.
fn pattern(rng: &mut TestRng) -> String {
    let pick = |rng: &mut TestRng, v: &[&str]| v[rng.random_range(0..v.len())].to_string();
    let ports = |rng: &mut TestRng| match rng.random_range(0..5u8) {
        0 => ":*".to_string(),
        1 => ":443".into(),
        2 => ":80,8000-8999".into(),
        3 => ":22".into(),
        _ => String::new(),
    };
    match rng.random_range(0..12u8) {
        0..=2 => {
            let name = pick(rng, NAMES);
            let name = if name.is_ascii() {
                name
            } else {
                "xn--bcher-kva.example".into()
            };
            let host = match rng.random_range(0..3u8) {
                0 => name,
                1 => format!("*.{name}"),
                _ => format!("**.{name}"),
            };
            format!("connect {host}{}", ports(rng))
        }
        3 => {
            let ip = pick(rng, IPS);
            if ip.contains(':') {
                format!("connect [{ip}]{}", ports(rng))
            } else {
                format!("connect {ip}{}", ports(rng))
            }
        }
        4 => {
            let c = pick(rng, CIDRS);
            let p = ports(rng);
            match p.strip_prefix(':') {
                Some(list) => format!("connect cidr {c} port {list}"),
                None => format!("connect cidr {c}"),
            }
        }
        5 => format!("connect *{}", ports(rng)),
        6 => {
            let name = pick(rng, &NAMES[..8]);
            match rng.random_range(0..3u8) {
                0 => format!("dns {name}"),
                1 => format!("dns *.{name}"),
                _ => format!("dns **.{name}"),
            }
        }
        7 => match rng.random_range(0..3u8) {
            0 => "socket *".into(),
            1 => "socket \"/var/run/docker.sock\"".into(),
            _ => "socket \"/run/user/1000/bus\"".into(),
        },
        8 => pick(
            rng,
            &[
                "tool *",
                "tool shell.exec",
                "tool files.write",
                "upstream",
                "web_search",
            ],
        ),
        9 => pick(
            rng,
            &["prompt *", "prompt rules", "prompt sandbox_approval"],
        ),
        10 => pick(rng, &["app firefox", "app terminal", "app *", "app vim"]),
        _ => "dns *".into(),
    }
}

fn claim(rng: &mut TestRng) -> String {
    let q = if rng.random_bool(0.7) {
        "never"
    } else {
        "always"
    };
    let o = ["allow", "deny", "ask"][rng.random_range(0..3usize)];
    format!("{q} {o} {}", pattern(rng))
}

/// Every query of the brute-force set.
fn queries(rng: &mut TestRng, random: usize) -> Vec<Query> {
    let mut hosts = names(rng, random / 4);
    hosts.extend(addrs(rng, random / 4));
    hosts.extend([
        "gh-witness-0.example.com".to_string(),
        "WWW.GitHub.COM.".into(),
    ]);
    let mut out = Vec::new();
    for h in &hosts {
        out.push(Query::Dns { name: h.clone() });
        for &port in PORTS {
            for via in VIAS {
                out.push(Query::Connect {
                    host: h.clone(),
                    port,
                    via,
                });
            }
        }
    }
    for p in SOCKETS.iter().chain(&["/gh/other.sock"]) {
        out.push(Query::Socket {
            path: p.to_string(),
        });
    }
    for p in gatehouse::vocab::Permission::ALL {
        out.push(Query::Tool {
            permission: p.as_str().into(),
        });
    }
    for c in gatehouse::vocab::PromptCategory::ALL {
        out.push(Query::Prompt { category: *c });
    }
    out.push(Query::Upstream);
    out.push(Query::WebSearch);
    for p in [
        "firefox",
        "/usr/local/bin/firefox",
        "/Applications/Firefox.app/Contents/MacOS/firefox",
        "/terminal/vim",
        "/firefox/vim",
        "/opt/vim/terminal",
        "vim",
        "/usr/bin/nano",
    ] {
        out.push(Query::App {
            program: p.to_string(),
        });
    }
    out
}

/// The class of the reference evaluator's outcome word.
fn class_of(word: &str) -> &'static str {
    match word {
        "allow" | "approved" | "live" | "cached" => "allow",
        "ask" => "ask",
        "review" => "review",
        _ => "deny",
    }
}

fn check(s: &Side, case: &PropertyCase, queries: &[Query]) -> (usize, bool) {
    let set = s.build.set.as_ref().unwrap();
    let policy = set.single().unwrap();
    let verdict = s.build.prove(case, policy);
    let ctx = || format!("claim `{}`\n{}", case.text, s.text);
    let mut broken = None;
    let mut n = 0;
    for q in queries.iter().filter(|q| case.covers(q)) {
        n += 1;
        let d = policy.decide(q);
        if !case.holds(&d) {
            broken = Some(q.clone());
            break;
        }
        // The engine and the reference agree on it (the differential
        // tests hold that everywhere; here, on what the proof rests on).
        if let Some((outcome, _)) = oracle(s, q) {
            assert_eq!(
                class_of(&outcome),
                outcome_class(d.outcome),
                "query `{q}`\n{}",
                ctx()
            );
        }
    }
    match &verdict {
        Verdict::Proved { .. } => {
            assert!(
                broken.is_none(),
                "proved, but `{}` breaks it\n{}",
                broken.map(|q| q.to_string()).unwrap_or_default(),
                ctx()
            );
        }
        Verdict::Refuted { counterexample, .. } => {
            assert!(case.covers(counterexample), "`{counterexample}` {}", ctx());
            let d = policy.decide(counterexample);
            assert!(!case.holds(&d), "`{counterexample}` {}", ctx());
            let _ = engine(s, counterexample);
            if let Some((outcome, _)) = oracle(s, counterexample) {
                assert!(
                    (class_of(&outcome) == case.outcome) != case.always,
                    "the reference keeps the claim on `{counterexample}`\n{}",
                    ctx()
                );
            }
        }
        other => panic!("{other:?} for an exact kind\n{}", ctx()),
    }
    (n, matches!(verdict, Verdict::Proved { .. }))
}

#[test]
fn a_proof_has_no_counterexample_and_a_counterexample_is_one() {
    let policies = crate::diff::env("GATEHOUSE_PROPERTY_POLICIES", 16) as u32;
    let claims = crate::diff::env("GATEHOUSE_PROPERTY_CLAIMS", 24);
    let mut runner = TestRunner::new(Config {
        cases: policies,
        ..Config::default()
    });
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let random = crate::diff::env("GATEHOUSE_PROPERTY_RANDOM", 100);
    let queries = queries(&mut rng, random);
    let mut texts = Vec::new();
    for _ in 0..policies {
        let g = policy().new_tree(&mut runner).unwrap().current();
        let lines: Vec<String> = (0..claims).map(|_| claim(&mut rng)).collect();
        texts.push(format!(
            "{}properties {{\n  {}\n}}\n",
            g.text(),
            lines.join("\n  ")
        ));
    }
    // Two workers over the policies.
    let run = |chunk: &[String]| {
        let (mut tried, mut proved, mut total) = (0usize, 0usize, 0usize);
        for text in chunk {
            let s = side(text);
            let cases = s.build.properties();
            assert_eq!(cases.len(), claims, "{text}");
            for case in &cases {
                let (n, p) = check(&s, case, &queries);
                tried += n;
                proved += usize::from(p);
                total += 1;
            }
        }
        (tried, proved, total)
    };
    let (left, right) = texts.split_at(texts.len() / 2);
    let ((t1, p1, n1), (t2, p2, n2)) = std::thread::scope(|sc| {
        let l = sc.spawn(|| run(left));
        let r = run(right);
        (l.join().unwrap(), r)
    });
    let (tried, proved, total) = (t1 + t2, p1 + p2, n1 + n2);
    eprintln!(
        "properties: {total} claims, {proved} proved, {} queries in the set, {tried} tried in their patterns",
        queries.len()
    );
    // Both verdicts are exercised.
    assert!(proved > 0 && proved < total, "{proved} of {total}");
}

#[test]
fn commands_and_files_are_proved_scripts_sampled() {
    let s = side(
        "policy p {\n  sandbox workspace-write\n  approvals on-request\n}\n\
         properties {\n  never allow write \".git/**\"\n  never allow exec rm -rf *\n  never allow read \"/etc/**\"\n  never deny exec bash -lc *\n}\n",
    );
    let set = s.build.set.as_ref().unwrap();
    let p = set.single().unwrap();
    let verdicts: Vec<Verdict> = s
        .build
        .properties()
        .iter()
        .map(|c| s.build.prove(c, p))
        .collect();
    // Files are decided for every path, commands for every command line.
    assert!(
        matches!(verdicts[0], Verdict::Proved { cells } if cells > 0),
        "{verdicts:?}"
    );
    assert!(
        matches!(verdicts[1], Verdict::Proved { cells } if cells > 0),
        "{verdicts:?}"
    );
    // Reading /etc is allowed under workspace-write: refuted, with a path
    // drawn from the pattern.
    match &verdicts[2] {
        Verdict::Refuted { counterexample, .. } => {
            assert!(
                counterexample.to_string().starts_with("read \"/etc"),
                "{counterexample}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A shell wrapper's scripts are drawn: never proved.
    assert!(
        matches!(verdicts[3], Verdict::NotRefuted { sampled } if sampled > 0),
        "{verdicts:?}"
    );
}

/// `exec` claims over every command line beginning with some words,
/// proved on the command-rule trie: checked against brute force like the
/// rest (the command lines of `tests/diff.rs`).
#[test]
fn exec_claims_on_agent_policies() {
    let policies = crate::diff::env("GATEHOUSE_PROPERTY_POLICIES", 16) as u32;
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[9; 32]);
    let random = crate::diff::env("GATEHOUSE_DIFF_RANDOM", 100);
    let queries = crate::diff_agent::exec_queries(&mut rng, random.max(500));
    let patterns: Vec<String> = [
        "exec rm -rf *",
        "exec rm *",
        "exec git push *",
        "exec git *",
        "exec /usr/bin/git *",
        "exec ./git *",
        "exec sudo *",
        "exec cargo *",
        "exec cargo publish",
        "exec ls",
        "exec ls *",
        "exec sed -n *",
        "exec python3 -m pytest *",
        "exec env *",
        "exec curl *",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    let (proved, total) = agent_claims(policies, 12, &patterns, &queries);
    eprintln!("properties (exec): {total} claims, {proved} proved");
    assert!(proved > 0 && proved < total, "{proved} of {total}");
}

#[test]
fn mcp_and_prompt_claims_on_agent_policies() {
    let policies = crate::diff::env("GATEHOUSE_PROPERTY_POLICIES", 16) as u32 * 3;
    let queries =
        crate::diff_agent::agent_queries(&["github", "slack", "other", "GitHub", "gh-witness-0"]);
    let patterns = [
        "mcp github/delete_repo",
        "mcp github",
        "mcp */delete_repo",
        "mcp *",
        "mcp slack/post",
        "mcp other/*",
        "prompt *",
        "prompt rules",
        "web_search",
    ];
    let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
    let (proved, total) = agent_claims(policies, 12, &patterns, &queries);
    eprintln!("properties (agent kinds): {total} claims, {proved} proved");
    assert!(proved > 0 && proved < total, "{proved} of {total}");
}

#[test]
fn file_claims_on_agent_policies() {
    let policies = crate::diff::env("GATEHOUSE_PROPERTY_POLICIES", 16) as u32 / 2;
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut queries = Vec::new();
    for path in crate::diff_files::paths(&mut rng, 200) {
        let (workspace, home) = (
            Some(gatehouse::diff::SAMPLE_WORKSPACE.to_string()),
            Some(gatehouse::diff::SAMPLE_HOME.to_string()),
        );
        queries.push(Query::Write {
            path: path.clone(),
            workspace: workspace.clone(),
            home: home.clone(),
        });
        queries.push(Query::Read {
            path,
            workspace,
            home,
        });
    }
    let globs = [
        "\".git/**\"",
        "\".git\"",
        "\"~/.ssh\"",
        "\"secrets/**\"",
        "\"**/*.env\"",
        "\"/etc/**\"",
        "\"/tmp/**\"",
        "\"~/.cache/x\"",
        "\"src/[!m]*.rs\"",
        "\"/\"",
        "\"**/.git/hooks/**\"",
    ];
    let patterns: Vec<String> = globs
        .iter()
        .flat_map(|g| [format!("write {g}"), format!("read {g}")])
        .collect();
    let (proved, total) = agent_claims(policies, 10, &patterns, &queries);
    eprintln!("properties (files): {total} claims, {proved} proved");
    assert!(proved > 0 && proved < total, "{proved} of {total}");
}

/// `per` claims on each of `policies` generated agent policies, each
/// `never|always OUTCOME` and one of `patterns`, checked against
/// `queries`; (proved, claims).
fn agent_claims(
    policies: u32,
    per: usize,
    patterns: &[String],
    queries: &[Query],
) -> (usize, usize) {
    let mut runner = TestRunner::new(Config {
        cases: policies,
        ..Config::default()
    });
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let agents = crate::agent_differential::policy();
    let (mut proved, mut total) = (0, 0);
    for _ in 0..policies {
        let g = agents.new_tree(&mut runner).unwrap().current();
        let lines: Vec<String> = (0..per)
            .map(|_| {
                let q = if rng.random_bool(0.6) {
                    "never"
                } else {
                    "always"
                };
                let o = ["allow", "deny", "ask"][rng.random_range(0..3usize)];
                let p = &patterns[rng.random_range(0..patterns.len())];
                format!("{q} {o} {p}")
            })
            .collect();
        let text = format!("{}properties {{\n  {}\n}}\n", g.text(), lines.join("\n  "));
        let s = side(&text);
        for case in &s.build.properties() {
            let (_, p) = check(&s, case, queries);
            proved += usize::from(p);
            total += 1;
        }
    }
    (proved, total)
}
