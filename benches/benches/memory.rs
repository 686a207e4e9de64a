//! Heap bytes a compiled set holds per rule, the peak heap while it is
//! built from text and while it is loaded from an artifact, and the
//! artifact's size (a counting allocator; allocations, not time):
//! `cargo bench -p gatehouse-benches --bench memory`.

#![allow(unsafe_code, clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use gatehouse::PolicySet;
use gatehouse::source::{FileId, SourceMap};
use gatehouse_benches::mixed_policy;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
struct Counting;

// SAFETY: forwards to the system allocator; only adds counters.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size() as isize, Ordering::Relaxed) + l.size() as isize;
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f`, giving what it leaves allocated and the highest the heap went
/// above where it started.
fn measured<T>(f: impl FnOnce() -> T) -> (T, isize, isize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f();
    let after = LIVE.load(Ordering::Relaxed);
    (out, after - before, PEAK.load(Ordering::Relaxed) - before)
}

fn main() {
    for n in [10_000usize, 100_000] {
        let rules = (2 * n) as f64;
        let text = mixed_policy(n);
        let (ast, _) = gatehouse::testing::parse_file(FileId(0), &text);
        let files = vec![ast];
        let mut sources = SourceMap::new();
        sources.add("bench.policy", text.as_str());
        let (set, held, _) =
            measured(|| gatehouse::testing::compile(&sources, &files).expect("compiles"));
        println!(
            "compiled set, {} rules ({n} domains + {n} CIDRs): {held} bytes, {:.0} bytes per rule",
            2 * n,
            held as f64 / rules
        );
        drop(files);
        let artifact = set.to_artifact().expect("serialises");
        println!(
            "  artifact: {} bytes, {:.1} bytes per rule",
            artifact.len(),
            artifact.len() as f64 / rules
        );
        drop(set);
        let (set, _, peak) = measured(|| PolicySet::from_source("bench.policy", &text).unwrap());
        println!(
            "  built from text: peak {peak} bytes, {:.0} bytes per rule, {:.2}x the compiled set",
            peak as f64 / rules,
            peak as f64 / held as f64
        );
        drop(set);
        // Where a text build's peak is: each stage on its own, what it
        // leaves and the highest it goes, in bytes a rule (the stages
        // before it still held, as in a build).
        let mut sources = SourceMap::new();
        let ((), src, _) = measured(|| {
            sources.add("bench.policy", text.as_str());
        });
        let ((ast, _), parsed, parse_peak) =
            measured(|| gatehouse::testing::parse_file(FileId(0), &text));
        let files = vec![ast];
        let (diags, checked, check_peak) = measured(|| gatehouse::testing::check(&files));
        let (set, compiled, compile_peak) =
            measured(|| gatehouse::testing::compile(&sources, &files).unwrap());
        let per = |b: isize| b as f64 / rules;
        println!(
            "    of which: source map {:.0}; parse leaves {:.0} (peak {:.0}); check leaves {:.0} ({} diagnostics; peak {:.0}); compile leaves {:.0} (peak {:.0}) bytes a rule",
            per(src),
            per(parsed),
            per(parse_peak),
            per(checked),
            diags.len(),
            per(check_peak),
            per(compiled),
            per(compile_peak)
        );
        drop((set, diags, files, sources));
        let (set, _, peak) = measured(|| PolicySet::from_artifact(&artifact).unwrap());
        println!(
            "  loaded from the artifact: peak {peak} bytes beside it, {:.0} bytes per rule, {:.2}x the compiled set",
            peak as f64 / rules,
            peak as f64 / held as f64
        );
        drop(set);
        let payload = gatehouse::testing::artifact_payload(&artifact).unwrap();
        let (set, _, peak) = measured(|| gatehouse::testing::load_payload(&payload).unwrap());
        println!(
            "  decoded from the inflated payload: peak {peak} bytes beside it, {:.2}x the compiled set",
            peak as f64 / held as f64
        );
        drop(set);
    }
}
