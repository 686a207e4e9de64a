//! The cells of the query space: classes of queries that every rule of
//! both sides, and every built-in test of the engine, treats alike.
//!
//! A `connect` is decided by its host, port and transport. The rules look
//! at a name only through the domain patterns' base names: a pattern with
//! base `B` matches `B` itself (`B`, `**.B`) or names strictly below it
//! (`*.B`, `**.B`), at any depth. So a name's matches are fixed by the
//! deepest base it equals or lies below, and which of the two: a *name
//! cell* is `(base, equal | below)`, or "under no base". The engine's
//! own test on names, `localhost` and the names below it, is one more
//! base. Addresses are matched by prefixes: the boundaries of every
//! rule's prefix, and of the built-in non-public ranges (with the IPv4
//! ranges NAT64 and 6to4 embed), cut each family into intervals inside
//! which nothing can tell two addresses apart. Ports are cut the same way
//! by every rule's port ranges. A cell is one host class, one port
//! interval and one transport: every query in it is decided alike by both
//! sides, so deciding one witness per cell decides the cell.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::normalize::pattern::DomainPattern;
use crate::normalize::{Host, HostBuf, canonical_ip, canonical_prefixes, normalize_split};
use crate::query::Via;
use crate::syntax::ast::{
    File, Item, McpStmt, NetStmt, NetTarget, Network, PortRange, SectionKind, SocketTarget,
};

/// The transports a `connect` can name.
pub const VIAS: [Via; 4] = [Via::Http, Via::Https, Via::Socks5, Via::Socks5Udp];

/// A class of hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostClass {
    /// A name: the index of the deepest base it equals or lies below
    /// (`None`: under no base), and whether it lies strictly below it.
    Name {
        /// The base's index among the sorted base names.
        base: Option<usize>,
        /// Strictly below the base (or, with no base, more than one label).
        below: bool,
    },
    /// An IPv4 address in interval `i`.
    V4(usize),
    /// An IPv6 address (not a mapped or compatible IPv4 form) in interval `i`.
    V6(usize),
}

/// What cuts the query space: read from both sides' rules.
#[derive(Debug, Default)]
pub struct Atoms {
    /// Base names, sorted.
    pub bases: Vec<String>,
    /// Interval starts over IPv4, sorted, starting at 0.
    pub v4: Vec<u32>,
    /// Interval starts over IPv6, sorted, starting at 0.
    pub v6: Vec<u128>,
    /// Interval starts over ports 1..=65535, sorted, starting at 1.
    pub ports: Vec<u16>,
    /// Socket paths named by `allow|deny socket PATH`, sorted.
    pub sockets: Vec<String>,
    /// App names any `apps { deny ... }` names, as the engine compares
    /// them (lower case, without one `.app` or `.exe`), sorted; a name
    /// holding a path separator can match no path component and is left
    /// out.
    pub apps: Vec<String>,
    /// MCP servers named by `server S` or `tool S/T`, sorted, each with
    /// the tools named for it, sorted.
    pub mcp: Vec<(String, Vec<String>)>,
    /// Per base: the base it lies strictly below, the deepest such.
    parents: Vec<Option<usize>>,
    /// Per base, and last for "under no base": the bases whose parent it is.
    children: Vec<Vec<usize>>,
    /// Per base (as [`Atoms::bases`]): the port ranges of rules with ports
    /// that match the base itself, and those that match names below it.
    base_ports: Vec<(Vec<PortRange>, Vec<PortRange>)>,
    /// The port ranges of `domain *` rules with ports (every host).
    star_ports: Vec<PortRange>,
    /// Prefix rules with ports: `(v4, lo, hi, ranges)`, IPv4 bounds as
    /// `u128`.
    prefix_ports: Vec<(bool, u128, u128, Vec<PortRange>)>,
}

/// IPv4 prefixes as `(network, length)`.
fn v4_cut(cuts: &mut BTreeSet<u32>, net: u32, len: u8) {
    let size = if len == 0 {
        None
    } else {
        1u64.checked_shl(32 - u32::from(len))
    };
    cuts.insert(net);
    if let Some(end) = size.and_then(|s| u64::from(net).checked_add(s)) {
        if let Ok(e) = u32::try_from(end) {
            cuts.insert(e);
        }
    }
}

