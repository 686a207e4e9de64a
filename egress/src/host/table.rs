//! The sandbox table: which source addresses are which sandbox, and the
//! policy each one is decided with (the file format is in [`super`]'s
//! documentation and docs/host.md).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gatehouse::log::{DecisionEvent, DecisionSink};

use crate::gate::Ctx;
use crate::metrics::Metrics;
use crate::policy::{Policies, PolicyError, PolicyOptions};
use crate::resolve::Upstream;

pub use super::addr::canonical;
use super::shards::{Chunks, ShardedMap};
/// The table's file: its shape, and its text as the control API writes it.
#[path = "table_file.rs"]
mod file;
pub(crate) use file::{Entry, File, splice_entry};

/// One sandbox: its id, its source addresses, its policy in force (in the
/// gate's context every front door decides with), and what its resolver
/// answered.
pub struct Sandbox {
    /// The sandbox's id, as decision records and metrics carry it.
    pub id: String,
    /// The id, shared: the key its shares of every cap are counted by.
    pub key: Arc<str>,
    /// Its source addresses (IPv4-mapped IPv6 written as IPv4).
    pub addresses: Vec<IpAddr>,
    /// The gate's context for this sandbox: its policy, swapped live, and
    /// the resolver and counters every sandbox shares.
    pub ctx: Arc<Ctx>,
    /// What its resolver answered, by address.
    pub answered: super::answered::Answered,
    /// Its counters (`sandbox` label on `/metrics`).
    pub tally: Arc<crate::metrics::Tally>,
}

impl Sandbox {
    /// The policy it is decided with.
    pub fn policies(&self) -> &Arc<Policies> {
        &self.ctx.policies
    }
}

/// What every sandbox of a table shares: the options every policy is
/// opened with (the decision log, trusted keys), the counters, the
/// upstream resolver, and the way out.
#[derive(Clone)]
pub struct Shared {
    /// The options each sandbox's policy is opened with; its path and
    /// policy name are each sandbox's own.
    pub options: PolicyOptions,
    /// The daemon's counters.
    pub metrics: Arc<Metrics>,
    /// The upstream resolver and its vetted answers.
    pub resolver: Arc<Upstream>,
    /// Deadlines for first bytes, kept-alive connections and tunnels.
    pub timeouts: crate::relay::Timeouts,
    /// Client connections open at once on the transparent listener.
    pub max_connections: usize,
    /// OpenTelemetry export: each sandbox's decisions carry its id.
    pub telemetry: gatehouse_otel::Telemetry,
}

/// A decision sink that writes each record with the sandbox's id.
struct Tagged {
    id: String,
    inner: Arc<dyn DecisionSink>,
}

impl Tagged {
    fn tag(&self, mut v: serde_json::Value) -> serde_json::Value {
        if let Some(o) = v.as_object_mut() {
            o.insert("sandbox".into(), serde_json::Value::from(self.id.as_str()));
        }
        v
    }
}

impl DecisionSink for Tagged {
    fn record(&self, event: &DecisionEvent<'_>) {
        if let Ok(v) = serde_json::to_value(event) {
            self.inner.record_other(&self.tag(v));
        }
    }

    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn record_other(&self, record: &serde_json::Value) {
        self.inner.record_other(&self.tag(record.clone()));
    }
}

/// Every sandbox of the host, by source address. Its list and maps are
/// in pieces a copy shares (`host/shards.rs`): an edit of one sandbox
/// copies what it touches, not the table.
#[derive(Default, Clone)]
pub struct SandboxTable {
    networks: Vec<ipnet::IpNet>,
    interfaces: Vec<String>,
    sandboxes: Chunks<Arc<Sandbox>>,
    by_address: ShardedMap<IpAddr, Arc<Sandbox>>,
    by_id: ShardedMap<Arc<str>, Arc<Sandbox>>,
}

