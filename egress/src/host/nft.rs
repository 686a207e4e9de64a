//! The nftables table host mode owns, built as nft's JSON (with the
//! `nftables` crate's types) and applied in one transaction: the table is
//! added, deleted and added again in the same batch, so replacing it never
//! opens a moment without rules, and a daemon that stops leaves its rules
//! in place (fail closed: redirected connections then find no listener).
//!
//! For the sandboxes' source addresses (sets `sandboxes_v4`,
//! `sandboxes_v6`):
//!
//! - `prerouting` (nat): DNS (UDP and TCP 53) is redirected to the
//!   resolver, every other TCP connection to the transparent listener;
//! - `input`: a sandbox reaches only those two ports of the host (and, over
//!   IPv6, neighbour discovery);
//! - `forward`: nothing of a sandbox's is forwarded but what a DNS-fed
//!   pass admits (and, while established, what it admitted: marked
//!   [`PASS_MARK`]) — every other UDP (QUIC falls back to
//!   TCP), ICMP, and TCP that somehow escaped the redirect are dropped.

use std::borrow::Cow;
use std::net::IpAddr;

use nftables::batch::Batch;
use nftables::expr::{CT, Expression, NamedExpression, SetItem, Verdict};
use nftables::expr::{Elem, Range};
use nftables::schema::{
    Chain, Element, NfListObject, Nftables, Set, SetFlag, SetType, SetTypeValue, Table,
};
use nftables::stmt::{JumpTarget, Mangle, Match, NAT, Operator, Statement, VerdictMap};
use nftables::types::{NfChainPolicy, NfChainType, NfFamily, NfHook};

use super::boundary::bridge_sets;
pub use super::boundary::{BRIDGE_TABLE, bridge_rules, hold_rules, ifaces_in_rules};
pub use super::expr::{Contents, Layer, LayerRule, PASS_MARK, Ports, SandboxLayer, TABLE};
use super::expr::{family, field, is, l4proto, prefix, rule, rule_in, set_of, sources_sets};

/// Why the ruleset could not be put in force.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NftError {
    /// The ruleset did not serialise (an internal error).
    #[error("the nftables ruleset did not serialise: {0}")]
    Serialize(#[from] serde_json::Error),
    /// `nft` refused it or could not be run.
    #[error("nft: {0}")]
    Apply(String),
    /// Two different kernel layers would share a chain's name (24 hex
    /// digits of SHA-256 alike): refused rather than one sandbox put under
    /// another's layer.
    #[error("two different kernel layers would share the chain `{0}`; refused")]
    Collision(String),
}

fn base_chain(
    name: &'static str,
    kind: NfChainType,
    hook: NfHook,
    prio: i32,
) -> NfListObject<'static> {
    NfListObject::Chain(Chain {
        family: family(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed(name),
        _type: Some(kind),
        hook: Some(hook),
        prio: Some(prio),
        policy: Some(NfChainPolicy::Accept),
        ..Chain::default()
    })
}

fn redirect(port: u16) -> Statement<'static> {
    Statement::Redirect(Some(NAT {
        addr: None,
        family: None,
        port: Some(Expression::Number(u32::from(port))),
        flags: None,
    }))
}

/// One destination match: an address, a prefix, or an anonymous set of
/// prefixes (aggregated: no two overlap).
fn dest_expr(nets: &[ipnet::IpNet]) -> Expression<'static> {
    let one = |n: &ipnet::IpNet| {
        if n.prefix_len() == n.max_prefix_len() {
            Expression::String(Cow::Owned(n.addr().to_string()))
        } else {
            prefix(*n)
        }
    };
    match nets {
        [n] => one(n),
        _ => Expression::Named(NamedExpression::Set(
            nets.iter().map(|n| SetItem::Element(one(n))).collect(),
        )),
    }
}

fn ports_expr(ports: &[(u16, u16)]) -> Expression<'static> {
    let items = ports
        .iter()
        .map(|&(lo, hi)| {
            SetItem::Element(match lo == hi {
                true => Expression::Number(u32::from(lo)),
                false => Expression::Range(Box::new(Range {
                    range: [
                        Expression::Number(u32::from(lo)),
                        Expression::Number(u32::from(hi)),
                    ],
                })),
            })
        })
        .collect();
    Expression::Named(NamedExpression::Set(items))
}