fn v6_cut(cuts: &mut BTreeSet<u128>, net: u128, len: u8) {
    cuts.insert(net);
    if len == 0 {
        return;
    }
    let size = 1u128.checked_shl(128 - u32::from(len));
    if let Some(end) = size.and_then(|s| net.checked_add(s)) {
        cuts.insert(end);
    }
}

fn port_cut(cuts: &mut BTreeSet<u32>, r: &PortRange) {
    cuts.insert(u32::from(r.lo));
    cuts.insert(u32::from(r.hi) + 1);
}

impl Atoms {
    /// Everything the rules of these files (both sides of a diff) and the
    /// engine's built-in tests look at.
    pub fn of(sides: &[&[File]]) -> Atoms {
        let mut bases = BTreeSet::new();
        let mut v4 = BTreeSet::from([0u32]);
        let mut v6 = BTreeSet::from([0u128]);
        let mut ports = BTreeSet::from([1u32]);
        let mut sockets = BTreeSet::new();
        let mut apps = BTreeSet::new();
        let mut mcp: std::collections::BTreeMap<String, BTreeSet<String>> =
            std::collections::BTreeMap::new();
        let mut named_ports: Vec<(String, bool, bool, Vec<PortRange>)> = Vec::new();
        let mut star_ports = Vec::new();
        let mut prefix_ports = Vec::new();
        // The engine's own: `localhost` and below; the non-public ranges,
        // the IPv4 ranges NAT64 and 6to4 carry, the mapped and compatible
        // forms (which are IPv4 queries), `::` and `::1`.
        bases.insert("localhost".to_string());
        for (net, len) in crate::normalize::non_public_v4_prefixes() {
            v4_cut(&mut v4, net, len);
            v6_cut(&mut v6, (0x64_ff9b_u128 << 96) | u128::from(net), 96 + len);
            v6_cut(
                &mut v6,
                (0x2002_u128 << 112) | (u128::from(net) << 80),
                16 + len,
            );
        }
        for (net, len) in crate::normalize::non_public_v6_prefixes() {
            v6_cut(&mut v6, net, len);
        }
        for (net, len) in [
            (0u128, 96u8),
            (0xffff_u128 << 32, 96),
            (0, 128),
            (1, 128),
            (0x64_ff9b_u128 << 96, 96),
            (0x2002_u128 << 112, 16),
            (0x2_u128 << 124, 3),
        ] {
            v6_cut(&mut v6, net, len);
        }
        for files in sides {
            for item in files.iter().flat_map(|f| &f.items) {
                let (Item::Policy(b) | Item::Requirements(b)) = item else {
                    continue;
                };
                for s in &b.sections {
                    if let SectionKind::Apps(stmts) = &s.kind {
                        for n in stmts.iter().flat_map(|st| &st.names) {
                            let key = crate::compile::app_key(&n.node);
                            if !key.contains(['/', '\\']) && !key.is_empty() {
                                apps.insert(key);
                            }
                        }
                    }
                    if let SectionKind::Mcp(stmts) = &s.kind {
                        for st in stmts {
                            match st {
                                McpStmt::Server { server, .. } => {
                                    mcp.entry(server.node.clone()).or_default();
                                }
                                McpStmt::Tool { server, tool, .. } => {
                                    mcp.entry(server.clone()).or_default().insert(tool.clone());
                                }
                            }
                        }
                    }
                    let SectionKind::Network(Network::Block(stmts)) = &s.kind else {
                        continue;
                    };
                    for st in stmts {
                        let NetStmt::Rule(r) = st else { continue };
                        for p in r.ports.iter().flatten() {
                            port_cut(&mut ports, p);
                        }
                        let rp = r.ports.clone().unwrap_or_default();
                        match &r.target {
                            NetTarget::Domain(d) => match DomainPattern::parse(d) {
                                Ok(DomainPattern::Exact(n)) => {
                                    named_ports.push((n.clone(), true, false, rp));
                                    bases.insert(n);
                                }
                                Ok(DomainPattern::Sub(n)) => {
                                    named_ports.push((n.clone(), false, true, rp));
                                    bases.insert(n);
                                }
                                Ok(DomainPattern::SelfAndSub(n)) => {
                                    named_ports.push((n.clone(), true, true, rp));
                                    bases.insert(n);
                                }
                                Ok(DomainPattern::Any) => star_ports.extend(rp),
                                Err(_) => {}
                            },
                            // A mapped or compatible address is its IPv4
                            // address in rules as in queries.
                            NetTarget::Ip(ip) => {
                                let n = ipnet::IpNet::from(canonical_ip(*ip));
                                prefix_ports.extend(prefix_bounds(n, rp));
                                net_cut(&mut v4, &mut v6, n);
                            }
                            NetTarget::Cidr(n) => {
                                prefix_ports.extend(prefix_bounds(*n, rp));
                                net_cut(&mut v4, &mut v6, *n);
                            }
                            NetTarget::Socket(SocketTarget::Path(p)) => {
                                sockets.insert(p.clone());
                            }
                            NetTarget::Socket(SocketTarget::Any) => {}
                        }
                    }
                }
            }
        }
        let bases: Vec<String> = bases.into_iter().collect();
        let mut base_ports = vec![(Vec::new(), Vec::new()); bases.len()];
        for (n, itself, below, rp) in named_ports {
            if let Ok(i) = bases.binary_search(&n)
                && let Some((e, b)) = base_ports.get_mut(i)
            {
                if itself {
                    e.extend(rp.iter().copied());
                }
                if below {
                    b.extend(rp);
                }
            }
        }
        let parents: Vec<Option<usize>> = (0..bases.len())
            .map(|i| deepest_parent(&bases, i))
            .collect();
        let mut children = vec![Vec::new(); bases.len() + 1];
        for (i, p) in parents.iter().enumerate() {
            if let Some(c) = children.get_mut(p.unwrap_or(bases.len())) {
                c.push(i);
            }
        }
        Atoms {
            parents,
            children,
            base_ports,
            star_ports,
            prefix_ports,
            bases,
            v4: v4.into_iter().collect(),
            v6: v6.into_iter().collect(),
            ports: ports
                .into_iter()
                .filter(|p| *p <= 65535)
                .filter_map(|p| u16::try_from(p).ok())
                .collect(),
            sockets: sockets.into_iter().collect(),
            apps: apps.into_iter().collect(),
            mcp: mcp
                .into_iter()
                .map(|(s, t)| (s, t.into_iter().collect()))
                .collect(),
        }
    }

