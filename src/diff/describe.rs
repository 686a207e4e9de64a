//! Regions in the language's words: `connect *.example.com port 443
//! (except api.example.com)`, `dns example.com`, `socket /run/x.sock`.

use std::collections::BTreeMap;

use super::Changed;
use super::Kind;
use super::cells::{self, Atoms, HostClass};
use super::group::{Draft, Except};
use crate::query::Via;

/// For `connect`: the ports of the cells per transport, transports with
/// the same ports together.
pub(super) fn shape(atoms: &Atoms, kind: Kind, cs: &[Changed]) -> Vec<(String, String)> {
    if kind != Kind::Connect {
        return Vec::new();
    }
    let mut per_via: BTreeMap<usize, (Via, Vec<usize>)> = BTreeMap::new();
    for c in cs {
        if let (Some(v), Some(p)) = (c.cell.via, c.cell.port) {
            let at = cells::VIAS.iter().position(|x| *x == v).unwrap_or(0);
            per_via
                .entry(at)
                .or_insert_with(|| (v, Vec::new()))
                .1
                .push(p);
        }
    }
    let mut by_ports: BTreeMap<String, Vec<Via>> = BTreeMap::new();
    for (v, ps) in per_via.into_values() {
        by_ports
            .entry(describe_ports(atoms, &ps))
            .or_default()
            .push(v);
    }
    by_ports
        .into_iter()
        .map(|(ports, vias)| {
            let via = if vias.len() == cells::VIAS.len() {
                String::new()
            } else {
                format!(
                    " via {}",
                    vias.iter()
                        .map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            (ports, via)
        })
        .collect()
}

/// The region in the language's words: `connect *.example.com:443,8443
/// via https (except api.example.com)`, `dns example.com`.
pub(super) fn describe(atoms: &Atoms, d: &Draft) -> String {
    let host = match d.host {
        Some(HostClass::V4(_)) => {
            describe_ranges(&d.v4, describe_v4, atoms.v4_non_public(), "IPv4")
        }
        Some(HostClass::V6(_)) => {
            describe_ranges(&d.v6, describe_v6, atoms.v6_non_public(), "IPv6")
        }
        Some(HostClass::Name {
            base: Some(i),
            below: true,
        }) if d.self_too => format!("**.{}", atoms.bases.get(i).map_or("?", String::as_str)),
        Some(h) => describe_host(atoms, h),
        None if d.kind == Kind::Mcp => describe_mcp(atoms, d),
        None => describe_item(atoms, d.kind, d.item),
    };
    let mut names: Vec<String> = d
        .except
        .iter()
        .filter_map(|e| match e {
            Except::Exact(i) => atoms.bases.get(*i).cloned(),
            Except::Tree(i) => atoms.bases.get(*i).map(|b| format!("**.{b}")),
        })
        .collect();
    names.sort();
    let except = match names.len() {
        0 => String::new(),
        n if n <= 4 => format!(" (except {})", names.join(", ")),
        n => format!(
            " (except {} and {} more)",
            names.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            n - 3
        ),
    };
    match d.kind {
        Kind::Dns => format!("dns {host}{except}"),
        Kind::Upstream | Kind::WebSearch => host,
        Kind::Socket
        | Kind::Tool
        | Kind::Prompt
        | Kind::Mcp
        | Kind::App
        | Kind::Write
        | Kind::Read
        | Kind::Exec
        | Kind::Script
        | Kind::Review
        | Kind::ReviewScript
        | Kind::Resolved
        | Kind::Listen => {
            format!("{} {host}", d.kind.as_str())
        }
        Kind::Connect => {
            let parts: Vec<String> = d
                .shape
                .iter()
                .map(|(ports, via)| {
                    if ports == "*" {
                        format!("connect {host}{via}")
                    } else {
                        format!("connect {host} port {ports}{via}")
                    }
                })
                .collect();
            format!("{}{except}", parts.join("; "))
        }
    }
}

fn describe_ports(atoms: &Atoms, idx: &[usize]) -> String {
    let mut ranges: Vec<(u16, u16)> = idx.iter().filter_map(|i| atoms.port_range(*i)).collect();
    ranges.sort_unstable();
    let mut merged: Vec<(u16, u16)> = Vec::new();
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if u32::from(last.1) + 1 == u32::from(lo) => last.1 = hi,
            _ => merged.push((lo, hi)),
        }
    }
    if merged == [(1, 65535)] {
        return "*".into();
    }
    merged
        .iter()
        .map(|(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// An item of a finite kind in words.
fn describe_item(atoms: &Atoms, kind: Kind, item: Option<usize>) -> String {
    let i = item.unwrap_or(0);
    match kind {
        Kind::Socket => atoms
            .sockets
            .get(i)
            .cloned()
            .unwrap_or_else(|| "any other path".into()),
        Kind::Tool => crate::vocab::Permission::ALL
            .get(i)
            .map_or("?", |p| p.as_str())
            .to_string(),
        Kind::Prompt => crate::vocab::PromptCategory::ALL
            .get(i)
            .map_or("?", |p| p.as_str())
            .to_string(),
        k => k.as_str().to_string(),
    }
}

/// An MCP region: `SERVER/TOOL` (or `any other server`, `any other
/// tool`) and the annotations it holds: nothing when it holds every
/// combination, each hint's values when they form a product
/// (`destructive=true`, `read_only=false|unknown`), else a count.
fn describe_mcp(atoms: &Atoms, d: &Draft) -> String {
    let Some((server, tool, _)) = d.item.and_then(|i| atoms.mcp_query(i)) else {
        return "?".into();
    };
    let named = atoms.mcp.iter().find(|(s, _)| *s == server);
    let s = if named.is_some() {
        server
    } else {
        "any other server".into()
    };
    let t = if named.is_some_and(|(_, t)| t.contains(&tool)) {
        tool
    } else {
        "any other tool".into()
    };
    let mut anns = d.anns.clone();
    anns.sort_unstable();
    anns.dedup();
    if anns.len() == 27 {
        return format!("{s}/{t}");
    }
    let values = |shift: usize| -> Vec<usize> {
        let mut v: Vec<usize> = anns.iter().map(|a| a / shift % 3).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let (dv, rv, ov) = (values(9), values(3), values(1));
    if dv.len() * rv.len() * ov.len() != anns.len() {
        return format!(
            "{s}/{t} (with {} of the 27 annotation combinations)",
            anns.len()
        );
    }
    let word = |name: &str, v: &[usize]| -> Option<String> {
        if v.len() == 3 {
            return None;
        }
        let spelled: Vec<&str> = v
            .iter()
            .map(|x| match x {
                1 => "true",
                2 => "false",
                _ => "unknown",
            })
            .collect();
        Some(format!("{name}={}", spelled.join("|")))
    };
    let words: Vec<String> = [
        word("destructive", &dv),
        word("read_only", &rv),
        word("open_world", &ov),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!("{s}/{t} {}", words.join(" "))
}

/// The host class in words (the names it leaves out are listed apart).
fn describe_host(atoms: &Atoms, h: HostClass) -> String {
    match h {
        HostClass::Name {
            base: Some(i),
            below,
        } => {
            let b = atoms.bases.get(i).map_or("?", String::as_str);
            if below {
                format!("*.{b}")
            } else {
                b.to_string()
            }
        }
        HostClass::Name { base: None, .. } => "any other name".into(),
        HostClass::V4(i) => match atoms.v4_range(i) {
            Some((lo, hi)) => describe_v4(lo, hi),
            None => "?".into(),
        },
        HostClass::V6(i) => match atoms.v6_range(i) {
            Some((lo, hi)) => describe_v6(lo, hi),
            None => "?".into(),
        },
    }
}

/// Address intervals in words: adjacent ones joined, each as a prefix or
/// a range; all the family's non-public addresses named as such.
fn describe_ranges<T: Copy + Ord + num_like::Step>(
    ranges: &[(T, T)],
    one: impl Fn(T, T) -> String,
    non_public: Vec<(T, T)>,
    family: &str,
) -> String {
    let mut r = ranges.to_vec();
    r.sort_unstable();
    let mut merged: Vec<(T, T)> = Vec::new();
    for (lo, hi) in r {
        match merged.last_mut() {
            Some(last) if num_like::Step::next(last.1) == Some(lo) => last.1 = hi,
            _ => merged.push((lo, hi)),
        }
    }
    let mut np = non_public;
    np.sort_unstable();
    let mut np_merged: Vec<(T, T)> = Vec::new();
    for (lo, hi) in np {
        match np_merged.last_mut() {
            Some(last) if num_like::Step::next(last.1) == Some(lo) => last.1 = hi,
            _ => np_merged.push((lo, hi)),
        }
    }
    if !np_merged.is_empty() && merged == np_merged {
        return format!("every non-public {family} address");
    }
    let parts: Vec<String> = merged.iter().map(|&(lo, hi)| one(lo, hi)).collect();
    match parts.len() {
        0 => "?".into(),
        n if n <= 4 => parts.join(", "),
        n => format!(
            "{} and {} more ranges",
            parts.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            n - 3
        ),
    }
}

/// The successor of an address, for joining adjacent intervals.
mod num_like {
    pub trait Step: Sized {
        fn next(self) -> Option<Self>;
    }
    impl Step for u32 {
        fn next(self) -> Option<u32> {
            self.checked_add(1)
        }
    }
    impl Step for u128 {
        fn next(self) -> Option<u128> {
            self.checked_add(1)
        }
    }
}

fn describe_v4(lo: u32, hi: u32) -> String {
    let a = std::net::Ipv4Addr::from(lo);
    if lo == hi {
        return a.to_string();
    }
    let span = u64::from(hi) - u64::from(lo) + 1;
    if span.is_power_of_two() && u64::from(lo).is_multiple_of(span) {
        return format!("cidr {a}/{}", 32 - span.trailing_zeros());
    }
    format!("{a}-{}", std::net::Ipv4Addr::from(hi))
}

fn describe_v6(lo: u128, hi: u128) -> String {
    let a = std::net::Ipv6Addr::from(lo);
    if lo == hi {
        return format!("[{a}]");
    }
    let span = hi.wrapping_sub(lo).wrapping_add(1);
    if span == 0 {
        return "cidr ::/0".into();
    }
    if span.is_power_of_two() && lo.is_multiple_of(span) {
        return format!("cidr {a}/{}", 128 - span.trailing_zeros());
    }
    format!("[{a}]-[{}]", std::net::Ipv6Addr::from(hi))
}
