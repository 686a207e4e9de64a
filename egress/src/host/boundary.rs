//! The boundary rules of host mode's nftables tables (issue 52, docs/host.md
//! "The boundary"): whatever arrives on a sandbox interface is a
//! sandbox's, whatever its source address says — the `hold` chain (forged
//! sources), `ifaces_in` (the host reached only on the daemon's ports, over
//! link-local too) and the bridge table (no sandbox bridged to another
//! port). [`super::nft`] puts them in the same transaction as the rest.

use std::borrow::Cow;

use nftables::batch::Batch;
use nftables::expr::{
    Expression, Fib, FibFlag, FibResult, Meta, MetaKey, NamedExpression, SetItem,
};
use nftables::schema::{
    Chain, Element, FlushObject, NfCmd, NfListObject, Rule, Set, SetFlag, SetType,
};
use nftables::stmt::{Match, Operator, Statement};
use nftables::types::NfFamily;

use super::expr::{Contents, Ports, field, is, l4proto, prefix, rule, set_of, sources_sets};

/// The bridge table's name (family `bridge`).
pub const BRIDGE_TABLE: &str = "gatehouse_host_br";

fn iif(name: &str) -> Statement<'static> {
    is(
        Expression::Named(NamedExpression::Meta(Meta {
            key: MetaKey::Iifname,
        })),
        Expression::String(Cow::Owned(name.to_string())),
    )
}

fn not(left: Expression<'static>, right: Expression<'static>) -> Statement<'static> {
    Statement::Match(Match {
        left,
        right,
        op: Operator::NEQ,
    })
}

/// `fib saddr . iif oif missing`: the source does not route back through
/// the interface it came in on.
fn rpf_fails() -> Statement<'static> {
    is(
        Expression::Named(NamedExpression::Fib(Fib {
            result: FibResult::Oif,
            flags: [FibFlag::Saddr, FibFlag::Iif].into_iter().collect(),
        })),
        Expression::Boolean(false),
    )
}

/// The `hold` chain (prerouting, before everything else): whatever arrives
/// on a sandbox interface is a sandbox's, whatever its source address
/// says. It must carry a sandbox's address (IPv4), or a sandbox's, a
/// link-local or the unspecified address (IPv6, for neighbour discovery),
/// and that address must route back through the interface it came in on
/// (a reverse-path check: on routed interfaces a sandbox cannot claim a
/// neighbour's address). Everything else is dropped before it is routed.
pub fn hold_rules(interfaces: &[String]) -> Vec<NfListObject<'static>> {
    let mut out = Vec::new();
    let s = |t: &'static str| Expression::String(Cow::Borrowed(t));
    for p in interfaces {
        out.push(rule(
            "hold",
            vec![
                iif(p),
                not(field("ip", "saddr"), s("@sandboxes_v4")),
                Statement::Drop(None),
            ],
        ));
        out.push(rule(
            "hold",
            vec![
                iif(p),
                not(field("ip6", "saddr"), s("@sandboxes_v6")),
                not(
                    field("ip6", "saddr"),
                    prefix(ipnet::IpNet::V6(
                        ipnet::Ipv6Net::new(
                            std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
                            10,
                        )
                        .unwrap_or_default(),
                    )),
                ),
                not(field("ip6", "saddr"), s("::")),
                Statement::Drop(None),
            ],
        ));
        out.push(rule(
            "hold",
            vec![
                iif(p),
                is(
                    Expression::Named(NamedExpression::Meta(Meta {
                        key: MetaKey::Nfproto,
                    })),
                    s("ipv4"),
                ),
                rpf_fails(),
                Statement::Drop(None),
            ],
        ));
        out.push(rule(
            "hold",
            vec![
                iif(p),
                not(field("ip6", "saddr"), s("::")),
                rpf_fails(),
                Statement::Drop(None),
            ],
        ));
    }
    out
}

