//! The pipeline's stages on large policies: parse, check, compile.

#![allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::expect_used)]

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use gatehouse::source::{FileId, SourceMap};
use gatehouse_benches::mixed_policy;
use std::hint::black_box;

fn stages(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline");
    g.sample_size(10);
    for &n in &[1_000usize, 100_000] {
        let text = mixed_policy(n);
        let (ast, _) = gatehouse::testing::parse_file(FileId(0), &text);
        let files = vec![ast];
        let mut sources = SourceMap::new();
        sources.add("bench.policy", text.as_str());
        g.bench_with_input(BenchmarkId::new("parse", 2 * n), &n, |b, _| {
            b.iter(|| gatehouse::testing::parse_file(FileId(0), black_box(&text)))
        });
        g.bench_with_input(BenchmarkId::new("check", 2 * n), &n, |b, _| {
            b.iter(|| gatehouse::testing::check(black_box(&files)))
        });
        g.bench_with_input(BenchmarkId::new("compile", 2 * n), &n, |b, _| {
            b.iter(|| gatehouse::testing::compile(&sources, black_box(&files)))
        });
        // The three in one: issue 62's figure (200 000 rules in 500 ms).
        g.bench_with_input(BenchmarkId::new("all", 2 * n), &n, |b, _| {
            b.iter(|| {
                let (ast, _) = gatehouse::testing::parse_file(FileId(0), black_box(&text));
                let files = vec![ast];
                let diags = gatehouse::testing::check(&files);
                (diags, gatehouse::testing::compile(&sources, &files))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
