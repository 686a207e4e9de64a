//! sandbox-runtime (`@anthropic-ai/sandbox-runtime`): its settings file
//! (`policyc export srt`), and the lists an `srt proxy` decider announces
//! in its `hello` (`gatehouse-egress srt-decider`).
//!
//! sandbox-runtime's network model is two lists of egress entries: a
//! lower-case DNS name, `*.name` (strict subdomains, the name having two
//! labels or more), or an IP literal, each with an optional `:PORT`. A host
//! passes when no denied entry matches it and an allowed one does; a name
//! may then resolve only to public addresses, or to an address a list names.
//! The mapping (docs/integrations/srt.md):
//!
//! | gatehouse | sandbox-runtime |
//! |---|---|
//! | `allow|deny domain x.com` | `x.com` |
//! | `*.x.com` / `**.x.com` | `*.x.com` / `x.com` and `*.x.com` |
//! | `allow|deny ip A`, `cidr A/32` | `A` (`[A]` with a port, for IPv6) |
//! | `port 80,443` | one entry per port, at most [`MAX_PORTS`] |
//! | `deny cidr P` | `deniedResolvedAddresses` (settings only) |
//! | `local deny` | `deniedResolvedAddresses`: every non-public range (settings only) |
//! | `allow socket "/p"`, `allow socket *` | `allowUnixSockets`, `allowAllUnixSockets` |
//!
//! What does not fit: `allow domain *`, `default allow`, `local allow`,
//! `network unrestricted`, prefixes in allow rules, port ranges wider than
//! [`MAX_PORTS`], names sandbox-runtime's lists refuse (`_`, one-label
//! wildcards), port lists on `deny cidr`, and `deny socket`.

use std::net::IpAddr;

use super::{ExportError, Unexpressible};
use crate::compile::{NetworkMode, NetworkRule, NetworkTarget, Policy, PolicySet, PortSpan};
use crate::normalize::pattern::DomainPattern;

/// The most entries one rule's ports may become (sandbox-runtime lists
/// ports one at a time).
pub const MAX_PORTS: usize = 64;

/// A decider's `hello` lists: the entries sandbox-runtime filters on before
/// it asks the decider, and what could not be listed.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
pub struct SrtLists {
    /// `allowedDomains`: every host the policy may allow, as far as the
    /// format can say it. A host outside it is refused by `srt proxy`
    /// without asking.
    pub allowed: Vec<String>,
    /// `deniedDomains`: hosts the policy denies whatever else it says.
    pub denied: Vec<String>,
    /// Rules left out of the lists. Leaving out an allow makes `srt proxy`
    /// refuse what the policy would allow (never the reverse); leaving out
    /// a deny leaves the decision to the decider.
    pub notes: Vec<Unexpressible>,
}

/// The `hello` lists of the policy named `name` (or the only one) for an
/// `srt proxy` decider. The decider decides every request these lists let
/// through, so what they cannot say is a note, not an error.
///
/// ```
/// let set = gatehouse::PolicySet::from_source("p.policy", "policy p {\n  network {\n    allow domain **.github.com port 443\n    deny domain gist.github.com\n  }\n}\n")?;
/// let lists = gatehouse::export::srt_lists(&set, None)?;
/// assert_eq!(lists.allowed, ["github.com:443", "*.github.com:443"]);
/// assert_eq!(lists.denied, ["gist.github.com"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn srt_lists(set: &PolicySet, name: Option<&str>) -> Result<SrtLists, ExportError> {
    let m = map(set, super::policy(set, name)?, false);
    Ok(SrtLists {
        allowed: m.allowed,
        denied: m.denied,
        notes: m.problems,
    })
}

/// sandbox-runtime's settings (`~/.srt-settings.json`) for the policy named
/// `name` (or the only one), as pretty JSON: [`srt_settings_file`] without
/// its notes.
pub fn srt_settings(set: &PolicySet, name: Option<&str>) -> Result<String, ExportError> {
    srt_settings_file(set, name).map(|s| s.json)
}

/// A sandbox-runtime settings file: its JSON, and what of the policy's
/// file rules it could not say (sandbox-runtime would decide those
/// differently; `policyc export srt` prints them on stderr).
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct SrtSettings {
    /// The settings file, pretty JSON.
    pub json: String,
    /// File rules the `filesystem` part could not say exactly.
    pub notes: Vec<Unexpressible>,
}