/// Why a sandbox table was refused. Each variant names the file, and the
/// sandbox where there is one; nothing of a refused table is put in force.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The table could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error reading it.
        source: std::io::Error,
    },
    /// Another user than root and the daemon's could change the table
    /// (docs/host.md, "Files the daemon trusts").
    #[error(transparent)]
    Untrusted(Box<crate::policy::Untrusted>),
    /// Not a table of this shape (TOML syntax, an unknown key, a wrong type).
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A sandbox's entry is wrong: its id, an address, or a duplicate.
    #[error("{path}: sandbox `{id}`: {problem}")]
    Sandbox {
        /// The file.
        path: PathBuf,
        /// The sandbox.
        id: String,
        /// What is wrong.
        problem: String,
    },
    /// An `interfaces` entry is not an interface name or pattern.
    #[error(
        "{path}: interfaces: `{interface}` is not an interface name (1 to 15 letters, digits, `-`, `_`, `.`, `@`, `:` or `+`, optionally ending in `*`)"
    )]
    Interface {
        /// The file.
        path: PathBuf,
        /// The entry.
        interface: String,
    },
    /// A `networks` entry is not an IP prefix.
    #[error("{path}: networks: `{network}` is not an IP prefix (10.200.0.0/16)")]
    Network {
        /// The file.
        path: PathBuf,
        /// The entry.
        network: String,
    },
    /// A sandbox's policy could not be put in force.
    #[error("{path}: sandbox `{id}`: {source}")]
    Policy {
        /// The file.
        path: PathBuf,
        /// The sandbox.
        id: String,
        /// Why its policy was refused.
        source: PolicyError,
    },
}

/// Whether `name` is an interface name the kernel could have (1 to 15
/// bytes of letters, digits, `-_.@:+`), or such a prefix followed by `*`
/// (nft's wildcard).
pub fn valid_interface(name: &str) -> bool {
    let stem = name.strip_suffix('*').unwrap_or(name);
    (1..=15).contains(&name.len())
        && !stem.is_empty()
        && stem != "."
        && stem != ".."
        && stem
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.@:+".contains(&c))
}

/// Whose share a source address counts against in host mode: its
/// sandbox's (every cap is per sandbox), else the address's own.
pub fn client_of(table: &SandboxTable, ip: IpAddr) -> crate::listener::Client {
    match table.lookup(ip) {
        Some(s) => crate::listener::Client::Sandbox(s.key.clone()),
        None => crate::listener::Client::Addr(ip),
    }
}

/// Why host mode with nftables refuses a table without `interfaces`.
pub const NO_INTERFACES: &str = "the sandbox table names no `interfaces`: host mode holds whatever arrives on the host-side interfaces of the sandboxes (their veth peers or TAP devices, or the bridge they sit on and its ports), whatever its source address says; list them, e.g. interfaces = [\"veth-sbx*\"] or [\"br-sbx\", \"veth*\"] (docs/host.md)";

/// The longest sandbox id (it names nftables sets and metric labels).
pub const MAX_ID: usize = 32;

/// Whether `id` may name a sandbox: 1 to [`MAX_ID`] ASCII letters, digits,
/// `-` and `_`.
pub fn valid_id(id: &str) -> bool {
    (1..=MAX_ID).contains(&id.len())
        && id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

/// A source address a sandbox may have: one host, not unspecified,
/// loopback, multicast or broadcast (those are never a sandbox's own).
fn usable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified() || v4.is_loopback() || v4.is_multicast() || v4.is_broadcast())
        }
        IpAddr::V6(v6) => !(v6.is_unspecified() || v6.is_loopback() || v6.is_multicast()),
    }
}

impl SandboxTable {
    /// Reads the table at `path` and opens every sandbox's policy (relative
    /// policy paths are read from the table's directory). `options` is
    /// what every sandbox's policy shares (the decision log, trusted keys);
    /// its path and policy name are each sandbox's own.
    ///
    /// A sandbox of `previous` whose id, addresses, policy file and policy
    /// name are unchanged is kept as it is (its policy in force, what its
    /// resolver answered, its open connections).
    pub fn load(
        path: &Path,
        shared: &Shared,
        previous: Option<&SandboxTable>,
    ) -> Result<SandboxTable, HostError> {
        SandboxTable::build(path, &File::read(path)?, shared, previous)
    }

    /// [`SandboxTable::load`] of the table file `path` as already read.
    pub(crate) fn build(
        path: &Path,
        file: &File,
        shared: &Shared,
        previous: Option<&SandboxTable>,
    ) -> Result<SandboxTable, HostError> {
        let base = path.parent().unwrap_or(Path::new("."));
        let mut table = SandboxTable::default();
        for n in &file.networks {
            let net = n.parse::<ipnet::IpNet>().map_err(|_| HostError::Network {
                path: path.to_path_buf(),
                network: n.clone(),
            })?;
            table.networks.push(net.trunc());
        }
        for name in &file.interfaces {
            if !valid_interface(name) {
                return Err(HostError::Interface {
                    path: path.to_path_buf(),
                    interface: name.clone(),
                });
            }
            if !table.interfaces.contains(name) {
                table.interfaces.push(name.clone());
            }
        }
        for entry in &file.sandbox {
            let sandbox = table.enter(path, base, entry, shared, previous)?;
            table.sandboxes.push(sandbox);
        }
        Ok(table)
    }

