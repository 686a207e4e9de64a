//! Domain rules as one label automaton: a trie over reversed labels
//! (`com` → `example` → `api`), laid out for the hot path.
//!
//! Every node lives in one open-addressing table keyed by `(parent, label)`:
//! a node's position in the table is its id, and its entry (32 bytes, two to
//! a cache line) holds everything a lookup needs: a hash tag, the parent,
//! the label itself (inline up to 16 bytes, compared as two words), and
//! where the node's rule slots are. A lookup walks the labels of the
//! normalised name from the right, hashing each label a word at a time, and
//! touches one table entry per label (plus the slots of nodes that carry
//! rules); its cost does not grow with the number of rules, only with how
//! much of the table stays in cache.
//!
//! The table is derived data: artifacts store the trie's nodes in insertion
//! order, and loading rebuilds the table (see [`StoredTrie`]).
//!
//! Hostile names cannot lengthen a probe: queries never insert, the table is
//! built from the policy alone, its load is at most three fifths, and every
//! candidate is verified by comparing the parent and the label bytes, never
//! by the hash alone. Probes run forward without wrapping: the table has
//! overflow room after the range that hashes land on, and ends with an
//! empty entry.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::ports::{Group, Packed, PortArena, PortQ, id};
use crate::decision::RuleId;
use crate::digest::FastHash;
use crate::normalize::pattern::DomainPattern;
use crate::normalize::{Labels, word};
use crate::syntax::ast::{Effect, PortRange};

const NONE: u32 = u32::MAX;
/// The parent of top-level labels (never a table position: tables hold at
/// most 2^31 entries).
const ROOT: u32 = u32::MAX - 1;

/// Slot flags of a node: rules for `name`, `*.name` and `**.name`.
const EXACT: u8 = 1;
const SUB: u8 = 2;
const BOTH: u8 = 4;

/// Labels longer than this are compared in the label arena.
const INLINE: usize = 16;
/// The longest label (RFC 1035).
const MAX_LABEL: usize = 63;

/// The allow and deny rules of one pattern position.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub struct Slot {
    pub deny: Group,
    pub allow: Group,
}

/// One node of the trie as artifacts store it: in insertion order, parents
/// first.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
struct Node {
    label_start: u32,
    label_len: u8,
    /// The parent's index in the node list, or [`NONE`] for a top-level
    /// label.
    parent: u32,
    /// Which of [`EXACT`], [`SUB`], [`BOTH`] have slots.
    flags: u8,
    /// The node's slots are `slots[first_slot..]`, in flag order.
    first_slot: u32,
}

/// One node in the lookup table. `len == 0` marks an empty entry.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(32))]
struct Entry {
    /// The label's first eight bytes, little-endian, zero-padded.
    w0: u64,
    /// The next eight bytes, or for a label longer than [`INLINE`] its
    /// offset in the label arena.
    w1: u64,
    /// High bits of the edge hash.
    tag: u32,
    /// The parent's table position, or [`ROOT`].
    parent: u32,
    first_slot: u32,
    len: u8,
    flags: u8,
}

/// A name's label as the lookup sees it: its hash and its first sixteen
/// bytes as two words.
#[derive(Clone, Copy)]
struct Key {
    hash: u64,
    w0: u64,
    w1: u64,
}

const K: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline(always)]
fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(K)
}

const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;

/// The key of `bytes[start..start + len]` (`len` ≥ 1): the first two
/// words hashed apart (no dependency between them), longer labels folded
/// in a word at a time.
#[inline(always)]
fn key(bytes: &[u8], start: usize, len: usize) -> Key {
    let w0 = word(bytes, start, len);
    let w1 = if len > 8 {
        word(bytes, start + 8, len - 8)
    } else {
        0
    };
    let mut hash = (w0 ^ len as u64).wrapping_mul(K) ^ w1.wrapping_mul(K2);
    let mut at = 16;
    while at < len {
        hash = mix(hash, word(bytes, start + at, len - at));
        at += 8;
    }
    Key { hash, w0, w1 }
}

/// The suffix hash of a node from its parent's and its label's: the table
/// position in its low bits, the tag in its high bits. It depends on the
/// name alone, not on where the parent was found, so that the probes of
/// every label of a name can be in flight at once; the entry's parent
/// position is still compared, so the hash never decides a match.
#[inline(always)]
fn edge(parent_hash: u64, k: &Key) -> u64 {
    let x = (k.hash ^ parent_hash.rotate_left(23)).wrapping_mul(K);
    x ^ (x >> 32)
}

/// The suffix hash of the root.
const ROOT_HASH: u64 = 0x243f_6a88_85a3_08d3;

