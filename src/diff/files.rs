//! `write` and `read`, compared for every path: each thing a file decision
//! looks at — lying under a literal rule's path or an implicit root, a
//! glob covering the path or an ancestor, a protected name directly under
//! a writable root, a nested repository's `.git/hooks` or `.git/config` —
//! becomes a regular expression over the path's bytes; one DFA of all of
//! them (both sides', `MatchKind::All`) reads a path to the set of those
//! that hold, and a decision is a function of that set. Walking the DFA
//! from its start finds every set some normalised absolute UTF-8 path
//! reaches, with the shortest such path as its witness: the classes of
//! paths no rule tells apart, every one of them. Exact for the workspace
//! and home the diff binds ([`SAMPLE_WORKSPACE`], [`SAMPLE_HOME`]).
//!
//! Too many rules for the DFA's size limit: `None`, and the caller samples
//! (and says so).

use std::collections::{BTreeMap, VecDeque};

use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::util::primitives::StateID;
use regex_automata::{Anchored, MatchKind, nfa::thompson, util::syntax};

use crate::compile::Policy;
use crate::eval::Workspace;
use crate::normalize::glob::{Segment, class_end, class_holds};

use super::prove::{SAMPLE_HOME, SAMPLE_WORKSPACE};
use super::{Cell, Kind, Region};
use crate::query::Query;

/// The DFA's size limits: a policy with more file rules than fit is
/// sampled instead.
const SIZE_LIMIT: usize = 4 << 20;

/// At most this many features (both sides' file rules and roots)...
const MAX_FEATURES: usize = 96;

/// ...of which at most this many span any depth (`**` globs, the nested
/// repositories' code).
const MAX_DEEP: usize = 6;

/// The classes of paths of two policies.
#[derive(Debug)]
pub(crate) struct FileClasses {
    dfa: dense::DFA<Vec<u32>>,
    /// Per class (in the order found), the shortest path of it.
    pub(crate) witnesses: Vec<String>,
    /// Per class, the features that hold for its paths.
    sets: Vec<Vec<bool>>,
    /// The class of each set of features that holds, by its bits.
    by_set: BTreeMap<Vec<bool>, usize>,
    features: usize,
}

impl FileClasses {
    /// The classes of every path both policies' file rules, bound to the
    /// sample workspace and home, tell apart; `None` when they do not fit
    /// the size limit.
    pub(crate) fn of(a: &Policy, b: &Policy) -> Option<FileClasses> {
        Self::with(a, b, None).map(|(c, _)| c)
    }

    /// The paths of one policy's classes that a property's glob covers
    /// (the glob or beneath it, as a file rule covers them; relative to
    /// the workspace, `~` the home), one per class: every path of the glob
    /// is decided as one of them. `None`: the glob is not a file pattern,
    /// or the rules do not fit.
    pub(crate) fn covered(p: &Policy, glob_text: &str) -> Option<Vec<String>> {
        let pattern = crate::normalize::glob::FilePattern::parse(glob_text).ok()?;
        let base = match pattern.anchor() {
            crate::normalize::glob::Anchor::Root => "/",
            crate::normalize::glob::Anchor::Workspace => SAMPLE_WORKSPACE,
            crate::normalize::glob::Anchor::Home => SAMPLE_HOME,
        };
        let extra = glob(base, pattern.segments())?;
        let (classes, at) = Self::with(p, p, Some(extra))?;
        let at = at?;
        Some(
            classes
                .sets
                .iter()
                .zip(&classes.witnesses)
                .filter(|(set, _)| set.get(at).copied().unwrap_or(false))
                .map(|(_, w)| w.clone())
                .collect(),
        )
    }

