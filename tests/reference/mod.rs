//! The oracle: a deliberately naive evaluator over the AST.
//!
//! It follows the language spec's steps literally, scans every rule in
//! source order for every query, allocates freely, and shares no matching
//! code with the compiled engine: hosts are normalised here from the spec's
//! own steps (with `idna::domain_to_ascii` for non-ASCII, as the spec says),
//! and addresses are matched with `ipnet` containment. Only the parser and
//! the decision types are shared.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod agent;
mod files;
pub mod requirements;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use gatehouse::query::{Query, Via};
use gatehouse::testing::ast::*;
use ipnet::IpNet;

/// A decision as the oracle sees it: outcome, reason, 0-based index of the
/// deciding statement among the policy's rule-bearing statements is not
/// tracked; the rule's source line is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefDecision {
    pub outcome: &'static str,
    pub reason: &'static str,
    /// Span start of the deciding statement, if any.
    pub rule_at: Option<u32>,
}

pub(crate) fn d(outcome: &'static str, reason: &'static str, rule_at: Option<u32>) -> RefDecision {
    RefDecision {
        outcome,
        reason,
        rule_at,
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum H {
    Name(String),
    Ip(IpAddr),
}

/// Spec §5, step by step.
pub(crate) fn normalize(host: &str) -> Result<H, &'static str> {
    if host.is_empty() {
        return Err("invalid_host");
    }
    if host
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || "@/\\?#%*".contains(c))
    {
        return Err("invalid_host");
    }
    if host.starts_with('[') {
        if !host.ends_with(']') || host.len() < 2 {
            return Err("invalid_host");
        }
        return match host[1..host.len() - 1].parse::<Ipv6Addr>() {
            Ok(v6) => Ok(H::Ip(unmap(IpAddr::V6(v6)))),
            Err(_) => Err("invalid_host"),
        };
    }
    if host.contains(':') {
        return match host.parse::<Ipv6Addr>() {
            Ok(v6) => Ok(H::Ip(unmap(IpAddr::V6(v6)))),
            Err(_) => Err("invalid_host"),
        };
    }
    if host.contains('[') || host.contains(']') {
        return Err("invalid_host");
    }
    let mut name = if host.is_ascii() {
        host.to_string()
    } else {
        idna::domain_to_ascii(host).map_err(|_| "invalid_host")?
    };
    name = name.to_ascii_lowercase();
    if name.ends_with('.') {
        name.pop();
    }
    if name.is_empty() || name.len() > 253 {
        return Err("invalid_host");
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("invalid_host");
        }
        if !label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        {
            return Err("invalid_host");
        }
    }
    let last = name.rsplit('.').next().unwrap();
    let hex = last.starts_with("0x") && last[2..].chars().all(|c| c.is_ascii_hexdigit());
    if last.chars().all(|c| c.is_ascii_digit()) || hex {
        let parts: Vec<&str> = name.split('.').collect();
        let canonical = parts.len() == 4
            && parts.iter().all(|p| {
                !p.is_empty()
                    && p.len() <= 3
                    && !(p.len() > 1 && p.starts_with('0'))
                    && p.parse::<u16>().is_ok_and(|n| n <= 255)
            });
        if canonical {
            return Ok(H::Ip(IpAddr::V4(name.parse().unwrap())));
        }
        return Err("ambiguous_ip_literal");
    }
    Ok(H::Name(name))
}

/// Mapped and compatible forms are their IPv4 address (`::`, `::1` stay).
fn unmap(ip: IpAddr) -> IpAddr {
    if let IpAddr::V6(v6) = ip {
        if let Some(v4) = v6.to_ipv4_mapped() {
            return IpAddr::V4(v4);
        }
        let seg = v6.segments();
        if seg[..6].iter().all(|s| *s == 0) && u128::from(v6) > 1 {
            return IpAddr::V4(Ipv4Addr::from(u128::from(v6) as u32));
        }
    }
    ip
}

