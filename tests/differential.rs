//! The compiled engine against the reference evaluator, and algebraic
//! properties of decisions. 14 000 generated cases in all.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::reference;

use gatehouse::PolicySet;
use gatehouse::normalize::{OwnedHost, normalize_host_owned};
use gatehouse::query::{Query, Via};
use gatehouse::source::SourceMap;
use gatehouse::testing::ast::Item;
use gatehouse::testing::{CIDRS, IPS, NAMES};
use proptest::prelude::*;

const PORTS: &[&str] = &["", " port 443", " port 80,443", " port 8000-8999"];

pub(crate) fn rule() -> impl Strategy<Value = String> {
    let effect = prop_oneof![Just("allow"), Just("deny")];
    let domain = (0..NAMES.len(), 0..3usize).prop_map(|(i, w)| {
        let n = NAMES[i];
        let p = match w {
            0 => n.to_string(),
            1 => format!("*.{n}"),
            _ => format!("**.{n}"),
        };
        format!("domain \"{p}\"")
    });
    let target = prop_oneof![
        4 => domain,
        2 => (0..IPS.len()).prop_map(|i| format!("ip {}", IPS[i])),
        2 => (0..CIDRS.len()).prop_map(|i| format!("cidr {}", CIDRS[i])),
    ];
    (effect, target, 0..PORTS.len()).prop_map(|(e, t, p)| format!("{e} {t}{}", PORTS[p]))
}

fn star() -> impl Strategy<Value = Option<String>> {
    prop_oneof![4 => Just(None), 1 => (0..PORTS.len()).prop_map(|p| Some(format!("allow domain *{}", PORTS[p])))]
}

#[derive(Clone, Debug)]
pub(crate) struct Gen {
    mode: u8,
    settings: Vec<String>,
    pub(crate) rules: Vec<String>,
    proxy: Vec<String>,
    perms: Vec<String>,
    apps: Vec<String>,
}

impl Gen {
    pub(crate) fn text(&self) -> String {
        let mut s = String::from("policy p {\n");
        match self.mode {
            0 => s.push_str("  network off\n"),
            1 => s.push_str("  network unrestricted\n"),
            2 => {}
            _ => {
                s.push_str("  network {\n");
                for l in self.settings.iter().chain(&self.rules) {
                    s.push_str(&format!("    {l}\n"));
                }
                s.push_str("  }\n");
            }
        }
        if !self.proxy.is_empty() {
            s.push_str(&format!("  proxy {{ {} }}\n", self.proxy.join("; ")));
        }
        if !self.perms.is_empty() {
            s.push_str(&format!("  permissions {{ {} }}\n", self.perms.join("; ")));
        }
        if !self.apps.is_empty() {
            s.push_str(&format!("  apps {{ deny {} }}\n", self.apps.join(" ")));
        }
        s.push_str("}\n");
        s
    }
}

