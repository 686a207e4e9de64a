//! IP and CIDR rules as disjoint intervals.
//!
//! Deny wins whatever the prefix length, so instead of a longest-prefix
//! match the compiler flattens every rule prefix of one family into sorted,
//! disjoint intervals, each pointing at the merged rules that cover it. A
//! lookup is one binary search (O(log n), no allocation).

use std::collections::HashMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::ports::{Group, Packed, PortArena, PortQ};
use crate::decision::RuleId;
use crate::digest::FastHash;
use crate::syntax::ast::{Effect, PortRange};

const NONE: u32 = u32::MAX;

/// The rules covering one interval.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub struct IpSlot {
    pub deny: Group,
    /// `allow ip` and `allow cidr` rules.
    pub allow: Group,
    /// `allow ip` rules for this very address (exact local exceptions).
    pub exact_allow: Group,
}

/// What the rules say about one address: raw rule ids, `u32::MAX` for
/// none (merging is `min`; the hit fits in registers).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct IpHit {
    pub deny: u32,
    pub allow: u32,
    pub exact_allow: u32,
}

impl IpHit {
    const NONE: IpHit = IpHit {
        deny: NONE,
        allow: NONE,
        exact_allow: NONE,
    };
}

/// One family's intervals. IPv4 starts are held as `u32` (4 bytes an
/// interval, a quarter of a widened `u128`: smaller and more of them per
/// cache line); IPv6 starts as `u128`.
///
/// A direct index on the address's top bits (about two buckets an
/// interval) narrows the search to the intervals starting in the
/// address's bucket, usually none or one: two loads, not a cache miss per
/// binary-search step. Loading an artifact rebuilds it.
///
/// Each interval carries a *code* ([`code`]): the one rule covering it
/// when that rule holds every port, else its table slot. IPv4 intervals
/// keep start and code side by side.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(into = "StoredIntervals", try_from = "StoredIntervals")]
pub struct Intervals {
    starts: Starts,
    /// The slots codes name (artifacts' per-interval slots are rebuilt
    /// from the codes: [`Intervals::slots`]).
    table: Vec<[Packed; 3]>,
    /// The groups of `table` too large to pack.
    split: Vec<Group>,
    ports: PortArena,
    /// Bits of the family's addresses: 32 or 128.
    width: u32,
    /// `index[b]`: how many intervals start before bucket `b` (the
    /// addresses whose top `bits` bits are `b`).
    index: Vec<u32>,
    bits: u32,
}

/// Interval starts in the family's own width, with each interval's code.
#[derive(Clone, Debug)]
enum Starts {
    /// `[start, code]` pairs.
    V4(Vec<[u32; 2]>),
    /// Starts, and codes beside them.
    V6(Vec<u128>, Vec<u32>),
}

impl Default for Starts {
    fn default() -> Self {
        Starts::V4(Vec::new())
    }
}

/// Codes of intervals (see [`Intervals`]): [`NONE`] for no rule; a table
/// slot below [`INLINE`]; or [`INLINE`] with the one rule's id in the low
/// bits, and [`DENY`] for a deny rule or [`EXACT`] for an `allow ip` rule
/// (which is also an allow).
const INLINE: u32 = 1 << 31;
const DENY: u32 = 1 << 30;
const EXACT: u32 = 1 << 29;
/// Rule ids an inline code can hold: below this (so that no code is
/// [`NONE`]).
const RULE_BITS: u32 = EXACT - 1;

/// The code of an interval with table slot `slot`.
fn code(table: &[[Packed; 3]], slot: u32) -> u32 {
    let Some(s) = table.get(slot as usize) else {
        return NONE;
    };
    let one = |r: u32| r != NONE && r < RULE_BITS;
    let [deny, allow, exact_allow] = *s;
    match (deny.whole(), allow.whole(), exact_allow.whole()) {
        (Some(d), Some(NONE), Some(NONE)) if one(d) => INLINE | DENY | d,
        (Some(NONE), Some(a), Some(NONE)) if one(a) => INLINE | a,
        (Some(NONE), Some(a), Some(e)) if one(a) && a == e => INLINE | EXACT | a,
        _ => slot,
    }
}