/// What the rules say about one name: raw rule ids, [`NONE`] for none, so
/// that merging is `min` (the first rule in source order wins) and the hit
/// fits in registers.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct DomainHit {
    deny: u32,
    allow: u32,
    exact_allow: u32,
}

impl DomainHit {
    /// The first matching deny rule.
    pub fn deny(&self) -> Option<RuleId> {
        id(self.deny)
    }
    /// The first matching allow rule (wildcards included).
    pub fn allow(&self) -> Option<RuleId> {
        id(self.allow)
    }
    /// The first exact `allow domain NAME` rule for this very name.
    pub fn exact_allow(&self) -> Option<RuleId> {
        id(self.exact_allow)
    }
}

/// The compiled domain rules of one policy.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(into = "StoredTrie", try_from = "StoredTrie")]
pub struct DomainTrie {
    /// Each node's table position, in insertion order: the node list
    /// artifacts store is rebuilt from the table when one is written
    /// (issue 62), so the set does not keep both.
    order: Vec<u32>,
    /// The labels longer than [`INLINE`] (a shorter one lives in its
    /// entry); artifacts store every label, in node order.
    labels: String,
    /// Each slot's deny and allow groups, packed (issue 62): artifacts
    /// store them as full [`Slot`]s.
    slots: Vec<[Packed; 2]>,
    /// The groups too large to pack.
    split: Vec<Group>,
    /// `allow domain *`.
    star: Group,
    ports: PortArena,
    /// The lookup table, derived from the nodes (never stored): `home`
    /// entries that hashes land on, then overflow room, so that a probe
    /// runs forward without wrapping and always ends on an empty entry.
    table: Vec<Entry>,
    home: usize,
}

#[path = "domains_store.rs"]
mod store;
pub use store::StoredTrie;

/// One domain rule, as the compiler hands it over.
pub struct DomainRule<'a> {
    pub pattern: DomainPattern,
    pub effect: Effect,
    pub rule: RuleId,
    pub ports: Option<&'a [PortRange]>,
}

impl DomainTrie {
    /// Builds the automaton. `deny domain *` never reaches here (a checker
    /// error).
    pub fn build(rules: &[DomainRule<'_>]) -> DomainTrie {
        let mut nodes: Vec<Node> = Vec::new();
        let mut t = DomainTrie {
            order: Vec::new(),
            labels: String::new(),
            slots: Vec::new(),
            split: Vec::new(),
            star: Group::default(),
            ports: PortArena::default(),
            table: Vec::new(),
            home: 0,
        };
        // The trie's nodes, found by (parent, label) while building.
        let mut children: HashMap<(u32, &str), u32, FastHash> = HashMap::default();
        // Group the rules by (node, position), preserving source order.
        let mut groups: HashMap<(u32, u8), Vec<usize>, FastHash> = HashMap::default();
        let mut star = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let (name, pos) = match &r.pattern {
                DomainPattern::Exact(n) => (n, EXACT),
                DomainPattern::Sub(n) => (n, SUB),
                DomainPattern::SelfAndSub(n) => (n, BOTH),
                DomainPattern::Any => {
                    if r.effect == Effect::Allow {
                        star.push((r.rule, r.ports));
                    }
                    continue;
                }
            };
            let mut node = NONE;
            for label in name.rsplit('.') {
                node = match children.get(&(node, label)) {
                    Some(&c) => c,
                    None => {
                        let id = nodes.len() as u32;
                        nodes.push(Node {
                            label_start: t.labels.len() as u32,
                            label_len: label.len() as u8,
                            parent: node,
                            flags: 0,
                            first_slot: 0,
                        });
                        t.labels.push_str(label);
                        children.insert((node, label), id);
                        id
                    }
                };
            }
            groups.entry((node, pos)).or_default().push(i);
        }
        t.star = Group::build(&mut t.ports, &star);
        // Slots node by node, so that a node's slots sit together.
        for (id, node) in nodes.iter_mut().enumerate() {
            node.first_slot = t.slots.len() as u32;
            for pos in [EXACT, SUB, BOTH] {
                let Some(members) = groups.get(&(id as u32, pos)) else {
                    continue;
                };
                let pick = |e: Effect| -> Vec<(RuleId, Option<&[PortRange]>)> {
                    members
                        .iter()
                        .filter_map(|&i| rules.get(i))
                        .filter(|r| r.effect == e)
                        .map(|r| (r.rule, r.ports))
                        .collect()
                };
                let (deny, allow) = (pick(Effect::Deny), pick(Effect::Allow));
                let deny = Group::build(&mut t.ports, &deny);
                let allow = Group::build(&mut t.ports, &allow);
                t.slots.push([
                    Packed::pack(deny, &mut t.split),
                    Packed::pack(allow, &mut t.split),
                ]);
                node.flags |= pos;
            }
        }
        t.slots.shrink_to_fit();
        t.split.shrink_to_fit();
        t.ports.shrink();
        let labels = std::mem::take(&mut t.labels);
        t.index(&nodes, &labels);
        t
    }

