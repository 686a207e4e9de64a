//! `resolved NAME -> ADDR, ... [port P]` compared for every answer.
//!
//! After the checks every side makes alike (the name, an empty list, an
//! address that is not address text, port 0), a side's decision is made
//! of three parts (docs/language.md#network, `resolved`): the mode and
//! the name's rules (a function of the name's class and the port's), and,
//! when those allow, the first address of the answer that the rules or
//! the rebinding check refuse (a function of that address's class and the
//! port's). Names, addresses and ports are independent parts of a query,
//! so every combination of a name class, a port class and a pair of
//! "first refused address" verdicts is some query; the verdict pairs an
//! answer can make are those of one address, or of two: the first refused
//! by one side only, then one the other side refuses. One witness per
//! combination decides every query.
//!
//! A region is every query whose two decisions have the same outcome,
//! reason and escalation on each side, as a diff compares decisions:
//! "every name allowed now, answered with an address some rule refuses"
//! is one region, not one a rule, and shows one witness with its rules.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::compile::Policy;
use crate::decision::Decision;
use crate::query::Query;

use super::cells::{Atoms, HostClass};
use super::{Cell, Key, Kind, Region, change};

/// A decision as a region tells it apart: outcome, reason, escalation
/// (the deciding rule is the witness's: one region for every answer
/// refused by some address rule, not one a rule).
pub(crate) type Red = Key;

/// One side's decision by a name, and whether it looks at the addresses
/// (the mode did not decide, the name is allowed).
type NamePart = (Decision, bool);

fn red(d: &Decision) -> Red {
    Key::of(d)
}

/// The regions of `resolved` and, per region (its cell's item), the pair
/// of decisions it holds.
pub(crate) fn regions(
    atoms: &Atoms,
    hosts: &[(HostClass, String)],
    a: &Policy,
    b: &Policy,
) -> (Vec<Region>, Vec<(Red, Red)>) {
    let names: Vec<&str> = hosts
        .iter()
        .filter(|(c, _)| matches!(c, HostClass::Name { .. }))
        .map(|(_, h)| h.as_str())
        .collect();
    // One address of every class: a familiar one where the class holds
    // it (public first), else the class's first.
    let familiar: Vec<IpAddr> = ["93.184.215.14", "2606:4700::1111"]
        .iter()
        .chain(crate::samples::IPS)
        .filter_map(|a| a.parse().ok())
        .collect();
    let addrs: Vec<IpAddr> = hosts
        .iter()
        .filter(|(c, _)| !matches!(c, HostClass::Name { .. }))
        .filter_map(|(c, h)| {
            let first: IpAddr = h
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse()
                .ok()?;
            Some(
                familiar
                    .iter()
                    .copied()
                    .find(|ip| {
                        atoms.ip_class(*ip) == *c && crate::normalize::canonical_ip(*ip) == *ip
                    })
                    .unwrap_or(first),
            )
        })
        .collect();
    // Familiar addresses first: each kind of answer's witness is then one.
    let mut addrs = addrs;
    addrs.sort_by_key(|ip| familiar.iter().position(|f| f == ip).unwrap_or(usize::MAX));
    // No port, and one port of every port class (443 or 80 where the
    // class holds them).
    let mut ports: Vec<Option<u16>> = vec![None];
    for i in 0..atoms.ports.len() {
        if let Some((lo, hi)) = atoms.port_range(i) {
            let p = [443u16, 80]
                .into_iter()
                .find(|p| (lo..=hi).contains(p))
                .unwrap_or(lo);
            ports.push(Some(p));
        }
    }
    let mut found: Vec<(Red, Red)> = Vec::new();
    let mut index: HashMap<(Red, Red), usize> = HashMap::new();
    let mut out: Vec<Region> = Vec::new();
    for port in ports {
        // The name parts: one name per pair of decisions.
        // Each side's decision by its name, and whether the addresses
        // are looked at (the mode did not decide, the name is allowed).
        let mut by_name: Vec<(NamePart, NamePart, &str)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let part = |r: Result<Decision, Decision>| match r {
            Ok(d) => (d, d.is_allow()),
            Err(d) => (d, false),
        };
        for n in &names {
            let (Some(x), Some(y)) = (a.resolved_by_name(n, port), b.resolved_by_name(n, port))
            else {
                continue;
            };
            let (x, y) = (part(x), part(y));
            if seen.insert((red(&x.0), x.1, red(&y.0), y.1)) {
                by_name.push((x, y, n));
            }
        }
        for (va, vb, answer) in answers(&addrs, a, b, port) {
            for ((x, xa), (y, ya), name) in &by_name {
                let ea = if *xa { va.unwrap_or(*x) } else { *x };
                let eb = if *ya { vb.unwrap_or(*y) } else { *y };
                if Key::of(&ea) == Key::of(&eb) || index.contains_key(&(red(&ea), red(&eb))) {
                    continue;
                }
                let witness = Query::Resolved {
                    host: name.to_string(),
                    addrs: answer.iter().map(IpAddr::to_string).collect(),
                    port: port.map(i64::from),
                };
                // The region is what the witness is decided as (the parts
                // above say which pairs exist; the engine says what each is).
                let (old, new) = (a.decide(&witness), b.decide(&witness));
                let Some(ch) = change(&Key::of(&old), &Key::of(&new)) else {
                    continue;
                };
                let key = (red(&old), red(&new));
                if index.contains_key(&key) {
                    continue;
                }
                index.insert(key, found.len());
                out.push(Region {
                    kind: Kind::Resolved,
                    change: ch,
                    description: format!("{witness} and every name and answer decided alike"),
                    witness,
                    old,
                    new,
                    sampled: false,
                    cells: vec![Cell::item(Kind::Resolved, found.len())],
                });
                found.push(key);
            }
        }
    }
    (out, found)
}

