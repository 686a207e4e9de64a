//! `gatehouse::diff` (issue 57) against brute force: pairs of generated
//! policies, and for every query of a large set — every rule's boundaries
//! (the names around each pattern, the addresses around each prefix's
//! ends, the ports around each range's ends) and random ones — the
//! decisions of both sides by the compiled engine and by the reference
//! evaluator. A query lies in a reported region exactly when its decision
//! (outcome, reason, escalation) differs; every witness differs; nothing
//! covered so far is sampled.
//!
//! `GATEHOUSE_DIFF_PAIRS` and `GATEHOUSE_DIFF_RANDOM` raise the pairs and
//! the random queries per pair (CI: 12 pairs of over 190 000 queries).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use gatehouse::diff::{Change, Key, Kind};
use gatehouse::query::{Query, Via};
use gatehouse::source::SourceMap;
use gatehouse::testing::ast::Item;
use gatehouse::testing::{CIDRS, IPS, NAMES};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRng, TestRunner};

use crate::differential::{Gen, policy};
use crate::reference;

pub(crate) struct Side {
    pub(crate) build: gatehouse::Build,
    pub(crate) file: gatehouse::testing::ast::File,
    pub(crate) text: String,
}

pub(crate) fn side(text: &str) -> Side {
    let mut sources = SourceMap::new();
    let id = sources.add("gen.policy", text);
    let build = gatehouse::build(sources);
    assert!(!build.has_errors(), "{text}\n{}", build.render());
    let (file, _) = gatehouse::testing::parse_file(id, text);
    Side {
        build,
        file,
        text: text.to_string(),
    }
}

pub(crate) fn engine(s: &Side, q: &Query) -> Key {
    Key::of(&s.build.set.as_ref().unwrap().single().unwrap().decide(q))
}

pub(crate) fn oracle(s: &Side, q: &Query) -> Option<(String, String)> {
    let Item::Policy(block) = &s.file.items[0] else {
        panic!("no policy")
    };
    let r = reference::RefPolicy::new(block).decide(q)?;
    Some((r.outcome.to_string(), r.reason.to_string()))
}

pub(crate) const SOCKETS: &[&str] = &[
    "/var/run/docker.sock",
    "/run/user/1000/bus",
    "/tmp/x.sock",
    "relative.sock",
    "/var/run/../run/docker.sock",
];

/// A socket rule now and then, on either side.
fn socket_rule(rng: &mut TestRng) -> Option<String> {
    match rng.random_range(0..6u8) {
        0 => Some("allow socket /var/run/docker.sock".into()),
        1 => Some("deny socket /var/run/docker.sock".into()),
        2 => Some("allow socket /run/user/1000/bus".into()),
        3 => Some("allow socket *".into()),
        _ => None,
    }
}

/// Names around every sample name: itself, one and two labels below, and
/// its parent.
pub(crate) fn names(rng: &mut TestRng, random: usize) -> Vec<String> {
    let mut out = BTreeSet::new();
    for n in NAMES {
        out.insert(n.to_string());
        out.insert(format!("w.{n}"));
        out.insert(format!("v.w.{n}"));
        if let Some((_, parent)) = n.split_once('.') {
            out.insert(parent.to_string());
        }
    }
    out.insert("gh-witness-0".into());
    out.insert("unrelated.test".into());
    for _ in 0..random {
        let labels = rng.random_range(1..4);
        let mut parts: Vec<String> = (0..labels)
            .map(|_| format!("r{}", rng.random_range(0..50u32)))
            .collect();
        if rng.random_bool(0.5) {
            parts.push(NAMES[rng.random_range(0..NAMES.len())].to_string());
        }
        out.insert(parts.join("."));
    }
    out.into_iter().collect()
}