pub(crate) fn policy() -> impl Strategy<Value = Gen> {
    let settings = (0..3u8, 0..3u8, 0..3u8).prop_map(|(d, l, n)| {
        let mut v = Vec::new();
        match d {
            1 => v.push("default allow".to_string()),
            2 => v.push("default deny".to_string()),
            _ => {}
        }
        match l {
            1 => v.push("local allow".to_string()),
            2 => v.push("local deny".to_string()),
            _ => {}
        }
        if n == 1 {
            v.push("dns off".to_string());
        }
        v
    });
    let proxy = (0..3u8, 0..3u8).prop_map(|(a, b)| {
        let mut v = Vec::new();
        if a > 0 {
            v.push(format!("socks5 {}", if a == 1 { "on" } else { "off" }));
        }
        if b > 0 {
            v.push(format!("socks5_udp {}", if b == 1 { "on" } else { "off" }));
        }
        v
    });
    let perms = prop::collection::vec(
        (
            prop_oneof![Just("allow"), Just("deny"), Just("default")],
            0..5usize,
        )
            .prop_map(|(e, i)| {
                let p = [
                    "shell.exec",
                    "screen.read",
                    "input.control",
                    "files.read",
                    "files.write",
                ][i];
                if e == "default" {
                    format!("default {}", if i % 2 == 0 { "deny" } else { "allow" })
                } else {
                    format!("{e} {p}")
                }
            }),
        0..3,
    )
    .prop_map(|mut v| {
        // One `default` at most.
        let mut seen = false;
        v.retain(|s| !s.starts_with("default") || !std::mem::replace(&mut seen, true));
        v
    });
    let apps = prop::collection::vec(
        prop_oneof![
            Just("firefox"),
            Just("\"Google Chrome\""),
            Just("Terminal.app")
        ],
        0..2,
    );
    (
        0..8u8,
        settings,
        prop::collection::vec(rule(), 0..8),
        star(),
        proxy,
        perms,
        apps,
    )
        .prop_map(|(mode, settings, mut rules, star, proxy, perms, apps)| {
            rules.extend(star);
            Gen {
                mode,
                settings,
                rules,
                proxy,
                perms,
                apps: apps.into_iter().map(String::from).collect(),
            }
        })
}

/// Adversarial spellings of a host.
fn host() -> impl Strategy<Value = String> {
    let base = prop_oneof![
        (0..NAMES.len()).prop_map(|i| NAMES[i].to_string()),
        (0..IPS.len()).prop_map(|i| IPS[i].to_string())
    ];
    let junk = prop_oneof![
        Just("a..b".to_string()),
        Just("user@github.com".to_string()),
        Just("2130706433".to_string()),
        Just("0x7f.1".to_string()),
        Just("127.1".to_string()),
        Just("0177.0.0.1".to_string()),
        Just("github.com:443".to_string()),
        Just("".to_string()),
        Just("[10.0.0.1]".to_string()),
        Just("fe80::1%eth0".to_string()),
        Just("ｇｉｔｈｕｂ.com".to_string()),
        Just("exa\u{ad}mple.com".to_string()),
    ];
    let spelled = (base, 0..7u8).prop_map(|(h, t)| {
        let is_v6 = h.contains(':');
        let is_v4 = h.parse::<std::net::Ipv4Addr>().is_ok();
        match t {
            0 => h.to_uppercase(),
            1 if !is_v6 => format!("{h}."),
            2 if !is_v6 => h.replace('.', "。"),
            3 if is_v4 => format!("[::ffff:{h}]"),
            4 if is_v6 => format!("[{h}]"),
            5 if is_v4 => format!("::{h}"),
            _ => h,
        }
    });
    prop_oneof![6 => spelled, 1 => junk]
}

fn port() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(443),
        Just(80),
        Just(8080),
        Just(8500),
        Just(22),
        Just(0),
        Just(70000)
    ]
}

fn query() -> impl Strategy<Value = Query> {
    let via = prop_oneof![
        Just(Via::Https),
        Just(Via::Http),
        Just(Via::Socks5),
        Just(Via::Socks5Udp)
    ];
    let addr = prop_oneof![5 => (0..IPS.len()).prop_map(|i| IPS[i].to_string()), 1 => Just("0177.0.0.1".to_string())];
    prop_oneof![
        4 => (host(), port(), via).prop_map(|(host, port, via)| Query::Connect { host, port, via }),
        2 => host().prop_map(|name| Query::Dns { name }),
        2 => (host(), prop::collection::vec(addr, 0..3), prop::option::of(port()))
            .prop_map(|(host, addrs, port)| Query::Resolved { host, addrs, port }),
        1 => (0..6usize).prop_map(|i| Query::Tool {
            permission: ["shell.exec", "screen.read", "input.control", "files.read", "files.write", "files.delete"][i].into()
        }),
        1 => prop_oneof![
            Just("firefox"), Just("/Applications/Firefox.app/Contents/MacOS/firefox"), Just("C:\\Apps\\TERMINAL.exe"),
            Just("/usr/bin/vim"), Just("Google Chrome"), Just("")
        ]
        .prop_map(|p| Query::App { program: p.to_string() }),
    ]
}