/// sandbox-runtime's settings (`~/.srt-settings.json`) for the policy named
/// `name` (or the only one): the `network` part, where every network rule
/// must map exactly (or the export is refused naming the rules that do
/// not), and the `filesystem` part sandbox-runtime requires, from the
/// policy's sandbox mode and file rules, with what it cannot say as notes.
pub fn srt_settings_file(set: &PolicySet, name: Option<&str>) -> Result<SrtSettings, ExportError> {
    let policy = super::policy(set, name)?;
    let m = map(set, policy, true);
    if !m.problems.is_empty() {
        return Err(ExportError::Unexpressible {
            format: "sandbox-runtime settings",
            rules: m.problems,
        });
    }
    let mut network = serde_json::Map::new();
    network.insert("allowedDomains".into(), m.allowed.into());
    network.insert("deniedDomains".into(), m.denied.into());
    if !m.resolved_denied.is_empty() {
        network.insert("deniedResolvedAddresses".into(), m.resolved_denied.into());
    }
    if !m.sockets.is_empty() {
        network.insert("allowUnixSockets".into(), m.sockets.into());
    }
    if m.all_sockets {
        network.insert("allowAllUnixSockets".into(), true.into());
    }
    let (filesystem, notes) = super::srt_files::filesystem(set, policy);
    let doc = serde_json::json!({ "network": network, "filesystem": filesystem });
    serde_json::to_string_pretty(&doc)
        .map(|s| SrtSettings {
            json: s + "\n",
            notes,
        })
        .map_err(|e| ExportError::Unexpressible {
            format: "sandbox-runtime settings",
            rules: vec![Unexpressible {
                at: String::from("?"),
                rule: String::new(),
                why: format!("internal error: {e}"),
            }],
        })
}

#[derive(Default)]
struct Mapped {
    allowed: Vec<String>,
    denied: Vec<String>,
    resolved_denied: Vec<String>,
    sockets: Vec<String>,
    all_sockets: bool,
    problems: Vec<Unexpressible>,
}

impl Mapped {
    fn push(list: &mut Vec<String>, entries: Vec<String>) {
        for e in entries {
            if !list.contains(&e) {
                list.push(e);
            }
        }
    }
}

/// Whether `name` (normalised) is a name sandbox-runtime's lists accept:
/// labels of `a-z 0-9 -` not starting or ending with `-`, the last
/// starting with a letter.
fn srt_name(name: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    name.len() <= 253
        && name.split('.').all(label_ok)
        && name
            .rsplit('.')
            .next()
            .is_some_and(|l| l.starts_with(|c: char| c.is_ascii_lowercase()))
}

/// The hosts (without ports) a rule's target is in sandbox-runtime's lists.
fn hosts(target: &NetworkTarget) -> Result<Vec<String>, String> {
    match target {
        NetworkTarget::Domain(text) => {
            let p = DomainPattern::parse(text).map_err(|e| e.to_string())?;
            let two_labels = |n: &str| n.contains('.');
            match p {
                DomainPattern::Any => Err(String::from(
                    "sandbox-runtime has no entry for every host; it only passes hosts its lists name",
                )),
                DomainPattern::Exact(n) if srt_name(&n) => Ok(vec![n]),
                DomainPattern::Sub(n) if srt_name(&n) && two_labels(&n) => {
                    Ok(vec![format!("*.{n}")])
                }
                DomainPattern::SelfAndSub(n) if srt_name(&n) && two_labels(&n) => {
                    Ok(vec![n.clone(), format!("*.{n}")])
                }
                DomainPattern::Sub(n) | DomainPattern::SelfAndSub(n) if !two_labels(&n) => {
                    Err(format!(
                        "sandbox-runtime's `*.` entries need a name of two labels or more, and `{n}` has one"
                    ))
                }
                DomainPattern::Exact(n) | DomainPattern::Sub(n) | DomainPattern::SelfAndSub(n) => {
                    Err(format!(
                        "`{n}` is not a name sandbox-runtime's lists accept (labels of a-z, 0-9 and `-`, the last starting with a letter)"
                    ))
                }
            }
        }
        NetworkTarget::Ip(ip) => Ok(vec![ip.to_string()]),
        NetworkTarget::Cidr(net) => {
            let net = crate::normalize::addr::canonical_net(*net);
            if net.prefix_len() == net.max_prefix_len() {
                Ok(vec![net.addr().to_string()])
            } else {
                Err(String::from(
                    "sandbox-runtime's lists name single addresses, not prefixes",
                ))
            }
        }
        NetworkTarget::Socket(_) | NetworkTarget::AnySocket => Ok(Vec::new()),
    }
}

