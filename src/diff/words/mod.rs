//! The classes of words a guardian tells apart (docs/diff.md#review).
//!
//! A guardian `path` rule matches a word as written *or* its lexical form
//! (`.`, empty and resolvable `..` segments removed: `lexical_path`); the
//! first word of a `command` prefix rule matches a program by its name or
//! its basename. So a word's class is: which globs hold for the word or
//! its lexical form, whether it is path-like (contains `/`, starts with
//! `.` or `~`), and which names it equals or ends in.
//!
//! One DFA of every glob and name test reads `/` followed by the word.
//! The word as written is read straight through; its lexical form is not
//! a regular function of it (each `..` removes whatever segment came
//! before), so the walk goes segment by segment with the lexical form's
//! states on a stack: a segment no later `..` removes is pushed for good,
//! and a segment that is removed belongs to a *balanced block* (a
//! segment, blocks, `..`) which moves the written word's state and leaves
//! the lexical form's as it was. The blocks from each state are found
//! first (a fixed point), then every reachable pair of states (written,
//! lexical) with the kind of segment on top of the stack. A word with a
//! NUL byte is not normalised (`lexical_path` leaves it) and is walked as
//! written. Every class some word reaches is found, with a word of it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use regex_automata::dfa::{Automaton, dense};
use regex_automata::util::primitives::StateID;

use super::files::{build_dfa, bytes, readability, representatives};

/// At most this many globs...
const MAX_GLOBS: usize = 64;
/// ...of which at most this many span any depth (`**`).
const MAX_DEEP: usize = 16;
/// Steps of the walk before it gives up (the caller samples instead).
const BUDGET: usize = 40_000_000;

/// One class of words, and a word of it.
#[derive(Clone, Debug)]
pub(crate) struct Word {
    /// The word.
    pub(crate) text: String,
    /// Which globs hold for the word or its lexical form.
    pub(crate) globs: Vec<bool>,
    /// Whether it contains `/` or starts with `.` or `~`.
    pub(crate) pathlike: bool,
    /// Whether it equals a name, or its basename does.
    pub(crate) program: bool,
}

/// What a segment is, as the lexical form treats it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Seg {
    Empty,
    Dot,
    DotDot,
    Tilde,
    Name,
}

impl Seg {
    fn next(self, b: u8) -> Seg {
        match (self, b) {
            (Seg::Empty, b'.') => Seg::Dot,
            (Seg::Empty, b'~') => Seg::Tilde,
            (Seg::Dot, b'.') => Seg::DotDot,
            _ => Seg::Name,
        }
    }
}

/// The segment on top of the lexical form's stack: none (the bottom),
/// one a `..` does not remove (`..`, and `~` in a relative word), or a
/// name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Top {
    Bottom,
    Keep,
    Other,
}

/// How far a word has got: a relative word before its first segment, an
/// absolute one before its second, or a whole word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Fresh,
    NeedMore,
    Done,
}

/// Per boundary state (by index), the states balanced blocks lead to,
/// with a block for each.
type Blocks = Vec<BTreeMap<usize, Vec<u8>>>;

/// What reading `/SEGMENT` does: the state it leads to from each boundary
/// state (by index), the segment's kind, and the shortest such segment.
struct Effect {
    to: Vec<usize>,
    seg: Seg,
    text: Vec<u8>,
}

struct Walk {
    dfa: dense::DFA<Vec<u32>>,
    /// The states at segment ends some word reaches, the start first.
    states: Vec<StateID>,
    /// Every distinct effect of a segment.
    effects: Vec<Effect>,
    globs: usize,
    features: usize,
    /// Balanced blocks: for relative words (a pushed segment is a name),
    /// for absolute ones (a name or `~`).
    blocks: [Blocks; 2],
}