/// Addresses around every sample address and prefix end, and random ones.
pub(crate) fn addrs(rng: &mut TestRng, random: usize) -> Vec<String> {
    let mut out = BTreeSet::new();
    let v4 = |x: u32, out: &mut BTreeSet<String>| {
        for d in [x.wrapping_sub(1), x, x.wrapping_add(1)] {
            out.insert(Ipv4Addr::from(d).to_string());
        }
    };
    for ip in IPS {
        out.insert(ip.to_string());
    }
    for c in CIDRS {
        match c.parse::<ipnet::IpNet>().unwrap() {
            ipnet::IpNet::V4(n) => {
                v4(u32::from(n.network()), &mut out);
                v4(u32::from(n.broadcast()), &mut out);
            }
            ipnet::IpNet::V6(n) => {
                for x in [u128::from(n.network()), u128::from(n.broadcast())] {
                    for d in [x.wrapping_sub(1), x, x.wrapping_add(1)] {
                        out.insert(Ipv6Addr::from(d).to_string());
                    }
                }
            }
        }
    }
    for n in gatehouse::normalize::non_public_v4() {
        v4(u32::from(n.network()), &mut out);
        v4(u32::from(n.broadcast()), &mut out);
    }
    for _ in 0..random {
        if rng.random_bool(0.5) {
            out.insert(Ipv4Addr::from(rng.random::<u32>()).to_string());
        } else {
            // Mostly inside the interesting IPv6 ranges.
            let prefix: u128 = [
                0x2606_4700u128 << 96,
                0xfd00u128 << 112,
                0x64_ff9b << 96,
                0x2002 << 112,
                0,
            ][rng.random_range(0..5usize)];
            let x = prefix | u128::from(rng.random::<u64>());
            out.insert(Ipv6Addr::from(x).to_string());
        }
    }
    out.into_iter().collect()
}

pub(crate) const PORTS: &[i64] = &[
    0, 1, 22, 79, 80, 81, 442, 443, 444, 7999, 8000, 8080, 8500, 8999, 9000, 65535,
];
const VIAS: [Via; 4] = [Via::Http, Via::Https, Via::Socks5, Via::Socks5Udp];