    /// Builds the lookup table from the node list (parents first), at a
    /// load of three fifths.
    /// `labels` holds every node's label (`nodes` name them there); the
    /// long ones are kept, in `self.labels`.
    fn index(&mut self, nodes: &[Node], labels: &str) {
        let cap = (nodes.len() * 5 / 3 + 1).max(8);
        self.home = cap;
        // One empty entry past the home range; more are added if a probe
        // runs past it, in room reserved here so that the table does not
        // double as it grows (it is shrunk to fit once built).
        self.table = Vec::with_capacity(cap + 1 + cap / 32 + 16);
        self.table.resize(cap + 1, Entry::default());
        let mut pos_of: Vec<(u32, u64)> = Vec::with_capacity(nodes.len());
        let mut long = String::new();
        for n in nodes {
            let (parent, parent_hash) = if n.parent == NONE {
                (ROOT, ROOT_HASH)
            } else {
                pos_of
                    .get(n.parent as usize)
                    .copied()
                    .unwrap_or((ROOT, ROOT_HASH))
            };
            let (start, len) = (n.label_start as usize, n.label_len as usize);
            let k = key(labels.as_bytes(), start, len);
            let at = long.len() as u64;
            if len > INLINE {
                long.push_str(labels.get(start..start + len).unwrap_or(""));
            }
            let x = edge(parent_hash, &k);
            let mut pos = self.home(x);
            while self.table.get(pos).is_some_and(|e| e.len != 0) {
                pos += 1;
            }
            if pos + 1 >= self.table.len() {
                self.table.resize(pos + 2, Entry::default());
            }
            if let Some(e) = self.table.get_mut(pos) {
                *e = Entry {
                    w0: k.w0,
                    w1: if len > INLINE { at } else { k.w1 },
                    tag: (x >> 32) as u32,
                    parent,
                    first_slot: n.first_slot,
                    len: len as u8,
                    flags: n.flags,
                };
            }
            pos_of.push((pos as u32, x));
        }
        // Growing into overflow room may have doubled the allocation.
        self.table.shrink_to_fit();
        self.order = pos_of.into_iter().map(|(p, _)| p).collect();
        long.shrink_to_fit();
        self.labels = long;
    }

    /// The node list, in insertion order, rebuilt from the table, and
    /// every label in that order (what artifacts store): each node's parent
    /// as its index, its label where it lies in the labels.
    fn nodes(&self) -> (Vec<Node>, String) {
        let index: HashMap<u32, u32, FastHash> = (self.order.iter().enumerate())
            .map(|(i, &p)| (p, u32::try_from(i).unwrap_or(NONE)))
            .collect();
        let mut start = 0u32;
        let mut nodes = Vec::with_capacity(self.order.len());
        let mut labels: Vec<u8> = Vec::new();
        for &p in &self.order {
            let Some(e) = self.table.get(p as usize) else {
                continue;
            };
            let len = usize::from(e.len);
            if len > INLINE {
                labels.extend_from_slice(self.long_label(e).unwrap_or_default());
            } else {
                let b = [e.w0.to_le_bytes(), e.w1.to_le_bytes()].concat();
                labels.extend_from_slice(b.get(..len).unwrap_or_default());
            }
            nodes.push(Node {
                label_start: start,
                label_len: e.len,
                parent: index.get(&e.parent).copied().unwrap_or(NONE),
                flags: e.flags,
                first_slot: e.first_slot,
            });
            start = start.saturating_add(u32::from(e.len));
        }
        let labels = String::from_utf8(labels)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        (nodes, labels)
    }