/// Every class of words `globs` (each a glob's segments) and `names` (the
/// first words of prefix rules) tell apart, with a word of each; `None`
/// past the bounds, or when a class holds no ASCII byte.
pub(crate) fn classes(globs: &[Vec<String>], names: &[String]) -> Option<Vec<Word>> {
    let deep = globs.iter().filter(|g| g.iter().any(|s| s == "**")).count();
    if globs.len() > MAX_GLOBS || deep > MAX_DEEP {
        return None;
    }
    let mut patterns: Vec<String> = globs.iter().map(|g| glob(g)).collect();
    patterns.push(r"/(?:[.~].*|[^/]*/.*)".into());
    // A basename holds no `/`.
    for n in names.iter().filter(|n| !n.contains('/')) {
        patterns.push(format!(".*/{}", bytes(n.as_bytes())));
    }
    for n in names {
        patterns.push(format!("/{}", bytes(n.as_bytes())));
    }
    let dfa = build_dfa(&patterns, true)?;
    let config = regex_automata::util::start::Config::new().anchored(regex_automata::Anchored::Yes);
    let start = dfa.start_state(&config).ok()?;
    let reps = segment_bytes(&dfa)?;
    let mut w = Walk {
        dfa,
        states: vec![start],
        effects: Vec::new(),
        globs: globs.len(),
        features: patterns.len(),
        blocks: [Vec::new(), Vec::new()],
    };
    let mut budget = BUDGET;
    w.effects(&reps, &mut budget)?;
    w.blocks(&mut budget)?;
    let mut found: BTreeMap<(Vec<bool>, Vec<bool>), String> = BTreeMap::new();
    // Lexically normal words first: they make the most readable witnesses.
    w.words(&mut found, &mut budget, true)?;
    w.words(&mut found, &mut budget, false)?;
    w.nul_words(&reps, &mut found, &mut budget)?;
    Some(
        found
            .into_iter()
            .map(|((globs, raw), text)| Word {
                text,
                globs,
                pathlike: raw.first().copied().unwrap_or(false),
                program: raw.iter().skip(1).any(|b| *b),
            })
            .collect(),
    )
}

/// A glob over `/` and the word: `**` any number of `/SEGMENT`, `*` any
/// run within one.
fn glob(segments: &[String]) -> String {
    let mut out = String::new();
    for s in segments {
        if s == "**" {
            out.push_str("(?:/[^/]*)*");
        } else {
            out.push('/');
            let pieces: Vec<String> = s.split('*').map(|p| bytes(p.as_bytes())).collect();
            out.push_str(&pieces.join("[^/]*"));
        }
    }
    out
}

/// One byte of each class a segment can hold, letters first; `None` when
/// some class holds no ASCII byte.
fn segment_bytes(dfa: &dense::DFA<Vec<u32>>) -> Option<Vec<u8>> {
    let mut out = representatives(dfa, b"/")?;
    // `.` and `~` are always walked: they make the segment kinds.
    out.extend([b'.', b'~']);
    out.sort_by_key(|&b| (readability(b), b));
    out.dedup();
    Some(out)
}

fn spend(budget: &mut usize, n: usize) -> Option<()> {
    *budget = budget.checked_sub(n)?;
    Some(())
}

impl Walk {
    /// The features that hold for a text ending in `sid`.
    fn bits(&self, sid: StateID) -> Vec<bool> {
        let end = self.dfa.next_eoi_state(sid);
        let mut set = vec![false; self.features];
        if self.dfa.is_match_state(end) {
            for i in 0..self.dfa.match_len(end) {
                if let Some(b) = set.get_mut(self.dfa.match_pattern(end, i).as_usize()) {
                    *b = true;
                }
            }
        }
        set
    }

    fn state(&self, i: usize) -> Option<StateID> {
        self.states.get(i).copied()
    }