    /// The classes, with one more feature (its index among them).
    fn with(a: &Policy, b: &Policy, extra: Option<String>) -> Option<(FileClasses, Option<usize>)> {
        let ws = workspace();
        let mut patterns: Vec<String> = Vec::new();
        for view in [a.files(&ws)?, b.files(&ws)?] {
            // One feature for "a protected name directly under some
            // writable root" and one for "a nested repository's code under
            // some writable root": the engine asks whether any root has
            // it.
            let roots: Vec<String> = view.write_roots.iter().map(|r| prefix(r)).collect();
            let names: Vec<String> = view
                .protect
                .iter()
                .map(String::as_str)
                .chain([".git"])
                .map(|n| bytes(n.as_bytes()))
                .collect();
            let any_root = format!("(?:{})", roots.join("|"));
            patterns.push(format!("{any_root}/(?i:{})(?:/.*)?", names.join("|")));
            patterns.push(format!(
                r"{any_root}(?:/[^/]+)*/(?i:\.git)/(?:(?i:hooks)(?:/.*)?|(?i:config))"
            ));
            patterns.push(under(&view.workspace));
            patterns.push(under("/tmp"));
            for r in &view.rules {
                if let Some(p) = &r.path {
                    patterns.push(under(p));
                } else if let Some(base) = &r.base
                    && let Some(g) = glob(base, r.pattern.segments())
                {
                    patterns.push(g);
                }
            }
        }
        patterns.extend(extra.clone());
        patterns.sort();
        patterns.dedup();
        // Each pattern that spans any depth multiplies the DFA's states;
        // past these bounds the comparison samples instead (and says so).
        let deep = patterns
            .iter()
            .filter(|p| p.contains("(?:/[^/]+)*"))
            .count();
        if patterns.len() > MAX_FEATURES || deep > MAX_DEEP {
            return None;
        }
        let at = extra.and_then(|e| patterns.iter().position(|p| *p == e));
        let dfa = build_dfa(&patterns, false)?;
        let features = patterns.len();
        let mut classes = FileClasses {
            dfa,
            witnesses: Vec::new(),
            sets: Vec::new(),
            by_set: BTreeMap::new(),
            features,
        };
        classes.walk()?;
        Some((classes, at))
    }

    /// Breadth first from the start, over ASCII bytes, alongside a small
    /// automaton that keeps the path normal (absolute, no empty, `.` or
    /// `..` segment, no trailing `/`): every state pair once, with the
    /// shortest (then most readable) path reaching it. `None` when some
    /// byte class holds no ASCII byte (a rule naming a non-ASCII
    /// character): the ASCII paths would not stand for every path then.
    fn walk(&mut self) -> Option<()> {
        let start = self.start()?;
        let alphabet = ascii_representatives(&self.dfa)?;
        let mut seen: std::collections::HashSet<(StateID, Norm)> = std::collections::HashSet::new();
        let mut queue: VecDeque<(StateID, Norm, Vec<u8>)> = VecDeque::new();
        seen.insert((start, Norm::Start));
        queue.push_back((start, Norm::Start, Vec::new()));
        while let Some((sid, norm, path)) = queue.pop_front() {
            if norm.accepts()
                && let Some(set) = self.set_at_end(sid)
                && !self.by_set.contains_key(&set)
                && let Ok(text) = String::from_utf8(path.clone())
            {
                self.by_set.insert(set.clone(), self.witnesses.len());
                self.sets.push(set);
                self.witnesses.push(text);
            }
            for &byte in &alphabet {
                let Some(n) = norm.next(byte) else { continue };
                let next = self.dfa.next_state(sid, byte);
                if self.dfa.is_dead_state(next) || !seen.insert((next, n)) {
                    continue;
                }
                let mut p = path.clone();
                p.push(byte);
                queue.push_back((next, n, p));
            }
        }
        Some(())
    }

    /// The state an anchored search starts in, at the start of the text.
    fn start(&self) -> Option<StateID> {
        let config = regex_automata::util::start::Config::new().anchored(Anchored::Yes);
        self.dfa.start_state(&config).ok()
    }

    /// The features that hold for a path ending in state `sid`.
    fn set_at_end(&self, sid: StateID) -> Option<Vec<bool>> {
        let end = self.dfa.next_eoi_state(sid);
        let mut set = vec![false; self.features];
        if self.dfa.is_match_state(end) {
            for i in 0..self.dfa.match_len(end) {
                *set.get_mut(self.dfa.match_pattern(end, i).as_usize())? = true;
            }
        }
        Some(set)
    }