/// The chain of one [`Layer`] and its rules: the exceptions in order, then
/// the drops — those for every port as one rule a family (an interval set
/// of the aggregated prefixes), those with ports one rule each. Drops
/// commute, so only the exceptions' place before them matters.
pub(super) fn layer_chain(name: &str, layer: &Layer) -> Vec<NfListObject<'static>> {
    let chain: Cow<'static, str> = Cow::Owned(name.to_string());
    let mut out = vec![NfListObject::Chain(Chain {
        family: family(),
        table: Cow::Borrowed(TABLE),
        name: chain.clone(),
        ..Chain::default()
    })];
    let fam = |n: &ipnet::IpNet| match n {
        ipnet::IpNet::V4(_) => "ip",
        ipnet::IpNet::V6(_) => "ip6",
    };
    let mut push = |nets: &[ipnet::IpNet], ports: Option<&[(u16, u16)]>, drop: bool| {
        let Some(first) = nets.first() else { return };
        let mut e = vec![
            is(field(fam(first), "daddr"), dest_expr(nets)),
            l4proto("tcp"),
        ];
        if let Some(ports) = ports {
            e.push(is(field("tcp", "dport"), ports_expr(ports)));
        }
        e.push(match drop {
            true => Statement::Drop(None),
            false => Statement::Return(None),
        });
        out.push(rule_in(chain.clone(), e));
    };
    for r in layer.rules.iter().filter(|r| !r.drop) {
        push(&[r.dest], r.ports.as_deref(), false);
    }
    for v4 in [true, false] {
        let every: Vec<ipnet::IpNet> = layer
            .rules
            .iter()
            .filter(|r| r.drop && r.ports.is_none() && r.dest.addr().is_ipv4() == v4)
            .map(|r| r.dest)
            .collect();
        push(&ipnet::IpNet::aggregate(&every), None, true);
    }
    for r in layer.rules.iter().filter(|r| r.drop && r.ports.is_some()) {
        push(&[r.dest], r.ports.as_deref(), true);
    }
    out
}

/// The verdict maps from a sandbox's source address to its layer's chain.
pub(super) const LAYER_MAPS: [(&str, &str); 2] =
    [("layer_v4", "ipv4_addr"), ("layer_v6", "ipv6_addr")];

/// The map a source's element is in.
pub(super) fn layer_map(source: IpAddr) -> &'static str {
    match source {
        IpAddr::V4(_) => "layer_v4",
        IpAddr::V6(_) => "layer_v6",
    }
}

/// The element of `source` in its verdict map: jump to `chain` (`None`:
/// the key alone, to delete it).
pub(super) fn layer_element(source: IpAddr, chain: Option<&str>) -> NfListObject<'static> {
    let key = Expression::String(Cow::Owned(source.to_string()));
    let elem = match chain {
        Some(chain) => Expression::List(vec![
            key,
            Expression::Verdict(Verdict::Jump(JumpTarget {
                target: Cow::Owned(chain.to_string()),
            })),
        ]),
        None => key,
    };
    NfListObject::Element(Element {
        family: family(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed(layer_map(source)),
        elem: Cow::Owned(vec![elem]),
    })
}

/// A transaction for `nft -j -f -`: nft's JSON commands, in order. (The
/// `nftables` crate has no verdict-map type: the two maps' declarations
/// are written as nft's JSON directly.)
#[derive(Default)]
pub struct Ruleset {
    commands: Vec<serde_json::Value>,
    error: Option<String>,
}

impl Ruleset {
    /// Appends a batch's commands.
    pub fn batch(&mut self, b: Batch<'static>) {
        for o in b.to_nftables().objects.iter() {
            match serde_json::to_value(o) {
                Ok(v) => self.commands.push(v),
                Err(e) => self.error = Some(e.to_string()),
            }
        }
    }

    /// Appends the declarations of the verdict maps.
    fn maps(&mut self) {
        for (name, kind) in LAYER_MAPS {
            self.commands.push(serde_json::json!({"add": {"map": {
                "family": "inet", "table": TABLE, "name": name,
                "type": kind, "map": "verdict"
            }}}));
        }
    }