    /// The class of a normalised host; `None` for a host the engine
    /// refuses before any rule (every side decides it alike).
    pub fn host_class(&self, host: &str) -> Option<HostClass> {
        let mut buf = HostBuf::new();
        let split = normalize_split(host, &mut buf).ok()?;
        Some(match split.host {
            Host::Name(n) => self.name_class(n),
            Host::Ip(ip) => self.ip_class(ip),
        })
    }

    /// The class of an address (mapped and compatible forms as IPv4).
    pub fn ip_class(&self, ip: IpAddr) -> HostClass {
        match canonical_ip(ip) {
            IpAddr::V4(a) => HostClass::V4(interval(&self.v4, u32::from(a))),
            IpAddr::V6(a) => HostClass::V6(interval(&self.v6, u128::from(a))),
        }
    }

    /// The deepest base `n` equals or lies below.
    pub fn name_class(&self, n: &str) -> HostClass {
        let mut suffix = n;
        let mut below = false;
        loop {
            if let Ok(i) = self.bases.binary_search_by(|b| b.as_str().cmp(suffix)) {
                return HostClass::Name {
                    base: Some(i),
                    below,
                };
            }
            match suffix.split_once('.') {
                Some((_, rest)) if !rest.is_empty() => {
                    suffix = rest;
                    below = true;
                }
                _ => {
                    return HostClass::Name { base: None, below };
                }
            }
        }
    }

