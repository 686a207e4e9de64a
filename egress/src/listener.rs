//! Accepting connections: a cap on open connections per listener, a back-off
//! when the process is out of descriptors, and the descriptor budget checked
//! at start.
//!
//! No client takes the whole cap: one source address holds at most a
//! quarter of a listener's connections ([`share`]); a connection over its
//! client's share is closed as soon as it is accepted (issue 35, finding 7).
//!
//! An `accept()` that fails with EMFILE or ENFILE leaves the connection in
//! the kernel's queue, so retrying at once spins on the same error: the loop
//! sleeps instead (doubling from 5 ms to 500 ms), and the cap keeps the
//! proxy's own connections from getting there in the first place.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use crate::metrics::Metrics;

/// The most connections of one listener a single client (source address)
/// may hold at once: a quarter of the listener's cap, at least one.
pub fn share(cap: usize) -> usize {
    (cap / 4).max(1)
}

/// Whose connections (or questions) count together against a share: a
/// source address, or in host mode a sandbox, whatever addresses it uses
/// (docs/host.md, "Shares per sandbox").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    /// One source address (IPv4-mapped IPv6 counts as IPv4).
    Addr(IpAddr),
    /// One sandbox, by id.
    Sandbox(Arc<str>),
}

/// What each client holds, for [`share`]; a client leaves the map with
/// its last hold.
#[derive(Default)]
pub(crate) struct Clients(Mutex<HashMap<Client, usize>>);

/// One client's hold, counted until dropped.
pub(crate) struct Held(Arc<Clients>, Client);

impl Clients {
    /// Counts a hold of `client`, unless it already holds `share`.
    pub(crate) fn hold(self: &Arc<Self>, client: Client, share: usize) -> Option<Held> {
        let mut m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = m.entry(client.clone()).or_insert(0);
        if *n >= share {
            return None;
        }
        *n += 1;
        Some(Held(self.clone(), client))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut m = (self.0)
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = m.get_mut(&self.1) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

/// Accepts on `listener` until the runtime ends, each connection handled on
/// its own task, at most `cap` at once (more wait in the kernel's accept
/// queue) and at most [`share`]`(cap)` of one client — one source address
/// (more are closed at once).
pub fn accept_loop<F, Fut>(listener: TcpListener, cap: usize, metrics: Arc<Metrics>, handle: F)
where
    F: Fn(TcpStream, SocketAddr) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    accept_loop_by(listener, cap, metrics, Arc::default(), Client::Addr, handle);
}

/// [`accept_loop`], with `client` telling whose a source address is (host
/// mode: a sandbox's, so that a sandbox with four addresses holds one
/// share, not four) and `clients` the holds counted, which listeners of
/// one service share (the IPv4 and IPv6 listeners of one port).
pub(crate) fn accept_loop_by<K, F, Fut>(
    listener: TcpListener,
    cap: usize,
    metrics: Arc<Metrics>,
    clients: Arc<Clients>,
    client: K,
    handle: F,
) where
    K: Fn(IpAddr) -> Client + Send + 'static,
    F: Fn(TcpStream, SocketAddr) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(cap.max(1)));
    let per_client = share(cap.max(1));
    tokio::spawn(async move {
        let mut backoff = Duration::ZERO;
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            match listener.accept().await {
                Ok((s, peer)) => {
                    backoff = Duration::ZERO;
                    // IPv4-mapped peers (a dual-stack listener) count as
                    // their IPv4 address.
                    let ip = gatehouse::normalize::canonical_ip(peer.ip());
                    let Some(held) = clients.hold(client(ip), per_client) else {
                        metrics.client_share_refusals.inc();
                        drop(s);
                        drop(permit);
                        continue;
                    };
                    let work = handle(s, peer);
                    let m = metrics.clone();
                    m.open_connections.inc();
                    tokio::spawn(async move {
                        work.await;
                        m.open_connections.dec();
                        drop(held);
                        drop(permit);
                    });
                }
                Err(e) => {
                    drop(permit);
                    if out_of_resources(&e) {
                        metrics.accept_backoffs.inc();
                        backoff = (backoff * 2)
                            .clamp(Duration::from_millis(5), Duration::from_millis(500));
                        tokio::time::sleep(backoff).await;
                    }
                    // Anything else (a connection reset before it was
                    // accepted) concerns that connection only.
                }
            }
        }
    });
}

/// EMFILE, ENFILE, ENOBUFS, ENOMEM: retrying at once would fail again.
fn out_of_resources(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(23 | 24 | 105 | 12))
}

/// The descriptors the proxy may need at once with `cap` connections per
/// listener: two per HTTP connection (client and upstream), three per SOCKS
/// connection (a UDP relay adds one), one per DNS-over-TCP connection, the
/// idle upstream pool (at most `cap` connections), and a reserve for the listeners, the log and the
/// resolver.
pub fn descriptors_needed(
    cap: usize,
    socks: bool,
    dns_tcp_cap: Option<usize>,
    pool_cap: usize,
) -> u64 {
    let per = 2 + if socks { 3 } else { 0 };
    (per * cap + dns_tcp_cap.unwrap_or(0) + pool_cap.min(cap) + 64) as u64
}

/// A connection cap the descriptor limit cannot hold: what was asked, what
/// it needs, and how to raise the limit.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CapError(String);

/// The connection cap per listener: `asked` if the descriptor limit (raised
/// to the hard limit first) holds it, else an error; when nothing was
/// asked, the default cap or the largest that the limit holds, whichever is
/// smaller (at least 16).
pub fn connection_cap(
    asked: Option<usize>,
    default: usize,
    socks: bool,
    dns_tcp_cap: Option<usize>,
    pool_cap: usize,
) -> Result<usize, CapError> {
    let limit = raise_descriptor_limit();
    let needed = |cap| descriptors_needed(cap, socks, dns_tcp_cap, pool_cap);
    match asked {
        Some(cap) if needed(cap) > limit => Err(CapError(format!(
            "--max-connections {cap} needs up to {} file descriptors, but the limit is {limit} \
             (raise it with `ulimit -n`, or lower --max-connections)",
            needed(cap)
        ))),
        Some(cap) => Ok(cap),
        None => {
            let mut cap = default;
            while cap > 16 && needed(cap) > limit {
                cap /= 2;
            }
            if needed(cap) > limit {
                return Err(CapError(format!(
                    "the descriptor limit {limit} is too low to serve even {cap} connections (raise it with `ulimit -n`)"
                )));
            }
            Ok(cap)
        }
    }
}

/// Raises the soft descriptor limit to the hard one; the limit in force.
pub fn raise_descriptor_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let lim = getrlimit(Resource::Nofile);
    let hard = lim.maximum;
    if lim.current != hard {
        // Best effort: a refusal leaves the soft limit, checked below.
        let _ = setrlimit(
            Resource::Nofile,
            rustix::process::Rlimit {
                current: hard,
                maximum: hard,
            },
        );
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}