impl Starts {
    /// From widened starts and their codes: `None` if a start does not fit
    /// the width.
    ///
    /// The vectors hold no spare capacity: the build's grew by doubling
    /// (up to half again the starts, 1.2 MB at 200 000 rules).
    fn new(width: u32, mut wide: Vec<u128>, mut codes: Vec<u32>) -> Option<Starts> {
        if width == 32 {
            let mut v4 = wide
                .into_iter()
                .zip(codes)
                .map(|(s, c)| u32::try_from(s).ok().map(|s| [s, c]))
                .collect::<Option<Vec<[u32; 2]>>>()?;
            v4.shrink_to_fit();
            Some(Starts::V4(v4))
        } else {
            wide.shrink_to_fit();
            codes.shrink_to_fit();
            Some(Starts::V6(wide, codes))
        }
    }

    fn len(&self) -> usize {
        match self {
            Starts::V4(v) => v.len(),
            Starts::V6(v, _) => v.len(),
        }
    }

    fn get(&self, i: usize) -> Option<u128> {
        match self {
            Starts::V4(v) => v.get(i).map(|&[s, _]| u128::from(s)),
            Starts::V6(v, _) => v.get(i).copied(),
        }
    }

    fn wide(&self) -> Vec<u128> {
        match self {
            Starts::V4(v) => v.iter().map(|&[s, _]| u128::from(s)).collect(),
            Starts::V6(v, _) => v.clone(),
        }
    }

    /// The code of the last interval starting at or before `addr`, whose
    /// index is in `lo..=hi` (the intervals in `lo..hi` start in the
    /// address's bucket; the one before `lo` started before it).
    #[inline(always)]
    fn code(&self, lo: usize, hi: usize, addr: u128) -> u32 {
        let i = match self {
            Starts::V4(v) => {
                let Some(s) = v.get(lo..hi) else { return NONE };
                // An IPv4 table is asked only IPv4 addresses; a wider one
                // is past every start.
                lo + match u32::try_from(addr) {
                    Ok(a) => s.partition_point(|&[s, _]| s <= a),
                    Err(_) => s.len(),
                }
            }
            Starts::V6(v, _) => {
                lo + v
                    .get(lo..hi)
                    .map_or(0, |s| s.partition_point(|&s| s <= addr))
            }
        };
        let Some(i) = i.checked_sub(1) else {
            return NONE;
        };
        match self {
            Starts::V4(v) => v.get(i).map_or(NONE, |&[_, c]| c),
            Starts::V6(_, c) => c.get(i).copied().unwrap_or(NONE),
        }
    }

    fn ascending(&self) -> bool {
        match self {
            Starts::V4(v) => v.windows(2).all(|w| w.first() < w.get(1)),
            Starts::V6(v, _) => v.windows(2).all(|w| w.first() < w.get(1)),
        }
    }
}

#[path = "prefixes_store.rs"]
mod store;
pub use store::StoredIntervals;

/// One address rule as the compiler hands it over, in canonical form.
pub struct PrefixRule<'a> {
    pub first: u128,
    pub last: u128,
    /// An `ip` rule (an exact address), not a `cidr`.
    pub exact: bool,
    pub effect: Effect,
    pub rule: RuleId,
    pub ports: Option<&'a [PortRange]>,
}