struct Both {
    set: PolicySet,
    sources: SourceMap,
    file: gatehouse::testing::ast::File,
}

fn build(text: &str) -> Option<Both> {
    let mut sources = SourceMap::new();
    let id = sources.add("gen.policy", text);
    let set = PolicySet::from_sources(sources.clone()).ok()?;
    let (file, _) = gatehouse::testing::parse_file(id, text);
    Some(Both { set, sources, file })
}

/// (outcome, reason, rule line:column) from the engine.
fn engine(b: &Both, q: &Query) -> (String, String, Option<(usize, usize)>) {
    let p = b.set.single().unwrap();
    let d = p.decide(q);
    let rule = d
        .rule
        .and_then(|r| b.set.rule(r))
        .map(|r| (r.line, r.column));
    (
        d.outcome.as_str().to_string(),
        d.reason.as_str().to_string(),
        rule,
    )
}

fn oracle(b: &Both, q: &Query) -> (String, String, Option<(usize, usize)>) {
    let Item::Policy(block) = &b.file.items[0] else {
        panic!("no policy")
    };
    let r = reference::RefPolicy::new(block).decide(q).unwrap();
    let f = b.sources.get(gatehouse::source::FileId(0)).unwrap();
    let rule = r.rule_at.map(|at| {
        let lc = f.line_col(at);
        (lc.line, lc.column)
    });
    (r.outcome.to_string(), r.reason.to_string(), rule)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// The compiled engine decides exactly as the reference, deciding rule included.
    #[test]
    fn engine_agrees_with_reference(g in policy(), qs in prop::collection::vec(query(), 1..8)) {
        let text = g.text();
        let b = build(&text).unwrap_or_else(|| panic!("generated policy must compile:\n{text}"));
        for q in &qs {
            prop_assert_eq!(engine(&b, q), oracle(&b, q), "query `{}` on\n{}", q, text);
        }
    }
}

