//! DNS-fed kernel sets (issue 30, item 3): when a sandbox's resolver
//! answers an allowed name, the name's addresses enter the sandbox's
//! elements of `pass_v4`/`pass_v6` ([`super::nft`]) for the ports its
//! policy names for that name, each with the answer's TTL, so protocols
//! the proxy cannot read (SSH to an allowed name, a database port the
//! policy allows) pass in the kernel exactly for allowed names and only
//! as long as the answer lives.
//!
//! Which ports: every port of an `allow` rule's port list for which
//! `connect NAME:PORT` (and `resolved NAME -> ADDRESS` with that port) is
//! allowed by the sandbox's policy, at most [`MAX_PORTS`] a name, never 80
//! or 443 — HTTP and TLS always go through the proxy, which reads their
//! `Host` and server name (an address is shared by many names behind a
//! CDN). A rule without a port list passes nothing in the kernel: its
//! traffic is decided by the transparent listener (docs/host.md).
//!
//! The sets are written by one thread of their own, in batches (one `nft`
//! transaction per batch), never on the resolver's path: until an element
//! is in, the connection takes the transparent listener, which decides it
//! the same way.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::time::Duration;

use gatehouse::Policy;

use arc_swap::ArcSwap;

use super::nft::{Layer, LayerRule, Pass};
use super::passes::{Grant, Registry};
pub use super::ports::{MAX_PORTS, ports_for};
use super::table::SandboxTable;
use crate::policy::stderr_line;

/// The longest an element lives, whatever the TTL.
pub const MAX_TTL: Duration = Duration::from_secs(3600);
/// Batches waiting for the writer; more are dropped (the transparent
/// listener decides those connections instead).
const QUEUE: usize = 1024;

/// A rule's inclusive port ranges; none: every port.
type Spans = Option<Vec<(u16, u16)>>;

/// The kernel layer of a sandbox's policy under the proxy (the language's
/// decision order, as `policyc export nftables` writes it for one
/// sandbox): its `deny ip`/`deny cidr` rules drop; under `local deny`,
/// non-public destinations drop but for an exact `allow ip` of one (an
/// exception, first); under `network off`, everything drops. TCP only:
/// every other protocol but DNS is dropped for every sandbox already.
pub fn layer_for(policy: &Policy) -> Layer {
    use gatehouse::{NetworkMode, NetworkTarget};
    use ipnet::IpNet;
    let network = policy.network();
    // (destination, ports, drop)
    let mut dests: Vec<(IpNet, Spans, bool)> = Vec::new();
    match network.mode {
        NetworkMode::Unrestricted => {}
        NetworkMode::Constrained => {
            // (allow, destination, ports, an exact address)
            let rules: Vec<(bool, IpNet, Spans, bool)> = network
                .rules
                .iter()
                .filter_map(|r| {
                    let ports = r
                        .ports
                        .as_ref()
                        .map(|p| p.iter().map(|s| (s.lo, s.hi)).collect());
                    match &r.target {
                        NetworkTarget::Ip(ip) => Some((r.allow, IpNet::from(*ip), ports, true)),
                        NetworkTarget::Cidr(n) => Some((
                            r.allow,
                            gatehouse::normalize::canonical_net(*n),
                            ports,
                            false,
                        )),
                        _ => None,
                    }
                })
                .collect();
            if network.local_allow.is_none() {
                for (allow, net, ports, exact) in &rules {
                    if *allow && *exact && gatehouse::normalize::is_non_public(net.addr()) {
                        dests.push((*net, ports.clone(), false));
                    }
                }
            }
            for (allow, net, ports, _) in &rules {
                if !allow {
                    dests.push((*net, ports.clone(), true));
                }
            }
            if network.local_allow.is_none() {
                let v4 = gatehouse::normalize::non_public_v4().map(IpNet::V4);
                let v6 = gatehouse::normalize::non_public_v6_in_global().map(IpNet::V6);
                // Outside 2000::/3, every IPv6 address is non-public.
                let outside: [IpNet; 3] = [
                    IpNet::V6(
                        ipnet::Ipv6Net::new(std::net::Ipv6Addr::UNSPECIFIED, 3).unwrap_or_default(),
                    ),
                    IpNet::V6(
                        ipnet::Ipv6Net::new(std::net::Ipv6Addr::from(0x4000u128 << 112), 2)
                            .unwrap_or_default(),
                    ),
                    IpNet::V6(
                        ipnet::Ipv6Net::new(std::net::Ipv6Addr::from(0x8000u128 << 112), 1)
                            .unwrap_or_default(),
                    ),
                ];
                for n in v4.chain(v6).chain(outside) {
                    dests.push((n, None, true));
                }
            }
        }
        _ => {
            for any in ["0.0.0.0/0", "::/0"] {
                if let Ok(n) = any.parse() {
                    dests.push((n, None, true));
                }
            }
        }
    }
    Layer {
        rules: dests
            .into_iter()
            .map(|(dest, ports, drop)| LayerRule { dest, ports, drop })
            .collect(),
    }
}

