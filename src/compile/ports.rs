//! Port lists resolved at compile time.
//!
//! A [`Group`] summarises every rule of one effect that applies to one
//! target (a domain slot or an address interval): for each port, the first
//! rule in source order whose port list holds it. Segments live in a shared
//! arena so that a group is four integers.

use serde::{Deserialize, Serialize};

use crate::decision::RuleId;
use crate::syntax::ast::PortRange;

const NONE: u32 = u32::MAX;

/// A port segment `lo..=hi` decided by `rule`.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct Seg {
    pub lo: u16,
    pub hi: u16,
    pub rule: u32,
}

/// Segments of every group of one table.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PortArena {
    segs: Vec<Seg>,
}

/// How a query uses ports.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum PortQ {
    /// A connection to this port: rules apply when their list holds it.
    Port(u16),
    /// No port (a `dns` question, a `resolved` check without port): deny
    /// rules apply only without a port list; allow rules with or without.
    NoPort,
}

/// Rules of one effect for one target.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub struct Group {
    start: u32,
    len: u32,
    /// First rule without a port list.
    portless: u32,
    /// First rule, with or without a port list.
    any: u32,
}

impl Default for Group {
    fn default() -> Self {
        Group {
            start: 0,
            len: 0,
            portless: NONE,
            any: NONE,
        }
    }
}

/// A raw rule id (`u32::MAX` for none) as decisions name it.
pub(crate) fn id(x: u32) -> Option<RuleId> {
    (x != NONE).then_some(RuleId(x))
}

/// Checks a loaded index (compiled artifacts).
pub(crate) fn check_rule(id: u32, rules: usize) -> Result<(), super::Inconsistency> {
    if id == NONE || (id as usize) < rules {
        Ok(())
    } else {
        Err(super::Inconsistency::Rule(id))
    }
}

impl PortArena {
    /// Gives back the growth room of the arena.
    pub(crate) fn shrink(&mut self) {
        self.segs.shrink_to_fit();
    }

    pub(crate) fn validate(&self, rules: usize) -> Result<(), super::Inconsistency> {
        for s in &self.segs {
            if s.lo > s.hi || s.lo == 0 {
                return Err(super::Inconsistency::Table("bad port segment"));
            }
            check_rule(s.rule, rules)?;
        }
        Ok(())
    }
}

impl Group {
    pub(crate) fn validate(
        &self,
        arena: &PortArena,
        rules: usize,
    ) -> Result<(), super::Inconsistency> {
        let end = self.start as usize + self.len as usize;
        if end > arena.segs.len() {
            return Err(super::Inconsistency::Table("port group out of range"));
        }
        check_rule(self.portless, rules)?;
        check_rule(self.any, rules)
    }

    /// The group's one rule when it holds every port and keeps no port
    /// segments (`Some(u32::MAX)` for an empty group): then every query
    /// but port 0 gets that rule, and port 0 gets none.
    pub(crate) fn whole(&self) -> Option<u32> {
        (self.len == 0 && self.portless == self.any).then_some(self.any)
    }

    /// The first rule whose port list holds `port`.
    #[inline]
    pub fn at(&self, arena: &PortArena, port: u16) -> Option<RuleId> {
        // When the first rule has no port list it holds every port and wins
        // them all: no segment to look at (the common case).
        if self.portless == self.any && port != 0 {
            return id(self.any);
        }
        let segs = arena
            .segs
            .get(self.start as usize..(self.start as usize + self.len as usize))?;
        let i = segs.partition_point(|s| s.hi < port);
        segs.get(i).filter(|s| s.lo <= port).map(|s| RuleId(s.rule))
    }

    /// The deciding rule as a raw id (`u32::MAX` for none, so that callers
    /// merge with `min`): the first rule holding the port, or without a port
    /// `no_port`.
    #[inline(always)]
    fn raw(&self, arena: &PortArena, q: PortQ, no_port: u32) -> u32 {
        match q {
            PortQ::Port(p) => self.at(arena, p).map_or(NONE, |r| r.0),
            PortQ::NoPort => no_port,
        }
    }

