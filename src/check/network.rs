//! Checks and lints of a `network { }` block.
//!
//! Lints look up covering rules by suffix (domains) and by supernet
//! (addresses) in hash maps, so checking stays linear in the rule count.

use ipnet::IpNet;
use std::collections::HashMap;

use super::{CheckError, Once, error};
use crate::diag::Diagnostic;
use crate::digest::FastHash;
use crate::normalize::pattern::DomainPattern;
use crate::normalize::{canonical_ip, is_localhost_name, is_non_public, is_normal_absolute_path};
use crate::source::Span;
use crate::syntax::ast::*;

/// What a rule targets, normalised for comparison.
#[derive(Clone, Debug, Eq, PartialEq, Hash)]
enum Target {
    Domain(DomainPattern),
    /// An address or prefix; `exact` for `ip` rules.
    Net(IpNet, bool),
}

struct R<'a> {
    rule: &'a NetRule,
    target: Target,
}

pub(super) fn check(stmts: &[NetStmt], diags: &mut Vec<Diagnostic>) {
    let mut once = Once::default();
    let mut default_allow = None;
    let mut local_allow = false;
    let mut rules: Vec<R<'_>> = Vec::new();
    for s in stmts {
        match s {
            NetStmt::Default(v) => {
                once.see("default", v.span, diags);
                if v.node == Effect::Allow {
                    default_allow = Some(v.span);
                }
            }
            NetStmt::Dns(v) => once.see("dns", v.span, diags),
            NetStmt::Local(v) => {
                once.see("local", v.span, diags);
                local_allow = v.node == Effect::Allow;
            }
            NetStmt::Rule(r) => match &r.target {
                NetTarget::Domain(text) => match DomainPattern::parse(text) {
                    Ok(DomainPattern::Any) if r.effect == Effect::Deny => {
                        diags.push(error(CheckError::DenyDomainStar, r.span));
                    }
                    Ok(p) => rules.push(R {
                        rule: r,
                        target: Target::Domain(p),
                    }),
                    Err(e) => {
                        let d = error(CheckError::Pattern(e), r.target_span);
                        diags.push(match url_help(text) {
                            Some(help) => d.with_help(Some(help)),
                            None => d,
                        });
                    }
                },
                NetTarget::Ip(ip) => rules.push(R {
                    rule: r,
                    target: Target::Net(IpNet::from(canonical_ip(*ip)), true),
                }),
                NetTarget::Cidr(c) => {
                    if let Some(v4) = compatible_prefix(*c) {
                        diags.push(
                            Diagnostic::warning(
                                "no_effect",
                                format!(
                                    "`{c}` lies inside `::/96`, where every address is decided as the IPv4 address it embeds: this IPv6 prefix never matches"
                                ),
                                r.target_span,
                            )
                            .with_help(Some(format!("write `cidr {v4}`"))),
                        );
                    }
                    rules.push(R {
                        rule: r,
                        target: Target::Net(crate::normalize::addr::canonical_net(*c), false),
                    })
                }
                NetTarget::Socket(SocketTarget::Any) if r.effect == Effect::Deny => {
                    diags.push(error(CheckError::DenySocketStar, r.span));
                }
                NetTarget::Socket(SocketTarget::Any) => {}
                NetTarget::Socket(SocketTarget::Path(p)) => {
                    if !is_normal_absolute_path(p) {
                        diags.push(error(CheckError::SocketPath(p.clone()), r.target_span));
                    }
                }
            },
        }
    }
    lints(&rules, default_allow, local_allow, diags);
}

/// The IPv4 prefix an IPv6 prefix inside `::/96` spells in the
/// IPv4-compatible form (`::10.0.0.0/104` is `10.0.0.0/8`), when the prefix
/// covers neither `::` nor `::1`. Queries turn such addresses into IPv4
/// (docs/language.md#host-normalisation) and an IPv6 prefix outside
/// `::ffff:0:0/96` covers IPv6 only, so the rule can never match.
fn compatible_prefix(net: IpNet) -> Option<ipnet::Ipv4Net> {
    let IpNet::V6(n) = net else { return None };
    let bits = u128::from(n.network());
    let inside = n.prefix_len() >= 96 && bits >> 32 == 0 && bits > 1;
    let low = u32::try_from(bits & 0xffff_ffff).ok()?;
    inside
        .then(|| ipnet::Ipv4Net::new(std::net::Ipv4Addr::from(low), n.prefix_len() - 96).ok())
        .flatten()
}