/// The `ifaces_in` chain (jumped to first from `input`): from a sandbox
/// interface — whatever the source, link-local included — the host is
/// reached only on the daemon's two ports and by ICMPv6 (neighbour
/// discovery).
pub fn ifaces_in_rules(interfaces: &[String], ports: Ports) -> Vec<NfListObject<'static>> {
    let port = |p: u16| Expression::Number(u32::from(p));
    let mut out = Vec::new();
    for p in interfaces {
        out.push(rule(
            "ifaces_in",
            vec![
                iif(p),
                is(
                    field("tcp", "dport"),
                    Expression::Named(NamedExpression::Set(vec![
                        SetItem::Element(port(ports.transparent)),
                        SetItem::Element(port(ports.dns)),
                    ])),
                ),
                Statement::Accept(None),
            ],
        ));
        out.push(rule(
            "ifaces_in",
            vec![
                iif(p),
                is(field("udp", "dport"), port(ports.dns)),
                Statement::Accept(None),
            ],
        ));
        out.push(rule(
            "ifaces_in",
            vec![iif(p), l4proto("ipv6-icmp"), Statement::Accept(None)],
        ));
        out.push(rule("ifaces_in", vec![iif(p), Statement::Drop(None)]));
    }
    out
}

/// The bridge table's `forward` chain: a sandbox on a bridge reaches only
/// the host, never another port (another sandbox, or an uplink that would
/// bypass the host), whatever `bridge-nf-call-*` says. Dropped when
/// bridged: every frame carrying a sandbox's address (IPv4, IPv6, ARP),
/// and everything that entered through an interface the table names (a
/// port pattern such as `vsbx*`: only a named port's IPv6 link-local
/// traffic can be told from another container's).
pub fn bridge_rules(interfaces: &[String]) -> Vec<NfListObject<'static>> {
    let r = |expr: Vec<Statement<'static>>| {
        NfListObject::Rule(Rule {
            family: NfFamily::Bridge,
            table: Cow::Borrowed(BRIDGE_TABLE),
            chain: Cow::Borrowed("forward"),
            expr: Cow::Owned(expr),
            handle: None,
            index: None,
            comment: None,
        })
    };
    let s = |t: &'static str| Expression::String(Cow::Borrowed(t));
    let mut out = vec![
        r(vec![
            is(field("ip", "saddr"), s("@sandboxes_v4")),
            Statement::Drop(None),
        ]),
        r(vec![
            is(field("ip6", "saddr"), s("@sandboxes_v6")),
            Statement::Drop(None),
        ]),
        r(vec![
            is(field("arp", "saddr ip"), s("@sandboxes_v4")),
            Statement::Drop(None),
        ]),
    ];
    out.extend(
        interfaces
            .iter()
            .map(|p| r(vec![iif(p), Statement::Drop(None)])),
    );
    out
}

/// The bridge table's copies of the sandboxes' sets (a table's rules see
/// only its own sets).
pub(super) fn bridge_sets(c: &Contents<'_>, b: &mut Batch<'static>, flush: bool) {
    for ((name, elems), kind) in sources_sets(c)
        .into_iter()
        .zip([SetType::Ipv4Addr, SetType::Ipv6Addr])
    {
        let set = Set {
            family: NfFamily::Bridge,
            table: Cow::Borrowed(BRIDGE_TABLE),
            ..set_of(name, kind, SetFlag::Interval)
        };
        if flush {
            b.add_cmd(NfCmd::Flush(FlushObject::Set(Box::new(set))));
            if !elems.is_empty() {
                b.add(NfListObject::Element(Element {
                    family: NfFamily::Bridge,
                    table: Cow::Borrowed(BRIDGE_TABLE),
                    name: Cow::Borrowed(name),
                    elem: Cow::Owned(elems),
                }));
            }
        } else {
            b.add(NfListObject::Set(Box::new(Set {
                elem: (!elems.is_empty()).then_some(Cow::Owned(elems)),
                ..set
            })));
        }
    }
}

pub(super) fn flush_chain(
    b: &mut Batch<'static>,
    fam: NfFamily,
    table: &'static str,
    name: &'static str,
) {
    b.add_cmd(NfCmd::Flush(FlushObject::Chain(Chain {
        family: fam,
        table: Cow::Borrowed(table),
        name: Cow::Borrowed(name),
        ..Chain::default()
    })));
}
