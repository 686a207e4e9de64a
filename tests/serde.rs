//! A compiled set serialises with serde and decides the same after a round
//! trip (so a proxy can load a precompiled set without the compiler).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use gatehouse::PolicySet;
use gatehouse::query::Query;

#[test]
fn a_round_tripped_set_decides_the_same() {
    let files: Vec<_> = [
        "coding-agent",
        "research",
        "observer",
        "zerocode-proxy",
        "apps",
    ]
    .iter()
    .map(|n| {
        std::fs::read_to_string(format!(
            "{}/policies/{n}.policy",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    })
    .collect();
    let mut sources = gatehouse::source::SourceMap::new();
    for (i, f) in files.iter().enumerate() {
        sources.add(format!("f{i}.policy"), f.as_str());
    }
    let set = PolicySet::from_sources(sources).unwrap();
    let json = serde_json::to_string(&set).unwrap();
    let back: PolicySet = serde_json::from_str(&json).unwrap();
    let queries = [
        "connect github.com:443",
        "connect api.github.com:443",
        "connect 10.0.0.1:22",
        "dns competitor.example.com",
        "resolved x.example -> 93.184.215.14, 10.0.0.7",
        "tool input.control",
        "app /Applications/Firefox.app",
        "socket \"/var/run/docker.sock\"",
        "listen 0.0.0.0:1",
        "upstream",
        "connect [::1]:8080",
    ];
    let mut compared = 0;
    for p in set.policies() {
        let q = back.policy(p.name()).unwrap();
        for text in queries {
            let query: Query = gatehouse::syntax::parse_query(text).unwrap();
            let (a, b) = (p.decide(&query), q.decide(&query));
            assert_eq!(a, b, "{} {text}", p.name());
            assert_eq!(
                set.rule(a.rule.unwrap_or(gatehouse::eval::RuleId(0))),
                back.rule(b.rule.unwrap_or(gatehouse::eval::RuleId(0)))
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 5 * queries.len());
}