    /// The `write` and `read` regions between two policies: each class's
    /// witness decided on both sides, classes that changed alike grouped.
    pub(crate) fn regions(&self, a: &Policy, b: &Policy) -> Vec<Region> {
        let mut found = Vec::new();
        for (i, path) in self.witnesses.iter().enumerate() {
            for kind in [Kind::Write, Kind::Read] {
                let (workspace, home) = (Some(SAMPLE_WORKSPACE.into()), Some(SAMPLE_HOME.into()));
                let q = match kind {
                    Kind::Write => Query::Write {
                        path: path.clone(),
                        workspace,
                        home,
                    },
                    _ => Query::Read {
                        path: path.clone(),
                        workspace,
                        home,
                    },
                };
                let (x, y) = (a.decide(&q), b.decide(&q));
                found.push((kind, q, x, y, Cell::item(kind, i)));
            }
        }
        super::sampled::alike(found, false)
    }

    /// The class of a path (`None`: not a normalised absolute UTF-8 path).
    pub(crate) fn class_of(&self, path: &str) -> Option<usize> {
        if crate::normalize::normalize_absolute_path(path).as_deref() != Some(path) {
            return None;
        }
        let mut sid = self.start()?;
        for &b in path.as_bytes() {
            sid = self.dfa.next_state(sid, b);
        }
        let set = self.set_at_end(sid)?;
        self.by_set.get(&set).copied()
    }
}

/// The workspace and home the diff binds.
pub(crate) fn workspace() -> Workspace {
    Workspace {
        root: SAMPLE_WORKSPACE.into(),
        gitdir: None,
        home: Some(SAMPLE_HOME.into()),
    }
}

/// Where a path being written stands, for keeping it normal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Norm {
    /// Nothing yet.
    Start,
    /// `/`, the root.
    Root,
    /// Right after a `/` that ends a name.
    Slash,
    /// A segment so far `.`.
    Dot,
    /// A segment so far `..`.
    DotDot,
    /// Inside a segment that is a name.
    Name,
}

impl Norm {
    /// The state after `b`; `None` where the path would not be normal.
    fn next(self, b: u8) -> Option<Norm> {
        if b == 0 {
            return None;
        }
        match self {
            Norm::Start => (b == b'/').then_some(Norm::Root),
            Norm::Root | Norm::Slash => match b {
                b'/' => None,
                b'.' => Some(Norm::Dot),
                _ => Some(Norm::Name),
            },
            Norm::Dot => match b {
                b'/' => None,
                b'.' => Some(Norm::DotDot),
                _ => Some(Norm::Name),
            },
            Norm::DotDot => (b != b'/').then_some(Norm::Name),
            Norm::Name => Some(if b == b'/' { Norm::Slash } else { Norm::Name }),
        }
    }

    /// Whether a normal path may end here: `/` alone, or after a name.
    fn accepts(self) -> bool {
        matches!(self, Norm::Root | Norm::Name)
    }
}

/// One DFA of every pattern (each anchored at both ends, bytewise, no
/// Unicode), reporting every pattern that matches (`MatchKind::All`);
/// `None` past the size limit. `minimize`: fewer states, for a walk
/// over pairs of them.
pub(crate) fn build_dfa(patterns: &[String], minimize: bool) -> Option<dense::DFA<Vec<u32>>> {
    dense::Builder::new()
        .syntax(
            syntax::Config::new()
                .unicode(false)
                .utf8(false)
                .dot_matches_new_line(true),
        )
        .thompson(thompson::Config::new().utf8(false))
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .minimize(minimize)
                .dfa_size_limit(Some(SIZE_LIMIT))
                .determinize_size_limit(Some(SIZE_LIMIT)),
        )
        .build_many(
            &patterns
                .iter()
                .map(|p| format!("(?:{p})$"))
                .collect::<Vec<_>>(),
        )
        .ok()
}

/// One ASCII representative of each byte class, the most readable first:
/// letters, then digits, then the rest; `None` when a class holds no
/// ASCII byte.
pub(crate) fn ascii_representatives(dfa: &dense::DFA<Vec<u32>>) -> Option<Vec<u8>> {
    representatives(dfa, &[])
}