/// The verdict pairs an answer can make on port `port` — each side's
/// refusal of the answer (`None`: it takes the answer) — each with an
/// answer that makes it: one address of every class, and two where one
/// side refuses the first and takes it, the other refuses the second.
#[allow(clippy::type_complexity)]
fn answers(
    addrs: &[IpAddr],
    a: &Policy,
    b: &Policy,
    port: Option<u16>,
) -> Vec<(Option<Decision>, Option<Decision>, Vec<IpAddr>)> {
    let verdicts: Vec<(Option<Decision>, Option<Decision>, IpAddr)> = addrs
        .iter()
        .map(|ip| {
            (
                a.resolved_address(*ip, port),
                b.resolved_address(*ip, port),
                *ip,
            )
        })
        .collect();
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let key = |v: &Option<Decision>| v.as_ref().map(red);
    for (va, vb, ip) in &verdicts {
        if seen.insert((key(va), key(vb))) {
            out.push((*va, *vb, vec![*ip]));
        }
    }
    // First refused by one side only, then refused by the other: one of
    // each distinct verdict.
    let distinct = |pick: &dyn Fn(&(Option<Decision>, Option<Decision>, IpAddr)) -> bool,
                    side: usize| {
        let mut kept: Vec<(Option<Decision>, IpAddr)> = Vec::new();
        let mut keys = std::collections::HashSet::new();
        for v in verdicts.iter().filter(|v| pick(v)) {
            let d = if side == 0 { v.0 } else { v.1 };
            if keys.insert(key(&d)) {
                kept.push((d, v.2));
            }
        }
        kept
    };
    let a_only = distinct(&|v| v.0.is_some() && v.1.is_none(), 0);
    let b_refuses = distinct(&|v| v.1.is_some(), 1);
    let b_only = distinct(&|v| v.1.is_some() && v.0.is_none(), 1);
    let a_refuses = distinct(&|v| v.0.is_some(), 0);
    // (Refusals are told apart by outcome and reason alone, so each list
    // holds a handful.)
    for (va, first) in &a_only {
        for (vb, second) in &b_refuses {
            if seen.insert((key(va), key(vb))) {
                out.push((*va, *vb, vec![*first, *second]));
            }
        }
    }
    for (vb, first) in &b_only {
        for (va, second) in &a_refuses {
            if seen.insert((key(va), key(vb))) {
                out.push((*va, *vb, vec![*first, *second]));
            }
        }
    }
    out
}

/// The region item a query's pair of decisions lies in, if any.
pub(crate) fn item_of(found: &[(Red, Red)], old: &Decision, new: &Decision) -> Option<usize> {
    let key = (red(old), red(new));
    found.iter().position(|k| *k == key)
}