/// An `allow` rule that can pass a local target under `local deny`: an
/// `allow ip` for a non-public address, or an exact `allow domain` for a
/// local name.
fn is_local_exception(r: &R<'_>) -> bool {
    r.rule.effect == Effect::Allow
        && match &r.target {
            Target::Net(n, true) => is_non_public(n.addr()),
            Target::Domain(DomainPattern::Exact(n)) => is_localhost_name(n),
            _ => false,
        }
}

fn lints(
    rules: &[R<'_>],
    default_allow: Option<Span>,
    local_allow: bool,
    diags: &mut Vec<Diagnostic>,
) {
    // Rules by target, and the prefix lengths that occur per family: a
    // rule's covering prefixes are looked up only at lengths some rule has
    // (a handful, against 33 or 129 for every length), with a fast hash.
    // Each target's rules in source order: the first and last in the map,
    // the rest chained through `next` (no list allocated a target).
    let mut by_target: HashMap<Key<'_>, (usize, usize), FastHash> = HashMap::default();
    let mut next = vec![usize::MAX; rules.len()];
    let mut lengths = [0u128; 2];
    let mut any_128 = false;
    for (i, r) in rules.iter().enumerate() {
        match by_target.entry(Key::of(&r.target)) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let (_, last) = e.get_mut();
                if let Some(n) = next.get_mut(*last) {
                    *n = i;
                }
                *last = i;
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert((i, i));
            }
        }
        if let Target::Net(n, _) = &r.target {
            let len = n.prefix_len();
            match n {
                IpNet::V4(_) => lengths[0] |= 1 << len,
                IpNet::V6(_) if len == 128 => any_128 = true,
                IpNet::V6(_) => lengths[1] |= 1 << len,
            }
        }
    }
    // `allow domain localhost` under `local deny` passes `connect
    // localhost`, but the proxy and the resolver dial and answer only the
    // loopback addresses the section allows (issue 37, item 4).
    let loopback = |r: &&R<'_>| {
        r.rule.effect == Effect::Allow
            && matches!(&r.target, Target::Net(n, true) if n.addr().is_loopback())
    };
    if !local_allow && !rules.iter().any(|r| loopback(&r)) {
        for r in rules.iter().filter(|r| r.rule.effect == Effect::Allow) {
            if let Target::Domain(DomainPattern::Exact(n)) = &r.target
                && is_localhost_name(n)
            {
                diags.push(
                    Diagnostic::warning(
                        "localhost_without_address",
                        "`connect` to this name passes, but nothing can reach it: no loopback address is allowed",
                        r.rule.span,
                    )
                    .with_help(Some(
                        "the name means 127.0.0.1 and ::1: add `allow ip 127.0.0.1` (and `allow ip ::1` for IPv6)".into(),
                    )),
                );
            }
        }
    }
    let mut cands = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let exception = !local_allow && is_local_exception(r);
        let mut covered_by_same = None;
        let mut covered_by_deny = None;
        candidates(&r.target, lengths, any_128, &mut cands);
        for cand in &cands {
            let mut at = by_target.get(cand).map_or(usize::MAX, |&(first, _)| first);
            while let Some(o) = rules.get(at) {
                let j = at;
                at = next.get(j).copied().unwrap_or(usize::MAX);
                if j == i
                    || !covers(&o.target, &r.target)
                    || !ports_cover(o.rule.ports.as_deref(), r.rule.ports.as_deref())
                {
                    continue;
                }
                let identical = o.target == r.target && o.rule.ports == r.rule.ports;
                if o.rule.effect == r.rule.effect {
                    // An exact local exception is only replaced by another
                    // exact one: wildcards and CIDRs never count.
                    let counts = !exception || identical;
                    if counts && (!identical || j < i) && covered_by_same.is_none() {
                        covered_by_same = Some(o);
                    }
                } else if r.rule.effect == Effect::Allow && covered_by_deny.is_none() {
                    covered_by_deny = Some(o);
                }
            }
        }
        if let Some(d) = covered_by_deny {
            diags.push(
                Diagnostic::warning(
                    "dead_allow",
                    "this allow rule can never allow anything",
                    r.rule.span,
                )
                .with_label(
                    d.rule.span,
                    "this deny rule matches everything it matches, and deny wins",
                )
                .with_help(Some(
                    "remove the allow rule, or narrow the deny rule".into(),
                )),
            );
        } else if let Some(o) = covered_by_same {
            diags.push(
                Diagnostic::warning(
                    "covered_rule",
                    "this rule never decides anything",
                    r.rule.span,
                )
                .with_label(
                    o.rule.span,
                    "this rule already matches everything it matches",
                )
                .with_help(Some("remove one of the two rules".into())),
            );
        }
        if r.rule.effect != Effect::Allow {
            continue;
        }
        if let Some(d) = default_allow {
            if !exception {
                diags.push(
                    Diagnostic::warning(
                        "allow_under_default_allow",
                        "this allow rule has no effect under `default allow`",
                        r.rule.span,
                    )
                    .with_label(d, "everything not denied is already allowed here")
                    .with_help(Some("remove it, or switch to `default deny`".into())),
                );
                continue;
            }
        }
        if !local_allow {
            let reaches_local = match &r.target {
                Target::Net(n, false) => overlaps_non_public(*n),
                Target::Domain(DomainPattern::Any) => true,
                _ => false,
            };
            if reaches_local {
                diags.push(
                    Diagnostic::warning(
                        "no_effect_on_local",
                        "this rule does not reach local or private addresses under `local deny`",
                        r.rule.span,
                    )
                    .with_help(Some(
                        "wildcards and CIDRs are never local exceptions: add an exact `allow ip ADDRESS` for each local target, or write `local allow`"
                            .into(),
                    )),
                );
            }
        }
    }
}

