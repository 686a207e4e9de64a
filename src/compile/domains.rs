//! Domain rules as one label automaton: a trie over reversed labels
//! (`com` → `example` → `api`), with every `(parent, label)` edge in one hash
//! index. A lookup walks the labels of the normalised name once; its cost
//! does not grow with the number of rules.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use super::ports::{Group, PortArena, PortQ};
use crate::decision::RuleId;
use crate::normalize::pattern::DomainPattern;
use crate::syntax::ast::{Effect, PortRange};

const NONE: u32 = u32::MAX;
const ROOT: u32 = 0;

/// The allow and deny rules of one pattern position.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub struct Slot {
    pub deny: Group,
    pub allow: Group,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Node {
    label_start: u32,
    label_len: u32,
    parent: u32,
    /// Next node whose edge has the same hash (collision chain).
    next_same_hash: u32,
    /// Slots for `name`, `*.name` and `**.name`.
    exact: u32,
    sub: u32,
    both: u32,
}

/// A hasher for keys that are already hashes.
#[derive(Default)]
pub struct IdentityHasher(u64);
impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The labels of a name from the right (`com`, `example`, `api`), by a
/// plain reverse scan: labels are short, and a call per label to a
/// general-purpose searcher costs more than the scan.
struct Labels<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> Labels<'a> {
    fn new(name: &'a [u8]) -> Self {
        Labels { rest: Some(name) }
    }
}

impl<'a> Iterator for Labels<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        let mut i = rest.len();
        while i > 0 {
            if rest.get(i - 1) == Some(&b'.') {
                self.rest = rest.get(..i - 1);
                return rest.get(i..);
            }
            i -= 1;
        }
        self.rest = None;
        Some(rest)
    }
}

/// Byte equality without a library call for short labels.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

fn edge_hash(parent: u32, label: &[u8]) -> u64 {
    // A multiply-rotate hash taking the label eight bytes at a time (the
    // length folded in, so chunks padded with zeros cannot collide with a
    // shorter label by construction). The table is built from the policy
    // only; queries never insert, so a crafted label cannot lengthen a chain,
    // and every candidate is verified by comparing the label itself.
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut h = mix(u64::from(parent), label.len() as u64);
    let mut chunks = label.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = mix(h, u64::from_le_bytes(w));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        if let Some(dst) = w.get_mut(..rest.len()) {
            dst.copy_from_slice(rest);
        }
        h = mix(h, u64::from_le_bytes(w));
    }
    h ^ (h >> 29)
}

/// What the rules say about one name.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub struct DomainHit {
    /// The first matching deny rule.
    pub deny: Option<RuleId>,
    /// The first matching allow rule (wildcards included).
    pub allow: Option<RuleId>,
    /// The first exact `allow domain NAME` rule for this very name.
    pub exact_allow: Option<RuleId>,
}

