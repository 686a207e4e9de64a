//! Reader throughput while a writer swaps policies 100 times a second, against
//! the same readers without swaps: `cargo bench -p gatehouse-benches --bench swap`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gatehouse::PolicySet;
use gatehouse::query::Via;
use gatehouse::store::PolicyStore;
use gatehouse_benches::domain_policy;

fn run(swaps_per_second: u32, seconds: u64) -> f64 {
    let (text, domains) = domain_policy(10_000, 7);
    let a = PolicySet::from_source("a.policy", &text).unwrap();
    let b = PolicySet::from_source(
        "b.policy",
        &text.replacen("default deny", "default allow", 1),
    )
    .unwrap();
    let store = Arc::new(PolicyStore::new(a.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (store, stop, done) = (store.clone(), stop.clone(), done.clone());
            let names: Vec<String> = domains
                .iter()
                .skip(t)
                .step_by(7)
                .take(1000)
                .map(|d| format!("api.{d}"))
                .collect();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for name in &names {
                        let set = store.load();
                        let p = set.single().unwrap();
                        std::hint::black_box(p.connect(name, 443, Via::Https));
                        n += 1;
                    }
                }
                done.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    let start = Instant::now();
    let mut flip = false;
    while start.elapsed() < Duration::from_secs(seconds) {
        if swaps_per_second == 0 {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        std::thread::sleep(Duration::from_millis(1000 / u64::from(swaps_per_second)));
        store.replace(if flip { a.clone() } else { b.clone() });
        flip = !flip;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let quiet = run(0, 5);
    let swapping = run(100, 5);
    println!("readers without swaps: {quiet:.0} decisions/s");
    println!(
        "readers with 100 swaps/s: {swapping:.0} decisions/s ({:+.1} %)",
        (swapping / quiet - 1.0) * 100.0
    );
}
