//! The building blocks of host mode's nftables rules, shared by the main
//! table ([`super::nft`]) and the boundary rules ([`super::boundary`]):
//! the table's name, what it holds, and the expressions both are made of.

use std::borrow::Cow;
use std::net::IpAddr;

use nftables::expr::{Expression, Meta, MetaKey, NamedExpression, Payload, PayloadField, Prefix};
use nftables::schema::{NfListObject, Rule, Set, SetFlag, SetType, SetTypeValue};
use nftables::stmt::{Match, Operator, Statement};
use nftables::types::NfFamily;

/// The table's name (family `inet`).
pub const TABLE: &str = "gatehouse_host";

/// The conntrack mark of a flow a DNS-fed pass admitted.
pub const PASS_MARK: u32 = 0x6768_0001;

/// Where the daemon listens on the host for what it redirects.
#[derive(Clone, Copy, Debug)]
pub struct Ports {
    /// The transparent TCP listener.
    pub transparent: u16,
    /// The resolver (UDP and TCP).
    pub dns: u16,
}

pub(super) fn family() -> NfFamily {
    NfFamily::INet
}

pub(super) fn field(protocol: &'static str, name: &'static str) -> Expression<'static> {
    Expression::Named(NamedExpression::Payload(Payload::PayloadField(
        PayloadField {
            protocol: Cow::Borrowed(protocol),
            field: Cow::Borrowed(name),
        },
    )))
}

pub(super) fn is(left: Expression<'static>, right: Expression<'static>) -> Statement<'static> {
    Statement::Match(Match {
        left,
        right,
        op: Operator::EQ,
    })
}

pub(super) fn l4proto(name: &'static str) -> Statement<'static> {
    is(
        Expression::Named(NamedExpression::Meta(Meta {
            key: MetaKey::L4proto,
        })),
        Expression::String(Cow::Borrowed(name)),
    )
}

pub(super) fn rule(chain: &'static str, expr: Vec<Statement<'static>>) -> NfListObject<'static> {
    NfListObject::Rule(Rule {
        family: family(),
        table: Cow::Borrowed(TABLE),
        chain: Cow::Borrowed(chain),
        expr: Cow::Owned(expr),
        handle: None,
        index: None,
        comment: None,
    })
}

/// What the table holds for the sandboxes, which changes with the sandbox
/// table and their policies: the sources it holds and the kernel layer.
pub struct Contents<'a> {
    /// Every sandbox's source addresses.
    pub sources: Vec<IpAddr>,
    /// The prefixes sandboxes live in: every source in them is redirected
    /// and held like a sandbox's (one that is no sandbox's is then denied
    /// everything); `sources` outside them are held one by one.
    pub networks: &'a [ipnet::IpNet],
    /// The kernel layer under the proxy ([`LayerRule`]).
    pub layer: Vec<LayerRule>,
    /// The host-side interfaces sandbox traffic arrives on (names, or
    /// prefixes ending in `*`): see [`super::boundary::hold_rules`].
    pub interfaces: &'a [String],
}

/// One rule of the kernel layer under the proxy, from a sandbox's policy:
/// TCP from `source` to `dest` (on `ports`; every port when none) is
/// dropped in the kernel, or, for an exact exception (`allow ip` of a
/// non-public address under `local deny`), goes on to the passes. It
/// holds below the DNS-fed passes, whatever put an element there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerRule {
    /// The sandbox's source address.
    pub source: IpAddr,
    /// The destination prefix.
    pub dest: ipnet::IpNet,
    /// Inclusive port ranges; none: every port.
    pub ports: Option<Vec<(u16, u16)>>,
    /// Drop (else: return, an exception before the drops).
    pub drop: bool,
}

pub(super) fn sources_sets(c: &Contents<'_>) -> [(&'static str, Vec<Expression<'static>>); 2] {
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    for net in ipnet::IpNet::aggregate(&c.networks.to_vec()) {
        let e = if net.prefix_len() == net.max_prefix_len() {
            Expression::String(Cow::Owned(net.addr().to_string()))
        } else {
            prefix(net)
        };
        match net {
            ipnet::IpNet::V4(_) => v4.push(e),
            ipnet::IpNet::V6(_) => v6.push(e),
        }
    }
    let mut seen = Vec::new();
    for ip in &c.sources {
        if c.networks.iter().any(|n| n.contains(ip)) || seen.contains(ip) {
            continue;
        }
        seen.push(*ip);
        let e = Expression::String(Cow::Owned(ip.to_string()));
        match ip {
            IpAddr::V4(_) => v4.push(e),
            IpAddr::V6(_) => v6.push(e),
        }
    }
    [("sandboxes_v4", v4), ("sandboxes_v6", v6)]
}

pub(super) fn prefix(net: ipnet::IpNet) -> Expression<'static> {
    Expression::Named(NamedExpression::Prefix(Prefix {
        addr: Box::new(Expression::String(Cow::Owned(net.network().to_string()))),
        len: u32::from(net.prefix_len()),
    }))
}

/// The rules of the `layer` chain.
pub(super) fn set_of(name: &'static str, kind: SetType, flags: SetFlag) -> Set<'static> {
    Set {
        family: family(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed(name),
        set_type: SetTypeValue::Single(kind),
        flags: Some([flags].into_iter().collect()),
        ..Set::default()
    }
}
