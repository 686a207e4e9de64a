//! `policyc export nftables`: the ip/cidr layer of a policy as an nftables
//! ruleset, for the kernel underneath the proxy and the resolver.
//!
//! Names cannot be decided in the kernel: traffic to names goes through the
//! proxy and the resolver, which are the only other exits the ruleset opens.
//! The chain follows the language's decision order (docs/language.md#decision-order): deny rules drop;
//! under `local deny` non-public destinations drop unless an exact `allow ip`
//! names them; allow rules accept; then the default. It is meant to be
//! loaded inside the sandbox's network namespace (`nft -f FILE`), where it
//! filters the sandbox's own outgoing packets.

use std::fmt::Write;
use std::net::SocketAddr;

use ipnet::IpNet;

use crate::build::Build;
use crate::syntax::ast::{
    Block, Effect, Item, NetStmt, NetTarget, Network, PortRange, SectionKind,
};

/// Why a policy cannot be exported.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// No policy of that name in the set.
    #[error("no policy `{0}`")]
    UnknownPolicy(String),
    /// No name was given and the set holds several policies (or none).
    #[error("several policies: pick one with `--policy NAME`")]
    Ambiguous,
    /// The sources have errors; `policyc check` shows them.
    #[error("the policy set has errors")]
    Invalid,
}

/// The exits the sandbox keeps besides the policy's address rules.
#[derive(Clone, Debug)]
pub struct Exits {
    /// The egress proxy (TCP).
    pub proxy: Option<SocketAddr>,
    /// The filtering resolver (UDP and TCP).
    pub resolver: Option<SocketAddr>,
}

/// The policy named `name` (or the only one) of a build without errors,
/// composed with the set's requirements, as an nftables ruleset.
///
/// ```
/// use gatehouse::export::{Exits, nftables};
/// use gatehouse::{SourceMap, build};
///
/// let mut sources = SourceMap::new();
/// sources.add("p.policy", "policy p {\n  network {\n    deny cidr 10.0.0.0/8\n  }\n}\n");
/// let ruleset = nftables(&build(sources), None, &Exits { proxy: None, resolver: None })?;
/// assert!(ruleset.contains("ip daddr 10.0.0.0/8 drop"));
/// # Ok::<(), gatehouse::export::ExportError>(())
/// ```
pub fn nftables(build: &Build, name: Option<&str>, exits: &Exits) -> Result<String, ExportError> {
    if build.has_errors() {
        return Err(ExportError::Invalid);
    }
    let files = build.files.as_slice();
    let policies: Vec<&Block> = files
        .iter()
        .flat_map(|f| &f.items)
        .filter_map(|i| match i {
            Item::Policy(b) => Some(b),
            _ => None,
        })
        .collect();
    let block = match name {
        Some(n) => policies
            .iter()
            .find(|b| b.name.node == n)
            .ok_or_else(|| ExportError::UnknownPolicy(n.to_string()))?,
        None => match policies.as_slice() {
            [one] => one,
            _ => return Err(ExportError::Ambiguous),
        },
    };
    let requirements = crate::syntax::ast::requirements_of(files);
    let block = crate::compile::compose_block(block, &requirements);
    Ok(render(&block, exits))
}

fn table_name(policy: &str) -> String {
    let clean: String = policy
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("gatehouse_{clean}")
}

fn ports(p: &Option<Vec<PortRange>>) -> Option<String> {
    let p = p.as_ref()?;
    let items: Vec<String> = p.iter().map(PortRange::to_string).collect();
    Some(format!("{{ {} }}", items.join(", ")))
}

fn family(net: &IpNet) -> &'static str {
    match net {
        IpNet::V4(_) => "ip",
        IpNet::V6(_) => "ip6",
    }
}

/// One verdict line for a prefix with an optional port list (TCP and UDP).
fn rule(out: &mut String, net: &IpNet, p: &Option<Vec<PortRange>>, verdict: &str, comment: &str) {
    let fam = family(net);
    let addr = if net.prefix_len() == net.max_prefix_len() {
        net.addr().to_string()
    } else {
        net.to_string()
    };
    match ports(p) {
        None => {
            let _ = writeln!(
                out,
                "    {fam} daddr {addr} {verdict} comment \"{comment}\""
            );
        }
        Some(list) => {
            for proto in ["tcp", "udp"] {
                let _ = writeln!(
                    out,
                    "    {fam} daddr {addr} {proto} dport {list} {verdict} comment \"{comment}\""
                );
            }
        }
    }
}

fn exit(out: &mut String, a: SocketAddr, protos: &[&str], what: &str) {
    let fam = if a.is_ipv4() { "ip" } else { "ip6" };
    for proto in protos {
        let _ = writeln!(
            out,
            "    {fam} daddr {} {proto} dport {} accept comment \"{what}\"",
            a.ip(),
            a.port()
        );
    }
}

