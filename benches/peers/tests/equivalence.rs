//! Before any comparison: every peer decides exactly as gatehouse on the
//! benchmark's queries, and on a few thousand more drawn from the same rules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use gatehouse_benches::{Rng, cidr_policy, domain_policy};
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
                assert_eq!(e.ip(q), Some(want), "{} on `{q}` with {n} rules", e.name());
            }
        }
        assert!(
            allowed > 0 && denied > 0,
            "{allowed} allowed, {denied} denied"
        );
    }
}
