//! Command lines drawn for the sampled comparison (`policyc diff`): from
//! both sides' `commands` rules and the shared vocabulary. With `exec`
//! compared exactly (`exec.rs`) only shell wrappers' scripts are drawn,
//! every changed rule's and a bounded number of the shared ones.

use std::collections::BTreeSet;

use crate::syntax::ast::{CommandEffect, CommandRule, File, SectionKind};

use super::sampled::sections;

/// A command rule as its effect and words (not where it is written).
fn rule_key(r: &CommandRule) -> String {
    let mut key = match r.effect {
        CommandEffect::Allow => "allow",
        CommandEffect::Prompt => "prompt",
        CommandEffect::Forbid => "forbid",
    }
    .to_string();
    for w in &r.pattern {
        key.push('\n');
        key.push_str(&w.alternatives.join("\0"));
    }
    key
}

/// When only scripts are drawn (`exec` compared exactly), at most this
/// many heads from the rules both sides share (the changed rules' heads
/// are all drawn).
const MAX_SHARED_HEADS: usize = 1024;

/// Argument tails tried after each command rule's words.
const EXEC_TAILS: &[&[&str]] = &[
    &[],
    &["x"],
    &["-rf", "/"],
    &["--force"],
    &["origin", "main"],
];

/// Command lines drawn from both sides' `commands` rules (each
/// alternative, with a few argument tails, behind `sudo` and inside `bash
/// -lc`) and the shared vocabulary of tails and wrappers.
pub(super) fn argvs(sides: &[&[File]], scripts_only: bool) -> BTreeSet<Vec<String>> {
    let mut out: BTreeSet<Vec<String>> = BTreeSet::new();
    // Each rule as (effect, words), per side: a rule on one side only is
    // what a change is about.
    let per_side: Vec<BTreeSet<String>> = sides
        .iter()
        .map(|side| {
            sections(&[side])
                .filter_map(|s| match s {
                    SectionKind::Commands(rules) => Some(rules),
                    _ => None,
                })
                .flatten()
                .map(rule_key)
                .collect()
        })
        .collect();
    let changed = |r: &CommandRule| {
        let key = rule_key(r);
        per_side.iter().filter(|side| side.contains(&key)).count() < per_side.len()
    };
    let mut heads: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut unchanged: BTreeSet<Vec<String>> = BTreeSet::new();
    for section in sections(sides) {
        let SectionKind::Commands(rules) = section else {
            continue;
        };
        for rule in rules {
            let mut words: Vec<Vec<String>> = vec![Vec::new()];
            for w in &rule.pattern {
                let choices: &Vec<String> = &w.alternatives;
                words = words
                    .iter()
                    .flat_map(|prefix| {
                        choices.iter().map(move |c| {
                            let mut v = prefix.clone();
                            v.push(c.clone());
                            v
                        })
                    })
                    .take(16)
                    .collect();
            }
            if changed(rule) {
                heads.extend(words);
            } else {
                unchanged.extend(words);
            }
        }
    }
    // Scripts are costly to read: the rules both sides share are drawn
    // up to a bound (every changed rule always is).
    let room = if scripts_only {
        MAX_SHARED_HEADS
    } else {
        usize::MAX
    };
    heads.extend(unchanged.into_iter().take(room));
    for tail in crate::samples::TAILS {
        heads.insert(tail.split_whitespace().map(String::from).collect());
    }
    for head in heads {
        if head.is_empty() {
            continue;
        }
        for tail in EXEC_TAILS {
            let argv: Vec<String> = head
                .iter()
                .cloned()
                .chain(tail.iter().map(|t| t.to_string()))
                .collect();
            if !scripts_only {
                out.insert(
                    vec!["sudo".to_string()]
                        .into_iter()
                        .chain(argv.clone())
                        .collect(),
                );
            }
            out.insert(vec![
                "bash".to_string(),
                "-lc".to_string(),
                argv.iter()
                    .map(|w| crate::query::quote_word(w))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]);
            out.insert(argv);
        }
        if head.len() > 1 {
            out.insert(head.iter().take(1).cloned().collect());
        }
    }
    for wrapper in crate::samples::COMMAND_WRAPPERS.iter().take(6) {
        out.insert(
            wrapper
                .split_whitespace()
                .chain(["rm", "-rf", "x"])
                .map(String::from)
                .collect(),
        );
    }
    out
}