    /// The deciding deny rule for a query: without a port, only a rule
    /// without a port list.
    #[inline(always)]
    pub fn deny_raw(&self, arena: &PortArena, q: PortQ) -> u32 {
        self.raw(arena, q, self.portless)
    }

    /// The deciding allow rule for a query: without a port, any rule.
    #[inline(always)]
    pub fn allow_raw(&self, arena: &PortArena, q: PortQ) -> u32 {
        self.raw(arena, q, self.any)
    }

    /// [`Group::deny_raw`] as an id.
    #[cfg(test)]
    pub fn deny(&self, arena: &PortArena, q: PortQ) -> Option<RuleId> {
        id(self.deny_raw(arena, q))
    }

    /// [`Group::allow_raw`] as an id.
    #[cfg(test)]
    pub fn allow(&self, arena: &PortArena, q: PortQ) -> Option<RuleId> {
        id(self.allow_raw(arena, q))
    }

    /// Builds a group from `(rule, port list)` pairs (`None` = every port).
    pub fn build(arena: &mut PortArena, rules: &[(RuleId, Option<&[PortRange]>)]) -> Group {
        if rules.is_empty() {
            return Group::default();
        }
        let all = [PortRange {
            lo: 1,
            hi: u16::MAX,
        }];
        let ranges = |p: Option<&[PortRange]>| -> Vec<PortRange> {
            p.map_or_else(|| all.to_vec(), <[_]>::to_vec)
        };
        let portless = rules
            .iter()
            .filter(|(_, p)| p.is_none())
            .map(|(r, _)| r.0)
            .min()
            .unwrap_or(NONE);
        let any = rules.iter().map(|(r, _)| r.0).min().unwrap_or(NONE);
        if portless == any {
            // The first rule holds every port: `at` answers without
            // segments, so none are kept.
            return Group {
                start: 0,
                len: 0,
                portless,
                any,
            };
        }
        let mut cuts: Vec<u32> = Vec::new();
        for (_, p) in rules {
            for r in ranges(*p) {
                cuts.push(u32::from(r.lo));
                cuts.push(u32::from(r.hi) + 1);
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        let start = arena.segs.len();
        for w in cuts.windows(2) {
            let (lo, next) = match w {
                [a, b] => (*a, *b),
                _ => continue,
            };
            let best = rules
                .iter()
                .filter(|(_, p)| {
                    ranges(*p)
                        .iter()
                        .any(|r| u32::from(r.lo) <= lo && lo <= u32::from(r.hi))
                })
                .map(|(r, _)| r.0)
                .min();
            let (Some(rule), Ok(lo16), Ok(hi16)) =
                (best, u16::try_from(lo), u16::try_from(next - 1))
            else {
                continue;
            };
            let fresh = arena.segs.len() == start;
            match arena.segs.last_mut() {
                Some(last) if !fresh && last.rule == rule && u32::from(last.hi) + 1 == lo => {
                    last.hi = hi16;
                }
                _ => arena.segs.push(Seg {
                    lo: lo16,
                    hi: hi16,
                    rule,
                }),
            }
        }
        let len = arena.segs.len() - start;
        Group {
            start: start as u32,
            len: len as u32,
            portless,
            any,
        }
    }
}

/// The bit of a [`Packed`] group that says it is kept whole in a side
/// list rather than inline.
const SPLIT: u32 = 1 << 31;

/// A group in four bytes (issue 62): most groups hold every port with one
/// rule, or are empty, and are that rule ([`NONE`] for none); the others
/// are [`SPLIT`] and their place in a side list of full [`Group`]s.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash)]
pub struct Packed(u32);

impl Packed {
    /// `g`, inline when it is whole (and its rule fits), else added to
    /// `split`.
    pub fn pack(g: Group, split: &mut Vec<Group>) -> Packed {
        match g.whole() {
            Some(r) if r == NONE || r < SPLIT => Packed(r),
            _ => {
                let i = u32::try_from(split.len()).unwrap_or(NONE);
                split.push(g);
                Packed(SPLIT | i.min(SPLIT - 2))
            }
        }
    }

    /// The full group again (as artifacts store it).
    pub fn unpack(self, split: &[Group]) -> Group {
        match self.whole() {
            Some(r) => Group {
                start: 0,
                len: 0,
                portless: r,
                any: r,
            },
            None => split
                .get((self.0 & !SPLIT) as usize)
                .copied()
                .unwrap_or_default(),
        }
    }

    /// The group's one rule when it is whole ([`NONE`] for empty).
    pub fn whole(self) -> Option<u32> {
        (self.0 == NONE || self.0 & SPLIT == 0).then_some(self.0)
    }

    /// [`Group::deny_raw`]: a whole group's rule holds every port but 0.
    #[inline(always)]
    pub fn deny_raw(self, split: &[Group], arena: &PortArena, q: PortQ) -> u32 {
        match self.whole() {
            Some(_) if q == PortQ::Port(0) => NONE,
            Some(r) => r,
            None => split
                .get((self.0 & !SPLIT) as usize)
                .map_or(NONE, |g| g.deny_raw(arena, q)),
        }
    }

    /// [`Group::allow_raw`], as [`Packed::deny_raw`].
    #[inline(always)]
    pub fn allow_raw(self, split: &[Group], arena: &PortArena, q: PortQ) -> u32 {
        match self.whole() {
            Some(_) if q == PortQ::Port(0) => NONE,
            Some(r) => r,
            None => split
                .get((self.0 & !SPLIT) as usize)
                .map_or(NONE, |g| g.allow_raw(arena, q)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_rule_per_port() {
        let mut a = PortArena::default();
        let p443 = [PortRange { lo: 443, hi: 443 }];
        let hi = [PortRange { lo: 400, hi: 500 }];
        let g = Group::build(
            &mut a,
            &[
                (RuleId(3), Some(&p443)),
                (RuleId(5), Some(&hi)),
                (RuleId(9), None),
            ],
        );
        assert_eq!(g.at(&a, 443), Some(RuleId(3)));
        assert_eq!(g.at(&a, 444), Some(RuleId(5)));
        assert_eq!(g.at(&a, 80), Some(RuleId(9)));
        assert_eq!(g.deny(&a, PortQ::NoPort), Some(RuleId(9)));
        assert_eq!(g.allow(&a, PortQ::NoPort), Some(RuleId(3)));
        let only_ports = Group::build(&mut a, &[(RuleId(1), Some(&p443))]);
        assert_eq!(only_ports.deny(&a, PortQ::NoPort), None);
        assert_eq!(only_ports.at(&a, 65535), None);
        // Packed, each answers every query as the full group does.
        let whole = Group::build(&mut a, &[(RuleId(4), None), (RuleId(7), Some(&p443))]);
        let mut split = Vec::new();
        for full in [g, only_ports, whole, Group::default()] {
            let p = Packed::pack(full, &mut split);
            assert_eq!(p.unpack(&split), full);
            for q in [
                PortQ::NoPort,
                PortQ::Port(0),
                PortQ::Port(80),
                PortQ::Port(443),
                PortQ::Port(444),
            ] {
                assert_eq!(
                    p.deny_raw(&split, &a, q),
                    full.deny_raw(&a, q),
                    "{full:?} {q:?}"
                );
                assert_eq!(
                    p.allow_raw(&split, &a, q),
                    full.allow_raw(&a, q),
                    "{full:?} {q:?}"
                );
            }
        }
        assert_eq!(split.len(), 2);
    }
}
