//! The compiled engine against the reference evaluator (tests/reference), on
//! policies and queries drawn by `gatehouse::arbitrary::Case`: the same
//! outcome, reason and deciding rule for every query, and never a panic.
#![no_main]
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

#[path = "../../tests/reference/mod.rs"]
mod reference;

use gatehouse::PolicySet;
use gatehouse::arbitrary::Case;
use gatehouse::source::{FileId, SourceMap};
use gatehouse::testing::ast::Item;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|case: Case| {
    // A raw pattern can make the policy itself invalid: nothing to compare.
    let mut alone = SourceMap::new();
    alone.add("gen.policy", &case.policy);
    if PolicySet::from_sources(alone).is_err() {
        return;
    }
    // With its requirements, the engine refuses exactly the policies the
    // reference finds in violation.
    let text = case.text();
    let mut sources = SourceMap::new();
    let id = sources.add("gen.policy", &text);
    let built = gatehouse::build(sources.clone());
    let (file, _) = gatehouse::testing::parse_file(id, &text);
    let Some(Item::Policy(block)) = file.items.first() else { panic!("no policy in\n{text}") };
    let reqs: Vec<_> = file
        .items
        .iter()
        .filter_map(|i| if let Item::Requirements(b) = i { Some(b) } else { None })
        .collect();
    let violated = reference::requirements::violated(block, &reqs);
    assert_eq!(built.has_errors(), violated, "violation?\n{text}\n{}", built.render());
    let Some(set) = built.set else { return };
    let oracle = reference::RefPolicy { block, reqs };
    let p = set.single().unwrap();
    let f = sources.get(FileId(0)).unwrap();
    for q in &case.queries {
        let e = p.decide(q);
        let Some(r) = oracle.decide(q) else { continue };
        let e_rule = e.rule.and_then(|id| set.rule(id)).map(|r| (r.line, r.column));
        let r_rule = r.rule_at.map(|at| {
            let lc = f.line_col(at);
            (lc.line, lc.column)
        });
        assert_eq!(
            (e.outcome.as_str(), e.reason.as_str(), e_rule),
            (r.outcome, r.reason, r_rule),
            "query `{q}` ({q:?}) on\n{text}"
        );
    }
});