fn render(block: &Block, exits: &Exits) -> String {
    let network = block.sections.iter().find_map(|s| match &s.kind {
        SectionKind::Network(n) => Some(n),
        _ => None,
    });
    let mut out = String::new();
    let _ = writeln!(out, "#!/usr/sbin/nft -f");
    let _ = writeln!(
        out,
        "# The ip/cidr layer of gatehouse policy `{}`, generated by `policyc export nftables`.",
        block.name.node
    );
    let _ = writeln!(
        out,
        "# Load it inside the sandbox's network namespace: nft -f FILE"
    );
    let _ = writeln!(
        out,
        "# Names are decided by the proxy and the resolver, the only other exits."
    );
    let table = table_name(&block.name.node);
    let _ = writeln!(out, "table inet {table}");
    let _ = writeln!(out, "delete table inet {table}");
    let _ = writeln!(out, "table inet {table} {{");
    let _ = writeln!(out, "  chain egress {{");
    let (mode_policy, stmts): (&str, &[NetStmt]) = match network {
        None | Some(Network::Off) => ("drop", &[]),
        Some(Network::Unrestricted) => ("accept", &[]),
        Some(Network::Block(s)) => ("block", s),
    };
    let default_allow = stmts
        .iter()
        .any(|s| matches!(s, NetStmt::Default(e) if e.node == Effect::Allow));
    let local_allow = stmts
        .iter()
        .any(|s| matches!(s, NetStmt::Local(e) if e.node == Effect::Allow));
    let policy = match mode_policy {
        "block" if default_allow => "accept",
        "block" => "drop",
        other => other,
    };
    let _ = writeln!(
        out,
        "    type filter hook output priority filter; policy {policy};"
    );
    let _ = writeln!(out, "    ct state established,related accept");
    if let Some(p) = exits.proxy {
        exit(&mut out, p, &["tcp"], "the egress proxy");
    }
    if let Some(r) = exits.resolver {
        exit(&mut out, r, &["udp", "tcp"], "the filtering resolver");
    }
    match mode_policy {
        "drop" => {
            let _ = writeln!(out, "    # network off: nothing else leaves");
        }
        "accept" => {
            let _ = writeln!(out, "    # network unrestricted: everything leaves");
        }
        _ => {
            let rules: Vec<(Effect, IpNet, &Option<Vec<PortRange>>, bool)> = stmts
                .iter()
                .filter_map(|s| match s {
                    NetStmt::Rule(r) => match &r.target {
                        // As the engine applies them (docs/language.md#host-normalisation): a mapped
                        // or compatible address, and a prefix inside
                        // `::ffff:0:0/96`, are IPv4; the kernel sees IPv4.
                        NetTarget::Ip(ip) => Some((
                            r.effect,
                            IpNet::from(crate::normalize::canonical_ip(*ip)),
                            &r.ports,
                            true,
                        )),
                        NetTarget::Cidr(net) => Some((
                            r.effect,
                            crate::normalize::addr::canonical_net(*net),
                            &r.ports,
                            false,
                        )),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            let _ = writeln!(out, "    # 1. deny rules");
            for (e, net, p, _) in &rules {
                if *e == Effect::Deny {
                    rule(&mut out, net, p, "drop", "deny");
                }
            }
            if !local_allow {
                let _ = writeln!(
                    out,
                    "    # 2. local deny: non-public destinations only through exact `allow ip`"
                );
                for (e, net, p, exact) in &rules {
                    if *e == Effect::Allow
                        && *exact
                        && crate::normalize::addr::is_non_public(net.addr())
                    {
                        rule(&mut out, net, p, "accept", "exact exception");
                    }
                }
                let v4: Vec<String> = crate::normalize::addr::non_public_v4()
                    .map(|n| n.to_string())
                    .collect();
                let _ = writeln!(
                    out,
                    "    ip daddr {{ {} }} drop comment \"non-public\"",
                    v4.join(", ")
                );
                let v6: Vec<String> = crate::normalize::addr::non_public_v6_in_global()
                    .map(|n| n.to_string())
                    .collect();
                let _ = writeln!(out, "    ip6 daddr != 2000::/3 drop comment \"non-public\"");
                let _ = writeln!(
                    out,
                    "    ip6 daddr {{ {} }} drop comment \"non-public\"",
                    v6.join(", ")
                );
            }
            let _ = writeln!(out, "    # 3. allow rules");
            for (e, net, p, _) in &rules {
                if *e == Effect::Allow {
                    rule(&mut out, net, p, "accept", "allow");
                }
            }
            let _ = writeln!(
                out,
                "    # 4. default {}",
                if default_allow {
                    "allow (the chain's policy)"
                } else {
                    "deny (the chain's policy)"
                }
            );
        }
    }
    let _ = writeln!(out, "  }}");
    let _ = writeln!(out, "}}");
    out
}
