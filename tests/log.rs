//! Decision logs: a sink that panics cannot change or lose a decision.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};

use gatehouse::PolicySet;
use gatehouse::log::{DecisionEvent, DecisionSink};
use gatehouse::query::Query;

struct Panics;
impl DecisionSink for Panics {
    fn record(&self, _: &DecisionEvent<'_>) {
        panic!("the sink failed");
    }
}

#[derive(Default)]
struct Counts(AtomicUsize);
impl DecisionSink for Counts {
    fn record(&self, e: &DecisionEvent<'_>) {
        assert_eq!(e.policy, "p");
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_panicking_sink_changes_nothing() {
    let set = PolicySet::from_source(
        "p.policy",
        "policy p { network { allow domain a.example } }",
    )
    .unwrap();
    let p = set.single().unwrap();
    for text in ["connect a.example:443", "connect b.example:443", "exec ls"] {
        let q: Query = gatehouse::Query::parse(text).unwrap();
        assert_eq!(
            set.decide_logged(p, &q, None, &Panics),
            p.decide(&q),
            "{text}"
        );
    }
    let counts = Counts::default();
    let q: Query = gatehouse::Query::parse("connect a.example:443").unwrap();
    set.decide_logged(p, &q, None, &counts);
    assert_eq!(counts.0.load(Ordering::SeqCst), 1);
}