/// The ports of a rule one by one (`None`: every port).
fn ports(p: &Option<Vec<PortSpan>>) -> Result<Vec<Option<u16>>, String> {
    let Some(ranges) = p else {
        return Ok(vec![None]);
    };
    let total: usize = ranges
        .iter()
        .map(|r| usize::from(r.hi.saturating_sub(r.lo)) + 1)
        .sum();
    if total > MAX_PORTS {
        return Err(format!(
            "its ports are {total} entries; sandbox-runtime lists ports one by one, and this export writes at most {MAX_PORTS}"
        ));
    }
    Ok(ranges
        .iter()
        .flat_map(|r| (r.lo..=r.hi).map(Some))
        .collect())
}

fn entry(host: &str, port: Option<u16>) -> String {
    match port {
        None => host.to_string(),
        Some(p) if host.parse::<std::net::Ipv6Addr>().is_ok() => format!("[{host}]:{p}"),
        Some(p) => format!("{host}:{p}"),
    }
}

fn entries(rule: &NetworkRule) -> Result<Vec<String>, String> {
    let hosts = hosts(&rule.target)?;
    let ports = ports(&rule.ports)?;
    Ok(hosts
        .iter()
        .flat_map(|h| ports.iter().map(move |p| entry(h, *p)))
        .collect())
}