    /// The port interval of a valid port.
    pub fn port_class(&self, port: u16) -> usize {
        interval(&self.ports, port)
    }

    /// The ports of interval `i`, inclusive.
    pub fn port_range(&self, i: usize) -> Option<(u16, u16)> {
        let lo = *self.ports.get(i)?;
        let hi = match self.ports.get(i + 1) {
            Some(next) => next.checked_sub(1)?,
            None => 65535,
        };
        Some((lo, hi))
    }

    /// The IPv4 interval `i`, inclusive.
    pub fn v4_range(&self, i: usize) -> Option<(u32, u32)> {
        let lo = *self.v4.get(i)?;
        let hi = match self.v4.get(i + 1) {
            Some(next) => next.checked_sub(1)?,
            None => u32::MAX,
        };
        Some((lo, hi))
    }

    /// The IPv6 interval `i`, inclusive.
    pub fn v6_range(&self, i: usize) -> Option<(u128, u128)> {
        let lo = *self.v6.get(i)?;
        let hi = match self.v6.get(i + 1) {
            Some(next) => next.checked_sub(1)?,
            None => u128::MAX,
        };
        Some((lo, hi))
    }

    /// The port intervals inside which no rule that can match a host of
    /// this class tells two ports apart (rules without ports match every
    /// port, and nothing but rules looks at a port): `(lo, hi)`
    /// inclusive, covering 1..=65535. Every interval is a union of whole
    /// intervals of [`Atoms::port_range`], whose cuts hold these.
    pub fn ports_for(&self, class: HostClass) -> Vec<(u16, u16)> {
        let mut cuts: BTreeSet<u32> = BTreeSet::from([1]);
        let mut add = |rs: &[PortRange]| {
            for r in rs {
                port_cut(&mut cuts, r);
            }
        };
        add(&self.star_ports);
        match class {
            HostClass::Name { base, below } => {
                let mut at = base;
                let mut first = true;
                while let Some(i) = at {
                    if let Some((itself, under)) = self.base_ports.get(i) {
                        if first && !below {
                            add(itself);
                        } else {
                            add(under);
                        }
                    }
                    first = false;
                    at = self.parent(i);
                }
            }
            HostClass::V4(i) | HostClass::V6(i) => {
                let v4 = matches!(class, HostClass::V4(_));
                let lo = if v4 {
                    self.v4_range(i).map(|(lo, _)| u128::from(lo))
                } else {
                    self.v6_range(i).map(|(lo, _)| lo)
                };
                if let Some(x) = lo {
                    for (f, a, b, rs) in &self.prefix_ports {
                        if *f == v4 && *a <= x && x <= *b {
                            add(rs);
                        }
                    }
                }
            }
        }
        let cuts: Vec<u32> = cuts.into_iter().filter(|c| *c <= 65535).collect();
        cuts.iter()
            .enumerate()
            .filter_map(|(k, lo)| {
                let hi = cuts.get(k + 1).map_or(65535, |n| n - 1);
                Some((u16::try_from(*lo).ok()?, u16::try_from(hi).ok()?))
            })
            .collect()
    }

    /// The base a base lies strictly below, the deepest such.
    pub fn parent(&self, i: usize) -> Option<usize> {
        self.parents.get(i).copied().flatten()
    }

    /// The bases whose parent is `base` (`None`: the bases under no other).
    pub fn children(&self, base: Option<usize>) -> &[usize] {
        self.children
            .get(base.unwrap_or(self.bases.len()))
            .map_or(&[], Vec::as_slice)
    }

    /// The most tools named for one server, plus one (any other tool).
    pub fn mcp_tools(&self) -> usize {
        self.mcp.iter().map(|(_, t)| t.len()).max().unwrap_or(0) + 1
    }

