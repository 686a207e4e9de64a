//! Live updates: readers never block and never see a mixture of two
//! policies; a set that fails to compile is refused.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gatehouse::query::Via;
use gatehouse::source::SourceMap;
use gatehouse::store::PolicyStore;
use gatehouse::{Outcome, PolicySet};

const A: &str = "policy p {\n  network {\n    allow domain a.example\n    deny domain b.example\n  }\n  permissions { deny shell.exec }\n}\n";
const B: &str = "policy p {\n  network {\n    allow domain b.example\n    deny domain a.example\n  }\n  permissions { deny files.read }\n}\n";

fn sources(text: &str) -> SourceMap {
    let mut s = SourceMap::new();
    s.add("p.policy", text);
    s
}

/// The decisions of one batch of queries on one loaded set.
fn batch(set: &PolicySet) -> [Outcome; 4] {
    let p = set.single().unwrap();
    [
        p.connect("a.example", 443, Via::Https).outcome,
        p.connect("b.example", 443, Via::Https).outcome,
        p.tool("shell.exec").outcome,
        p.tool("files.read").outcome,
    ]
}

#[test]
fn readers_see_one_whole_policy_or_the_other() {
    let a = PolicySet::from_source("p.policy", A).unwrap();
    let b = PolicySet::from_source("p.policy", B).unwrap();
    let (want_a, want_b) = (batch(&a), batch(&b));
    assert_ne!(want_a, want_b);
    let store = Arc::new(PolicyStore::new(a));
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (store, stop, seen) = (store.clone(), stop.clone(), seen.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let got = batch(&store.load());
                    if got == want_a {
                        seen[0].fetch_add(1, Ordering::Relaxed);
                    } else if got == want_b {
                        seen[1].fetch_add(1, Ordering::Relaxed);
                    } else {
                        panic!("a mixture of two policies: {got:?}");
                    }
                }
            })
        })
        .collect();
    for i in 0..400 {
        let text = if i % 2 == 0 { B } else { A };
        store.update(sources(text)).unwrap();
        if i % 50 == 0 {
            std::thread::yield_now();
        }
    }
    // A broken update is refused, and the last good set stays in force.
    let before = batch(&store.load());
    let err = store
        .update(sources("policy p { network { allow domian x.example } }"))
        .unwrap_err();
    assert!(err.to_string().contains("domian"), "{err}");
    assert_eq!(batch(&store.load()), before);
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let total = seen[0].load(Ordering::Relaxed) + seen[1].load(Ordering::Relaxed);
    assert!(total > 0, "the readers decided nothing");
}