/// The writer of the DNS-fed sets, and the record of what they hold
/// ([`super::passes`]).
pub struct Kernel {
    tx: Option<SyncSender<Grant>>,
    registry: Option<Arc<Registry>>,
}

impl Kernel {
    /// A writer that applies each batch with `nft`, keeping its record over
    /// `table`; `apply: false` keeps nothing (a daemon without nftables,
    /// the library's tests). `conntrack`: whether kernel-passed flows are
    /// kept while established (and so cut on revocation). `record`: the
    /// file the record is kept in across restarts.
    pub fn start(
        apply: bool,
        table: Arc<ArcSwap<SandboxTable>>,
        conntrack: bool,
        record: Option<std::path::PathBuf>,
    ) -> Kernel {
        if !apply {
            return Kernel {
                tx: None,
                registry: None,
            };
        }
        let registry = Arc::new(Registry::new(table, conntrack, record));
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let r = registry.clone();
        let spawned = std::thread::Builder::new()
            .name("gatehouse-nft".into())
            .spawn(move || writer(&rx, &r));
        match spawned {
            Ok(_) => Kernel {
                tx: Some(tx),
                registry: Some(registry),
            },
            Err(e) => {
                stderr_line(format!(
                    "gatehouse-egress: cannot start the nftables writer ({e}): no name passes in the kernel; the transparent listener decides every connection"
                ));
                Kernel {
                    tx: None,
                    registry: Some(registry),
                }
            }
        }
    }

    /// Queues one answer's passes for sandbox `sandbox`; never blocks.
    pub fn add(&self, sandbox: &str, name: &str, passes: Vec<Pass>) {
        if passes.is_empty() {
            return;
        }
        let grant = Grant {
            sandbox: sandbox.to_string(),
            name: name.to_string(),
            passes,
        };
        if let Some(tx) = &self.tx
            && let Err(TrySendError::Full(_)) = tx.try_send(grant)
        {
            stderr_line("gatehouse-egress: the nftables writer is behind; a DNS answer's kernel passes were dropped (the transparent listener decides them)".into());
        }
    }

    /// After a change in force: revokes the passes and cuts the flows the
    /// policies now in force no longer allow (`before`: the sources held
    /// before the change; `only`: the sandboxes it touched). See
    /// [`Registry::revise`].
    pub fn revise(&self, before: &[IpAddr], only: Option<&std::collections::HashSet<String>>) {
        if let Some(r) = &self.registry {
            let (passes, flows) = r.revise(before, only);
            if passes + flows > 0 {
                stderr_line(format!(
                    "gatehouse-egress: revoked {passes} kernel passes and cut {flows} kernel-passed flows the policies in force no longer allow"
                ));
            }
        }
    }

    /// Whether kernel-passed flows are kept while established (and cut on
    /// revocation): `conntrack` is there.
    pub fn conntrack(&self) -> bool {
        self.registry.as_ref().is_some_and(|r| r.conntrack())
    }

    /// How many passes sandbox `id` holds.
    pub fn held(&self, id: &str) -> usize {
        self.registry.as_ref().map_or(0, |r| r.held(id))
    }
}

