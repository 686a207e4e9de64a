//! Host mode's resolver: every question decided with the policy of the
//! sandbox it comes from (an address of no sandbox is refused), and what
//! each answer gave kept for that sandbox — for the transparent listener
//! ([`super::answered`]) and the kernel ([`super::kernel`]).

use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::kernel::{self, Kernel};
use super::table::SandboxTable;
use crate::dns::{Given, Route};
use crate::policy::Policies;

/// The route of host mode's resolver.
pub struct HostRoute {
    /// The sandbox table in force.
    pub table: Arc<ArcSwap<SandboxTable>>,
    /// The writer of the DNS-fed sets.
    pub kernel: Arc<Kernel>,
}

impl Route for HostRoute {
    fn policies(&self, from: IpAddr) -> Option<Arc<Policies>> {
        self.table.load().lookup(from).map(|s| {
            s.tally.questions.inc();
            s.policies().clone()
        })
    }

    fn client(&self, from: IpAddr) -> crate::listener::Client {
        super::table::client_of(&self.table.load(), from)
    }

    fn given(&self, from: IpAddr, given: &Given) {
        let table = self.table.load();
        let Some(sandbox) = table.lookup(from) else {
            return;
        };
        sandbox
            .answered
            .record(&given.name, &given.addrs, given.ttl);
        let set = sandbox.policies().store.load();
        let Ok(policy) = set.select(sandbox.policies().name.as_deref()) else {
            return;
        };
        let ports = kernel::ports_for(policy, &given.name, &given.addrs);
        if !ports.is_empty() {
            self.kernel.add(
                &sandbox.id,
                &given.name,
                kernel::passes(&sandbox.addresses, &given.addrs, &ports, given.ttl),
            );
        }
    }
}
