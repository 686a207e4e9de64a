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

use super::ports::{Group, PortArena, PortQ};
use crate::decision::RuleId;
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

/// What the rules say about one address.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub struct IpHit {
    pub deny: Option<RuleId>,
    pub allow: Option<RuleId>,
    pub exact_allow: Option<RuleId>,
}

/// One family's intervals (IPv4 addresses are stored widened to `u128`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Intervals {
    starts: Vec<u128>,
    slots: Vec<u32>,
    table: Vec<IpSlot>,
    ports: PortArena,
}

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
        let mut out = Intervals::default();
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
        let mut dedup: HashMap<Vec<usize>, u32> = HashMap::new();
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
                        let slot = IpSlot {
                            deny: Group::build(&mut out.ports, &deny),
                            allow: Group::build(&mut out.ports, &allow),
                            exact_allow: Group::build(&mut out.ports, &exact),
                        };
                        out.table.push(slot);
                        dedup.insert(key, s);
                        s
                    }
                }
            };
            // Merge with the previous interval when nothing changes.
            if out.slots.last() != Some(&slot) {
                out.starts.push(cut);
                out.slots.push(slot);
            }
        }
        out
    }

    /// Checks every index of a loaded table.
    pub(crate) fn validate(&self, rules: usize) -> Result<(), super::Inconsistency> {
        if self.starts.len() != self.slots.len()
            || self.starts.windows(2).any(|w| w.first() >= w.get(1))
        {
            return Err(super::Inconsistency::Table("interval starts out of order"));
        }
        if self
            .slots
            .iter()
            .any(|&s| s != NONE && s as usize >= self.table.len())
        {
            return Err(super::Inconsistency::Table("interval slot out of range"));
        }
        self.ports.validate(rules)?;
        for s in &self.table {
            for g in [&s.deny, &s.allow, &s.exact_allow] {
                g.validate(&self.ports, rules)?;
            }
        }
        Ok(())
    }

    /// What the rules say about one address (canonical form, widened).
    pub fn lookup(&self, addr: u128, q: PortQ) -> IpHit {
        let i = self.starts.partition_point(|&s| s <= addr);
        let slot = i
            .checked_sub(1)
            .and_then(|i| self.slots.get(i))
            .copied()
            .unwrap_or(NONE);
        match self.table.get(slot as usize) {
            None => IpHit::default(),
            Some(s) => IpHit {
                deny: s.deny.deny(&self.ports, q),
                allow: s.allow.allow(&self.ports, q),
                exact_allow: s.exact_allow.allow(&self.ports, q),
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
        assert_eq!(
            (h.deny, h.allow, h.exact_allow),
            (Some(RuleId(1)), Some(RuleId(0)), Some(RuleId(2)))
        );
        let h = t.lookup(11, PortQ::Port(80));
        assert_eq!(
            (h.deny, h.allow, h.exact_allow),
            (None, Some(RuleId(0)), None)
        );
        assert_eq!(t.lookup(256, PortQ::Port(80)), IpHit::default());
    }
}