/// A target as the lint's index keys it, borrowing the name (a domain
/// pattern's kind and name; an address or prefix as [`Target::Net`]).
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash)]
enum Key<'a> {
    Exact(&'a str),
    Sub(&'a str),
    SelfAndSub(&'a str),
    Any,
    Net(IpNet, bool),
}

impl<'a> Key<'a> {
    fn of(t: &'a Target) -> Key<'a> {
        match t {
            Target::Domain(DomainPattern::Exact(n)) => Key::Exact(n),
            Target::Domain(DomainPattern::Sub(n)) => Key::Sub(n),
            Target::Domain(DomainPattern::SelfAndSub(n)) => Key::SelfAndSub(n),
            Target::Domain(DomainPattern::Any) => Key::Any,
            Target::Net(n, exact) => Key::Net(*n, *exact),
        }
    }
}

/// Targets that could cover `t`, into `out`: itself, its suffix patterns,
/// its supernets (at the prefix `lengths` some rule has, per family: bit
/// `l` of `lengths[0]` for IPv4, of `lengths[1]` for IPv6 below 128;
/// `any_128` for IPv6 /128).
fn candidates<'a>(t: &'a Target, lengths: [u128; 2], any_128: bool, out: &mut Vec<Key<'a>>) {
    out.clear();
    out.extend([Key::of(t), Key::Any]);
    match t {
        Target::Domain(p) => {
            let name = match p {
                DomainPattern::Exact(n) | DomainPattern::Sub(n) | DomainPattern::SelfAndSub(n) => n,
                DomainPattern::Any => return,
            };
            out.extend([Key::Sub(name), Key::SelfAndSub(name)]);
            let mut rest = name.as_str();
            while let Some((_, suffix)) = rest.split_once('.') {
                out.extend([Key::Sub(suffix), Key::SelfAndSub(suffix)]);
                rest = suffix;
            }
        }
        Target::Net(n, _) => {
            let present = |len: u8| match n {
                IpNet::V4(_) => lengths[0] >> len & 1 == 1,
                IpNet::V6(_) if len == 128 => any_128,
                IpNet::V6(_) => lengths[1] >> len & 1 == 1,
            };
            for len in (0..=n.prefix_len()).filter(|&l| present(l)) {
                if let Ok(s) = IpNet::new(n.addr(), len) {
                    out.push(Key::Net(s.trunc(), false));
                    if s.prefix_len() == s.max_prefix_len() {
                        out.push(Key::Net(s.trunc(), true));
                    }
                }
            }
        }
    }
}

fn covers(outer: &Target, inner: &Target) -> bool {
    match (outer, inner) {
        (Target::Domain(DomainPattern::Any), Target::Net(..)) => false,
        (Target::Domain(o), Target::Domain(i)) => i.covered_by(o),
        (Target::Net(o, _), Target::Net(i, _)) => o.contains(i),
        _ => false,
    }
}

/// Whether port list `outer` holds every port of `inner` (`None` = all).
fn ports_cover(outer: Option<&[PortRange]>, inner: Option<&[PortRange]>) -> bool {
    let Some(outer) = outer else { return true };
    let all = [PortRange {
        lo: 1,
        hi: u16::MAX,
    }];
    let inner = inner.unwrap_or(&all);
    // Packed `lo << 16 | hi` so that sorting is the plain `u32` sort the
    // engine already has (one less sort instantiation in the browser build).
    let mut merged: Vec<u32> = outer
        .iter()
        .map(|o| (u32::from(o.lo) << 16) | u32::from(o.hi))
        .collect();
    merged.sort_unstable();
    inner.iter().all(|r| {
        // Walk the merged outer ranges from r.lo.
        let mut at = u32::from(r.lo);
        for &o in &merged {
            let (lo, hi) = (o >> 16, o & 0xffff);
            if lo <= at && at <= hi {
                at = hi + 1;
            }
        }
        at > u32::from(r.hi)
    })
}

/// Whether a prefix reaches any non-public address (docs/language.md#non-public-addresses). A
/// prefix reaching into 6to4 space counts, whatever it embeds.
fn overlaps_non_public(net: IpNet) -> bool {
    use crate::normalize::addr::{non_public_v4, non_public_v6_in_global};
    let overlap = |a: IpNet, b: IpNet| a.contains(&b.network()) || b.contains(&a.network());
    let (v4s, v6) = crate::normalize::addr::canonical_prefixes(net);
    let v4_hit = v4s
        .iter()
        .any(|n| non_public_v4().any(|p| overlap(IpNet::V4(*n), IpNet::V4(p))));
    let v6_hit = v6.is_some_and(|n| {
        let global = ipnet::Ipv6Net::new(std::net::Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);
        !global.is_ok_and(|g| g.contains(&n))
            || non_public_v6_in_global().any(|p| overlap(IpNet::V6(n), IpNet::V6(p)))
    });
    v4_hit || v6_hit
}

/// The help for a URL written where a domain belongs, as queries give it:
/// the host, and the port its scheme implies.
fn url_help(text: &str) -> Option<String> {
    let (scheme, rest) = text.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = match crate::normalize::split_host_port(authority) {
        Ok((h, p)) => (h.to_string(), Some(p.to_string())),
        Err(_) => (
            authority.to_string(),
            match scheme.to_ascii_lowercase().as_str() {
                "http" | "ws" => Some("80".to_string()),
                "https" | "wss" => Some("443".to_string()),
                _ => None,
            },
        ),
    };
    let port = port.map(|p| format!(" port {p}")).unwrap_or_default();
    Some(format!(
        "`{text}` is a URL; a rule takes a host, not a URL: write `domain {host}{port}`: the decision is about the connection, whatever is sent over it"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_coverage() {
        let p = |lo, hi| PortRange { lo, hi };
        assert!(ports_cover(None, Some(&[p(443, 443)])));
        assert!(!ports_cover(Some(&[p(443, 443)]), None));
        assert!(ports_cover(
            Some(&[p(1, 100), p(101, 200)]),
            Some(&[p(50, 150)])
        ));
        assert!(!ports_cover(
            Some(&[p(1, 100), p(102, 200)]),
            Some(&[p(50, 150)])
        ));
    }

    #[test]
    fn non_public_overlap() {
        let n = |s: &str| {
            s.parse::<IpNet>()
                .unwrap_or_else(|_| IpNet::V4(Default::default()))
        };
        assert!(overlaps_non_public(n("10.0.0.0/8")));
        assert!(overlaps_non_public(n("0.0.0.0/0")));
        assert!(!overlaps_non_public(n("8.8.8.0/24")));
        assert!(overlaps_non_public(n("fd00::/8")));
        assert!(!overlaps_non_public(n("2606:4700::/32")));
    }
}