pub(crate) fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Checks one pair; the number of queries tried.
fn check_pair(a: &Gen, b: &Gen, rng: &mut TestRng, random: usize) -> usize {
    let (old, new) = (side(&a.text()), side(&b.text()));
    let diff = gatehouse::diff::diff(&old.build, &new.build).unwrap();
    let ctx = || format!("old:\n{}\nnew:\n{}", old.text, new.text);
    let p = &diff.policies[0];
    assert!(p.old && p.new);
    // Every witness changes, on both evaluators for outcome changes.
    for r in &p.regions {
        // Sampled exactly for the kinds not decided for every query.
        assert_eq!(r.sampled, !r.kind.is_exact(), "{}", r.description);
        let (x, y) = (engine(&old, &r.witness), engine(&new, &r.witness));
        assert_ne!(
            x,
            y,
            "witness {} of `{}`\n{}",
            r.witness,
            r.description,
            ctx()
        );
        if r.change != Change::Reason {
            assert_ne!(
                oracle(&old, &r.witness),
                oracle(&new, &r.witness),
                "{}",
                ctx()
            );
        }
    }
    let mut hosts = names(rng, random / 4);
    hosts.extend(addrs(rng, random / 4));
    let mut n = 0;
    let mut queries: Vec<Query> = Vec::new();
    for h in &hosts {
        queries.push(Query::Dns { name: h.clone() });
        for &port in PORTS {
            for via in VIAS {
                queries.push(Query::Connect {
                    host: h.clone(),
                    port,
                    via,
                });
            }
        }
    }
    for p in SOCKETS {
        queries.push(Query::Socket {
            path: p.to_string(),
        });
    }
    for p in gatehouse::vocab::Permission::ALL {
        queries.push(Query::Tool {
            permission: p.as_str().into(),
        });
    }
    queries.push(Query::Tool {
        permission: "files.delete".into(),
    });
    for c in gatehouse::vocab::PromptCategory::ALL {
        queries.push(Query::Prompt { category: *c });
    }
    queries.push(Query::Upstream);
    queries.push(Query::WebSearch);
    // Answers: every name with one address, a few names with every
    // address, and answers of two and three addresses in every order,
    // on no port and on several.
    let answers: Vec<String> = addrs(rng, 8);
    let names_for = |rng: &mut TestRng, k: usize| -> Vec<String> {
        (0..k)
            .map(|_| hosts[rng.random_range(0..hosts.len())].clone())
            .collect()
    };
    for port in [None, Some(443), Some(22), Some(8080), Some(0)] {
        for n in hosts.iter().step_by(3) {
            let a = &answers[rng.random_range(0..answers.len())];
            queries.push(Query::Resolved {
                host: n.clone(),
                addrs: vec![a.clone()],
                port,
            });
        }
        for n in names_for(rng, 4) {
            for a in &answers {
                queries.push(Query::Resolved {
                    host: n.clone(),
                    addrs: vec![a.clone()],
                    port,
                });
            }
        }
        for n in names_for(rng, random / 8 + 20) {
            let k = rng.random_range(2..4);
            let list: Vec<String> = (0..k)
                .map(|_| answers[rng.random_range(0..answers.len())].clone())
                .collect();
            queries.push(Query::Resolved {
                host: n,
                addrs: list,
                port,
            });
        }
    }
    queries.push(Query::Resolved {
        host: "example.com".into(),
        addrs: vec![],
        port: None,
    });
    for addr in [
        "127.0.0.1:3128",
        "[::1]:3128",
        "0.0.0.0:3128",
        "[::]:3128",
        "10.0.0.1:8080",
        "[::ffff:127.0.0.1]:80",
        "127.0.0.2:0",
        "x:1",
        "10.0.0.1:99999",
    ] {
        queries.push(Query::Listen { addr: addr.into() });
    }
    for p in [
        "firefox",
        "/Applications/Firefox.app/Contents/MacOS/firefox",
        "C:\\Apps\\TERMINAL.exe",
        "/usr/bin/vim",
        "Google Chrome",
        "/opt/Google Chrome.app/bin/helper",
        "terminal",
        "/usr/bin/firefox.exe/vim",
        "",
        "  ",
    ] {
        queries.push(Query::App {
            program: p.to_string(),
        });
    }
    for q in &queries {
        n += 1;
        let (x, y) = (engine(&old, q), engine(&new, q));
        let (rx, ry) = (oracle(&old, q), oracle(&new, q));
        let region = diff.region_of("p", q);
        assert_eq!(
            region.is_some(),
            x != y,
            "query `{q}`: engine old {x:?} new {y:?}, region {:?}\n{}",
            region.map(|r| &r.description),
            ctx()
        );
        // What the reference sees change is inside a region too.
        if rx.is_some() && rx != ry {
            assert!(
                region.is_some(),
                "query `{q}`: reference {rx:?} → {ry:?}\n{}",
                ctx()
            );
        }
        if let Some(r) = region {
            let (ko, kn) = (Key::of(&r.old), Key::of(&r.new));
            assert_eq!(
                (x, y),
                (ko, kn),
                "query `{q}` in `{}`\n{}",
                r.description,
                ctx()
            );
        }
    }
    n
}