    /// An MCP call's item: `((server * tools) + tool) * 27 + annotations`,
    /// where an unnamed server is `mcp.len()` and an unnamed tool the
    /// server's tool count; each hint is unknown, true or false.
    pub fn mcp_item(&self, server: &str, tool: &str, ann: &crate::query::Annotations) -> usize {
        let s = self
            .mcp
            .binary_search_by(|(n, _)| n.as_str().cmp(server))
            .unwrap_or(self.mcp.len());
        let t = match self.mcp.get(s) {
            Some((_, tools)) => tools
                .binary_search_by(|n| n.as_str().cmp(tool))
                .unwrap_or(tools.len()),
            None => 0,
        };
        (s * self.mcp_tools() + t) * 27 + annotation_index(ann)
    }

    /// The `(server, tool, annotations)` of an MCP item, fresh names for
    /// unnamed ones.
    pub fn mcp_query(&self, item: usize) -> Option<(String, String, crate::query::Annotations)> {
        let ann = annotations(item % 27);
        let st = item / 27;
        let (s, t) = (st / self.mcp_tools(), st % self.mcp_tools());
        let (server, tools) = match self.mcp.get(s) {
            Some((n, tools)) => (n.clone(), tools.as_slice()),
            None if s == self.mcp.len() => (
                (0..).map(|k| format!("gh-witness-{k}")).find(|n| {
                    self.mcp
                        .binary_search_by(|(m, _)| m.as_str().cmp(n))
                        .is_err()
                })?,
                &[][..],
            ),
            None => return None,
        };
        let tool = match tools.get(t) {
            Some(n) => n.clone(),
            None if t == tools.len() => (0..)
                .map(|k| format!("gh-witness-{k}"))
                .find(|n| tools.binary_search(n).is_err())?,
            None => return None,
        };
        Some((server, tool, ann))
    }

    /// Every MCP item a query can fall in.
    pub fn mcp_items(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for s in 0..=self.mcp.len() {
            let tools = self.mcp.get(s).map_or(0, |(_, t)| t.len());
            for t in 0..=tools {
                for a in 0..27 {
                    out.push((s * self.mcp_tools() + t) * 27 + a);
                }
            }
        }
        out
    }

    /// A normal absolute path no socket rule names.
    pub fn fresh_socket(&self) -> String {
        (0..)
            .map(|k| format!("/gh-witness-{k}.sock"))
            .find(|p| self.sockets.binary_search(p).is_err())
            .unwrap_or_default()
    }

    /// The IPv4 intervals of non-public addresses.
    pub fn v4_non_public(&self) -> Vec<(u32, u32)> {
        (0..self.v4.len())
            .filter_map(|i| self.v4_range(i))
            .filter(|(lo, _)| crate::normalize::is_non_public(IpAddr::V4(Ipv4Addr::from(*lo))))
            .collect()
    }

    /// The IPv6 intervals of non-public addresses that are IPv6 queries
    /// (not mapped or compatible IPv4 forms).
    pub fn v6_non_public(&self) -> Vec<(u128, u128)> {
        (0..self.v6.len())
            .filter_map(|i| self.v6_range(i))
            .filter(|(lo, _)| {
                let ip = IpAddr::V6(Ipv6Addr::from(*lo));
                canonical_ip(ip).is_ipv6() && crate::normalize::is_non_public(ip)
            })
            .collect()
    }