/// Applies what arrives, a few milliseconds' worth at a time.
fn writer(rx: &Receiver<Grant>, registry: &Registry) {
    while let Ok(first) = rx.recv() {
        std::thread::sleep(Duration::from_millis(2));
        let mut batch = vec![first];
        let mut n = batch.iter().map(|g| g.passes.len()).sum::<usize>();
        while let Ok(more) = rx.try_recv() {
            n += more.passes.len();
            batch.push(more);
            if n > 4096 {
                break;
            }
        }
        registry.grant(batch);
    }
}

/// The passes for `sources` (a sandbox's addresses) to `addrs` on `ports`
/// for `ttl`.
pub fn passes(sources: &[IpAddr], addrs: &[IpAddr], ports: &[u16], ttl: Duration) -> Vec<Pass> {
    let ttl = u32::try_from(ttl.min(MAX_TTL).as_secs())
        .unwrap_or(1)
        .max(1);
    let mut out = Vec::new();
    for &source in sources {
        for &addr in addrs {
            let addr = super::table::canonical(addr);
            if source.is_ipv4() != addr.is_ipv4() {
                continue;
            }
            for &port in ports {
                out.push(Pass {
                    source,
                    addr,
                    port,
                    ttl,
                });
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_named_ports_the_policy_allows_pass_never_http_or_tls() {
        let set = gatehouse::PolicySet::from_source(
            "p.policy",
            "policy p {\n  network {\n    allow domain ssh.test port 22, 443, 80\n    allow domain db.test port 5432-5434\n    deny domain db.test port 5433\n    allow domain web.test\n    allow domain **.test port 22\n    allow domain any.test\n  }\n}\n",
        )
        .unwrap();
        let p = set.single().unwrap();
        let a: Vec<IpAddr> = vec!["11.0.0.3".parse().unwrap()];
        assert_eq!(ports_for(p, "ssh.test", &a), [22]);
        assert_eq!(ports_for(p, "db.test", &a), [22, 5432, 5434]);
        // `allow domain web.test` comes before `allow domain **.test port
        // 22`; the order does not matter (issue 52, finding 8): 22 passes.
        assert_eq!(ports_for(p, "web.test", &a), [22]);
        assert_eq!(ports_for(p, "else.test", &a), [22]);
        assert!(ports_for(p, "other.example", &a).is_empty());
        // A non-public answer is refused by `resolved` under `local deny`.
        let private: Vec<IpAddr> = vec!["10.0.0.3".parse().unwrap()];
        assert!(ports_for(p, "ssh.test", &private).is_empty());
        // The order of the rules does not matter (issue 52, finding 8): a
        // rule for every port before the one with the port list.
        for text in [
            "policy p {\n  network {\n    allow domain ssh.test\n    allow domain ssh.test port 22\n  }\n}\n",
            "policy p {\n  network {\n    allow domain ssh.test port 22\n    allow domain ssh.test\n  }\n}\n",
            "policy p {\n  network {\n    allow domain **.test\n    allow domain ssh.test port 22\n  }\n}\n",
        ] {
            let set = gatehouse::PolicySet::from_source("o.policy", text).unwrap();
            assert_eq!(
                ports_for(set.single().unwrap(), "ssh.test", &a),
                [22],
                "{text}"
            );
            assert!(
                ports_for(set.single().unwrap(), "web.test", &a).is_empty(),
                "{text}"
            );
        }
        let src: Vec<IpAddr> = vec!["10.200.1.2".parse().unwrap(), "fd00::2".parse().unwrap()];
        let ps = passes(&src, &a, &[22], Duration::from_millis(10));
        assert_eq!(ps.len(), 1);
        assert_eq!(ps.first().map(|p| p.ttl), Some(1));
        let json = crate::host::nft::to_json(&crate::host::nft::passes(&ps)).unwrap();
        assert!(
            json.contains("\"concat\":[\"10.200.1.2\",\"11.0.0.3\",22]"),
            "{json}"
        );
    }
}
