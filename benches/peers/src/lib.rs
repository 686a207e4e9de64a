//! One egress policy, six engines: gatehouse and the engines people would
//! otherwise use, each given the same rules (from the generators of
//! `gatehouse-benches`) and asked the same questions.
//!
//! The semantics every engine implements here are the gatehouse ones the
//! generated policies use: `default deny`, deny wins over allow, and three
//! kinds of domain pattern — exact (`d`), strict subdomains (`*.d`), the
//! name and its subdomains (`**.d`) — plus allow/deny CIDR rules. The peers
//! are given clean, lower-case, already-normalised input (they would not
//! normalise it themselves; gatehouse does, and pays for it in these
//! numbers). `tests/equivalence.rs` checks that all of them decide alike.

#![deny(missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

/// A domain pattern of the generated policies.
#[derive(Clone, Debug)]
pub enum Pat {
    /// `d`
    Exact(String),
    /// `*.d`: strict subdomains.
    Sub(String),
    /// `**.d`: `d` and its subdomains.
    Apex(String),
}

impl Pat {
    /// Whether `host` matches the pattern.
    pub fn matches(&self, host: &str) -> bool {
        let under = |d: &str| {
            host.len() > d.len()
                && host.ends_with(d)
                && host.as_bytes()[host.len() - d.len() - 1] == b'.'
        };
        match self {
            Pat::Exact(d) => host == d,
            Pat::Sub(d) => under(d),
            Pat::Apex(d) => host == d || under(d),
        }
    }
}

/// The rules of one generated policy: `(allow, pattern)` and `(allow, prefix)`.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// The rules as gatehouse policy text.
    pub text: String,
    /// The domain rules: (allow, pattern).
    pub domains: Vec<(bool, Pat)>,
    /// The address rules: (allow, prefix).
    pub cidrs: Vec<(bool, IpNet)>,
}

impl Rules {
    /// Reads the rules back from a generated policy text.
    pub fn from_policy(text: &str) -> Rules {
        let mut r = Rules {
            text: text.to_string(),
            ..Rules::default()
        };
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            let [effect, kind, value] = w[..] else {
                continue;
            };
            let allow = effect == "allow";
            match kind {
                "domain" => {
                    let pat = if let Some(d) = value.strip_prefix("**.") {
                        Pat::Apex(d.to_string())
                    } else if let Some(d) = value.strip_prefix("*.") {
                        Pat::Sub(d.to_string())
                    } else {
                        Pat::Exact(value.to_string())
                    };
                    r.domains.push((allow, pat));
                }
                "cidr" => r.cidrs.push((allow, value.parse().expect("cidr"))),
                _ => {}
            }
        }
        r
    }
}

/// An engine deciding `connect HOST:443` for names and for addresses.
pub trait Engine {
    /// The engine's name in reports.
    fn name(&self) -> &'static str;
    /// Whether a connection to the name may go ahead.
    fn host(&self, host: &str) -> bool;
    /// Whether a connection to the address may go ahead (`None`: this
    /// engine does not do addresses).
    fn ip(&self, ip: &str) -> Option<bool>;
    /// The same for an address already parsed (the socket's peer): engines
    /// that take one natively skip the text.
    fn addr(&self, ip: IpAddr) -> Option<bool> {
        self.ip(&ip.to_string())
    }
}

// ------------------------------------------------------------- gatehouse

/// gatehouse itself.
pub struct Gatehouse {
    set: gatehouse::PolicySet,
}

impl Gatehouse {
    /// Compiles the rules.
    pub fn new(r: &Rules) -> Self {
        Gatehouse {
            set: gatehouse::PolicySet::from_source("bench.policy", &r.text).expect("compiles"),
        }
    }
}

impl Engine for Gatehouse {
    fn name(&self) -> &'static str {
        "gatehouse"
    }
    fn host(&self, host: &str) -> bool {
        let p = self.set.single().expect("one policy");
        p.connect(host, 443, gatehouse::query::Via::Https).outcome == gatehouse::Outcome::Allow
    }
    fn ip(&self, ip: &str) -> Option<bool> {
        Some(self.host(ip))
    }
    fn addr(&self, ip: IpAddr) -> Option<bool> {
        let p = self.set.single().expect("one policy");
        Some(
            p.connect_addr(ip, 443, gatehouse::query::Via::Https)
                .outcome
                == gatehouse::Outcome::Allow,
        )
    }
}

