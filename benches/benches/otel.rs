//! What a decision costs when it is exported over OTLP (`gatehouse-otel`):
//! on the deciding thread, its compact form; then, on the export's, its
//! `LogRecord`, or the SDK's, as opentelemetry-otlp's exporters would
//! send it — over a stream of 4 096 distinct decisions of a
//! proxy — `connect` by name and the `resolved` check of its answers, hosts
//! of realistic lengths, ports, rules and outcomes varied:
//! `cargo bench -p gatehouse-benches --bench otel`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gatehouse::RuleRef;
use gatehouse::log::DecisionEvent;
use gatehouse::query::{Query, Via};

const HOSTS: [&str; 8] = [
    "api.github.com",
    "objects.githubusercontent.com",
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "exfil.attacker.example",
    "storage.googleapis.com",
    "a-very-long-subdomain-name.eu-west-1.compute.internal.example.com",
];

fn queries() -> Vec<Query> {
    (0..4096u32)
        .map(|i| {
            let host = format!(
                "{}{}",
                if i % 3 == 0 { "" } else { "x." },
                HOSTS[i as usize % 8]
            );
            let port = [443i64, 80, 8080, 22][i as usize % 4];
            if i % 2 == 0 {
                Query::Connect {
                    host,
                    port,
                    via: [Via::Http, Via::Https, Via::Socks5][i as usize % 3],
                }
            } else {
                Query::Resolved {
                    host,
                    addrs: (0..1 + i % 3)
                        .map(|k| format!("140.82.{}.{}", i % 256, k))
                        .collect(),
                    port: Some(port),
                }
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let qs = queries();
    let events: Vec<DecisionEvent<'_>> = qs
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let allow = i % 5 != 0;
            DecisionEvent {
                time: String::new(),
                policy: "coding-agent",
                revision: "sha256:4f1c0e8d9b7a6f5e",
                query: serde_json::Value::Null,
                decision: if allow { "allow" } else { "deny" },
                reason: if allow {
                    "allowed_by_rule"
                } else {
                    "not_allowed"
                },
                rule: allow.then_some(RuleRef {
                    file: "policies/coding-agent.policy",
                    line: 10 + (i % 40),
                    column: 5,
                    source: "allow domain github.com",
                    because: None,
                }),
                tool_decision: None,
                elapsed: Duration::from_nanos(60 + (i % 50) as u64),
                masked: q,
            }
        })
        .collect();
    let mut g = c.benchmark_group("otel");
    g.throughput(Throughput::Elements(events.len() as u64));
    // What the deciding thread does: the decision's compact form.
    g.bench_function("capture a decision (4096 distinct)", |b| {
        b.iter(|| {
            let mut bytes = 0;
            for e in &events {
                bytes += gatehouse_otel::encode_decision_for_bench(black_box(e), false);
            }
            black_box(bytes)
        })
    });
    // And then what the export does: its OTLP LogRecord.
    g.bench_function("capture and expand a decision (4096 distinct)", |b| {
        b.iter(|| {
            let mut bytes = 0;
            for e in &events {
                bytes += gatehouse_otel::encode_decision_for_bench(black_box(e), true);
            }
            black_box(bytes)
        })
    });
    // What the export does with them, one request of 4 096 records: its
    // own encoding, against handing them to opentelemetry-otlp's log
    // exporter as the SDK's records (built, grouped, converted, encoded).
    let captured = gatehouse_otel::capture_for_bench(&events);
    g.bench_function("export encodes a request (4096 records)", |b| {
        b.iter(|| {
            black_box(gatehouse_otel::export_for_bench(
                black_box(&captured),
                false,
            ))
        })
    });
    g.bench_function(
        "export as the SDK's records through opentelemetry-proto (4096 records)",
        |b| b.iter(|| black_box(gatehouse_otel::export_for_bench(black_box(&captured), true))),
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
