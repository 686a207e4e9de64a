//! `policyc test`: run every `test` block.

use gatehouse::syntax::ast::{Item, TestStmt};
use gatehouse::{Policy, PolicySet};

use crate::Exit;

pub fn run(args: &[String]) -> Exit {
    let (_, sources) = match crate::load::args_and_sources(args, &[], &[]) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let (b, set) = match crate::load::compiled(sources) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let set = &set;
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut workspaces = crate::load::Workspaces::new(None);
    for (file, (_, src)) in b.files.iter().zip(b.sources.files()) {
        for item in &file.items {
            let Item::Test(t) = item else { continue };
            let mut policy: Option<&Policy> = set.single();
            for s in &t.stmts {
                match s {
                    TestStmt::Policy(n) => policy = set.policy(&n.node),
                    TestStmt::Expect(e) => {
                        let at = src.line_col(e.span.start);
                        let Some(p) = policy else { continue };
                        match outcome(set, p, e, &mut workspaces) {
                            Ok(()) => passed += 1,
                            Err(why) => {
                                failed += 1;
                                outln!(
                                    "FAIL {}:{}:{} in test \"{}\"",
                                    src.name,
                                    at.line,
                                    at.column,
                                    t.description.value
                                );
                                outln!(
                                    "  expected: {} {}{}",
                                    e.decision.node,
                                    e.query_text,
                                    e.because
                                        .as_ref()
                                        .map(|b| format!(" because {}", b.node))
                                        .unwrap_or_default()
                                );
                                outln!("  {why}\n");
                            }
                        }
                    }
                }
            }
        }
    }
    outln!("{passed} passed, {failed} failed");
    if failed > 0 { Exit::Failed } else { Exit::Ok }
}

fn outcome(
    set: &PolicySet,
    p: &Policy,
    e: &gatehouse::syntax::ast::Expectation,
    workspaces: &mut crate::load::Workspaces,
) -> Result<(), String> {
    let d = p.decide_in(&e.query, Some(workspaces.for_query(&e.query)));
    let decision_ok = d.outcome.as_str() == e.decision.node;
    let reason_ok = e
        .because
        .as_ref()
        .is_none_or(|b| b.node == d.reason.as_str());
    if decision_ok && reason_ok {
        return Ok(());
    }
    let rule = match d.rule.and_then(|r| set.rule(r)) {
        Some(r) => format!("{}:{}:{} `{}`", r.file, r.line, r.column, r.source),
        None => "none (a default)".to_string(),
    };
    Err(format!(
        "actual:   {} because {} (policy {}, rule: {rule})",
        d.outcome.as_str(),
        d.reason.as_str(),
        p.name()
    ))
}