// ----------------------------------------------------------------- cedar

/// The egress policy in Cedar: one `permit` per allow rule and one `forbid`
/// per deny rule, over `context.host` (`==` and `like`) or `context.ip`
/// (`isInRange`, the `ipaddr` extension). Cedar denies by default and a
/// `forbid` wins: the same algebra.
pub struct Cedar {
    policies: cedar_policy::PolicySet,
    authorizer: cedar_policy::Authorizer,
    entities: cedar_policy::Entities,
    principal: cedar_policy::EntityUid,
    action: cedar_policy::EntityUid,
    resource: cedar_policy::EntityUid,
}

impl Cedar {
    /// Compiles the rules.
    pub fn new(r: &Rules) -> Self {
        let mut text = String::new();
        for (allow, pat) in &r.domains {
            let effect = if *allow { "permit" } else { "forbid" };
            let cond = match pat {
                Pat::Exact(d) => format!("context.host == \"{d}\""),
                Pat::Sub(d) => format!("context.host like \"*.{d}\""),
                Pat::Apex(d) => format!("context.host == \"{d}\" || context.host like \"*.{d}\""),
            };
            text.push_str(&format!(
                "{effect}(principal, action, resource) when {{ context has host && ({cond}) }};\n"
            ));
        }
        for (allow, net) in &r.cidrs {
            let effect = if *allow { "permit" } else { "forbid" };
            text.push_str(&format!(
                "{effect}(principal, action, resource) when {{ context has ip && context.ip.isInRange(ip(\"{net}\")) }};\n"
            ));
        }
        Cedar {
            policies: cedar_policy::PolicySet::from_str(&text).expect("cedar policy"),
            authorizer: cedar_policy::Authorizer::new(),
            entities: cedar_policy::Entities::empty(),
            principal: r#"Sandbox::"agent""#.parse().expect("uid"),
            action: r#"Action::"connect""#.parse().expect("uid"),
            resource: r#"Endpoint::"any""#.parse().expect("uid"),
        }
    }

    fn decide(&self, key: &str, value: cedar_policy::RestrictedExpression) -> bool {
        let context =
            cedar_policy::Context::from_pairs([(key.to_string(), value)]).expect("context");
        let request = cedar_policy::Request::new(
            self.principal.clone(),
            self.action.clone(),
            self.resource.clone(),
            context,
            None,
        )
        .expect("request");
        self.authorizer
            .is_authorized(&request, &self.policies, &self.entities)
            .decision()
            == cedar_policy::Decision::Allow
    }
}

impl Engine for Cedar {
    fn name(&self) -> &'static str {
        "cedar"
    }
    fn host(&self, host: &str) -> bool {
        self.decide(
            "host",
            cedar_policy::RestrictedExpression::new_string(host.to_string()),
        )
    }
    fn ip(&self, ip: &str) -> Option<bool> {
        Some(self.decide("ip", cedar_policy::RestrictedExpression::new_ip(ip)))
    }
}

// --------------------------------------------------------------- regorus

/// The egress policy in Rego (OPA's language, evaluated by regorus): one
/// `permit` or `forbid` rule body per gatehouse rule, and
/// `allow if { permit; not forbid }`.
pub struct Regorus {
    engine: std::cell::RefCell<regorus::Engine>,
}

