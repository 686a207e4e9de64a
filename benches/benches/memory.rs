//! Heap bytes a compiled set holds per rule (a counting allocator):
//! `cargo bench -p gatehouse-benches --bench memory`.

#![allow(unsafe_code, clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use gatehouse::source::{FileId, SourceMap};
use gatehouse_benches::mixed_policy;

static LIVE: AtomicIsize = AtomicIsize::new(0);
struct Counting;

// SAFETY: forwards to the system allocator; only adds a counter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
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

fn main() {
    for n in [10_000usize, 100_000] {
        let text = mixed_policy(n);
        let (ast, _) = gatehouse::testing::parse_file(FileId(0), &text);
        let files = vec![ast];
        let mut sources = SourceMap::new();
        sources.add("bench.policy", text.as_str());
        let before = LIVE.load(Ordering::Relaxed);
        let set = gatehouse::testing::compile(&sources, &files).expect("compiles");
        let after = LIVE.load(Ordering::Relaxed);
        let per_rule = (after - before) as f64 / (2 * n) as f64;
        println!(
            "compiled set, {} rules ({n} domains + {n} CIDRs): {} bytes, {per_rule:.0} bytes per rule",
            2 * n,
            after - before
        );
        drop(set);
    }
}