    /// Every distinct effect of a segment on every boundary state, read
    /// for all of them at once; the states grow until the effects lead
    /// to no new one.
    fn effects(&mut self, reps: &[u8], budget: &mut usize) -> Option<()> {
        loop {
            let first: Vec<StateID> = self
                .states
                .iter()
                .map(|s| self.dfa.next_state(*s, b'/'))
                .collect();
            let mut seen: HashSet<(Vec<StateID>, Seg)> =
                HashSet::from([(first.clone(), Seg::Empty)]);
            let mut queue = VecDeque::from([(first, Seg::Empty, Vec::new())]);
            let mut found: Vec<(Vec<StateID>, Seg, Vec<u8>)> = Vec::new();
            while let Some((v, k, text)) = queue.pop_front() {
                spend(budget, reps.len() * v.len())?;
                for &b in reps {
                    let n: Vec<StateID> = v.iter().map(|s| self.dfa.next_state(*s, b)).collect();
                    let key = (n, k.next(b));
                    if !seen.contains(&key) {
                        seen.insert(key.clone());
                        let mut t = text.clone();
                        t.push(b);
                        queue.push_back((key.0, key.1, t));
                    }
                }
                found.push((v, k, text));
            }
            let mut index: HashMap<StateID, usize> = self
                .states
                .iter()
                .enumerate()
                .map(|(i, s)| (*s, i))
                .collect();
            let before = self.states.len();
            let mut effects = Vec::new();
            let mut distinct = HashSet::new();
            for (v, seg, text) in found {
                let mut to = Vec::with_capacity(v.len());
                for s in v {
                    let i = *index.entry(s).or_insert_with(|| {
                        self.states.push(s);
                        self.states.len() - 1
                    });
                    to.push(i);
                }
                if distinct.insert((to.clone(), seg)) {
                    effects.push(Effect { to, seg, text });
                }
            }
            if self.states.len() == before {
                self.effects = effects;
                return Some(());
            }
        }
    }

    /// The balanced blocks from every boundary state: grown until
    /// nothing changes.
    fn blocks(&mut self, budget: &mut usize) -> Option<()> {
        let n = self.states.len();
        // `/..` from each state (the segment `..` is one of the effects).
        let up: Vec<usize> = self
            .effects
            .iter()
            .find(|e| e.seg == Seg::DotDot)
            .map(|e| e.to.clone())?;
        for abs in [false, true] {
            let mut table: Blocks = (0..n).map(|x| BTreeMap::from([(x, Vec::new())])).collect();
            loop {
                // A pushed segment from `y`, a block, `..`: where each
                // lands (`up` of a block's end), with that block.
                let popped: Vec<Vec<(usize, &Vec<u8>)>> = table
                    .iter()
                    .map(|t| {
                        let mut seen = vec![false; n];
                        t.iter()
                            .filter_map(|(x4, t4)| {
                                let x5 = *up.get(*x4)?;
                                let fresh = !std::mem::replace(seen.get_mut(x5)?, true);
                                fresh.then_some((x5, t4))
                            })
                            .collect()
                    })
                    .collect();
                let mut grown: Vec<(usize, BTreeMap<usize, Vec<u8>>)> = Vec::new();
                for x in 0..n {
                    let mut reach = table.get(x).cloned().unwrap_or_default();
                    let mut has = vec![false; n];
                    for z in reach.keys() {
                        *has.get_mut(*z)? = true;
                    }
                    let mut queue: VecDeque<usize> = reach.keys().copied().collect();
                    while let Some(z) = queue.pop_front() {
                        spend(budget, self.effects.len())?;
                        for e in &self.effects {
                            let z2 = *e.to.get(z)?;
                            let pushed = e.seg == Seg::Name || (abs && e.seg == Seg::Tilde);
                            let lands: Vec<(usize, Option<&Vec<u8>>)> =
                                if matches!(e.seg, Seg::Empty | Seg::Dot) {
                                    vec![(z2, None)]
                                } else if pushed {
                                    popped
                                        .get(z2)?
                                        .iter()
                                        .map(|(x5, t4)| (*x5, Some(*t4)))
                                        .collect()
                                } else {
                                    continue;
                                };
                            for (x5, inner) in lands {
                                let slot = has.get_mut(x5)?;
                                if *slot {
                                    continue;
                                }
                                *slot = true;
                                let mut t = seg_text(reach.get(&z)?, &e.text);
                                if let Some(t4) = inner {
                                    t.extend_from_slice(t4);
                                    t.extend_from_slice(b"/..");
                                }
                                reach.insert(x5, t);
                                queue.push_back(x5);
                            }
                        }
                    }
                    if reach.len() > table.get(x).map_or(0, BTreeMap::len) {
                        grown.push((x, reach));
                    }
                }
                if grown.is_empty() {
                    break;
                }
                for (x, reach) in grown {
                    if let Some(slot) = table.get_mut(x) {
                        *slot = reach;
                    }
                }
            }
            if let Some(slot) = self.blocks.get_mut(usize::from(abs)) {
                *slot = table;
            }
        }
        Some(())
    }