impl Regorus {
    /// Compiles the rules.
    pub fn new(r: &Rules) -> Self {
        let mut text = String::from(
            "package egress\nimport rego.v1\n\ndefault allow := false\nallow if {\n  permit\n  not forbid\n}\n\n",
        );
        for (allow, pat) in &r.domains {
            let head = if *allow { "permit" } else { "forbid" };
            match pat {
                Pat::Exact(d) => text.push_str(&format!("{head} if input.host == \"{d}\"\n")),
                Pat::Sub(d) => {
                    text.push_str(&format!("{head} if endswith(input.host, \".{d}\")\n"))
                }
                Pat::Apex(d) => {
                    text.push_str(&format!("{head} if input.host == \"{d}\"\n"));
                    text.push_str(&format!("{head} if endswith(input.host, \".{d}\")\n"));
                }
            }
        }
        for (allow, net) in &r.cidrs {
            let head = if *allow { "permit" } else { "forbid" };
            text.push_str(&format!(
                "{head} if net.cidr_contains(\"{net}\", input.ip)\n"
            ));
        }
        let mut engine = regorus::Engine::new();
        engine
            .add_policy("egress.rego".to_string(), text)
            .expect("rego policy");
        Regorus {
            engine: std::cell::RefCell::new(engine),
        }
    }

    fn decide(&self, key: &str, value: &str) -> bool {
        let mut engine = self.engine.borrow_mut();
        let input =
            regorus::Value::from_json_str(&format!("{{\"{key}\":\"{value}\"}}")).expect("input");
        engine.set_input(input);
        engine
            .eval_rule("data.egress.allow".to_string())
            .map(|v| v == regorus::Value::from(true))
            .unwrap_or(false)
    }
}

impl Engine for Regorus {
    fn name(&self) -> &'static str {
        "regorus"
    }
    fn host(&self, host: &str) -> bool {
        self.decide("host", host)
    }
    fn ip(&self, ip: &str) -> Option<bool> {
        Some(self.decide("ip", ip))
    }
}

// --------------------------------------------------------------- globset

/// How agent sandbox proxies build their matchers today: one `GlobSet` of
/// allowed host globs and one of denied ones (`**.d` becomes `d` and `*.d`).
/// No addresses.
pub struct Globs {
    allow: globset::GlobSet,
    deny: globset::GlobSet,
}

impl Globs {
    /// Compiles the rules.
    pub fn new(r: &Rules) -> Self {
        let mut allow = globset::GlobSetBuilder::new();
        let mut deny = globset::GlobSetBuilder::new();
        for (a, pat) in &r.domains {
            let set = if *a { &mut allow } else { &mut deny };
            let globs = match pat {
                Pat::Exact(d) => vec![d.clone()],
                Pat::Sub(d) => vec![format!("*.{d}")],
                Pat::Apex(d) => vec![d.clone(), format!("*.{d}")],
            };
            for g in globs {
                set.add(globset::Glob::new(&g).expect("glob"));
            }
        }
        Globs {
            allow: allow.build().expect("globset"),
            deny: deny.build().expect("globset"),
        }
    }
}

impl Engine for Globs {
    fn name(&self) -> &'static str {
        "globset"
    }
    fn host(&self, host: &str) -> bool {
        !self.deny.is_match(host) && self.allow.is_match(host)
    }
    fn ip(&self, _: &str) -> Option<bool> {
        None
    }
}

// ---------------------------------------------------------------- linear

/// A scan over every rule in order, as simple egress proxies do: deny if any
/// deny rule matches, else allow if any allow rule does.
pub struct Linear {
    rules: Rules,
}

impl Linear {
    /// Compiles the rules.
    pub fn new(r: &Rules) -> Self {
        Linear { rules: r.clone() }
    }
}

impl Engine for Linear {
    fn name(&self) -> &'static str {
        "linear"
    }
    fn host(&self, host: &str) -> bool {
        let hit = |want: bool| {
            self.rules
                .domains
                .iter()
                .any(|(a, p)| *a == want && p.matches(host))
        };
        !hit(false) && hit(true)
    }
    fn ip(&self, ip: &str) -> Option<bool> {
        let ip: IpAddr = ip.parse().ok()?;
        let hit = |want: bool| {
            self.rules
                .cidrs
                .iter()
                .any(|(a, n)| *a == want && n.contains(&ip))
        };
        Some(!hit(false) && hit(true))
    }
}

// ------------------------------------------------------ ip_network_table

/// The address side in a prefix table (`ip_network_table`, a radix trie per
/// family): every prefix holding the address is visited; deny wins.
pub struct IpTable {
    table: ip_network_table::IpNetworkTable<u8>,
}