fn min_rule(a: Option<RuleId>, b: Option<RuleId>) -> Option<RuleId> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The compiled domain rules of one policy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DomainTrie {
    nodes: Vec<Node>,
    labels: String,
    index: HashMap<u64, u32, BuildHasherDefault<IdentityHasher>>,
    slots: Vec<Slot>,
    /// `allow domain *`.
    star: Group,
    ports: PortArena,
}

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
        let mut t = DomainTrie {
            nodes: vec![Node {
                label_start: 0,
                label_len: 0,
                parent: NONE,
                next_same_hash: NONE,
                exact: NONE,
                sub: NONE,
                both: NONE,
            }],
            labels: String::new(),
            index: HashMap::default(),
            slots: Vec::new(),
            star: Group::default(),
            ports: PortArena::default(),
        };
        // Group the rules by (node, position), preserving source order.
        type Key = (u32, u8);
        let mut groups: HashMap<Key, Vec<usize>> = HashMap::new();
        let mut order: Vec<Key> = Vec::new();
        let mut star = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let (name, pos) = match &r.pattern {
                DomainPattern::Exact(n) => (n, 0u8),
                DomainPattern::Sub(n) => (n, 1),
                DomainPattern::SelfAndSub(n) => (n, 2),
                DomainPattern::Any => {
                    if r.effect == Effect::Allow {
                        star.push((r.rule, r.ports));
                    }
                    continue;
                }
            };
            let node = t.insert(name);
            let key = (node, pos);
            let entry = groups.entry(key).or_default();
            if entry.is_empty() {
                order.push(key);
            }
            entry.push(i);
        }
        t.star = Group::build(&mut t.ports, &star);
        for key in order {
            let members = groups.get(&key).map(Vec::as_slice).unwrap_or(&[]);
            let pick = |e: Effect| -> Vec<(RuleId, Option<&[PortRange]>)> {
                members
                    .iter()
                    .filter_map(|&i| rules.get(i))
                    .filter(|r| r.effect == e)
                    .map(|r| (r.rule, r.ports))
                    .collect()
            };
            let (deny, allow) = (pick(Effect::Deny), pick(Effect::Allow));
            let slot = Slot {
                deny: Group::build(&mut t.ports, &deny),
                allow: Group::build(&mut t.ports, &allow),
            };
            let idx = t.slots.len() as u32;
            t.slots.push(slot);
            if let Some(n) = t.nodes.get_mut(key.0 as usize) {
                match key.1 {
                    0 => n.exact = idx,
                    1 => n.sub = idx,
                    _ => n.both = idx,
                }
            }
        }
        t
    }

    fn label(&self, n: &Node) -> &[u8] {
        self.labels
            .as_bytes()
            .get(n.label_start as usize..(n.label_start + n.label_len) as usize)
            .unwrap_or(&[])
    }

    fn child(&self, parent: u32, label: &[u8]) -> Option<u32> {
        let mut cur = *self.index.get(&edge_hash(parent, label))?;
        while let Some(n) = self.nodes.get(cur as usize) {
            if n.parent == parent && same(self.label(n), label) {
                return Some(cur);
            }
            cur = n.next_same_hash;
        }
        None
    }

    fn insert(&mut self, name: &str) -> u32 {
        let mut node = ROOT;
        for label in name.rsplit('.') {
            node = match self.child(node, label.as_bytes()) {
                Some(c) => c,
                None => {
                    let id = self.nodes.len() as u32;
                    let h = edge_hash(node, label.as_bytes());
                    let next_same_hash = self.index.insert(h, id).unwrap_or(NONE);
                    self.nodes.push(Node {
                        label_start: self.labels.len() as u32,
                        label_len: label.len() as u32,
                        parent: node,
                        next_same_hash,
                        exact: NONE,
                        sub: NONE,
                        both: NONE,
                    });
                    self.labels.push_str(label);
                    id
                }
            };
        }
        node
    }

    fn slot(&self, i: u32) -> Option<&Slot> {
        if i == NONE {
            None
        } else {
            self.slots.get(i as usize)
        }
    }

    fn apply(&self, hit: &mut DomainHit, slot: u32, q: PortQ) {
        if let Some(s) = self.slot(slot) {
            hit.deny = min_rule(hit.deny, s.deny.deny(&self.ports, q));
            hit.allow = min_rule(hit.allow, s.allow.allow(&self.ports, q));
        }
    }

    /// What the rules say about a normalised name (no allocation).
    pub fn lookup(&self, name: &str, q: PortQ) -> DomainHit {
        let mut hit = DomainHit {
            allow: self.star.allow(&self.ports, q),
            ..DomainHit::default()
        };
        let mut node = ROOT;
        for label in Labels::new(name.as_bytes()) {
            if node != ROOT {
                // The name is a strict subdomain of this node's name.
                if let Some(n) = self.nodes.get(node as usize) {
                    self.apply(&mut hit, n.sub, q);
                    self.apply(&mut hit, n.both, q);
                }
            }
            match self.child(node, label) {
                Some(c) => node = c,
                None => return hit,
            }
        }
        if let Some(n) = self.nodes.get(node as usize) {
            self.apply(&mut hit, n.both, q);
            if let Some(s) = self.slot(n.exact) {
                hit.deny = min_rule(hit.deny, s.deny.deny(&self.ports, q));
                let exact = s.allow.allow(&self.ports, q);
                hit.allow = min_rule(hit.allow, exact);
                hit.exact_allow = exact;
            }
        }
        hit
    }

    /// Checks every index of a loaded automaton: no lookup can go out of
    /// range or loop (collision chains must strictly decrease).
    pub(crate) fn validate(&self, rules: usize) -> Result<(), super::Inconsistency> {
        let n = self.nodes.len() as u32;
        if n == 0 {
            return Err(super::Inconsistency::Table("no root"));
        }
        let slot_ok = |i: u32| i == NONE || (i as usize) < self.slots.len();
        for (i, node) in self.nodes.iter().enumerate() {
            let i = i as u32;
            let label_end = node.label_start as usize + node.label_len as usize;
            if label_end > self.labels.len()
                || !self.labels.is_char_boundary(node.label_start as usize)
            {
                return Err(super::Inconsistency::Table("label out of range"));
            }
            if i > 0 && node.parent >= i {
                return Err(super::Inconsistency::Table("bad parent"));
            }
            if node.next_same_hash != NONE && node.next_same_hash >= i {
                return Err(super::Inconsistency::Table("bad collision chain"));
            }
            if !(slot_ok(node.exact) && slot_ok(node.sub) && slot_ok(node.both)) {
                return Err(super::Inconsistency::Table("slot out of range"));
            }
        }
        if self.index.values().any(|&v| v >= n) {
            return Err(super::Inconsistency::Table("index out of range"));
        }
        self.ports.validate(rules)?;
        self.star.validate(&self.ports, rules)?;
        for s in &self.slots {
            s.deny.validate(&self.ports, rules)?;
            s.allow.validate(&self.ports, rules)?;
        }
        Ok(())
    }

    /// The `allow domain *` rule for a query, if any (it also covers IP
    /// literals).
    pub fn star(&self, q: PortQ) -> Option<RuleId> {
        self.star.allow(&self.ports, q)
    }
}
