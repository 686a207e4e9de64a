//! Before any comparison: every peer decides exactly as gatehouse on the
//! benchmark's queries, and on a few thousand more drawn from the same rules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use gatehouse_benches::{Category, Rng, addr_stream, cidr_policy, domain_policy, name_stream};
use gatehouse_peers::{Rules, ip_engines, ip_queries, name_engines, name_queries};

#[test]
fn every_peer_decides_names_as_gatehouse_does() {
    for n in [10, 100, 1_000] {
        let (text, domains) = domain_policy(n, 7);
        let rules = Rules::from_policy(&text);
        assert_eq!(rules.domains.len(), n);
        let engines = name_engines(&rules);
        let mut queries: Vec<String> = name_queries(&domains).into_iter().map(|(_, q)| q).collect();
        let mut rng = Rng::new(99);
        for d in domains.iter().take(300) {
            queries.push(d.clone());
            queries.push(format!("a.{d}"));
            queries.push(format!("a.b.{d}"));
            queries.push(format!("x{d}"));
            let other = &domains[rng.below(domains.len() as u64) as usize];
            queries.push(format!("{}.{other}", rng.below(100)));
        }
        let (mut allowed, mut denied) = (0, 0);
        for q in &queries {
            let want = engines[0].host(q);
            if want {
                allowed += 1
            } else {
                denied += 1
            }
            for e in &engines[1..] {
                assert_eq!(e.host(q), want, "{} on `{q}` with {n} rules", e.name());
            }
        }
        // The comparison means something only if both answers occur.
        assert!(
            allowed > 0 && denied > 0,
            "{allowed} allowed, {denied} denied"
        );
    }
}

#[test]
fn every_peer_decides_addresses_as_gatehouse_does() {
    for n in [10, 100, 1_000] {
        let (text, inside) = cidr_policy(n, 11);
        let rules = Rules::from_policy(&text);
        assert_eq!(rules.cidrs.len(), n);
        let engines = ip_engines(&rules);
        let mut queries: Vec<String> = ip_queries(&inside).into_iter().map(|(_, q)| q).collect();
        queries.extend(inside.iter().take(300).cloned());
        let mut rng = Rng::new(5);
        for _ in 0..300 {
            queries.push(std::net::Ipv4Addr::from(rng.next_u64() as u32 | 0x0100_0000).to_string());
        }
        let (mut allowed, mut denied) = (0, 0);
        for q in &queries {
            let want = engines[0].ip(q).unwrap();
            if want {
                allowed += 1
            } else {
                denied += 1
            }
            for e in &engines[1..] {
                match e.ip(q) {
                    Some(got) => assert_eq!(got, want, "{} on `{q}` with {n} rules", e.name()),
                    // The interval table is IPv4 only.
                    None => assert!(
                        e.name() == "interval_table" && q.contains(':'),
                        "{}",
                        e.name()
                    ),
                }
            }
        }
        assert!(
            allowed > 0 && denied > 0,
            "{allowed} allowed, {denied} denied"
        );
    }
}

/// How many queries of a stream the slow engines (Cedar, regorus) are asked:
/// at milliseconds a query, a whole stream would take minutes.
const SLOW_QUERIES: usize = 256;

fn slow(name: &str) -> bool {
    matches!(name, "cedar" | "regorus")
}

/// The realistic streams the benchmarks time (4 096 distinct queries):
/// every peer decides each as gatehouse does, and every category occurs
/// with the answer its name promises.
#[test]
fn every_peer_decides_the_realistic_name_stream_as_gatehouse_does() {
    for n in [10, 1_000, 100_000] {
        let (text, domains) = domain_policy(n, 7);
        let rules = Rules::from_policy(&text);
        let engines = name_engines(&rules);
        let stream = name_stream(&domains, 4096, 3);
        assert_eq!(stream.len(), 4096, "{n} rules");
        let distinct: std::collections::HashSet<&String> = stream.iter().map(|(_, q)| q).collect();
        assert_eq!(distinct.len(), 4096);
        let dns = gatehouse::PolicySet::from_source("bench.policy", &text).unwrap();
        let dns = dns.single().unwrap();
        let mut wrong_category = 0;
        for (i, (cat, q)) in stream.iter().enumerate() {
            let labels = q.split('.').count();
            assert!(
                (2..=6).contains(&labels) && (15..=45).contains(&q.len()),
                "`{q}`"
            );
            let want = engines[0].host(q);
            // The resolver's question answers as the connection does (no
            // port lists, no local names in these policies).
            assert_eq!(dns.dns(q).is_allow(), want, "dns `{q}` with {n} rules");
            let expected = matches!(cat, Category::ExactHit | Category::SubdomainHit);
            if want != expected {
                wrong_category += 1;
            }
            for e in &engines[1..] {
                if slow(e.name()) && i >= SLOW_QUERIES {
                    continue;
                }
                assert_eq!(
                    e.host(q),
                    want,
                    "{} on `{q}` ({cat:?}) with {n} rules",
                    e.name()
                );
            }
        }
        // A category is what the query is: at most a stray collision of
        // generated names (a sibling that happens to be a rule).
        assert!(
            wrong_category * 100 < stream.len(),
            "{wrong_category} queries answer against their category with {n} rules"
        );
    }
}

#[test]
fn every_peer_decides_the_random_address_stream_as_gatehouse_does() {
    for n in [10, 1_000, 100_000] {
        let (text, _) = cidr_policy(n, 11);
        let rules = Rules::from_policy(&text);
        let engines = ip_engines(&rules);
        let stream = addr_stream(&text, 4096, 5);
        let (mut allowed, mut denied) = (0, 0);
        for (i, a) in stream.iter().enumerate() {
            let q = a.to_string();
            let want = engines[0].ip(&q).unwrap();
            if want {
                allowed += 1
            } else {
                denied += 1
            }
            for e in &engines[1..] {
                if slow(e.name()) && i >= SLOW_QUERIES {
                    continue;
                }
                assert_eq!(e.ip(&q), Some(want), "{} on `{q}` with {n} rules", e.name());
                if !slow(e.name()) {
                    // Parsed addresses too (`connect_addr` for gatehouse).
                    let parsed = e.addr(std::net::IpAddr::V4(*a));
                    assert_eq!(parsed, Some(want), "{} on {a} with {n} rules", e.name());
                }
            }
            assert_eq!(engines[0].addr(std::net::IpAddr::V4(*a)), Some(want), "{a}");
        }
        assert!(
            allowed > 0 && denied > 0,
            "{allowed} allowed, {denied} denied with {n} rules"
        );
    }
}