const ALLOW: u8 = 1;
const DENY: u8 = 2;

impl IpTable {
    /// Compiles the rules.
    pub fn new(r: &Rules) -> Self {
        let mut table = ip_network_table::IpNetworkTable::new();
        for (allow, net) in &r.cidrs {
            let n = ip_network::IpNetwork::new(net.network(), net.prefix_len()).expect("network");
            let bit = if *allow { ALLOW } else { DENY };
            let old = table.exact_match(n).copied().unwrap_or(0);
            table.insert(n, old | bit);
        }
        IpTable { table }
    }
}

impl Engine for IpTable {
    fn name(&self) -> &'static str {
        "ip_network_table"
    }
    fn host(&self, _: &str) -> bool {
        false
    }
    fn ip(&self, ip: &str) -> Option<bool> {
        self.addr(ip.parse().ok()?)
    }
    fn addr(&self, ip: IpAddr) -> Option<bool> {
        let flags = self.table.matches(ip).fold(0, |acc, (_, v)| acc | v);
        Some(flags & DENY == 0 && flags & ALLOW != 0)
    }
}

// --------------------------------------------------------------- hashmap

/// The simplest fast design for names (issue 19's peer): one hash map
/// (FxHash) from a rule's name to what rules say of it, looked up once for
/// the name and once per label suffix, deny winning. Given clean,
/// lower-case input: it validates and normalises nothing.
pub struct HashPeer {
    map: rustc_hash::FxHashMap<String, u8>,
}

const EXACT_ALLOW: u8 = 1;
const UNDER_ALLOW: u8 = 2;
const EXACT_DENY: u8 = 4;
const UNDER_DENY: u8 = 8;

impl HashPeer {
    /// Compiles the rules.
    pub fn new(r: &Rules) -> Self {
        let mut map = rustc_hash::FxHashMap::default();
        for (allow, pat) in &r.domains {
            let (exact, under) = if *allow {
                (EXACT_ALLOW, UNDER_ALLOW)
            } else {
                (EXACT_DENY, UNDER_DENY)
            };
            let (d, bits) = match pat {
                Pat::Exact(d) => (d, exact),
                Pat::Sub(d) => (d, under),
                Pat::Apex(d) => (d, exact | under),
            };
            *map.entry(d.clone()).or_insert(0) |= bits;
        }
        HashPeer { map }
    }
}

impl Engine for HashPeer {
    fn name(&self) -> &'static str {
        "hashmap"
    }
    fn host(&self, host: &str) -> bool {
        let mut allow = false;
        if let Some(&b) = self.map.get(host) {
            if b & EXACT_DENY != 0 {
                return false;
            }
            allow |= b & EXACT_ALLOW != 0;
        }
        let mut rest = host;
        while let Some((_, tail)) = rest.split_once('.') {
            if let Some(&b) = self.map.get(tail) {
                if b & UNDER_DENY != 0 {
                    return false;
                }
                allow |= b & UNDER_ALLOW != 0;
            }
            rest = tail;
        }
        allow
    }
    fn ip(&self, _: &str) -> Option<bool> {
        None
    }
}

// -------------------------------------------------------- interval table

/// The simplest fast design for addresses (issue 19's peer): the IPv4
/// space cut into intervals at every prefix boundary, each with its verdict
/// resolved in advance (deny wins, else allow if a prefix covers it), adjacent
/// equal verdicts merged, searched by binary search. IPv4 only; given a
/// parsed address.
pub struct IntervalPeer {
    /// Interval starts, ascending; `allow[i]` holds from `starts[i]` to the
    /// next start.
    starts: Vec<u32>,
    allow: Vec<bool>,
}

