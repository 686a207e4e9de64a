//! Gatehouse against its peers, the same policy and queries, in one run.
//! Groups `peers_name/<query>` and `peers_ip/<query>`, one function per
//! engine, the rule count as the parameter. Cedar and regorus stop at 10 000
//! rules ([`gatehouse_peers::SLOW_MAX`]).

#![allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gatehouse_benches::{Category, addr_stream, cidr_policy, domain_policy, name_stream};
use gatehouse_peers::{Engine, Rules, ip_engines, ip_queries, name_engines, name_queries};

const SIZES: &[usize] = &[10, 100, 1_000, 10_000, 100_000];
fn sizes() -> Vec<usize> {
    // PEERS_MAX=1000 for a quick run; PEERS_MIN=100000 to redo the largest.
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let (min, max) = (env("PEERS_MIN", 0), env("PEERS_MAX", usize::MAX));
    SIZES
        .iter()
        .copied()
        .filter(|&n| n >= min && n <= max)
        .collect()
}

/// How many of a stream's queries an engine is timed on: all of them, but
/// Cedar and regorus take milliseconds a query (tens of milliseconds at
/// 10 000 rules), so they get the stream's first 256, or 32 from 10 000
/// rules on, with fewer samples. Their per-query figure is still a median
/// over distinct queries; it only sets the ≥ 1 000× target apart.
fn slow_budget(engine: &str, rules: usize) -> usize {
    match engine {
        "cedar" | "regorus" if rules >= 10_000 => 32,
        "cedar" | "regorus" => 256,
        _ => usize::MAX,
    }
}

fn names(c: &mut Criterion) {
    for &n in &sizes() {
        let (text, domains) = domain_policy(n, 7);
        let rules = Rules::from_policy(&text);
        let engines: Vec<Box<dyn Engine>> = name_engines(&rules);
        for (kind, q) in name_queries(&domains) {
            let mut g = c.benchmark_group(format!("peers_name/{kind}"));
            g.warm_up_time(Duration::from_millis(300))
                .measurement_time(Duration::from_secs(1))
                .sample_size(20);
            for e in &engines {
                g.bench_with_input(BenchmarkId::new(e.name(), n), &n, |b, _| {
                    b.iter(|| e.host(black_box(&q)))
                });
            }
            g.finish();
        }
    }
}

fn addresses(c: &mut Criterion) {
    for &n in &sizes() {
        let (text, inside) = cidr_policy(n, 11);
        let rules = Rules::from_policy(&text);
        let engines: Vec<Box<dyn Engine>> = ip_engines(&rules);
        for (kind, q) in ip_queries(&inside) {
            let mut g = c.benchmark_group(format!("peers_ip/{kind}"));
            g.warm_up_time(Duration::from_millis(300))
                .measurement_time(Duration::from_secs(1))
                .sample_size(20);
            for e in &engines {
                g.bench_with_input(BenchmarkId::new(e.name(), n), &n, |b, _| {
                    b.iter(|| e.ip(black_box(&q)))
                });
            }
            g.finish();
        }
    }
}

/// The realistic streams (issue 19): 4 096 distinct queries a measurement,
/// reported per query (`Throughput::Elements`), for every category apart
/// and all together; the slow engines (Cedar, regorus) on the stream's
/// first 256 queries. `tests/equivalence.rs` holds every engine to
/// gatehouse's answers on exactly these streams.
fn name_streams(c: &mut Criterion) {
    for &n in &sizes() {
        let (text, domains) = domain_policy(n, 7);
        let rules = Rules::from_policy(&text);
        let engines: Vec<Box<dyn Engine>> = name_engines(&rules);
        let stream = name_stream(&domains, 4096, 3);
        let dns = gatehouse::PolicySet::from_source("bench.policy", &text).expect("compiles");
        let mut parts: Vec<(&str, Vec<String>)> =
            vec![("all", stream.iter().map(|(_, q)| q.clone()).collect())];
        for cat in Category::ALL {
            let qs: Vec<String> = stream
                .iter()
                .filter(|(c, _)| *c == cat)
                .map(|(_, q)| q.clone())
                .collect();
            if !qs.is_empty() {
                parts.push((cat.as_str(), qs));
            }
        }
        for (part, queries) in &parts {
            let mut g = c.benchmark_group(format!("stream_name/{part}"));
            g.warm_up_time(Duration::from_millis(300))
                .measurement_time(Duration::from_secs(1))
                .sample_size(20);
            for e in &engines {
                let qs = &queries[..queries.len().min(slow_budget(e.name(), n))];
                g.sample_size(if qs.len() < queries.len() { 10 } else { 20 });
                g.throughput(Throughput::Elements(qs.len() as u64));
                g.bench_with_input(BenchmarkId::new(e.name(), n), &n, |b, _| {
                    b.iter(|| qs.iter().filter(|q| e.host(black_box(q))).count())
                });
            }
            // The filtering resolver's question over the same names.
            g.sample_size(20);
            g.throughput(Throughput::Elements(queries.len() as u64));
            g.bench_with_input(BenchmarkId::new("gatehouse_dns", n), &n, |b, _| {
                let p = dns.single().expect("one policy");
                b.iter(|| {
                    queries
                        .iter()
                        .filter(|q| p.dns(black_box(q)).is_allow())
                        .count()
                })
            });
            g.finish();
        }
    }
}

fn addr_streams(c: &mut Criterion) {
    for &n in &sizes() {
        let (text, _) = cidr_policy(n, 11);
        let rules = Rules::from_policy(&text);
        let engines: Vec<Box<dyn Engine>> = ip_engines(&rules);
        let queries: Vec<String> = addr_stream(&text, 4096, 5)
            .iter()
            .map(|a| a.to_string())
            .collect();
        let mut g = c.benchmark_group("stream_ip/all");
        g.warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(20);
        for e in &engines {
            let qs = &queries[..queries.len().min(slow_budget(e.name(), n))];
            g.sample_size(if qs.len() < queries.len() { 10 } else { 20 });
            g.throughput(Throughput::Elements(qs.len() as u64));
            g.bench_with_input(BenchmarkId::new(e.name(), n), &n, |b, _| {
                b.iter(|| {
                    qs.iter()
                        .filter(|q| e.ip(black_box(q)) == Some(true))
                        .count()
                })
            });
        }
        g.finish();
        // Parsed addresses: `connect_addr` against the engines that take an
        // `IpAddr` natively (the slow engines would parse text anyway).
        let parsed: Vec<std::net::IpAddr> = addr_stream(&text, 4096, 5)
            .into_iter()
            .map(std::net::IpAddr::V4)
            .collect();
        let mut g = c.benchmark_group("stream_addr/all");
        g.warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(20)
            .throughput(Throughput::Elements(parsed.len() as u64));
        for e in engines.iter().filter(|e| {
            matches!(
                e.name(),
                "gatehouse" | "interval_table" | "ip_network_table"
            )
        }) {
            g.bench_with_input(BenchmarkId::new(e.name(), n), &n, |b, _| {
                b.iter(|| {
                    parsed
                        .iter()
                        .filter(|a| e.addr(black_box(**a)) == Some(true))
                        .count()
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, names, addresses, name_streams, addr_streams);
criterion_main!(benches);