    /// The class of a word ending with the written word in `r` and the
    /// lexical form's stack topped by `top` in `l`.
    fn key(&self, r: StateID, l: StateID, top: Top) -> (Vec<bool>, Vec<bool>) {
        let lex_end = if top == Top::Bottom {
            self.dfa.next_state(l, b'/')
        } else {
            l
        };
        let raw = self.bits(r);
        let lex = self.bits(lex_end);
        let globs = raw
            .iter()
            .zip(&lex)
            .take(self.globs)
            .map(|(a, b)| *a || *b)
            .collect();
        (globs, raw.into_iter().skip(self.globs).collect())
    }

    /// Every class of the words without a NUL byte (`normal`: of the
    /// lexically normal ones: no empty, `.` or removed segment).
    fn words(
        &self,
        found: &mut BTreeMap<(Vec<bool>, Vec<bool>), String>,
        budget: &mut usize,
        normal: bool,
    ) -> Option<()> {
        // (written, lexical, top, absolute, phase), states by index (the
        // lexical form's bottom in an absolute word is the state after
        // `/` and an empty segment: a boundary state too).
        type Config = (usize, usize, Top, bool, Phase);
        let start = self.state(0)?;
        let slash = self.dfa.next_state(start, b'/');
        // The empty word, whose lexical form is itself.
        found
            .entry(self.key(slash, start, Top::Bottom))
            .or_default();
        // `/` then the empty first segment of an absolute word.
        let abs_at = self
            .effects
            .iter()
            .find(|e| e.seg == Seg::Empty)
            .and_then(|e| e.to.first().copied())?;
        let mut seen: HashSet<Config> = HashSet::new();
        let mut queue: VecDeque<(Config, Vec<u8>)> = VecDeque::new();
        for (c, text) in [
            ((0, 0, Top::Bottom, false, Phase::Fresh), Vec::new()),
            (
                (abs_at, abs_at, Top::Bottom, true, Phase::NeedMore),
                b"/".to_vec(),
            ),
        ] {
            seen.insert(c);
            queue.push_back((c, text));
        }
        let up = self
            .effects
            .iter()
            .find(|e| e.seg == Seg::DotDot)
            .map(|e| &e.to)?;
        let mut keyed: HashSet<(usize, usize, bool)> = HashSet::new();
        while let Some(((r, l, top, abs, phase), text)) = queue.pop_front() {
            if phase == Phase::Done && keyed.insert((r, l, top == Top::Bottom)) {
                let key = self.key(self.state(r)?, self.state(l)?, top);
                if let std::collections::btree_map::Entry::Vacant(e) = found.entry(key) {
                    e.insert(String::from_utf8(text.get(1..)?.to_vec()).ok()?);
                }
            }
            // Each next configuration, with what the word gains.
            let mut next: Vec<(Config, [&[u8]; 4])> = Vec::new();
            // Segments the lexical form keeps for good.
            for e in &self.effects {
                let top = match e.seg {
                    Seg::Name => Top::Other,
                    Seg::Tilde if abs => Top::Other,
                    Seg::Tilde => Top::Keep,
                    _ => continue,
                };
                next.push((
                    (*e.to.get(r)?, *e.to.get(l)?, top, abs, Phase::Done),
                    [b"/", &e.text, b"", b""],
                ));
            }
            // `..` with nothing it removes.
            let r_up = *up.get(r)?;
            match (abs, top) {
                (true, Top::Bottom) if !normal => {
                    next.push(((r_up, l, top, abs, Phase::Done), [b"/..", b"", b"", b""]));
                }
                (false, Top::Bottom | Top::Keep) => next.push((
                    (r_up, *up.get(l)?, Top::Keep, abs, Phase::Done),
                    [b"/..", b"", b"", b""],
                )),
                _ => {}
            }
            // Balanced blocks: the word moves, the lexical form stays.
            let table = self.blocks.get(usize::from(abs))?;
            if normal {
                // None.
            } else if phase == Phase::Fresh {
                // A relative word's first segment is not empty.
                for e in &self.effects {
                    let x1 = *e.to.get(r)?;
                    match e.seg {
                        Seg::Dot => {
                            next.push(((x1, l, top, abs, Phase::Done), [b"/", &e.text, b"", b""]));
                        }
                        Seg::Name => {
                            for (x4, t4) in table.get(x1).into_iter().flatten() {
                                next.push((
                                    (*up.get(*x4)?, l, top, abs, Phase::Done),
                                    [b"/", &e.text, t4, b"/.."],
                                ));
                            }
                        }
                        _ => {}
                    }
                }
            } else {
                for (r2, t2) in table.get(r).into_iter().flatten() {
                    if !t2.is_empty() {
                        next.push(((*r2, l, top, abs, Phase::Done), [t2, b"", b"", b""]));
                    }
                }
            }
            spend(budget, next.len() + 1)?;
            for (c, parts) in next {
                if seen.insert(c) {
                    let mut t = text.clone();
                    for p in parts {
                        t.extend_from_slice(p);
                    }
                    queue.push_back((c, t));
                }
            }
        }
        Some(())
    }