    /// Every host class a query can fall in, with a host of it; classes
    /// no query reaches (an IPv6 interval of mapped forms, a name cell
    /// with no name) are left out.
    pub fn host_classes(&self) -> Vec<(HostClass, String)> {
        let mut out = Vec::new();
        // A name clashes with a base when it is one, or a base lies below
        // it: when it is a label-suffix of some base.
        let mut suffixes: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for b in &self.bases {
            let mut rest = b.as_str();
            suffixes.insert(rest);
            while let Some((_, r)) = rest.split_once('.') {
                suffixes.insert(r);
                rest = r;
            }
        }
        let fresh = |parent: Option<&str>| -> Option<String> {
            (0..1000).find_map(|k| {
                let label = format!("gh-witness-{k}");
                let name = match parent {
                    Some(p) => format!("{label}.{p}"),
                    None => label,
                };
                (!suffixes.contains(name.as_str())).then_some(name)
            })
        };
        for (i, b) in self.bases.iter().enumerate() {
            out.push((
                HostClass::Name {
                    base: Some(i),
                    below: false,
                },
                b.clone(),
            ));
            if let Some(n) = fresh(Some(b)) {
                out.push((
                    HostClass::Name {
                        base: Some(i),
                        below: true,
                    },
                    n,
                ));
            }
        }
        // Under no base: a one-label name, and one with more labels.
        if let Some(n) = fresh(None) {
            out.push((
                HostClass::Name {
                    base: None,
                    below: false,
                },
                n.clone(),
            ));
            if let Some(m) = fresh(Some(&n)) {
                out.push((
                    HostClass::Name {
                        base: None,
                        below: true,
                    },
                    m,
                ));
            }
        }
        for i in 0..self.v4.len() {
            if let Some((lo, _)) = self.v4_range(i) {
                out.push((HostClass::V4(i), Ipv4Addr::from(lo).to_string()));
            }
        }
        for i in 0..self.v6.len() {
            if let Some((lo, _)) = self.v6_range(i) {
                let ip = Ipv6Addr::from(lo);
                // Mapped and compatible forms are IPv4 queries.
                if canonical_ip(IpAddr::V6(ip)).is_ipv6() {
                    out.push((HostClass::V6(i), format!("[{ip}]")));
                }
            }
        }
        // Keep only witnesses that classify as their own class (a check
        // of this module's own reasoning, never of the caller's input).
        out.retain(|(c, h)| self.host_class(h) == Some(*c));
        out
    }
}

/// The deepest base of the sorted `bases` that base `i` lies strictly below.
fn deepest_parent(bases: &[String], i: usize) -> Option<usize> {
    let mut rest = bases.get(i)?.as_str();
    while let Some((_, r)) = rest.split_once('.') {
        if let Ok(j) = bases.binary_search_by(|b| b.as_str().cmp(r)) {
            return Some(j);
        }
        rest = r;
    }
    None
}

/// A prefix rule's bounds in canonical form, when it has ports.
fn prefix_bounds(
    n: ipnet::IpNet,
    ports: Vec<PortRange>,
) -> Vec<(bool, u128, u128, Vec<PortRange>)> {
    if ports.is_empty() {
        return Vec::new();
    }
    let (a, b) = canonical_prefixes(n);
    let mut out = Vec::new();
    if let Some(a) = a {
        out.push((
            true,
            u128::from(u32::from(a.network())),
            u128::from(u32::from(a.broadcast())),
            ports.clone(),
        ));
    }
    if let Some(b) = b {
        out.push((
            false,
            u128::from(b.network()),
            u128::from(b.broadcast()),
            ports,
        ));
    }
    out
}

/// The index of an annotation combination: each hint unknown (0), true
/// (1) or false (2), destructive first.
pub fn annotation_index(a: &crate::query::Annotations) -> usize {
    let h = |x: Option<bool>| match x {
        None => 0,
        Some(true) => 1,
        Some(false) => 2,
    };
    h(a.destructive_hint) * 9 + h(a.read_only_hint) * 3 + h(a.open_world_hint)
}

/// The annotations of an index (see [`annotation_index`]).
pub fn annotations(i: usize) -> crate::query::Annotations {
    let h = |x: usize| match x % 3 {
        1 => Some(true),
        2 => Some(false),
        _ => None,
    };
    crate::query::Annotations {
        destructive_hint: h(i / 9),
        read_only_hint: h(i / 3),
        open_world_hint: h(i),
    }
}

fn net_cut(v4: &mut BTreeSet<u32>, v6: &mut BTreeSet<u128>, n: ipnet::IpNet) {
    let (a, b) = canonical_prefixes(n);
    if let Some(a) = a {
        v4_cut(v4, u32::from(a.network()), a.prefix_len());
    }
    if let Some(b) = b {
        v6_cut(v6, u128::from(b.network()), b.prefix_len());
    }
}

/// The index of the interval (by sorted starts, the first at the lowest
/// value) holding `x`.
fn interval<T: Ord + Copy>(starts: &[T], x: T) -> usize {
    match starts.binary_search(&x) {
        Ok(i) => i,
        Err(i) => i.saturating_sub(1),
    }
}