    /// The sandbox of `entry`, entered into the maps (not into the list):
    /// `previous`'s own when its id, addresses, policy file and policy
    /// name are unchanged, else opened afresh. Refused: an invalid id, one
    /// the table has already, an address that cannot be a sandbox's or is
    /// another's.
    fn enter(
        &mut self,
        path: &Path,
        base: &Path,
        entry: &Entry,
        shared: &Shared,
        previous: Option<&SandboxTable>,
    ) -> Result<Arc<Sandbox>, HostError> {
        let problem = |problem: String| HostError::Sandbox {
            path: path.to_path_buf(),
            id: entry.id.clone(),
            problem,
        };
        if !valid_id(&entry.id) {
            return Err(problem(format!(
                "an id is 1 to {MAX_ID} letters, digits, `-` and `_`"
            )));
        }
        if self.by_id.contains_key(entry.id.as_str()) {
            return Err(problem("a second sandbox with this id".into()));
        }
        let addresses = self.addresses_of(entry, shared).map_err(problem)?;
        let policy_path = base.join(&entry.policy);
        let kept = previous.and_then(|p| p.get(&entry.id)).filter(|s| {
            s.addresses == addresses
                && s.policies().path == policy_path
                && s.policies().name == entry.policy_name
        });
        let sandbox = match kept {
            Some(kept) => kept.clone(),
            None => Sandbox::open(
                path,
                policy_path,
                entry.clone(),
                addresses,
                shared,
                previous,
            )?,
        };
        for ip in &sandbox.addresses {
            self.by_address.insert(*ip, sandbox.clone());
        }
        self.by_id.insert(sandbox.key.clone(), sandbox.clone());
        Ok(sandbox)
    }

    /// This table with the entry of sandbox `id` changed to `entry` (added
    /// when it had none; `None`: removed), as [`SandboxTable::build`]
    /// would make it from the file with that one entry changed: every
    /// other sandbox is kept as it is (the same `Arc`) and in its place,
    /// without reading its entry again, and the pieces of the maps and
    /// list it does not touch are shared, so a change costs the same
    /// whatever the number of sandboxes.
    pub(crate) fn edit(
        &self,
        path: &Path,
        id: &str,
        entry: Option<&Entry>,
        shared: &Shared,
    ) -> Result<SandboxTable, HostError> {
        let mut table = self.clone();
        let old = table.by_id.remove(id);
        if let Some(old) = &old {
            for ip in &old.addresses {
                table.by_address.remove(ip);
            }
        }
        let is_old = |s: &Arc<Sandbox>| old.as_ref().is_some_and(|o| Arc::ptr_eq(o, s));
        let Some(entry) = entry else {
            table.sandboxes.remove(is_old);
            return Ok(table);
        };
        if entry.id != id {
            return Err(HostError::Sandbox {
                path: path.to_path_buf(),
                id: entry.id.clone(),
                problem: format!("the edit is of sandbox `{id}`"),
            });
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let sandbox = table.enter(path, base, entry, shared, Some(self))?;
        if !table.sandboxes.replace(is_old, sandbox.clone()) {
            table.sandboxes.push(sandbox);
        }
        Ok(table)
    }

    /// An entry's addresses, canonical and without repeats; why not, where
    /// one cannot be a sandbox's source or is already another's.
    fn addresses_of(&self, entry: &Entry, shared: &Shared) -> Result<Vec<IpAddr>, String> {
        if entry.addresses.is_empty() {
            return Err("no addresses: it could never be told apart".into());
        }
        let mut addresses = Vec::new();
        for text in &entry.addresses {
            let ip = text
                .parse::<IpAddr>()
                .map(canonical)
                .map_err(|_| format!("`{text}` is not an IP address"))?;
            if !usable(ip) {
                return Err(format!("`{text}` cannot be a sandbox's source address"));
            }
            // An address the daemon depends on is no sandbox's: every
            // sandbox's DNS would then go nowhere.
            if ip == canonical(shared.resolver.server.ip()) {
                return Err(format!(
                    "`{text}` is the daemon's upstream resolver (--upstream-dns): no sandbox may have it"
                ));
            }
            if let Some(other) = self.by_address.get(&ip) {
                return Err(format!("`{text}` is already sandbox `{}`'s", other.id));
            }
            if !addresses.contains(&ip) {
                addresses.push(ip);
            }
        }
        Ok(addresses)
    }

    /// The host-side interfaces sandbox traffic arrives on.
    pub fn interfaces(&self) -> &[String] {
        &self.interfaces
    }

    /// The sandbox a connection or question from `source` comes from;
    /// `None` (deny) for an address of no sandbox.
    pub fn lookup(&self, source: IpAddr) -> Option<&Arc<Sandbox>> {
        self.by_address.get(&canonical(source))
    }

    /// The prefixes sandboxes live in.
    pub fn networks(&self) -> &[ipnet::IpNet] {
        &self.networks
    }

    /// Whether `ip` is inside one of the table's networks.
    pub fn covers(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.networks.iter().any(|n| n.contains(&ip))
    }

    /// The sandbox with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<Sandbox>> {
        self.by_id.get(id)
    }