    /// The child of `parent` (whose suffix hash is `*hash`, updated to the
    /// child's) for the label `bytes[start..start + len]`: its table
    /// position and entry.
    #[inline(always)]
    fn child(
        &self,
        parent: u32,
        hash: &mut u64,
        bytes: &[u8],
        start: usize,
        len: usize,
    ) -> Option<(u32, &Entry)> {
        if len == 0 || len > MAX_LABEL {
            return None;
        }
        let k = key(bytes, start, len);
        let x = edge(*hash, &k);
        *hash = x;
        let tag = (x >> 32) as u32;
        let mut pos = self.home(x);
        // The table ends with an empty entry, and `get` ends the probe past
        // the end of a corrupt one.
        loop {
            let e = self.table.get(pos)?;
            if e.len == 0 {
                return None;
            }
            if e.tag == tag
                && e.parent == parent
                && usize::from(e.len) == len
                && e.w0 == k.w0
                && (if len <= INLINE {
                    e.w1 == k.w1
                } else {
                    self.long_label(e) == bytes.get(start..start + len)
                })
            {
                return Some((pos as u32, e));
            }
            pos += 1;
        }
    }

    /// Where an edge hash starts probing: its low 32 bits scaled to the
    /// table (any size, no power of two needed).
    #[inline(always)]
    fn home(&self, x: u64) -> usize {
        (((x & 0xffff_ffff) * self.home as u64) >> 32) as usize
    }

    fn long_label(&self, e: &Entry) -> Option<&[u8]> {
        let start = usize::try_from(e.w1).ok()?;
        self.labels
            .as_bytes()
            .get(start..start + usize::from(e.len))
    }

    /// Adds the rules of one slot of node `e` (`pos`: [`EXACT`], [`SUB`]
    /// or [`BOTH`]); returns the slot's allow rule ([`NONE`] for none).
    #[inline(always)]
    fn apply(&self, hit: &mut DomainHit, e: &Entry, pos: u8, q: PortQ) -> u32 {
        if e.flags & pos == 0 {
            return NONE;
        }
        let rank = (e.flags & (pos - 1)).count_ones();
        let Some(s) = self.slots.get((e.first_slot + rank) as usize) else {
            return NONE;
        };
        let [deny, allow] = *s;
        hit.deny = hit.deny.min(deny.deny_raw(&self.split, &self.ports, q));
        let allow = allow.allow_raw(&self.split, &self.ports, q);
        hit.allow = hit.allow.min(allow);
        allow
    }

    fn empty_hit(&self, q: PortQ) -> DomainHit {
        DomainHit {
            deny: NONE,
            allow: self.star.allow_raw(&self.ports, q),
            exact_allow: NONE,
        }
    }

    /// What the rules say about a normalised name (no allocation).
    pub fn lookup(&self, name: &str, q: PortQ) -> DomainHit {
        match Labels::layout(name) {
            Some(l) => self.lookup_labels(l, q),
            // Longer than any normalised name: only `*` can match.
            None => self.empty_hit(q),
        }
    }

    /// [`DomainTrie::lookup`] for a name the normaliser laid out (inlined
    /// into each decision, but for the browser build's size).
    #[cfg_attr(not(target_arch = "wasm32"), inline(always))]
    #[cfg_attr(target_arch = "wasm32", inline)]
    pub(crate) fn lookup_labels(&self, l: Labels<'_>, q: PortQ) -> DomainHit {
        let mut hit = self.empty_hit(q);
        let mut end = l.bytes.len();
        let mut start = l.dot_before(end).map_or(0, |d| d + 1);
        let mut hash = ROOT_HASH;
        let Some((mut parent, mut at)) = self.child(ROOT, &mut hash, l.bytes, start, end - start)
        else {
            return hit;
        };
        while start > 0 {
            // The name is a strict subdomain of this node's name.
            if at.flags & (SUB | BOTH) != 0 {
                self.apply(&mut hit, at, SUB, q);
                self.apply(&mut hit, at, BOTH, q);
            }
            end = start - 1;
            start = l.dot_before(end).map_or(0, |d| d + 1);
            match self.child(parent, &mut hash, l.bytes, start, end - start) {
                Some((pos, e)) => (parent, at) = (pos, e),
                None => return hit,
            }
        }
        if at.flags != 0 {
            self.apply(&mut hit, at, BOTH, q);
            hit.exact_allow = self.apply(&mut hit, at, EXACT, q);
        }
        hit
    }

    /// Checks every index of a loaded automaton: no lookup can go out of
    /// range or loop.
    pub(crate) fn validate(&self, rules: usize) -> Result<(), super::Inconsistency> {
        // Each node's slots (its labels were checked as it loaded).
        for e in self.table.iter().filter(|e| e.len != 0) {
            if e.flags & !(EXACT | SUB | BOTH) != 0
                || e.first_slot as usize + e.flags.count_ones() as usize > self.slots.len()
            {
                return Err(super::Inconsistency::Table("slot out of range"));
            }
        }
        if self.table.len() <= self.order.len() {
            return Err(super::Inconsistency::Table("wrong table size"));
        }
        self.ports.validate(rules)?;
        self.star.validate(&self.ports, rules)?;
        for g in &self.split {
            g.validate(&self.ports, rules)?;
        }
        for p in self.slots.iter().flatten() {
            if let Some(r) = p.whole() {
                super::ports::check_rule(r, rules)?;
            }
        }
        Ok(())
    }

