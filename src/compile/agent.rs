//! Agent-side tables: `commands` rules indexed by program, MCP modes, and
//! the sandbox's writable roots and protected names.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::decision::RuleId;
use crate::syntax::ast::{CommandEffect, McpMode};

/// One `commands` rule: alternatives per position (position 0 is the
/// program).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct CommandRule {
    pub effect: CommandEffect,
    pub pattern: Vec<Vec<String>>,
    pub rule: RuleId,
}

impl CommandRule {
    /// Whether the rule's program matches `program`: a spelling of
    /// position 0 itself, or for a path, its basename — `forbid` and
    /// `prompt` rules from any directory, `allow` rules only from a system
    /// directory (docs/language.md#exec, step 2).
    #[cfg(feature = "diff")]
    pub fn matches_program(&self, program: &str) -> bool {
        let first = self.pattern.first().map(Vec::as_slice).unwrap_or(&[]);
        let name = crate::normalize::path::basename(program);
        first.iter().any(|p| p == program)
            || (name != program
                && first.iter().any(|p| p == name)
                && (self.effect != CommandEffect::Allow
                    || crate::normalize::path::trusted_name(program).is_some()))
    }

    /// Whether the argv is at least as long as the rule and every argument
    /// position equals one of its alternatives (the program is
    /// [`CommandRule::matches_program`]'s).
    pub fn matches_args(&self, args: &[String]) -> bool {
        self.pattern.len() <= args.len() + 1
            && self
                .pattern
                .iter()
                .skip(1)
                .zip(args)
                .all(|(alts, a)| alts.iter().any(|x| x == a))
    }
}

/// `commands` rules, indexed by each program spelling of position 0.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Commands {
    pub rules: Vec<CommandRule>,
    #[serde(serialize_with = "super::sorted::map")]
    pub by_program: HashMap<String, Vec<usize>>,
}

impl Commands {
    pub fn push(&mut self, r: CommandRule) {
        let i = self.rules.len();
        for p in r.pattern.first().into_iter().flatten() {
            self.by_program.entry(p.clone()).or_default().push(i);
        }
        self.rules.push(r);
    }

    /// The strictest rule matching `argv` (forbid, then prompt, then
    /// allow; among equals the first written), if any.
    pub fn strictest(&self, argv: &[String]) -> Option<&CommandRule> {
        let (program, args) = argv.split_first()?;
        let name = crate::normalize::path::basename(program);
        // The index holds each rule under each spelling of its program
        // (checked when an artifact loads): a rule under `program` names
        // it; one under its basename applies to the path as
        // [`CommandRule::matches_program`] says — an `allow` rule only in
        // a system directory. The path's trust is asked once, not a rule.
        let exact = self
            .by_program
            .get(program.as_str())
            .into_iter()
            .flatten()
            .filter_map(|&i| self.rules.get(i));
        let by_name: &[usize] = if name == program {
            &[]
        } else {
            self.by_program.get(name).map_or(&[], Vec::as_slice)
        };
        let trusted =
            !by_name.is_empty() && crate::normalize::path::trusted_name(program).is_some();
        let by_name = by_name
            .iter()
            .filter_map(|&i| self.rules.get(i))
            .filter(|r| r.effect != CommandEffect::Allow || trusted);
        exact
            .chain(by_name)
            .filter(|r| r.matches_args(args))
            .max_by_key(|r| (r.effect, std::cmp::Reverse(r.rule)))
    }

    /// Whether every rule is indexed under exactly the spellings of its
    /// program (an artifact's index is checked against its rules).
    pub(crate) fn index_holds(&self) -> bool {
        let mut expected: usize = 0;
        for (i, r) in self.rules.iter().enumerate() {
            let first = r.pattern.first().map(Vec::as_slice).unwrap_or(&[]);
            for p in first {
                if !self.by_program.get(p).is_some_and(|v| v.contains(&i)) {
                    return false;
                }
            }
            // (As `push` indexes it: once per alternative.)
            expected += first.len();
        }
        // Nothing else is indexed (a rule under a word it does not name).
        self.by_program.values().map(Vec::len).sum::<usize>() == expected
            && self.by_program.iter().all(|(p, v)| {
                v.iter().all(|&i| {
                    self.rules
                        .get(i)
                        .and_then(|r| r.pattern.first())
                        .is_some_and(|first| first.contains(p))
                })
            })
    }

    /// Some `forbid` or `prompt` rule exists (an undecodable script may
    /// name its program).
    pub fn raises_on_any(&self) -> bool {
        self.rules.iter().any(|r| r.effect != CommandEffect::Allow)
    }

    /// Whether a `forbid` or `prompt` rule names this program (for the
    /// raises of unknown scripts).
    pub fn raises_on(&self, word: &str) -> bool {
        let name = crate::normalize::path::basename(word);
        [word, name].iter().any(|w| {
            self.by_program.get(*w).into_iter().flatten().any(|&i| {
                self.rules
                    .get(i)
                    .is_some_and(|r| r.effect != CommandEffect::Allow)
            })
        })
    }
}

/// MCP approval modes by server, and by tool within a server.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Mcp {
    #[serde(serialize_with = "super::sorted::map")]
    pub servers: HashMap<String, (McpMode, RuleId)>,
    #[serde(serialize_with = "super::sorted::nested")]
    pub tools: HashMap<String, HashMap<String, (McpMode, RuleId)>>,
}

/// What a file rule grants, weakest first: a glob only ever takes access
/// away, and among literal rules on one path the weakest wins.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Ord, PartialOrd, Serialize, Deserialize)]
pub(crate) enum Access {
    /// `none`: neither read nor write.
    None,
    /// `read`: read, not write.
    Read,
    /// `writable`: read and write.
    Write,
}

/// One file rule of the `sandbox` block.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct FileRule {
    pub access: Access,
    pub pattern: crate::normalize::FilePattern,
    pub rule: RuleId,
}

/// The sandbox's file rules (`writable`, `read`, `none`, in source order)
/// and protected names.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct SandboxPaths {
    pub files: Vec<FileRule>,
    /// Lowercase; always holds `.git`, `.agents`, `.zerocode`.
    pub protect: Vec<String>,
    /// `exclude "/tmp"`: `/tmp` is not a writable root.
    #[serde(default)]
    pub no_tmp: bool,
}
