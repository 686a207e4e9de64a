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
use nftables::expr::{CT, Expression, NamedExpression, SetItem};
use nftables::expr::{Elem, Range};
use nftables::schema::{
    Chain, Element, FlushObject, NfCmd, NfListObject, Nftables, Set, SetFlag, SetType,
    SetTypeValue, Table,
};
use nftables::stmt::{JumpTarget, Mangle, Match, NAT, Operator, Statement};
use nftables::types::{NfChainPolicy, NfChainType, NfFamily, NfHook};

pub use super::boundary::{BRIDGE_TABLE, bridge_rules, hold_rules, ifaces_in_rules};
use super::boundary::{bridge_sets, flush_chain};
pub use super::expr::{Contents, LayerRule, PASS_MARK, Ports, TABLE};
use super::expr::{family, field, is, l4proto, prefix, rule, set_of, sources_sets};

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

fn layer_rules(layer: &[LayerRule]) -> Vec<NfListObject<'static>> {
    let mut out = Vec::new();
    for r in layer {
        let fam = match (r.source, r.dest) {
            (IpAddr::V4(_), ipnet::IpNet::V4(_)) => "ip",
            (IpAddr::V6(_), ipnet::IpNet::V6(_)) => "ip6",
            _ => continue,
        };
        let dest = if r.dest.prefix_len() == r.dest.max_prefix_len() {
            Expression::String(Cow::Owned(r.dest.addr().to_string()))
        } else {
            prefix(r.dest)
        };
        let verdict = match r.drop {
            true => Statement::Drop(None),
            false => Statement::Return(None),
        };
        let mut e = vec![
            is(
                field(fam, "saddr"),
                Expression::String(Cow::Owned(r.source.to_string())),
            ),
            is(field(fam, "daddr"), dest),
            l4proto("tcp"),
        ];
        if let Some(ports) = &r.ports {
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
            e.push(is(
                field("tcp", "dport"),
                Expression::Named(NamedExpression::Set(items)),
            ));
        }
        e.push(verdict);
        out.push(rule("layer", e));
    }
    out
}

/// The batch that replaces what changes with the sandbox table and the
/// policies, in one transaction: the sources held and the kernel layer.
/// The DNS-fed passes are not touched here: the revision that follows
/// every change deletes exactly those no longer allowed
/// ([`super::passes::Registry::revise`]), so other sandboxes' passes and
/// flows go on.
pub fn update(c: &Contents<'_>, ports: Ports) -> Nftables<'static> {
    let mut b = Batch::new();
    for ((name, elems), kind) in sources_sets(c)
        .into_iter()
        .zip([SetType::Ipv4Addr, SetType::Ipv6Addr])
    {
        b.add_cmd(NfCmd::Flush(FlushObject::Set(Box::new(set_of(
            name,
            kind,
            SetFlag::Interval,
        )))));
        if !elems.is_empty() {
            b.add(NfListObject::Element(Element {
                family: family(),
                table: Cow::Borrowed(TABLE),
                name: Cow::Borrowed(name),
                elem: Cow::Owned(elems),
            }));
        }
    }
    b.add_cmd(NfCmd::Flush(FlushObject::Chain(Chain {
        family: family(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed("layer"),
        ..Chain::default()
    })));
    for r in layer_rules(&c.layer) {
        b.add(r);
    }
    flush_chain(&mut b, family(), TABLE, "hold");
    for r in hold_rules(c.interfaces) {
        b.add(r);
    }
    flush_chain(&mut b, family(), TABLE, "ifaces_in");
    for r in ifaces_in_rules(c.interfaces, ports) {
        b.add(r);
    }
    bridge_sets(c, &mut b, true);
    flush_chain(&mut b, NfFamily::Bridge, BRIDGE_TABLE, "forward");
    for r in bridge_rules(c.interfaces) {
        b.add(r);
    }
    b.to_nftables()
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
pub fn ruleset(c: &Contents<'_>, ports: Ports, keep_established: bool) -> Nftables<'static> {
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
    for r in layer_rules(&c.layer) {
        b.add(r);
    }
    for r in hold_rules(c.interfaces)
        .into_iter()
        .chain(ifaces_in_rules(c.interfaces, ports))
        .chain(bridge_rules(c.interfaces))
    {
        b.add(r);
    }
    b.to_nftables()
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
pub fn to_json(rules: &Nftables<'_>) -> Result<String, NftError> {
    Ok(serde_json::to_string(rules)?)
}

/// Puts the ruleset in force (`nft -j -f -`, one transaction).
pub fn apply(rules: &Nftables<'_>) -> Result<(), NftError> {
    let json = to_json(rules)?;
    nftables::helper::apply_ruleset_raw(
        &json,
        nftables::helper::DEFAULT_NFT,
        nftables::helper::DEFAULT_ARGS,
    )
    .map(|_| ())
    .map_err(|e| NftError::Apply(e.to_string()))
}