fn map(set: &PolicySet, policy: &Policy, exact: bool) -> Mapped {
    let network = policy.network();
    let mut m = Mapped::default();
    // Problems in source order: a rule's key is its id (ids follow the
    // statements), `local allow` sorts before the rule read after it.
    let mut problems: Vec<(u64, Unexpressible)> = Vec::new();
    let mut problem = |id: crate::decision::RuleId, why: &str| {
        problems.push((u64::from(id.0) * 2 + 1, Unexpressible::rule(set, id, why)));
    };
    if network.mode == NetworkMode::Unrestricted {
        if let Some(id) = network.mode_rule {
            problem(
                id,
                "`network unrestricted` has no sandbox-runtime form: it passes only the hosts its lists name",
            );
        }
        m.problems = problems.into_iter().map(|p| p.1).collect();
        return m;
    }
    let local_allow = network.local_allow.is_some();
    if let Some(id) = network.default_allow {
        problem(
            id,
            "`default allow` has no sandbox-runtime form: it passes only the hosts its lists name",
        );
    }
    // Prefixes a name may not resolve into (settings only), to drop the
    // allowed addresses a deny already covers.
    let mut denied_prefixes: Vec<ipnet::IpNet> = Vec::new();
    for r in network.rules {
        match (&r.target, r.allow) {
            (NetworkTarget::AnySocket, true) => m.all_sockets = true,
            (NetworkTarget::Socket(p), true) => {
                Mapped::push(&mut m.sockets, vec![p.clone()]);
            }
            (NetworkTarget::Socket(_) | NetworkTarget::AnySocket, false) => {
                if exact {
                    problem(
                        r.rule,
                        "sandbox-runtime cannot deny a unix socket, only allow them",
                    );
                }
            }
            (NetworkTarget::Cidr(net), false)
                if exact && net.prefix_len() != net.max_prefix_len() =>
            {
                if r.ports.is_some() {
                    problem(
                        r.rule,
                        "sandbox-runtime's deniedResolvedAddresses takes no ports",
                    );
                } else {
                    let net = crate::normalize::addr::canonical_net(*net);
                    denied_prefixes.push(net);
                    Mapped::push(&mut m.resolved_denied, vec![net.to_string()]);
                }
            }
            (_, allow) => match entries(r) {
                Ok(list) if allow => Mapped::push(&mut m.allowed, list),
                Ok(list) => Mapped::push(&mut m.denied, list),
                Err(why) => problem(r.rule, &why),
            },
        }
    }
    if let Some(place) = network.local_allow {
        problems.push((
            u64::from(policy.net.local_allow_next) * 2,
            Unexpressible::place(
                place,
                "`local allow` has no sandbox-runtime form: an allowed name never resolves to loopback or link-local addresses there",
            ),
        ));
    }
    problems.sort_by_key(|p| p.0);
    m.problems = problems.into_iter().map(|p| p.1).collect();
    if exact && !local_allow && network.mode == NetworkMode::Constrained {
        let v4 = crate::normalize::addr::non_public_v4().map(|n| n.to_string());
        // Everything outside 2000::/3, then the non-public ranges inside it.
        let outside = ["::/3", "4000::/2", "8000::/1"].map(String::from);
        let v6 = crate::normalize::addr::non_public_v6_in_global().map(|n| n.to_string());
        Mapped::push(
            &mut m.resolved_denied,
            v4.chain(outside).chain(v6).collect(),
        );
    }
    if !denied_prefixes.is_empty() {
        // `deny cidr` wins over `allow ip` in gatehouse; in sandbox-runtime a
        // listed literal would pass, so it is not listed.
        m.allowed.retain(|e| {
            let host = e
                .strip_prefix('[')
                .and_then(|r| r.split_once(']'))
                .map(|(h, _)| h.to_string())
                .unwrap_or_else(|| match e.rsplit_once(':') {
                    Some((h, p)) if !h.contains(':') && p.parse::<u16>().is_ok() => h.to_string(),
                    _ => e.clone(),
                });
            match host.parse::<IpAddr>() {
                Ok(ip) => !denied_prefixes.iter().any(|n| n.contains(&ip)),
                Err(_) => true,
            }
        });
    }
    m
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    fn set(body: &str) -> PolicySet {
        PolicySet::from_source(
            "p.policy",
            &format!("policy p {{\n  network {{\n{body}\n  }}\n}}\n"),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn lists(body: &str) -> Result<SrtLists, ExportError> {
        srt_lists(&set(body), None)
    }

    fn settings(body: &str) -> Result<String, ExportError> {
        srt_settings(&set(body), None)
    }

    #[test]
    fn names_ports_and_addresses() {
        let l = lists(
            "allow domain API.GitHub.com. port 443\nallow domain **.npmjs.org\nallow ip ::ffff:10.0.0.5 port 5432\nallow ip 2001:db8::1 port 8443\ndeny domain *.evil.example port 80,8080",
        )
        .ok();
        let l = l.unwrap_or_default();
        assert_eq!(
            l.allowed,
            [
                "api.github.com:443",
                "npmjs.org",
                "*.npmjs.org",
                "10.0.0.5:5432",
                "[2001:db8::1]:8443"
            ]
        );
        assert_eq!(l.denied, ["*.evil.example:80", "*.evil.example:8080"]);
        assert!(l.notes.is_empty());
    }

    #[test]
    fn what_does_not_fit_is_a_note_for_the_decider_and_an_error_for_settings() {
        let body = "default allow\nallow domain *\nallow domain *.com\nallow domain a_b.example\nallow cidr 10.0.0.0/8\nallow domain x.example port 1-1000";
        let l = lists(body).unwrap_or_default();
        assert!(l.allowed.is_empty(), "{:?}", l.allowed);
        assert_eq!(l.notes.len(), 6, "{:?}", l.notes);
        match settings(body) {
            Err(ExportError::Unexpressible { rules, .. }) => {
                assert_eq!(rules.len(), 6);
                assert_eq!(rules.first().map(|r| r.at.as_str()), Some("p.policy:3:1"));
                assert_eq!(
                    rules.get(1).map(|r| r.rule.as_str()),
                    Some("allow domain *")
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn settings_carry_local_deny_and_denied_prefixes() {
        let s = settings(
            "allow ip 192.0.2.7\nallow ip 198.51.100.1\ndeny cidr 198.51.100.0/24\nallow socket \"/run/docker.sock\"",
        )
        .unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&s).unwrap_or_default();
        let net = v.pointer("/network").cloned().unwrap_or_default();
        assert_eq!(
            net.pointer("/allowedDomains"),
            Some(&serde_json::json!(["192.0.2.7"]))
        );
        let resolved = net
            .pointer("/deniedResolvedAddresses")
            .and_then(|a| a.as_array())
            .cloned()
            .unwrap_or_default();
        assert!(resolved.contains(&"198.51.100.0/24".into()));
        assert!(resolved.contains(&"10.0.0.0/8".into()));
        assert!(resolved.contains(&"::/3".into()));
        assert_eq!(
            net.pointer("/allowUnixSockets"),
            Some(&serde_json::json!(["/run/docker.sock"]))
        );
    }
}