#[test]
fn regions_are_exactly_the_queries_whose_decision_changed() {
    let pairs = env("GATEHOUSE_DIFF_PAIRS", 12) as u32;
    let random = env("GATEHOUSE_DIFF_RANDOM", 100);
    let mut runner = TestRunner::new(Config {
        cases: pairs,
        ..Config::default()
    });
    let mut rng = TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha);
    let mut generated = Vec::new();
    for _ in 0..pairs {
        let a = policy().new_tree(&mut runner).unwrap().current();
        // Half the pairs are one small edit apart, as a pull request is.
        let b = if rng.random_bool(0.5) {
            let mut b = a.clone();
            if !b.rules.is_empty() && rng.random_bool(0.5) {
                let i = rng.random_range(0..b.rules.len());
                b.rules.remove(i);
            }
            let r = crate::differential::rule()
                .new_tree(&mut runner)
                .unwrap()
                .current();
            b.rules.push(r);
            b
        } else {
            policy().new_tree(&mut runner).unwrap().current()
        };
        let (mut a, mut b) = (a, b);
        a.rules.extend(socket_rule(&mut rng));
        b.rules.extend(socket_rule(&mut rng));
        generated.push((a, b));
    }
    // Two workers, each with its own deterministic stream of queries.
    let (left, right) = generated.split_at(generated.len() / 2);
    let total: usize = std::thread::scope(|s| {
        let work = |part: &'static str, chunk: &[(Gen, Gen)]| {
            let mut rng = TestRng::from_seed(
                proptest::test_runner::RngAlgorithm::ChaCha,
                &[if part == "left" { 1 } else { 2 }; 32],
            );
            chunk
                .iter()
                .map(|(a, b)| check_pair(a, b, &mut rng, random))
                .sum::<usize>()
        };
        let l = s.spawn(move || work("left", left));
        let r = work("right", right);
        l.join().unwrap() + r
    });
    eprintln!("diff: {pairs} pairs, {total} queries");
}

#[test]
fn a_readable_region_with_its_witness() {
    let old = side(
        "policy p {\n  network {\n    default deny\n    allow domain \"**.github.com\" port 443\n  }\n}\n",
    );
    let new = side(
        "policy p {\n  network {\n    default deny\n    allow domain \"**.github.com\" port 443\n    allow domain \"*.amazonaws.com\" port 443\n    deny domain \"s3.amazonaws.com\"\n  }\n}\n",
    );
    let d = gatehouse::diff::diff(&old.build, &new.build).unwrap();
    let texts: Vec<(Change, String)> = d.policies[0]
        .regions
        .iter()
        .map(|r| (r.change, r.description.clone()))
        .collect();
    assert!(
        texts.contains(&(
            Change::Opens,
            "connect *.amazonaws.com port 443 (except s3.amazonaws.com)".into()
        )),
        "{texts:#?}"
    );
    assert!(
        texts
            .iter()
            .any(|(c, t)| *c == Change::Opens
                && t == "dns *.amazonaws.com (except s3.amazonaws.com)"),
        "{texts:#?}"
    );
    assert!(d.opens());
    // The same file on both sides: nothing.
    let same = gatehouse::diff::diff(&old.build, &old.build).unwrap();
    assert!(same.policies[0].regions.is_empty() && !same.opens());
    let _ = IpAddr::V4(Ipv4Addr::LOCALHOST);
}

/// An answer whose decision on each side is made by a different address:
/// the old side refuses 10.0.0.1 (`local deny`), which the new one takes
/// (`local allow`), and the new refuses 8.8.8.8 by a rule; only an answer
/// holding both is refused for those two reasons, and it lies in a region
/// of its own.
#[test]
fn an_answer_decided_by_two_addresses() {
    let net = |rules: &str| {
        format!(
            "policy p {{\n  network {{\n    default deny\n    allow domain example.com\n{rules}  }}\n}}\n"
        )
    };
    let old = side(&net("    local deny\n"));
    let new = side(&net("    local allow\n    deny ip 8.8.8.8\n"));
    let d = gatehouse::diff::diff(&old.build, &new.build).unwrap();
    let both = Query::Resolved {
        host: "example.com".into(),
        addrs: vec!["10.0.0.1".into(), "8.8.8.8".into()],
        port: None,
    };
    let (x, y) = (engine(&old, &both), engine(&new, &both));
    assert_ne!(x, y);
    let r = d
        .region_of("p", &both)
        .expect("the two-address answer's region");
    assert_eq!(
        r.old.rule,
        old.build
            .set
            .as_ref()
            .unwrap()
            .single()
            .unwrap()
            .decide(&both)
            .rule
    );
    assert_eq!(
        r.new.rule,
        new.build
            .set
            .as_ref()
            .unwrap()
            .single()
            .unwrap()
            .decide(&both)
            .rule
    );
    assert!(!r.sampled && r.kind == Kind::Resolved, "{}", r.description);
}
