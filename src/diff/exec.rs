//! `exec` compared for every command line that is not a shell wrapper's
//! (`bash -lc SCRIPT` and its kin are [`Kind::Script`], drawn in
//! `sampled.rs`: a script is text in an infinite language).
//!
//! A direct command line's decision is a function of three things only
//! (docs/language.md#exec, steps 2 and 3): the strictest `commands` rule
//! each side matches, what the built-in tests make of it (dangerous,
//! known-safe, neither: [`builtin_class`]) and `escalate`. So a class is
//! that triple ([`Key`]), and the diff needs one witness per class that
//! some command line realises.
//!
//! The classes are found on a trie of both sides' rules: a node is a
//! prefix of literal words (the program in each spelling the rules tell
//! apart: the literal, and for each name bare, in a system directory, and
//! elsewhere), its children the words some rule still alive at that depth
//! names. Every command line follows one path: its words are children
//! while they can be, then it ends or holds a word no rule alive there
//! names — and then every rule longer than the prefix fails, so it
//! matches what the prefix alone matches. At each node the prefix itself
//! and the prefix followed by one other word and a tail are tried, the
//! word drawn from every word the built-in tests single out
//! ([`crate::eval::known_safe::special_words`]) and from fresh words of
//! each shape they test for (a `sed` range, a `--format=`, a `-C` dir, a
//! plain word), none of them a child; the tails give the flags, forbidden
//! options and subcommands that turn a class on or off. `tests/diff.rs`
//! checks the result against brute force.

use std::collections::{BTreeSet, HashMap};

use crate::compile::Policy;
use crate::compile::agent::{CommandRule, Commands};
use crate::decision::RuleId;
use crate::eval::known_safe::{
    COMMAND_WRAPPERS, basename, builtin_class, known_safe_programs, possible_classes,
    special_words, trusted_name,
};
use crate::eval::{argv_valid, wrapper_script};
use crate::normalize::path::SYSTEM_DIRS;
use crate::query::Query;

use super::{Cell, Kind, Region};

/// Past this many prefixes (both sides' rules with many alternatives in
/// many positions), `exec` is drawn instead and the output says so.
const MAX_NODES: usize = 100_000;

/// Tails tried after the word that follows a prefix: the force flag and
/// `rm -f` (dangerous, also behind wrappers), an option each known-safe
/// program forbids, too many arguments for `sed -n Np`, and the
/// subcommand git needs after a global option.
const TAILS: &[&[&str]] = &[
    &[],
    &["x"],
    &["-f"],
    &["rm", "-f"],
    &["-o"],
    &["-z"],
    &["-exec"],
    &["--output"],
    &["x", "y", "z"],
    &["status"],
    &["x", "status"],
    &["1p"],
];

/// What a direct command line's decision depends on: each side's
/// strictest matching rule, and the built-in tests' class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    a: Option<RuleId>,
    b: Option<RuleId>,
    builtin: u8,
}

/// The classes of direct command lines two policies tell apart, each with
/// a witness.
#[derive(Debug)]
pub(crate) struct ExecClasses {
    a: Commands,
    b: Commands,
    /// Both sides' query limits (an argv past them is refused before any
    /// rule).
    limits: crate::limits::QueryLimits,
    keys: HashMap<Key, usize>,
    witnesses: Vec<Vec<String>>,
}

impl ExecClasses {
    /// The classes of `a` and `b`; `None` when the trie grows past
    /// [`MAX_NODES`] or the two sides hold different query limits (an
    /// argv one side refuses as too long would be a change no class has).
    pub(crate) fn of(a: &Policy, b: &Policy) -> Option<ExecClasses> {
        if a.limits != b.limits {
            return None;
        }
        let (ca, cb) = (&a.agent.commands, &b.agent.commands);
        let rules: Vec<&CommandRule> = ca.rules.iter().chain(&cb.rules).collect();
        let index = by_program(&rules);
        let mut walk = Walk {
            a: ca,
            b: cb,
            special: special(),
            nodes: 0,
            keys: HashMap::new(),
            witnesses: Vec::new(),
        };
        for program in programs(&rules) {
            let live = live_for(&index, &program);
            walk.node(&mut vec![program], live)?;
        }
        Some(ExecClasses {
            a: ca.clone(),
            b: cb.clone(),
            limits: a.limits,
            keys: walk.keys,
            witnesses: walk.witnesses,
        })
    }

    /// Every class's witness decided by both sides, with and without
    /// `escalate`: the changed ones grouped into regions.
    pub(crate) fn regions(&self, a: &Policy, b: &Policy) -> Vec<Region> {
        let mut found = Vec::new();
        for (i, argv) in self.witnesses.iter().enumerate() {
            for escalate in [false, true] {
                let q = Query::Exec {
                    argv: argv.clone(),
                    escalate,
                };
                let (x, y) = (a.decide(&q), b.decide(&q));
                found.push((
                    Kind::Exec,
                    q,
                    x,
                    y,
                    Cell::item(Kind::Exec, i * 2 + usize::from(escalate)),
                ));
            }
        }
        super::sampled::alike(found, false)
    }