impl IntervalPeer {
    /// Compiles the rules.
    pub fn new(r: &Rules) -> Self {
        // Sweep over boundaries: +1 at a prefix's first address, -1 after
        // its last, counted apart for allows and denies.
        let mut events: Vec<(u64, i32, i32)> = Vec::new();
        for (allow, net) in &r.cidrs {
            let IpNet::V4(n) = net else { continue };
            let lo = u64::from(u32::from(n.network()));
            let hi = u64::from(u32::from(n.broadcast())) + 1;
            let (a, d) = if *allow { (1, 0) } else { (0, 1) };
            events.push((lo, a, d));
            events.push((hi, -a, -d));
        }
        events.sort_unstable();
        let (mut starts, mut allow) = (vec![0u32], vec![false]);
        let (mut a, mut d) = (0i32, 0i32);
        let mut i = 0;
        while i < events.len() {
            let at = events[i].0;
            while i < events.len() && events[i].0 == at {
                a += events[i].1;
                d += events[i].2;
                i += 1;
            }
            if at > u64::from(u32::MAX) {
                break;
            }
            let v = a > 0 && d == 0;
            if *allow.last().unwrap() != v {
                if *starts.last().unwrap() == at as u32 {
                    *allow.last_mut().unwrap() = v;
                } else {
                    starts.push(at as u32);
                    allow.push(v);
                }
            }
        }
        IntervalPeer { starts, allow }
    }

    /// Whether the address is allowed.
    pub fn decide(&self, ip: std::net::Ipv4Addr) -> bool {
        let x = u32::from(ip);
        let i = self.starts.partition_point(|&s| s <= x);
        self.allow[i - 1]
    }

    /// Intervals in the table.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether there are no prefixes.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }
}

impl Engine for IntervalPeer {
    fn name(&self) -> &'static str {
        "interval_table"
    }
    fn host(&self, _: &str) -> bool {
        false
    }
    fn ip(&self, ip: &str) -> Option<bool> {
        self.addr(ip.parse().ok()?)
    }
    fn addr(&self, ip: IpAddr) -> Option<bool> {
        match ip {
            IpAddr::V4(v4) => Some(self.decide(v4)),
            IpAddr::V6(_) => None,
        }
    }
}

/// Above this many rules Cedar and regorus are left out: building and
/// asking them takes minutes, and regorus refuses a policy file over 1 MiB.
pub const SLOW_MAX: usize = 10_000;

/// The name-side engines for a rule set.
pub fn name_engines(r: &Rules) -> Vec<Box<dyn Engine>> {
    let mut v: Vec<Box<dyn Engine>> = vec![Box::new(Gatehouse::new(r))];
    if r.domains.len() <= SLOW_MAX {
        v.push(Box::new(Cedar::new(r)));
        v.push(Box::new(Regorus::new(r)));
    }
    v.push(Box::new(Globs::new(r)));
    v.push(Box::new(Linear::new(r)));
    v.push(Box::new(HashPeer::new(r)));
    v
}

/// The address-side engines for a rule set.
pub fn ip_engines(r: &Rules) -> Vec<Box<dyn Engine>> {
    let mut v: Vec<Box<dyn Engine>> = vec![Box::new(Gatehouse::new(r))];
    if r.cidrs.len() <= SLOW_MAX {
        v.push(Box::new(Cedar::new(r)));
        v.push(Box::new(Regorus::new(r)));
    }
    v.push(Box::new(Linear::new(r)));
    v.push(Box::new(IpTable::new(r)));
    v.push(Box::new(IntervalPeer::new(r)));
    v
}

/// The benchmark's name queries for a generated domain policy: a subdomain
/// hit, an exact hit, a deny and a miss (as in `benches/decide.rs`).
pub fn name_queries(domains: &[String]) -> Vec<(&'static str, String)> {
    vec![
        (
            "hit_subdomain",
            format!("api.{}", domains[5 % domains.len()]),
        ),
        ("hit_exact", domains[1 % domains.len()].clone()),
        ("deny", format!("x.{}", domains[0])),
        ("miss", "nothing-here.example.org".to_string()),
    ]
}

/// The benchmark's address queries: an IPv4 and an IPv6 hit, and a miss.
pub fn ip_queries(inside: &[String]) -> Vec<(&'static str, String)> {
    vec![
        ("v4", inside[1 % inside.len()].clone()),
        ("v6", inside[3 % inside.len()].clone()),
        ("miss", "8.8.8.8".to_string()),
    ]
}
