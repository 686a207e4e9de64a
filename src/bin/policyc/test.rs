//! `policyc test`: run every `test` block.

use gatehouse::{Policy, PolicySet, TestCase};

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
    for case in b.tests() {
        // `check` has refused a case without a policy already.
        let Some(p) = case.policy_in(set) else {
            continue;
        };
        match outcome(set, p, &case, &mut workspaces) {
            Ok(()) => passed += 1,
            Err(why) => {
                failed += 1;
                outln!(
                    "FAIL {}:{}:{} in test \"{}\"",
                    case.file,
                    case.line,
                    case.column,
                    case.test
                );
                outln!(
                    "  expected: {} {}{}",
                    case.expected.outcome,
                    case.query_text,
                    case.expected
                        .because
                        .as_ref()
                        .map(|b| format!(" because {b}"))
                        .unwrap_or_default()
                );
                outln!("  {why}\n");
            }
        }
    }
    outln!("{passed} passed, {failed} failed");
    if failed > 0 { Exit::Failed } else { Exit::Ok }
}

fn outcome(
    set: &PolicySet,
    p: &Policy,
    case: &TestCase,
    workspaces: &mut crate::load::Workspaces,
) -> Result<(), String> {
    let d = p.decide_in(&case.query, Some(workspaces.for_query(&case.query)));
    if case.passes(&d) {
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