/// The borrowed form of a network query, when it has one.
fn borrowed<'a>(
    q: &'a Query,
    addrs: &'a mut Vec<std::net::IpAddr>,
) -> Option<gatehouse::query::QueryRef<'a>> {
    use gatehouse::query::QueryRef;
    Some(match q {
        Query::Connect { host, port, via } => QueryRef::Connect {
            host,
            port: u16::try_from(*port).ok()?,
            via: *via,
        },
        Query::Dns { name } => QueryRef::Dns { name },
        Query::Resolved {
            host,
            addrs: text,
            port,
        } => {
            *addrs = text.iter().map(|a| a.parse().ok()).collect::<Option<_>>()?;
            QueryRef::Resolved {
                host,
                addrs,
                port: match port {
                    Some(p) => Some(u16::try_from(*p).ok()?),
                    None => None,
                },
            }
        }
        Query::Upstream => QueryRef::Upstream,
        other => QueryRef::Owned(other),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The borrowed path (`decide_ref`, typed addresses) decides exactly as
    /// the owned one, deciding rule included; so does the logged borrowed
    /// path, whatever the sink.
    #[test]
    fn borrowed_queries_decide_as_owned_ones(g in policy(), qs in prop::collection::vec(query(), 1..8)) {
        let b = build(&g.text()).unwrap();
        let p = b.set.single().unwrap();
        for q in &qs {
            let mut addrs = Vec::new();
            let Some(r) = borrowed(q, &mut addrs) else { continue };
            let (owned, by_ref) = (p.decide(q), p.decide_ref(r));
            prop_assert_eq!((owned.outcome, owned.reason, owned.rule), (by_ref.outcome, by_ref.reason, by_ref.rule), "`{}`", q);
            let sink = gatehouse::log::JsonLinesSink::new(Vec::new());
            let logged = b.set.decide_ref_logged(p, r, &sink);
            prop_assert_eq!((owned.outcome, owned.reason), (logged.outcome, logged.reason));
            let line = String::from_utf8(sink.into_inner()).unwrap();
            let event: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
            prop_assert_eq!(event["reason"].as_str(), Some(owned.reason.as_str()));
        }
    }

    /// Adding a deny rule never turns a deny into an allow.
    #[test]
    fn adding_a_deny_never_allows_more(g in policy(), extra in rule(), qs in prop::collection::vec(query(), 1..6)) {
        let mut g2 = g.clone();
        let deny = extra.replacen("allow", "deny", 1);
        g2.rules.push(deny);
        if g2.mode < 3 { g2.mode = 3; }
        let mut g1 = g.clone();
        if g1.mode < 3 { g1.mode = 3; }
        let (a, b) = (build(&g1.text()).unwrap(), build(&g2.text()).unwrap());
        for q in &qs {
            let (before, after) = (engine(&a, q), engine(&b, q));
            prop_assert!(!(after.0 == "allow" && before.0 != "allow"), "`{}`: {:?} -> {:?}\n{}", q, before, after, g2.text());
        }
    }

    /// The order of rules never changes a decision or its reason.
    #[test]
    fn shuffling_rules_changes_nothing(g in policy(), seed in any::<u64>(), qs in prop::collection::vec(query(), 1..6)) {
        let mut g2 = g.clone();
        let n = g2.rules.len();
        let mut s = seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            g2.rules.swap(i, (s >> 33) as usize % (i + 1));
        }
        let (a, b) = (build(&g.text()).unwrap(), build(&g2.text()).unwrap());
        for q in &qs {
            let (x, y) = (engine(&a, q), engine(&b, q));
            prop_assert_eq!((&x.0, &x.1), (&y.0, &y.1), "`{}`", q);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    /// Normalising a normalised host changes nothing.
    #[test]
    fn normalisation_is_idempotent(h in prop_oneof![host(), "\\PC{0,20}", "[a-zA-Z0-9.\\-_。．]{1,30}"]) {
        match normalize_host_owned(&h) {
            Ok(OwnedHost::Name(n)) => prop_assert_eq!(normalize_host_owned(&n), Ok(OwnedHost::Name(n.clone()))),
            Ok(OwnedHost::Ip(ip)) => prop_assert_eq!(normalize_host_owned(&ip.to_string()), Ok(OwnedHost::Ip(ip))),
            Err(_) => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The text form of a query reads back as the same query.
    #[test]
    fn query_text_round_trips(q in query(), addr in prop_oneof![Just("127.0.0.1:3128"), Just("[::1]:80"), Just("0.0.0.0:1")]) {
        for q in [q, Query::Listen { addr: addr.to_string() }] {
            let text = q.to_string();
            let back = gatehouse::Query::parse(&text);
            prop_assert_eq!(back.as_ref().ok(), Some(&q), "`{}` read back as {:?}", text, back);
            let json = serde_json::to_string(&q).unwrap();
            prop_assert_eq!(Query::from_json(&json).ok(), Some(q.clone()), "{}", json);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// `connect_addr` with a parsed address decides as `connect` with its text.
    #[test]
    fn connect_addr_agrees_with_connect(g in policy(), i in 0..IPS.len(), port in 1u16..) {
        let b = build(&g.text()).unwrap();
        let p = b.set.single().unwrap();
        let text = IPS[i];
        let ip: std::net::IpAddr = text.parse().unwrap();
        let host = if ip.is_ipv6() { format!("[{text}]") } else { text.to_string() };
        prop_assert_eq!(p.connect_addr(ip, port, Via::Https), p.connect(&host, port, Via::Https));
    }
}