impl Intervals {
    pub fn build(rules: &[PrefixRule<'_>], max: u128) -> Intervals {
        let mut out = Intervals {
            width: if max <= u128::from(u32::MAX) { 32 } else { 128 },
            ..Intervals::default()
        };
        let mut starts: Vec<u128> = Vec::new();
        let mut slots: Vec<u32> = Vec::new();
        let mut cuts: Vec<u128> = vec![0];
        for r in rules {
            cuts.push(r.first);
            if r.last < max {
                cuts.push(r.last + 1);
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        // The rules in order of their first address: a counting sort over
        // the cut each one starts at (every `first` is a cut). No comparison
        // sort, so no sort instantiation of its own in the browser build.
        let start_cut: Vec<usize> = rules
            .iter()
            .map(|r| cuts.binary_search(&r.first).unwrap_or(0))
            .collect();
        let mut offsets = vec![0usize; cuts.len() + 1];
        for &c in &start_cut {
            if let Some(o) = offsets.get_mut(c + 1) {
                *o += 1;
            }
        }
        for i in 1..offsets.len() {
            let prev = offsets.get(i - 1).copied().unwrap_or(0);
            if let Some(o) = offsets.get_mut(i) {
                *o += prev;
            }
        }
        let mut by_start = vec![0usize; rules.len()];
        for (i, &c) in start_cut.iter().enumerate() {
            if let Some(o) = offsets.get_mut(c) {
                if let Some(slot) = by_start.get_mut(*o) {
                    *slot = i;
                }
                *o += 1;
            }
        }
        let mut next = 0;
        let mut active: Vec<usize> = Vec::new();
        let mut dedup: HashMap<Vec<usize>, u32, FastHash> = HashMap::default();
        for &cut in &cuts {
            while let Some(&i) = by_start.get(next) {
                match rules.get(i) {
                    Some(r) if r.first <= cut => {
                        active.push(i);
                        next += 1;
                    }
                    _ => break,
                }
            }
            active.retain(|&i| rules.get(i).is_some_and(|r| r.last >= cut));
            let slot = if active.is_empty() {
                NONE
            } else {
                let mut key = active.clone();
                key.sort_unstable();
                match dedup.get(&key) {
                    Some(&s) => s,
                    None => {
                        let s = out.table.len() as u32;
                        let members: Vec<&PrefixRule<'_>> =
                            key.iter().filter_map(|&i| rules.get(i)).collect();
                        let pick = |f: &dyn Fn(&PrefixRule<'_>) -> bool| -> Vec<(RuleId, Option<&[PortRange]>)> {
                            members.iter().filter(|r| f(r)).map(|r| (r.rule, r.ports)).collect()
                        };
                        let deny = pick(&|r| r.effect == Effect::Deny);
                        let allow = pick(&|r| r.effect == Effect::Allow);
                        let exact = pick(&|r| r.effect == Effect::Allow && r.exact);
                        let groups = [
                            Group::build(&mut out.ports, &deny),
                            Group::build(&mut out.ports, &allow),
                            Group::build(&mut out.ports, &exact),
                        ];
                        let slot = groups.map(|g| Packed::pack(g, &mut out.split));
                        out.table.push(slot);
                        dedup.insert(key, s);
                        s
                    }
                }
            };
            // Merge with the previous interval when nothing changes.
            if slots.last() != Some(&slot) {
                starts.push(cut);
                slots.push(slot);
            }
        }
        // Every cut is within the family's width (`max`).
        let codes = slots.iter().map(|&slot| code(&out.table, slot)).collect();
        drop(slots);
        out.starts = Starts::new(out.width, starts, codes).unwrap_or_default();
        out.table.shrink_to_fit();
        out.split.shrink_to_fit();
        out.ports.shrink();
        out.index();
        out
    }

    /// Each interval's table slot ([`NONE`] for none), from its code: the
    /// code itself below [`INLINE`], else the one slot (slots are unique by
    /// their rules) whose inline code it is.
    pub(crate) fn slots(&self) -> Vec<u32> {
        let inline: HashMap<u32, u32, FastHash> = (0..self.table.len())
            .filter_map(|k| {
                let k = u32::try_from(k).ok()?;
                let c = code(&self.table, k);
                (c != NONE && c & INLINE != 0).then_some((c, k))
            })
            .collect();
        let codes: Vec<u32> = match &self.starts {
            Starts::V4(v) => v.iter().map(|&[_, c]| c).collect(),
            Starts::V6(_, c) => c.clone(),
        };
        codes
            .into_iter()
            .map(|c| match c {
                NONE => NONE,
                c if c & INLINE == 0 => c,
                c => inline.get(&c).copied().unwrap_or(NONE),
            })
            .collect()
    }

    /// Builds the direct index: about two buckets per interval, at most
    /// 2^20 buckets.
    fn index(&mut self) {
        let n = self.starts.len().max(1);
        let bits = (usize::BITS - n.leading_zeros())
            .clamp(1, 20)
            .min(self.width);
        let shift = self.width.saturating_sub(bits);
        let buckets = 1usize << bits;
        let mut index = Vec::with_capacity(buckets + 1);
        let mut i = 0usize;
        for b in 0..=buckets {
            // Intervals starting before bucket `b`.
            let first = (b as u128).checked_shl(shift).unwrap_or(u128::MAX);
            while self
                .starts
                .get(i)
                .is_some_and(|s| s < first || b == buckets)
            {
                i += 1;
            }
            index.push(i as u32);
        }
        self.index = index;
        self.bits = bits;
    }

    /// Checks every index of a loaded table.
    pub(crate) fn validate(&self, rules: usize) -> Result<(), super::Inconsistency> {
        if !self.starts.ascending() {
            return Err(super::Inconsistency::Table("interval starts out of order"));
        }
        self.ports.validate(rules)?;
        for g in &self.split {
            g.validate(&self.ports, rules)?;
        }
        for r in self.table.iter().flatten().filter_map(|p| p.whole()) {
            super::ports::check_rule(r, rules)?;
        }
        Ok(())
    }

    /// What the rules say about one address (canonical form, widened).
    #[inline(always)]
    pub fn lookup(&self, addr: u128, q: PortQ) -> IpHit {
        let b = addr.checked_shr(self.width - self.bits).unwrap_or(0) as usize;
        let (lo, hi) = match (self.index.get(b), self.index.get(b + 1)) {
            (Some(&lo), Some(&hi)) => (lo as usize, hi as usize),
            _ => (0, self.starts.len()),
        };
        let code = self.starts.code(lo, hi, addr);
        if code & INLINE != 0 && code != NONE {
            // One rule holding every port: port 0 gets none (as its group
            // would answer).
            let r = if q == PortQ::Port(0) {
                NONE
            } else {
                code & RULE_BITS
            };
            return if code & DENY != 0 {
                IpHit {
                    deny: r,
                    ..IpHit::NONE
                }
            } else {
                IpHit {
                    deny: NONE,
                    allow: r,
                    exact_allow: if code & EXACT != 0 { r } else { NONE },
                }
            };
        }
        match self.table.get(code as usize) {
            None => IpHit::NONE,
            Some([deny, allow, exact]) => IpHit {
                deny: deny.deny_raw(&self.split, &self.ports, q),
                allow: allow.allow_raw(&self.split, &self.ports, q),
                exact_allow: exact.allow_raw(&self.split, &self.ports, q),
            },
        }
    }
}

/// `[first, last]` of a prefix, widened.
fn bounds(net: IpNet) -> (u128, u128) {
    match net {
        IpNet::V4(n) => (
            u128::from(u32::from(n.network())),
            u128::from(u32::from(n.broadcast())),
        ),
        IpNet::V6(n) => (u128::from(n.network()), u128::from(n.broadcast())),
    }
}

pub use crate::normalize::addr::canonical_prefixes;

/// `[first, last]` of an address range, widened to `u128`.
pub type Range = (u128, u128);

/// A rule's address or prefix, widened to `[first, last]`, per family.
pub fn rule_ranges(net: IpNet) -> (Vec<Range>, Option<Range>) {
    let (v4, v6) = canonical_prefixes(net);
    (
        v4.into_iter().map(|n| bounds(IpNet::V4(n))).collect(),
        v6.map(|n| bounds(IpNet::V6(n))),
    )
}

/// An address widened for lookup, and whether it is IPv4.
pub fn widen(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v4) => (true, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (false, u128::from(v6)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap_or(IpNet::V4(ipnet::Ipv4Net::default()))
    }

    #[test]
    fn mapped_prefixes_mean_ipv4() {
        let v4 = |s: &str| canonical_prefixes(net(s)).0.map(|n| n.to_string());
        assert_eq!(v4("::ffff:10.0.0.0/104").as_deref(), Some("10.0.0.0/8"));
        assert_eq!(v4("::ffff:0:0/96").as_deref(), Some("0.0.0.0/0"));
        assert_eq!(v4("::ffff:1.2.3.4/128").as_deref(), Some("1.2.3.4/32"));
        assert_eq!(v4("10.0.0.0/8").as_deref(), Some("10.0.0.0/8"));
        // Every other IPv6 prefix covers IPv6 only (docs/language.md#network, ruling of 2026-12-01).
        for s in [
            "::/0",
            "::/64",
            "::ffff:0:0/95",
            "::/96",
            "::1/128",
            "fd00::/8",
        ] {
            assert_eq!(v4(s), None, "{s}");
            assert!(canonical_prefixes(net(s)).1.is_some(), "{s}");
        }
        for s in ["::ffff:10.0.0.0/104", "::ffff:0:0/96"] {
            assert_eq!(canonical_prefixes(net(s)).1, None, "{s}");
        }
    }

    #[test]
    fn intervals_find_every_covering_rule() {
        let r = |f: u128, l: u128, e, id, exact| PrefixRule {
            first: f,
            last: l,
            exact,
            effect: e,
            rule: RuleId(id),
            ports: None,
        };
        let rules = [
            r(0, 255, Effect::Allow, 0, false),
            r(10, 10, Effect::Deny, 1, true),
            r(10, 10, Effect::Allow, 2, true),
        ];
        let t = Intervals::build(&rules, u128::from(u32::MAX));
        let h = t.lookup(10, PortQ::Port(80));
        assert_eq!((h.deny, h.allow, h.exact_allow), (1, 0, 2));
        let h = t.lookup(11, PortQ::Port(80));
        assert_eq!((h.deny, h.allow, h.exact_allow), (NONE, 0, NONE));
        assert_eq!(t.lookup(256, PortQ::Port(80)), IpHit::NONE);
    }

    /// The direct index finds the same interval as a binary search over all
    /// of them, for random prefixes of both families and random addresses
    /// (inside them, at their edges, anywhere).
    #[test]
    fn the_direct_index_agrees_with_a_full_binary_search() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Addresses answered by table slots and by inline codes.
        let mut kinds = [0usize; 2];
        for (width, count) in [
            (32u32, 1usize),
            (32, 7),
            (32, 300),
            (32, 5000),
            (128, 40),
            (128, 3000),
        ] {
            let max = if width == 32 {
                u128::from(u32::MAX)
            } else {
                u128::MAX
            };
            const WEB: &[PortRange] = &[PortRange { lo: 80, hi: 80 }];
            let mut rules = Vec::new();
            for i in 0..count {
                // Any length, or a long one (few rules cover it).
                let len = if i % 2 == 0 {
                    (next() % u64::from(width + 1)) as u32
                } else {
                    width - (next() % 9) as u32
                };
                let a = (u128::from(next()) << 64 | u128::from(next())) & max;
                let mask = max & !max.checked_shr(len).unwrap_or(0);
                let first = a & mask;
                let last = first | (max & !mask);
                // Deny and allow, exact addresses, port lists: intervals
                // with inline codes and intervals with table slots.
                rules.push(PrefixRule {
                    first,
                    last,
                    exact: i % 4 == 2,
                    effect: if i % 3 == 0 {
                        Effect::Deny
                    } else {
                        Effect::Allow
                    },
                    rule: RuleId(i as u32),
                    ports: (i % 5 == 1).then_some(WEB),
                });
            }
            let t = Intervals::build(&rules, max);
            let slots = t.slots();
            let wide = t.starts.wide();
            let full = |addr: u128| {
                let i = wide.partition_point(|&s| s <= addr);
                i.checked_sub(1).and_then(|i| slots.get(i)).copied()
            };
            let mut probes: Vec<u128> = vec![0, max];
            for r in &rules {
                probes.extend([
                    r.first,
                    r.last,
                    r.first.saturating_sub(1),
                    r.last.wrapping_add(1) & max,
                ]);
            }
            for _ in 0..20_000 {
                probes.push((u128::from(next()) << 64 | u128::from(next())) & max);
            }
            for a in probes {
                for q in [
                    PortQ::NoPort,
                    PortQ::Port(0),
                    PortQ::Port(80),
                    PortQ::Port(443),
                ] {
                    let want = full(a).and_then(|s| t.table.get(s as usize)).map(|s| {
                        let [d, a, e] = s.map(|p| p.unpack(&t.split));
                        (
                            d.deny(&t.ports, q),
                            a.allow(&t.ports, q),
                            e.allow(&t.ports, q),
                        )
                    });
                    let got = t.lookup(a, q);
                    let raw = |r: Option<RuleId>| r.map_or(NONE, |r| r.0);
                    let want = want.map_or(IpHit::NONE, |(d, a, e)| IpHit {
                        deny: raw(d),
                        allow: raw(a),
                        exact_allow: raw(e),
                    });
                    assert_eq!(want, got, "{a:#x} {q:?}");
                }
                let slot = full(a).unwrap_or(NONE);
                if slot != NONE {
                    if let Some(k) = kinds.get_mut(usize::from(code(&t.table, slot) & INLINE != 0))
                    {
                        *k += 1;
                    }
                }
            }
            // And after a round trip through the stored form.
            let back = Intervals::try_from(StoredIntervals::from(t.clone()));
            assert!(back.is_ok_and(|b| b.index == t.index && b.starts.wide() == wide));
        }
        assert!(kinds.iter().all(|&k| k > 1000), "{kinds:?}");
    }

    #[test]
    fn a_stored_ipv4_start_wider_than_32_bits_is_refused() {
        let rule = PrefixRule {
            first: 0x0a00_0000,
            last: 0x0aff_ffff,
            exact: false,
            effect: Effect::Allow,
            rule: RuleId(0),
            ports: None,
        };
        let t = Intervals::build(&[rule], u128::from(u32::MAX));
        assert!(matches!(t.starts, Starts::V4(_)));
        let mut stored = StoredIntervals::from(t);
        assert!(Intervals::try_from(stored.clone()).is_ok());
        if let Some(s) = stored.starts.last_mut() {
            *s = 1 << 40;
        }
        assert!(Intervals::try_from(stored).is_err());
    }
}