    /// Every sandbox, in the table's order.
    pub fn sandboxes(&self) -> impl Iterator<Item = &Arc<Sandbox>> {
        self.sandboxes.iter()
    }

    /// How many sandboxes the table holds.
    pub fn len(&self) -> usize {
        self.sandboxes.len()
    }

    /// Whether the table holds no sandbox.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Sandbox {
    /// A sandbox opened afresh from its table entry (`table` is the table
    /// file, for errors): its decision log or telemetry tagged with its id,
    /// its counters kept from `previous`, its policy opened — and refused if
    /// it is a signed bundle older than the one `previous` had in force.
    fn open(
        table: &Path,
        policy_path: PathBuf,
        entry: Entry,
        addresses: Vec<IpAddr>,
        shared: &Shared,
        previous: Option<&SandboxTable>,
    ) -> Result<Arc<Sandbox>, HostError> {
        let before = previous.and_then(|p| p.get(&entry.id));
        let log = shared.options.log.clone().map(|inner| {
            Arc::new(Tagged {
                id: entry.id.clone(),
                inner,
            }) as Arc<dyn DecisionSink>
        });
        let log =
            match (log, shared.telemetry.is_on()) {
                (log, false) => log,
                (None, true) => Some(shared.telemetry.sink_with("gatehouse.sandbox", &entry.id)
                    as Arc<dyn DecisionSink>),
                (Some(json), true) => Some(Arc::new(gatehouse::log::Tee(vec![
                    json,
                    shared.telemetry.sink_with("gatehouse.sandbox", &entry.id),
                ])) as Arc<dyn DecisionSink>),
            };
        // A sandbox that changed keeps its counters (its policy moved
        // into the state directory, its addresses edited): `/metrics`
        // counts per sandbox id, not per table entry.
        let tally = before.map_or_else(
            || Arc::new(crate::metrics::Tally::default()),
            |s| s.tally.clone(),
        );
        let policies = Policies::open(
            PolicyOptions {
                path: policy_path,
                name: entry.policy_name.clone(),
                log,
                tally: Some(tally.clone()),
                telemetry: shared.telemetry.clone(),
                sandbox: Some(entry.id.clone()),
                ..shared.options.clone()
            },
            shared.metrics.clone(),
        )
        .map_err(|source| HostError::Policy {
            path: table.to_path_buf(),
            id: entry.id.clone(),
            source,
        })?;
        // The serial check holds on every path a policy enters: a
        // sandbox whose entry changed (and so is opened afresh) may not
        // go back to a bundle older than the one it had in force.
        if !shared.options.trusted.is_empty()
            && let Some(before) = before
        {
            let (now, was) = (policies.newest_serial(), before.policies().newest_serial());
            if now < was {
                return Err(HostError::Sandbox {
                    path: table.to_path_buf(),
                    id: entry.id,
                    problem: format!(
                        "its policy is a bundle older (serial {now}) than the one in force (serial {was}): a rollback, refused"
                    ),
                });
            }
        }
        let ctx = Arc::new(Ctx {
            policies: Arc::new(policies),
            resolver: shared.resolver.clone(),
            upstream_proxy: None,
            timeouts: shared.timeouts,
            pool: crate::pool::Pool::new(shared.metrics.clone(), 0),
            metrics: shared.metrics.clone(),
            max_connections: shared.max_connections,
        });
        Ok(Arc::new(Sandbox {
            key: Arc::from(entry.id.as_str()),
            id: entry.id,
            addresses,
            ctx,
            answered: super::answered::Answered::default(),
            tally,
        }))
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
