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
    rule_in(Cow::Borrowed(chain), expr)
}

pub(super) fn rule_in(
    chain: Cow<'static, str>,
    expr: Vec<Statement<'static>>,
) -> NfListObject<'static> {
    NfListObject::Rule(Rule {
        family: family(),
        table: Cow::Borrowed(TABLE),
        chain,
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
    /// Each sandbox's kernel layer under the proxy ([`SandboxLayer`]).
    pub layer: Vec<SandboxLayer>,
    /// The host-side interfaces sandbox traffic arrives on (names, or
    /// prefixes ending in `*`): see [`super::boundary::hold_rules`].
    pub interfaces: &'a [String],
}

/// One sandbox's place in the kernel layer: its source addresses jump (by
/// the verdict maps `layer_v4`/`layer_v6`) to the chain of its policy's
/// [`Layer`], which every sandbox with the same layer shares. A packet's
/// cost is one map lookup and that chain, whatever the number of sandboxes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxLayer {
    /// The sandbox's id.
    pub id: String,
    /// Its source addresses.
    pub sources: Vec<IpAddr>,
    /// Its policy's kernel layer.
    pub layer: std::sync::Arc<Layer>,
}

/// A policy's kernel layer under the proxy: the rules of one chain, in
/// order (the exceptions, then the drops).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layer {
    /// The rules.
    pub rules: Vec<LayerRule>,
}

impl Layer {
    /// Every TCP connection dropped: the layer of a sandbox whose policy is
    /// not in force (fail closed).
    pub fn drop_all() -> Layer {
        let rules = ["0.0.0.0/0", "::/0"]
            .iter()
            .filter_map(|n| n.parse().ok())
            .map(|dest| LayerRule {
                dest,
                ports: None,
                drop: true,
            })
            .collect();
        Layer { rules }
    }

    /// The chain's name: `layer_` and 24 hex digits of the SHA-256 of the
    /// rules, so that sandboxes with equal layers share one chain (a
    /// different layer with the same name is refused where the chains are
    /// kept: [`super::layout`]).
    pub fn chain(&self) -> String {
        use std::fmt::Write as _;
        let mut text = String::new();
        for r in &self.rules {
            let _ = write!(text, "{} {} ", r.dest, u8::from(r.drop));
            for (lo, hi) in r.ports.iter().flatten() {
                let _ = write!(text, "{lo}-{hi},");
            }
            text.push(';');
        }
        let digest = gatehouse::artifact::sha256_hex(text.as_bytes());
        format!("layer_{}", digest.get(..24).unwrap_or(&digest))
    }
}

/// One rule of the kernel layer under the proxy, from a sandbox's policy:
/// TCP to `dest` (on `ports`; every port when none) is dropped in the
/// kernel, or, for an exact exception (`allow ip` of a non-public address
/// under `local deny`), goes on to the passes. It holds below the DNS-fed
/// passes, whatever put an element there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerRule {
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

/// One source address as an element of the sources set of its family in
/// `table` (family `fam`).
pub(super) fn source_element(
    fam: NfFamily,
    table: &'static str,
    ip: IpAddr,
) -> NfListObject<'static> {
    NfListObject::Element(nftables::schema::Element {
        family: fam,
        table: Cow::Borrowed(table),
        name: Cow::Borrowed(match ip {
            IpAddr::V4(_) => "sandboxes_v4",
            IpAddr::V6(_) => "sandboxes_v6",
        }),
        elem: Cow::Owned(vec![Expression::String(Cow::Owned(ip.to_string()))]),
    })
}

/// Empties a sources set of the main table and fills it with `elems`.
pub(super) fn refill(
    b: &mut nftables::batch::Batch<'static>,
    name: &'static str,
    kind: SetType,
    elems: Vec<Expression<'static>>,
) {
    b.add_cmd(nftables::schema::NfCmd::Flush(
        nftables::schema::FlushObject::Set(Box::new(set_of(name, kind, SetFlag::Interval))),
    ));
    if !elems.is_empty() {
        b.add(NfListObject::Element(nftables::schema::Element {
            family: family(),
            table: Cow::Borrowed(TABLE),
            name: Cow::Borrowed(name),
            elem: Cow::Owned(elems),
        }));
    }
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