/// The same, leaving the bytes `but` out, and with them out of the reach
/// of the check (a class of `/` alone needs no other byte).
pub(crate) fn representatives(dfa: &dense::DFA<Vec<u32>>, but: &[u8]) -> Option<Vec<u8>> {
    let classes = dfa.byte_classes();
    let mut best: BTreeMap<u8, u8> = BTreeMap::new();
    for b in (1..=0x7fu8).filter(|b| !but.contains(b)) {
        let c = classes.get(b);
        match best.get(&c) {
            Some(&have) if readability(have) <= readability(b) => {}
            _ => {
                best.insert(c, b);
            }
        }
    }
    if (0x80..=0xffu8).any(|b| !best.contains_key(&classes.get(b))) {
        return None;
    }
    let mut out: Vec<u8> = best.into_values().collect();
    out.sort_by_key(|&b| (readability(b), b));
    Some(out)
}

/// How readable a byte is in a witness: letters, digits, capitals, then
/// punctuation.
pub(crate) fn readability(b: u8) -> u8 {
    match b {
        b'a'..=b'z' => 0,
        b'0'..=b'9' => 1,
        b'A'..=b'Z' => 2,
        b'.' | b'-' | b'_' | b'/' => 3,
        0x21..=0x7e => 4,
        _ => 5,
    }
}

/// Every byte as `\xNN` (the syntax runs without Unicode).
pub(crate) fn bytes(b: &[u8]) -> String {
    b.iter().map(|c| format!(r"\x{c:02X}")).collect()
}

/// A path's prefix for a pattern: nothing for `/`.
fn prefix(path: &str) -> String {
    if path == "/" {
        String::new()
    } else {
        bytes(path.trim_end_matches('/').as_bytes())
    }
}

/// The path and everything beneath it.
fn under(path: &str) -> String {
    if path == "/" {
        "/.*".into()
    } else {
        format!("{}(?:/.*)?", prefix(path))
    }
}

/// A glob anchored at `base`, covering what it matches and everything
/// beneath; `None` for one that can match nothing (an empty class).
fn glob(base: &str, segments: &[Segment]) -> Option<String> {
    let mut out = prefix(base);
    for s in segments {
        match s {
            Segment::Literal(l) => {
                out.push('/');
                out.push_str(&bytes(l.as_bytes()));
            }
            Segment::AnyDepth => out.push_str("(?:/[^/]+)*"),
            Segment::Glob(g) => {
                out.push('/');
                out.push_str(&glob_segment(g.as_bytes())?);
            }
        }
    }
    if out.is_empty() {
        // `**` at the root: every path.
        return Some("/.*".into());
    }
    out.push_str("(?:/.*)?");
    Some(out)
}

/// One glob segment, bytewise as the engine matches it: `*` any bytes
/// but `/`, `?` one, a class its member bytes.
fn glob_segment(g: &[u8]) -> Option<String> {
    let mut out = String::new();
    let mut i = 0;
    while let Some(&c) = g.get(i) {
        match c {
            b'*' => {
                while g.get(i) == Some(&b'*') {
                    i += 1;
                }
                out.push_str("[^/]*");
                continue;
            }
            b'?' => out.push_str("[^/]"),
            b'[' => {
                if let Some(end) = class_end(g, i) {
                    let members: Vec<u8> = (0..=255u8)
                        .filter(|&b| b != b'/' && class_holds(g, i, end, b))
                        .collect();
                    if members.is_empty() {
                        return None;
                    }
                    out.push('[');
                    out.push_str(&bytes(&members));
                    out.push(']');
                    i = end;
                    continue;
                }
                out.push_str(&bytes(b"["));
            }
            other => out.push_str(&bytes(&[other])),
        }
        i += 1;
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::PolicySet;

    #[test]
    fn classes_of_a_policy_with_globs() {
        let a = PolicySet::from_source(
            "p.policy",
            "policy p {\n  sandbox workspace-write {\n    none \"**/*.env\" \"~/.ssh\"\n    read \"secrets\"\n  }\n}\n",
        )
        .unwrap();
        let p = a.single().unwrap();
        let c = FileClasses::of(p, p).expect("fits");
        // Every witness is in its own class, and the classes differ.
        for (i, w) in c.witnesses.iter().enumerate() {
            assert_eq!(c.class_of(w), Some(i), "{w}");
        }
        let env = format!("{SAMPLE_WORKSPACE}/a/b.env");
        let plain = format!("{SAMPLE_WORKSPACE}/a/b");
        assert_ne!(c.class_of(&env), c.class_of(&plain));
        assert_eq!(c.class_of("relative"), None);
    }
}