const NON_PUBLIC: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "2001::/23",
    "2001:db8::/32",
    "3fff::/20",
];

fn non_public(ip: IpAddr) -> bool {
    let ip = unmap(ip);
    if let IpAddr::V6(v6) = ip {
        let x = u128::from(v6);
        let nat64: IpNet = "64:ff9b::/96".parse().unwrap();
        if nat64.contains(&ip) {
            return non_public(IpAddr::V4(Ipv4Addr::from(x as u32)));
        }
        let six: IpNet = "2002::/16".parse().unwrap();
        if six.contains(&ip) {
            return non_public(IpAddr::V4(Ipv4Addr::from((x >> 80) as u32)));
        }
        let global: IpNet = "2000::/3".parse().unwrap();
        if !global.contains(&ip) {
            return true;
        }
    }
    NON_PUBLIC
        .iter()
        .any(|n| n.parse::<IpNet>().unwrap().contains(&ip))
}

/// Does a rule's address or prefix cover the (unmapped) query address?
fn net_covers(net: IpNet, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpNet::V4(n), IpAddr::V4(a)) => n.contains(&a),
        (IpNet::V6(n), IpAddr::V6(a)) => n.contains(&a),
        // §1: only a prefix inside `::ffff:0:0/96` applies to IPv4.
        (IpNet::V6(n), IpAddr::V4(a)) => {
            let mapped: ipnet::Ipv6Net = "::ffff:0:0/96".parse().unwrap();
            mapped.contains(&n) && n.contains(&a.to_ipv6_mapped())
        }
        (IpNet::V4(_), IpAddr::V6(_)) => false,
    }
}

fn rule_net(t: &NetTarget) -> Option<(IpNet, bool)> {
    match t {
        NetTarget::Ip(ip) => Some((IpNet::from(unmap(*ip)), true)),
        NetTarget::Cidr(c) => Some((*c, false)),
        _ => None,
    }
}

pub(crate) fn pattern_matches(p: &str, name: &str) -> bool {
    let norm = |s: &str| match normalize(s) {
        Ok(H::Name(n)) => n,
        _ => String::from("\u{0}invalid"),
    };
    let sub = |n: &str, parent: &str| n.ends_with(&format!(".{parent}"));
    if p == "*" {
        true
    } else if let Some(rest) = p.strip_prefix("**.") {
        let r = norm(rest);
        name == r || sub(name, &r)
    } else if let Some(rest) = p.strip_prefix("*.") {
        sub(name, &norm(rest))
    } else {
        name == norm(p)
    }
}

/// `None` = no port (dns, resolved without port).
fn port_ok(ports: &Option<Vec<PortRange>>, port: Option<u16>, effect: Effect) -> bool {
    match (ports, port) {
        (None, _) => true,
        (Some(list), Some(p)) => list.iter().any(|r| r.lo <= p && p <= r.hi),
        (Some(_), None) => effect == Effect::Allow,
    }
}

pub struct RefPolicy<'a> {
    pub block: &'a Block,
    /// The requirements blocks of the set (spec §12), each after the policy
    /// in the source, so that "first in source order" is "policy first".
    pub reqs: Vec<&'a Block>,
}

impl<'a> RefPolicy<'a> {
    pub fn new(block: &'a Block) -> Self {
        RefPolicy {
            block,
            reqs: Vec::new(),
        }
    }

    /// The policy's sections, then every requirements block's.
    fn all_sections(&self) -> impl Iterator<Item = &'a SectionKind> + '_ {
        self.block
            .sections
            .iter()
            .chain(self.reqs.iter().flat_map(|r| r.sections.iter()))
            .map(|s| &s.kind)
    }

