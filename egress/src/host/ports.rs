//! Which ports of an allowed name pass in the kernel (see
//! [`super::kernel`]): every port of an `allow` rule's port list for which
//! `connect NAME:PORT` and `resolved NAME -> ADDRESS` with that port are
//! allowed, at most [`MAX_PORTS`], never 80 or 443.

use std::net::IpAddr;

use gatehouse::Policy;
use gatehouse::query::{QueryRef, Via};

/// The most ports passed in the kernel for one name.
pub const MAX_PORTS: usize = 64;
/// The ports of `policy` passed in the kernel for `name` answered with
/// `addrs`: see the module's documentation.
pub fn ports_for(policy: &Policy, name: &str, addrs: &[IpAddr]) -> Vec<u16> {
    let network = policy.network();
    // The allow rules with a port list: only they pass anything.
    let listed: Vec<_> = network
        .rules
        .iter()
        .filter(|r| r.allow && r.ports.is_some())
        .collect();
    let mut candidates: Vec<u16> = Vec::new();
    'rules: for r in &listed {
        for span in r.ports.iter().flatten() {
            for port in span.lo..=span.hi {
                if candidates.len() >= MAX_PORTS * 4 {
                    break 'rules;
                }
                if port != 80 && port != 443 && !candidates.contains(&port) {
                    candidates.push(port);
                }
            }
        }
    }
    candidates.sort_unstable();
    candidates
        .into_iter()
        .filter(|&port| {
            let d = policy.decide_ref(QueryRef::Connect {
                host: name,
                port,
                via: Via::Https,
            });
            // Allowed, with an allow rule whose port list holds the port
            // naming the name — whichever rule decided, so that the order
            // of the rules does not matter (`allow domain x` before
            // `allow domain x port 22` passes 22 as the reverse order does)
            // — and the answer accepted for the port.
            d.is_allow()
                && listed.iter().any(|r| {
                    r.target.matches_name(name)
                        && r.ports
                            .iter()
                            .flatten()
                            .any(|s| s.lo <= port && port <= s.hi)
                })
                && policy
                    .decide_ref(QueryRef::Resolved {
                        host: name,
                        addrs,
                        port: Some(port),
                    })
                    .is_allow()
        })
        .take(MAX_PORTS)
        .collect()
}