    /// The class of a command line: `None` for one both sides refuse
    /// before any rule (`invalid_command`), a shell wrapper's (sampled),
    /// or a class the trie did not find (which `tests/diff.rs` would
    /// report as a miss).
    pub(crate) fn class_of(&self, argv: &[String], escalate: bool) -> Option<usize> {
        if !argv_valid(&self.limits, argv) || wrapper_script(argv).is_some() {
            return None;
        }
        let key = Key {
            a: self.a.strictest(argv).map(|r| r.rule),
            b: self.b.strictest(argv).map(|r| r.rule),
            builtin: builtin_class(argv),
        };
        self.keys.get(&key).map(|i| i * 2 + usize::from(escalate))
    }
}

struct Walk<'a> {
    a: &'a Commands,
    b: &'a Commands,
    /// [`special`], once.
    special: Vec<String>,
    nodes: usize,
    keys: HashMap<Key, usize>,
    witnesses: Vec<Vec<String>>,
}

impl Walk<'_> {
    /// One prefix: its own classes, then each child's. `None` past
    /// [`MAX_NODES`].
    fn node(&mut self, prefix: &mut Vec<String>, live: Vec<&CommandRule>) -> Option<()> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return None;
        }
        let depth = prefix.len();
        let longer: Vec<&CommandRule> = live
            .into_iter()
            .filter(|r| r.pattern.len() > depth)
            .collect();
        let next: BTreeSet<String> = longer
            .iter()
            .flat_map(|r| r.pattern.get(depth).into_iter().flatten())
            .cloned()
            .collect();
        self.leaf(prefix, &next);
        for w in next.iter() {
            let child: Vec<&CommandRule> = longer
                .iter()
                .copied()
                .filter(|r| {
                    r.pattern
                        .get(depth)
                        .is_some_and(|alts| alts.iter().any(|x| x == w))
                })
                .collect();
            prefix.push(w.clone());
            self.node(prefix, child)?;
            prefix.pop();
        }
        Some(())
    }

    /// The classes of the prefix and of the prefix followed by a word not
    /// in `next` and a tail: the rules matched are the prefix's for all
    /// of them, so only the built-in class varies.
    fn leaf(&mut self, prefix: &[String], next: &BTreeSet<String>) {
        let a = self.a.strictest(prefix).map(|r| r.rule);
        let b = self.b.strictest(prefix).map(|r| r.rule);
        let possible = prefix.first().map_or([true; 3], |p| possible_classes(p));
        let mut found = [false; 3];
        let key = Key { a, b, builtin: 0 };
        self.record(key, prefix, &mut found);
        let mut argv: Vec<String> = prefix.to_vec();
        for w in words(&self.special, next) {
            for tail in TAILS {
                if possible.iter().zip(&found).all(|(p, f)| !p || *f) {
                    return;
                }
                argv.truncate(prefix.len());
                argv.push(w.clone());
                argv.extend(tail.iter().map(|t| t.to_string()));
                self.record(key, &argv, &mut found);
            }
        }
    }

    /// Records `argv`'s class (`key` with its built-in class) with `argv`
    /// as its witness, unless a shell wrapper's or already found.
    fn record(&mut self, key: Key, argv: &[String], found: &mut [bool; 3]) {
        if wrapper_script(argv).is_some() {
            return;
        }
        let builtin = builtin_class(argv);
        let Some(slot) = found.get_mut(usize::from(builtin)) else {
            return;
        };
        if std::mem::replace(slot, true) {
            return;
        }
        let key = Key { builtin, ..key };
        if !self.keys.contains_key(&key) {
            self.keys.insert(key, self.witnesses.len());
            self.witnesses.push(argv.to_vec());
        }
    }
}

/// Both sides' rules by each spelling of their program.
fn by_program<'a>(rules: &[&'a CommandRule]) -> HashMap<&'a str, Vec<&'a CommandRule>> {
    let mut out: HashMap<&str, Vec<&CommandRule>> = HashMap::new();
    for r in rules {
        for p in r.pattern.first().into_iter().flatten() {
            out.entry(p.as_str()).or_default().push(r);
        }
    }
    out
}

/// The rules whose program matches `program`: those written with it,
/// and for a path those written with its basename (as
/// [`CommandRule::matches_program`] says), each once.
fn live_for<'a>(
    index: &HashMap<&'a str, Vec<&'a CommandRule>>,
    program: &str,
) -> Vec<&'a CommandRule> {
    let name = basename(program);
    let mut out: Vec<&CommandRule> = Vec::new();
    let spellings: &[&str] = if name == program {
        &[program]
    } else {
        &[program, name]
    };
    for s in spellings {
        for r in index.get(s).into_iter().flatten() {
            if r.matches_program(program) && !out.iter().any(|o| std::ptr::eq(*o, *r)) {
                out.push(r);
            }
        }
    }
    out
}