    /// The requirements' `network { }` statements.
    fn req_net_stmts(&self) -> impl Iterator<Item = &'a NetStmt> + '_ {
        self.reqs
            .iter()
            .flat_map(|r| r.sections.iter())
            .flat_map(|s| match &s.kind {
                SectionKind::Network(Network::Block(v)) => v.as_slice(),
                _ => &[],
            })
    }

    fn network(&self) -> Option<&'a Network> {
        self.block.sections.iter().find_map(|s| match &s.kind {
            SectionKind::Network(n) => Some(n),
            _ => None,
        })
    }
    fn stmts(&self) -> &'a [NetStmt] {
        match self.network() {
            Some(Network::Block(s)) => s,
            _ => &[],
        }
    }
    /// The policy's rules, then the requirements' deny rules (which join a
    /// constrained network; `off` and `unrestricted` have no rules).
    fn rules(&self) -> impl Iterator<Item = &'a NetRule> + '_ {
        let constrained = matches!(self.network(), Some(Network::Block(_)));
        let own = self.stmts().iter().filter_map(|s| match s {
            NetStmt::Rule(r) => Some(r),
            _ => None,
        });
        let joined = self.req_net_stmts().filter_map(move |s| match s {
            NetStmt::Rule(r) if constrained && r.effect == Effect::Deny => Some(r),
            _ => None,
        });
        own.chain(joined)
    }

    /// `dns off` written by the policy, or by requirements when the policy
    /// does not write `dns`.
    fn dns_off(&self) -> Option<u32> {
        let off = |s: &NetStmt| match s {
            NetStmt::Dns(v) if v.node == Switch::Off => Some(v.span.start),
            _ => None,
        };
        let written = self.stmts().iter().any(|s| matches!(s, NetStmt::Dns(_)));
        if written {
            self.stmts().iter().find_map(off)
        } else if matches!(self.network(), Some(Network::Block(_))) {
            self.req_net_stmts().find_map(off)
        } else {
            None
        }
    }
    fn default_allow(&self) -> Option<Option<u32>> {
        self.stmts().iter().find_map(|s| match s {
            NetStmt::Default(v) if v.node == Effect::Allow => Some(Some(v.span.start)),
            _ => None,
        })
    }
    fn local_allow(&self) -> bool {
        self.stmts()
            .iter()
            .any(|s| matches!(s, NetStmt::Local(v) if v.node == Effect::Allow))
    }
    /// A proxy switch: the policy's value; when it writes none, a
    /// restrictive value (`off`, `loopback`) from the requirements, since an
    /// absent setting takes the language default unless that is beyond the
    /// cap.
    fn proxy(&self, which: &str) -> Option<(bool, u32)> {
        let value = |kind: &'a SectionKind| match kind {
            SectionKind::Proxy(stmts) => stmts.iter().find_map(|p| match (p, which) {
                (ProxyStmt::Socks5(v), "socks5")
                | (ProxyStmt::Socks5Udp(v), "socks5_udp")
                | (ProxyStmt::Upstream(v), "upstream") => {
                    Some((v.node == Switch::On, v.span.start))
                }
                (ProxyStmt::Listen(v), "listen") => {
                    Some((v.node == ListenScope::Any, v.span.start))
                }
                _ => None,
            }),
            _ => None,
        };
        self.block
            .sections
            .iter()
            .find_map(|s| value(&s.kind))
            .or_else(|| {
                self.reqs
                    .iter()
                    .flat_map(|r| r.sections.iter())
                    .filter_map(|s| value(&s.kind))
                    .find(|(open, _)| !open)
            })
    }

    fn mode(&self) -> Option<RefDecision> {
        let span = self
            .block
            .sections
            .iter()
            .find(|s| matches!(s.kind, SectionKind::Network(_)))
            .map(|s| s.span.start);
        match self.network() {
            None => Some(d("deny", "network_off", None)),
            Some(Network::Off) => Some(d("deny", "network_off", span)),
            Some(Network::Unrestricted) => Some(d("allow", "unrestricted", span)),
            Some(Network::Block(_)) => None,
        }
    }

    /// Steps 3–6 for a normalised host; `port` None = no port.
    fn rules_decide(&self, h: &H, port: Option<u16>) -> RefDecision {
        let matches = |r: &NetRule| -> bool {
            if !port_ok(&r.ports, port, r.effect) {
                return false;
            }
            match (&r.target, h) {
                (NetTarget::Domain(p), H::Name(n)) => pattern_matches(p, n),
                (NetTarget::Domain(p), H::Ip(_)) => p == "*",
                (t, H::Ip(ip)) => rule_net(t).is_some_and(|(n, _)| net_covers(n, *ip)),
                _ => false,
            }
        };
        if let Some(r) = self
            .rules()
            .find(|r| r.effect == Effect::Deny && matches(r))
        {
            return d("deny", "denied_by_rule", Some(r.span.start));
        }
        let local = match h {
            H::Name(n) => n == "localhost" || n.ends_with(".localhost"),
            H::Ip(ip) => non_public(*ip),
        };
        if local && !self.local_allow() {
            let exact = self.rules().find(|r| {
                r.effect == Effect::Allow
                    && port_ok(&r.ports, port, r.effect)
                    && match (&r.target, h) {
                        (NetTarget::Ip(a), H::Ip(ip)) => unmap(*a) == *ip,
                        (NetTarget::Domain(p), H::Name(n)) => {
                            !p.starts_with('*') && pattern_matches(p, n)
                        }
                        _ => false,
                    }
            });
            return match exact {
                Some(r) => d("allow", "allowed_by_rule", Some(r.span.start)),
                None => d("deny", "local_address", None),
            };
        }
        if let Some(r) = self
            .rules()
            .find(|r| r.effect == Effect::Allow && matches(r))
        {
            return d("allow", "allowed_by_rule", Some(r.span.start));
        }
        if let Some(at) = self.default_allow() {
            return d("allow", "default_allow", at);
        }
        d("deny", "not_allowed", None)
    }

    /// `socket "/path"` (docs/language.md#decision-order): an absolute,
    /// normal path; the mode; a deny rule for it; an exact allow, then
    /// `allow socket *`; else `not_allowed` (`default allow` never allows
    /// a socket).
    fn socket(&self, path: &str) -> RefDecision {
        let normal = path.starts_with('/')
            && !path.contains('\0')
            && (path == "/"
                || path[1..]
                    .split('/')
                    .all(|c| !c.is_empty() && c != "." && c != ".."));
        if !normal {
            return d("deny", "invalid_path", None);
        }
        if let Some(m) = self.mode() {
            return m;
        }
        let target = |r: &NetRule, want: &SocketTarget| match &r.target {
            NetTarget::Socket(t) => t == want,
            _ => false,
        };
        let exact = SocketTarget::Path(path.to_string());
        if let Some(r) = self
            .rules()
            .find(|r| r.effect == Effect::Deny && target(r, &exact))
        {
            return d("deny", "denied_by_rule", Some(r.span.start));
        }
        let allow = |want: &SocketTarget| {
            self.rules()
                .find(|r| r.effect == Effect::Allow && target(r, want))
                .map(|r| r.span.start)
        };
        match allow(&exact).or_else(|| allow(&SocketTarget::Any)) {
            Some(at) => d("allow", "allowed_by_rule", Some(at)),
            None => d("deny", "not_allowed", None),
        }
    }

    pub fn decide(&self, q: &Query) -> Option<RefDecision> {
        Some(match q {
            Query::Connect { host, port, via } => {
                let h = match normalize(host) {
                    Ok(h) => h,
                    Err(r) => return Some(d("deny", r, None)),
                };
                if !(1..=65535).contains(port) {
                    return Some(d("deny", "invalid_port", None));
                }
                if let Some(m) = self.mode() {
                    return Some(m);
                }
                let socks = self.proxy("socks5");
                let udp = self.proxy("socks5_udp");
                if matches!(via, Via::Socks5 | Via::Socks5Udp) && socks.is_some_and(|(on, _)| !on) {
                    return Some(d("deny", "protocol_disabled", socks.map(|s| s.1)));
                }
                if *via == Via::Socks5Udp && udp.is_some_and(|(on, _)| !on) {
                    return Some(d("deny", "protocol_disabled", udp.map(|s| s.1)));
                }
                self.rules_decide(&h, Some(*port as u16))
            }
            Query::Dns { name } => {
                let h = match normalize(name) {
                    Ok(H::Name(n)) => H::Name(n),
                    Ok(H::Ip(_)) | Err("ambiguous_ip_literal") => {
                        return Some(d("deny", "invalid_host", None));
                    }
                    Err(r) => return Some(d("deny", r, None)),
                };
                if let Some(m) = self.mode() {
                    return Some(m);
                }
                if let Some(s) = self.dns_off() {
                    return Some(d("deny", "dns_off", Some(s)));
                }
                self.rules_decide(&h, None)
            }
            Query::Resolved { host, addrs, port } => {
                let h = match normalize(host) {
                    Ok(H::Name(n)) => H::Name(n),
                    Ok(H::Ip(_)) | Err("ambiguous_ip_literal") => {
                        return Some(d("deny", "invalid_host", None));
                    }
                    Err(r) => return Some(d("deny", r, None)),
                };
                if addrs.is_empty() {
                    return Some(d("deny", "lookup_failed", None));
                }
                let Ok(ips) = addrs
                    .iter()
                    .map(|a| a.parse::<IpAddr>())
                    .collect::<Result<Vec<_>, _>>()
                else {
                    return Some(d("deny", "invalid_address", None));
                };
                if let Some(p) = port {
                    if !(1..=65535).contains(p) {
                        return Some(d("deny", "invalid_port", None));
                    }
                }
                if let Some(m) = self.mode() {
                    return Some(m);
                }
                let port = port.map(|p| p as u16);
                let by_name = self.rules_decide(&h, port);
                if by_name.outcome != "allow" {
                    return Some(by_name);
                }
                for ip in ips {
                    let ip = unmap(ip);
                    if let Some(r) = self.rules().find(|r| {
                        r.effect == Effect::Deny
                            && port_ok(&r.ports, port, r.effect)
                            && rule_net(&r.target).is_some_and(|(n, _)| net_covers(n, ip))
                    }) {
                        return Some(d("deny", "denied_by_rule", Some(r.span.start)));
                    }
                    let exact = self.rules().any(|r| {
                        r.effect == Effect::Allow
                            && port_ok(&r.ports, port, r.effect)
                            && matches!(r.target, NetTarget::Ip(a) if unmap(a) == ip)
                    });
                    if non_public(ip) && !self.local_allow() && !exact {
                        return Some(d("deny", "non_public_resolution", None));
                    }
                }
                by_name
            }
            Query::Tool { permission } => {
                let perm = Permission::parse(permission);
                let mut allow = None;
                let mut deny = None;
                let mut default = None;
                // The policy's statements, then the requirements': their deny
                // rules join, and their `default deny` applies when the
                // policy writes no default.
                let own = self.block.sections.len();
                for (i, k) in self.all_sections().enumerate() {
                    let from_reqs = i >= own;
                    if let SectionKind::Permissions(stmts) = k {
                        for st in stmts {
                            match st {
                                PermStmt::Default(v) if from_reqs && v.node == Effect::Allow => {}
                                PermStmt::Default(v) => {
                                    default.get_or_insert((v.node, v.span.start));
                                }
                                PermStmt::Rule { effect, .. }
                                    if from_reqs && *effect == Effect::Allow => {}
                                PermStmt::Rule {
                                    effect,
                                    permissions,
                                    span,
                                } => {
                                    if permissions.iter().any(|p| Some(p.node) == perm) {
                                        let slot = if *effect == Effect::Deny {
                                            &mut deny
                                        } else {
                                            &mut allow
                                        };
                                        slot.get_or_insert(span.start);
                                    }
                                }
                            }
                        }
                    }
                }
                if perm.is_none() {
                    return Some(d("deny", "unknown_permission", None));
                }
                match (deny, allow, default) {
                    (Some(r), _, _) => d("deny", "denied_by_rule", Some(r)),
                    (None, Some(r), _) => d("allow", "allowed_by_rule", Some(r)),
                    (None, None, Some((Effect::Deny, at))) => d("deny", "default_deny", Some(at)),
                    (None, None, Some((Effect::Allow, at))) => {
                        d("allow", "default_allow", Some(at))
                    }
                    (None, None, None) => d("allow", "default_allow", None),
                }
            }
            Query::App { program } => {
                if program.trim().is_empty() || program.contains('\0') {
                    return Some(d("deny", "invalid_path", None));
                }
                let key = |s: &str| {
                    let l = s.to_lowercase();
                    l.strip_suffix(".app")
                        .or_else(|| l.strip_suffix(".exe"))
                        .unwrap_or(&l)
                        .to_string()
                };
                let comps: Vec<String> = program
                    .split(['/', '\\'])
                    .filter(|c| !c.is_empty())
                    .map(key)
                    .collect();
                for k in self.all_sections() {
                    if let SectionKind::Apps(stmts) = k {
                        for st in stmts {
                            if st.names.iter().any(|n| comps.contains(&key(&n.node))) {
                                return Some(d("deny", "denied_by_rule", Some(st.span.start)));
                            }
                        }
                    }
                }
                d("allow", "default_allow", None)
            }
            Query::Write {
                path,
                workspace,
                home,
            } => self.write(path, workspace.as_deref().unwrap_or(""), home.as_deref()),
            Query::Read {
                path,
                workspace,
                home,
            } => self.read(path, workspace.as_deref().unwrap_or(""), home.as_deref()),
            Query::Exec { argv, escalate } => self.exec(argv, *escalate),
            Query::Mcp {
                server,
                tool,
                annotations,
            } => self.mcp(server, tool, annotations),
            Query::Prompt { category } => self.prompt_query(*category),
            Query::WebSearch => self.web_search(),
            Query::Socket { path } => self.socket(path),
            Query::Listen { addr } => listen(self, addr),
            Query::Upstream => match self.proxy("upstream") {
                Some((true, at)) => d("allow", "allowed_by_rule", Some(at)),
                Some((false, at)) => d("deny", "denied_by_rule", Some(at)),
                None => d("allow", "default_allow", None),
            },
            Query::Review { action, assessment } => self.review(action, assessment),
        })
    }
}

/// `listen ADDRESS:PORT`: an IP address (IPv6 in brackets) and a port;
/// loopback is always allowed; `proxy { listen any }` allows any other
/// address unless the policy allows a socket; else `non_loopback_listener`.
fn listen(p: &RefPolicy<'_>, addr: &str) -> RefDecision {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return d("deny", "invalid_address", None);
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let Ok(ip) = host.parse::<std::net::IpAddr>() else {
        return d("deny", "invalid_address", None);
    };
    if port.parse::<u16>().is_err() {
        return d("deny", "invalid_port", None);
    }
    let loopback = match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    };
    if loopback {
        return d("allow", "loopback", None);
    }
    let any = p.proxy("listen");
    let socket_allowed = p
        .rules()
        .any(|r| r.effect == Effect::Allow && matches!(r.target, NetTarget::Socket(_)));
    match any {
        Some((true, at)) if !socket_allowed => d("allow", "allowed_by_rule", Some(at)),
        other => d("deny", "non_loopback_listener", other.map(|o| o.1)),
    }
}