    /// Whether it holds no command.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty() && self.error.is_none()
    }

    /// Its commands as element operations ([`super::netlink`]), when that
    /// is all they are, none failed to serialise, and every element is in
    /// a verdict map of `layer_v4`/`layer_v6`: plain hash maps, whose elements
    /// are one message each. (The sources' sets are interval sets, whose
    /// elements nft splits into ranges: those stay nft's.)
    pub fn element_ops(&self) -> Option<super::netlink::Ops> {
        if self.error.is_some() {
            return None;
        }
        let ops = super::netlink::Ops::from_commands(&self.commands)?;
        ops.0
            .iter()
            .all(|o| {
                o.family == super::netlink::NFPROTO_INET
                    && o.table == TABLE
                    && LAYER_MAPS.iter().any(|(m, _)| *m == o.set)
                    && layer_map(o.key) == o.set
                    && (o.jump.is_some() == o.add)
            })
            .then_some(ops)
    }
}

impl serde::Serialize for Ruleset {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap as _};
        if let Some(e) = &self.error {
            return Err(S::Error::custom(e));
        }
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("nftables", &self.commands)?;
        m.end()
    }
}

fn ct(key: &'static str) -> Expression<'static> {
    Expression::Named(NamedExpression::CT(CT {
        key: Cow::Borrowed(key),
        family: None,
        dir: None,
    }))
}

/// The whole table, as one batch: the skeleton (sets, chains, the
/// redirects and drops) and the contents. With `keep_established`, a flow
/// a DNS-fed pass admitted is accepted while established (its revocation
/// deletes its conntrack entry: [`super::passes`]); without it (no
/// `conntrack` to delete entries with), every packet needs a live pass.
pub fn ruleset(c: &Contents<'_>, ports: Ports, keep_established: bool) -> Ruleset {
    let table = || Table {
        family: family(),
        name: Cow::Borrowed(TABLE),
        handle: None,
    };
    let mut b = Batch::new();
    // Add (a no-op when it exists), delete, add: one transaction replaces
    // the table, whether or not an earlier daemon left it.
    b.add(NfListObject::Table(table()));
    b.delete(NfListObject::Table(table()));
    b.add(NfListObject::Table(table()));
    let bridge = || Table {
        family: NfFamily::Bridge,
        name: Cow::Borrowed(BRIDGE_TABLE),
        handle: None,
    };
    b.add(NfListObject::Table(bridge()));
    b.delete(NfListObject::Table(bridge()));
    b.add(NfListObject::Table(bridge()));
    bridge_sets(c, &mut b, false);
    b.add(NfListObject::Chain(Chain {
        family: NfFamily::Bridge,
        table: Cow::Borrowed(BRIDGE_TABLE),
        name: Cow::Borrowed("forward"),
        _type: Some(NfChainType::Filter),
        hook: Some(NfHook::Forward),
        prio: Some(0),
        policy: Some(NfChainPolicy::Accept),
        ..Chain::default()
    }));
    for ((name, elems), kind) in sources_sets(c)
        .into_iter()
        .zip([SetType::Ipv4Addr, SetType::Ipv6Addr])
    {
        b.add(NfListObject::Set(Box::new(Set {
            elem: (!elems.is_empty()).then_some(Cow::Owned(elems)),
            ..set_of(name, kind, SetFlag::Interval)
        })));
    }
    for (name, kind) in [
        ("pass_v4", SetType::Ipv4Addr),
        ("pass_v6", SetType::Ipv6Addr),
    ] {
        b.add(NfListObject::Set(Box::new(Set {
            family: family(),
            table: Cow::Borrowed(TABLE),
            name: Cow::Borrowed(name),
            set_type: SetTypeValue::Concatenated(Cow::Owned(vec![
                kind,
                kind,
                SetType::InetService,
            ])),
            flags: Some([SetFlag::Timeout].into_iter().collect()),
            ..Set::default()
        })));
    }
    let mut out = Ruleset::default();
    out.batch(b);
    out.maps();
    let mut b = Batch::new();
    // dstnat (-100) and filter (0), as nft spells them.
    b.add(base_chain(
        "prerouting",
        NfChainType::NAT,
        NfHook::Prerouting,
        -100,
    ));
    // raw (-300): before conntrack and the redirects.
    b.add(base_chain(
        "hold",
        NfChainType::Filter,
        NfHook::Prerouting,
        -300,
    ));
    b.add(base_chain("input", NfChainType::Filter, NfHook::Input, 0));
    b.add(NfListObject::Chain(Chain {
        family: family(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed("ifaces_in"),
        ..Chain::default()
    }));
    b.add(rule(
        "input",
        vec![Statement::Jump(JumpTarget {
            target: Cow::Borrowed("ifaces_in"),
        })],
    ));
    b.add(base_chain(
        "forward",
        NfChainType::Filter,
        NfHook::Forward,
        0,
    ));
    b.add(NfListObject::Chain(Chain {
        family: family(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed("layer"),
        ..Chain::default()
    }));
    let port = |p: u16| Expression::Number(u32::from(p));
    let ports_set = Expression::Named(NamedExpression::Set(vec![
        SetItem::Element(port(ports.transparent)),
        SetItem::Element(port(ports.dns)),
    ]));
    for (ip, set) in [("ip", "@sandboxes_v4"), ("ip6", "@sandboxes_v6")] {
        let from = || is(field(ip, "saddr"), Expression::String(Cow::Borrowed(set)));
        for proto in ["udp", "tcp"] {
            b.add(rule(
                "prerouting",
                vec![
                    from(),
                    is(field(proto, "dport"), port(53)),
                    redirect(ports.dns),
                ],
            ));
        }
        let pass = || {
            is(
                Expression::Named(NamedExpression::Concat(vec![
                    field(ip, "saddr"),
                    field(ip, "daddr"),
                    field("tcp", "dport"),
                ])),
                Expression::String(Cow::Borrowed(if ip == "ip" {
                    "@pass_v4"
                } else {
                    "@pass_v6"
                })),
            )
        };
        b.add(rule(
            "prerouting",
            vec![from(), pass(), Statement::Accept(None)],
        ));
        b.add(rule(
            "prerouting",
            vec![from(), l4proto("tcp"), redirect(ports.transparent)],
        ));
        b.add(rule(
            "input",
            vec![
                from(),
                is(field("tcp", "dport"), ports_set.clone()),
                Statement::Accept(None),
            ],
        ));
        b.add(rule(
            "input",
            vec![
                from(),
                is(field("udp", "dport"), port(ports.dns)),
                Statement::Accept(None),
            ],
        ));
        if ip == "ip6" {
            b.add(rule(
                "input",
                vec![from(), l4proto("ipv6-icmp"), Statement::Accept(None)],
            ));
        }
        b.add(rule("input", vec![from(), Statement::Drop(None)]));
        b.add(rule(
            "forward",
            vec![
                from(),
                Statement::Jump(JumpTarget {
                    target: Cow::Borrowed("layer"),
                }),
            ],
        ));
        if keep_established {
            // A flow a pass admitted lives while the policy allows it: only
            // a revision ends it, by deleting its conntrack entry
            // (super::passes).
            b.add(rule(
                "forward",
                vec![
                    from(),
                    Statement::Match(Match {
                        left: ct("state"),
                        right: Expression::List(vec![
                            Expression::String(Cow::Borrowed("established")),
                            Expression::String(Cow::Borrowed("related")),
                        ]),
                        op: Operator::IN,
                    }),
                    is(ct("mark"), Expression::Number(PASS_MARK)),
                    Statement::Accept(None),
                ],
            ));
        }
        b.add(rule(
            "forward",
            vec![
                from(),
                pass(),
                Statement::Mangle(Mangle {
                    key: ct("mark"),
                    value: Expression::Number(PASS_MARK),
                }),
                Statement::Accept(None),
            ],
        ));
        b.add(rule("forward", vec![from(), Statement::Drop(None)]));
    }
    for (ip, map) in [("ip", "@layer_v4"), ("ip6", "@layer_v6")] {
        b.add(rule(
            "layer",
            vec![Statement::VerdictMap(VerdictMap {
                key: field(ip, "saddr"),
                data: Expression::String(Cow::Borrowed(map)),
            })],
        ));
    }
    let mut chains = std::collections::HashSet::new();
    for s in &c.layer {
        let chain = s.layer.chain();
        if chains.insert(chain.clone()) {
            for o in layer_chain(&chain, &s.layer) {
                b.add(o);
            }
        }
        for &source in &s.sources {
            b.add(layer_element(source, Some(&chain)));
        }
    }
    for r in hold_rules(c.interfaces)
        .into_iter()
        .chain(ifaces_in_rules(c.interfaces, ports))
        .chain(bridge_rules(c.interfaces))
    {
        b.add(r);
    }
    out.batch(b);
    out
}

/// One element of the DNS-fed sets: a sandbox's source address may reach
/// `addr:port` over TCP for `ttl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// The sandbox's source address.
    pub source: IpAddr,
    /// The allowed name's address.
    pub addr: IpAddr,
    /// The port its policy names.
    pub port: u16,
    /// How long, in seconds (at least 1).
    pub ttl: u32,
}

/// One element of `pass_v4`/`pass_v6`, with its timeout when added;
/// `None` when the source and the address are of different families.
fn pass_element(
    source: IpAddr,
    addr: IpAddr,
    port: u16,
    timeout: Option<u32>,
) -> Option<NfListObject<'static>> {
    let set = match (source, addr) {
        (IpAddr::V4(_), IpAddr::V4(_)) => "pass_v4",
        (IpAddr::V6(_), IpAddr::V6(_)) => "pass_v6",
        _ => return None,
    };
    Some(NfListObject::Element(Element {
        family: family(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed(set),
        elem: Cow::Owned(vec![Expression::Named(NamedExpression::Elem(Elem {
            val: Box::new(Expression::Named(NamedExpression::Concat(vec![
                Expression::String(Cow::Owned(source.to_string())),
                Expression::String(Cow::Owned(addr.to_string())),
                Expression::Number(u32::from(port)),
            ]))),
            timeout,
            expires: None,
            comment: None,
            counter: None,
        }))]),
    }))
}

/// The commands that put `passes` in the sets, each with its own timeout:
/// an element already there is deleted and added again in the same
/// transaction, so a fresh answer renews it. Passes whose source and
/// address are of different families are skipped.
pub fn passes_batch(passes: &[Pass]) -> Batch<'static> {
    let mut b = Batch::new();
    for p in passes {
        let ttl = Some(p.ttl.max(1));
        let (Some(add), Some(del), Some(again)) = (
            pass_element(p.source, p.addr, p.port, ttl),
            pass_element(p.source, p.addr, p.port, None),
            pass_element(p.source, p.addr, p.port, ttl),
        ) else {
            continue;
        };
        b.add(add);
        b.delete(del);
        b.add(again);
    }
    b
}

/// The commands that delete elements `(source, address, port)` from the
/// sets, whether or not they are still there (each is added with a short
/// timeout first, so the delete never fails the transaction).
pub fn revoke(keys: &[(IpAddr, IpAddr, u16)]) -> Batch<'static> {
    let mut b = Batch::new();
    for &(source, addr, port) in keys {
        if let (Some(add), Some(del)) = (
            pass_element(source, addr, port, Some(1)),
            pass_element(source, addr, port, None),
        ) {
            b.add(add);
            b.delete(del);
        }
    }
    b
}

/// Joins batches into one transaction.
pub fn join(mut first: Batch<'static>, then: Batch<'static>) -> Nftables<'static> {
    let rest = then.to_nftables();
    first.add_all(rest.objects.into_owned());
    first.to_nftables()
}

/// The transaction that puts `passes` in the sets (see [`passes_batch`]).
pub fn passes(passes: &[Pass]) -> Nftables<'static> {
    passes_batch(passes).to_nftables()
}

/// The ruleset as nft's JSON.
pub fn to_json(rules: &impl serde::Serialize) -> Result<String, NftError> {
    Ok(serde_json::to_string(rules)?)
}

/// Puts the ruleset in force (`nft -j -f -`, one transaction).
pub fn apply(rules: &impl serde::Serialize) -> Result<(), NftError> {
    let json = to_json(rules)?;
    nftables::helper::apply_ruleset_raw(
        &json,
        nftables::helper::DEFAULT_NFT,
        nftables::helper::DEFAULT_ARGS,
    )
    .map(|_| ())
    .map_err(|e| NftError::Apply(e.to_string()))
}