/// The program words to start from: every spelling a rule writes, and
/// for every name a rule or the built-in tests use, the bare name, the
/// name in a system directory and the name elsewhere (each the first such
/// spelling no rule writes), and a name nothing uses.
fn programs(rules: &[&CommandRule]) -> Vec<String> {
    let literals: BTreeSet<String> = rules
        .iter()
        .flat_map(|r| r.pattern.first().into_iter().flatten())
        .cloned()
        .collect();
    let mut names: BTreeSet<String> = literals
        .iter()
        .map(|p| basename(p).to_string())
        .filter(|n| !n.is_empty())
        .collect();
    names.extend(known_safe_programs().map(String::from));
    names.extend(COMMAND_WRAPPERS.iter().map(|w| w.to_string()));
    names.insert("rm".into());
    let mut out = literals.clone();
    let unused = |mut candidates: Box<dyn Iterator<Item = String> + '_>| {
        candidates.find(|c| !literals.contains(c))
    };
    for n in &names {
        out.insert(n.clone());
        out.extend(unused(Box::new(
            SYSTEM_DIRS.iter().map(move |d| format!("{d}/{n}")),
        )));
        out.extend(unused(Box::new(
            std::iter::once(format!("./{n}"))
                .chain((0usize..).map(move |i| format!("/tmp/gh{i}/{n}"))),
        )));
    }
    out.extend(unused(Box::new((0usize..).map(|i| format!("zz{i}")))));
    out.extend(unused(Box::new((0usize..).map(|i| format!("./zz{i}")))));
    // Bare names before paths, so that a class's witness reads plainly.
    let mut out: Vec<String> = out.into_iter().collect();
    out.sort_by_key(|p| (p.contains('/'), p.len(), p.clone()));
    out
}

/// The words the built-in tests single out, and a few of the shapes
/// they test for (a walk computes them once).
fn special() -> Vec<String> {
    let mut out: Vec<String> = special_words()
        .into_iter()
        .map(String::from)
        .chain(["x", "/bin/rm", "1,2p", "-Cdir", "--format=%(refname)"].map(String::from))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The words tried after a prefix: `special` and the first fresh word of
/// each shape the built-in tests test for, none of them in `next`.
fn words(special: &[String], next: &BTreeSet<String>) -> Vec<String> {
    let mut out: Vec<String> = special
        .iter()
        .filter(|w| !next.contains(*w))
        .cloned()
        .collect();
    let shapes: [&dyn Fn(usize) -> String; 6] = [
        &|i| format!("zz{i}"),
        &|i| format!("{}p", i + 1),
        &|i| format!("--format={i}"),
        &|i| format!("-Cd{i}"),
        &|i| format!("-{i}f"),
        &|i| format!("f{i}"),
    ];
    for shape in shapes {
        out.extend((0..).map(shape).find(|w| !next.contains(w)));
    }
    out
}

/// Command lines, one per class, covering the claim `exec WORDS [*]`
/// over `policy` (docs/language.md#properties): without `*` the one
/// command line; with it, every class of the command lines beginning with
/// WORDS, found on the policy's trie from that prefix, and WORDS itself.
/// The flag says whether that is every command line of the claim: not
/// when a shell wrapper's script can follow (`exec bash *`, `exec sh -c
/// *`), whose scripts are drawn instead. `None` past [`MAX_NODES`].
pub(crate) fn covered(
    policy: &Policy,
    words: &[String],
    rest: bool,
) -> Option<(Vec<Vec<String>>, bool)> {
    if !rest {
        return Some((vec![words.to_vec()], true));
    }
    let none = Commands::default();
    let commands = &policy.agent.commands;
    let mut walk = Walk {
        a: commands,
        b: &none,
        special: special(),
        nodes: 0,
        keys: HashMap::new(),
        witnesses: Vec::new(),
    };
    let rules: Vec<&CommandRule> = commands.rules.iter().collect();
    let index = by_program(&rules);
    match words.split_first() {
        None => {
            for program in programs(&rules) {
                let live = live_for(&index, &program);
                walk.node(&mut vec![program], live)?;
            }
        }
        Some((program, args)) => {
            let live = live_for(&index, program)
                .into_iter()
                .filter(|r| {
                    r.pattern
                        .iter()
                        .skip(1)
                        .zip(args)
                        .all(|(alts, w)| alts.contains(w))
                })
                .collect();
            walk.node(&mut words.to_vec(), live)?;
        }
    }
    let mut out = walk.witnesses;
    if !words.is_empty() {
        out.push(words.to_vec());
    }
    Some((out, !script_may_follow(words)))
}

/// Whether some command line beginning with `words` (and longer) is a
/// shell wrapper's, `PROGRAM -c|-lc SCRIPT`.
fn script_may_follow(words: &[String]) -> bool {
    let shell = |p: &String| {
        trusted_name(p).is_some_and(|n| matches!(n, "bash" | "sh" | "zsh"))
            || crate::eval::is_shell(basename(p))
    };
    match words {
        [] => true,
        [p] => shell(p),
        [p, flag] => shell(p) && (flag == "-c" || flag == "-lc"),
        _ => false,
    }
}