    /// The `allow domain *` rule for a query (it also covers IP literals),
    /// as a raw id (`u32::MAX` for none).
    #[inline(always)]
    pub fn star_raw(&self, q: PortQ) -> u32 {
        self.star.allow_raw(&self.ports, q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(p: &str, effect: Effect, id: u32) -> DomainRule<'static> {
        let pattern = if p == "*" {
            DomainPattern::Any
        } else if let Some(n) = p.strip_prefix("**.") {
            DomainPattern::SelfAndSub(n.into())
        } else if let Some(n) = p.strip_prefix("*.") {
            DomainPattern::Sub(n.into())
        } else {
            DomainPattern::Exact(p.into())
        };
        DomainRule {
            pattern,
            effect,
            rule: RuleId(id),
            ports: None,
        }
    }

    #[test]
    fn the_table_holds_no_spare_capacity() {
        // Tables of many sizes, so that some probe runs into the overflow
        // room (which grows the vector) in some of them.
        let mut overflowed = 0;
        for n in 1..400 {
            let names: Vec<String> = (0..n).map(|i| format!("n{i}.example.com")).collect();
            let rules: Vec<DomainRule<'_>> = names
                .iter()
                .enumerate()
                .map(|(i, n)| rule(n, Effect::Allow, i as u32))
                .collect();
            let t = DomainTrie::build(&rules);
            if t.table.len() > t.home + 1 {
                overflowed += 1;
            }
            assert_eq!(t.table.capacity(), t.table.len(), "{n} rules");
            assert_eq!(t.table.last().map(|e| e.len), Some(0));
        }
        assert!(overflowed > 0);
    }

    #[test]
    fn long_labels_and_shared_prefixes() {
        let long = "a".repeat(63);
        let long2 = format!("{}b", "a".repeat(62));
        let rules = [
            rule(&format!("{long}.example.com"), Effect::Allow, 0),
            rule(&format!("*.{long2}.example.com"), Effect::Allow, 1),
            rule("exactly16bytes00.com", Effect::Deny, 2),
            rule("exactly17bytes000.com", Effect::Allow, 3),
        ];
        let t = DomainTrie::build(&rules);
        let q = PortQ::Port(443);
        let hit = |n: &str| t.lookup(n, q);
        assert_eq!(hit(&format!("{long}.example.com")).allow(), Some(RuleId(0)));
        assert_eq!(hit(&format!("x.{long}.example.com")).allow(), None);
        assert_eq!(
            hit(&format!("x.{long2}.example.com")).allow(),
            Some(RuleId(1))
        );
        assert_eq!(hit(&format!("{long2}.example.com")).allow(), None);
        assert_eq!(hit("exactly16bytes00.com").deny(), Some(RuleId(2)));
        assert_eq!(hit("exactly16bytes01.com").deny(), None);
        assert_eq!(hit("exactly17bytes000.com").allow(), Some(RuleId(3)));
        assert_eq!(hit("exactly17bytes001.com").allow(), None);
        assert_eq!(hit("exactly17bytes00.com").allow(), None);
        assert_eq!(hit("com").allow(), None);
        // Stored and rebuilt, the same answers.
        let stored = StoredTrie::from(t.clone());
        let back = DomainTrie::try_from(stored).unwrap_or_else(|_| DomainTrie::build(&[]));
        for n in [
            format!("{long}.example.com"),
            format!("x.{long2}.example.com"),
            "exactly17bytes000.com".into(),
        ] {
            assert_eq!(back.lookup(&n, q), t.lookup(&n, q), "{n}");
        }
    }

    #[test]
    fn crafted_collisions_still_compare_labels() {
        // Many labels under one parent: chains form, and only the label
        // itself decides.
        let rules: Vec<_> = (0..2000)
            .map(|i| rule(&format!("l{i}.example.com"), Effect::Allow, i))
            .collect();
        let t = DomainTrie::build(&rules);
        for i in 0..2000u32 {
            let h = t.lookup(&format!("l{i}.example.com"), PortQ::NoPort);
            assert_eq!(h.exact_allow(), Some(RuleId(i)));
            let h = t.lookup(&format!("m{i}.example.com"), PortQ::NoPort);
            assert_eq!(h.allow(), None);
        }
    }
}