    /// Every class of the words with a NUL byte (read as written: their
    /// lexical form is themselves).
    fn nul_words(
        &self,
        reps: &[u8],
        found: &mut BTreeMap<(Vec<bool>, Vec<bool>), String>,
        budget: &mut usize,
    ) -> Option<()> {
        let slash = self.dfa.next_state(self.state(0)?, b'/');
        let mut alphabet = reps.to_vec();
        alphabet.extend([b'/', 0]);
        let mut seen = HashSet::from([(slash, false)]);
        let mut queue = VecDeque::from([(slash, false, Vec::new())]);
        while let Some((s, nul, text)) = queue.pop_front() {
            if nul {
                let bits = self.bits(s);
                let key = (
                    bits.iter().take(self.globs).copied().collect(),
                    bits.iter().skip(self.globs).copied().collect(),
                );
                if let std::collections::btree_map::Entry::Vacant(e) = found.entry(key) {
                    e.insert(String::from_utf8(text.clone()).ok()?);
                }
            }
            spend(budget, alphabet.len())?;
            for &b in &alphabet {
                let n = (self.dfa.next_state(s, b), nul || b == 0);
                if seen.insert(n) {
                    let mut t = text.clone();
                    t.push(b);
                    queue.push_back((n.0, n.1, t));
                }
            }
        }
        Some(())
    }
}

/// `text` followed by `/SEGMENT`.
fn seg_text(text: &[u8], seg: &[u8]) -> Vec<u8> {
    let mut t = text.to_vec();
    t.push(b'/');
    t.extend_from_slice(seg);
    t
}

#[cfg(test)]
mod tests;
