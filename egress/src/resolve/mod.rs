//! Resolution: the upstream DNS client that the resolver and the proxy
//! share, and the table of vetted answers ([`cache`]).
//!
//! One UDP socket carries every question; answers are matched to questions
//! by a random id *and* the question they repeat, and only the configured
//! server's are read (the socket is connected to it). At most
//! [`MAX_INFLIGHT`] questions wait at once, each at most [`TIMEOUT`]: a name
//! that never answers costs a table entry for three seconds, not a
//! descriptor.

pub mod cache;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gatehouse_wire::dns::{follow, is_loopback_name};
use hickory_proto::op::{Message, MessageType, OpCode};
use hickory_proto::rr::{Name, RecordType};
use tokio::net::UdpSocket;
use tokio::sync::{Semaphore, oneshot};

use crate::metrics::Metrics;
use crate::resolve::cache::Vetted;

/// How long a question waits for its answer.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// Questions waiting upstream at once; more are answered SERVFAIL.
pub const MAX_INFLIGHT: usize = 1024;

struct Waiter {
    name: Name,
    kind: RecordType,
    tx: oneshot::Sender<Message>,
}

type Waiting = Arc<Mutex<HashMap<u16, Waiter>>>;

/// The upstream server, the shared socket, and the vetted answers.
/// Why a name could not be resolved upstream.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// Too many questions are already waiting for the upstream server.
    #[error("too many questions in flight")]
    Busy,
    /// No answer within the deadline.
    #[error("upstream DNS timed out")]
    Timeout,
    /// The upstream socket's reader is gone.
    #[error("upstream DNS gone")]
    Gone,
    /// An answer's CNAME chain does not lead to the name's addresses.
    #[error("a broken CNAME chain")]
    BrokenChain,
    /// Not a name DNS can carry.
    #[error("`{0}` is not a DNS name")]
    BadName(String),
    /// The question could not be encoded.
    #[error("cannot encode the question: {0}")]
    Encode(String),
    /// The question could not be sent.
    #[error("cannot send to the upstream server: {0}")]
    Send(std::io::Error),
    /// A lock was poisoned by a panic elsewhere.
    #[error("the question table is poisoned")]
    Poisoned,
}

/// The upstream DNS server and the answers vetted from it.
pub struct Upstream {
    /// The server's address.
    pub server: SocketAddr,
    /// The vetted answers.
    pub vetted: Vetted,
    sock: Arc<UdpSocket>,
    waiting: Waiting,
    slots: Semaphore,
    /// What each client's questions hold of `slots` (a quarter at most).
    clients: Arc<crate::listener::Clients>,
    metrics: Arc<Metrics>,
}

/// Addresses for a host, and the fresh answers they came from (to be
/// remembered once the policy has accepted them).
pub struct Resolution {
    /// The addresses, in answer order.
    pub addrs: Vec<IpAddr>,
    /// The host was an IP literal: its address is itself, and no answer
    /// needs the `resolved` check.
    pub literal: bool,
    /// The host was `localhost` or a name under it: its addresses are the
    /// loopback ones, asked of no one (RFC 6761 §6.3), and each is checked
    /// apart (the policy may allow one and not the other).
    pub loopback: bool,
    fresh: Vec<(RecordType, Vec<IpAddr>, Duration)>,
}

fn rand_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::Instant::now().elapsed().as_nanos());
    h.finish() as u16
}

impl Upstream {
    /// Binds the shared socket, connected to `server`, and starts reading
    /// its answers.
    pub async fn new(server: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<Upstream> {
        let bind: SocketAddr = if server.is_ipv4() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
        };
        let sock = Arc::new(UdpSocket::bind(bind).await?);
        sock.connect(server).await?;
        let waiting: Waiting = Arc::default();
        let (s, w) = (sock.clone(), waiting.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65_535];
            loop {
                let n = match s.recv(&mut buf).await {
                    Ok(n) => n,
                    // An ICMP error surfaces as a failed read: keep going.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                };
                let Ok(r) = Message::from_vec(buf.get(..n).unwrap_or_default()) else {
                    continue;
                };
                let Ok(mut waiting) = w.lock() else { return };
                let matches = waiting.get(&r.metadata.id).is_some_and(|wt| {
                    r.metadata.message_type == MessageType::Response
                        && matches!(r.queries.as_slice(), [q] if q.query_type() == wt.kind && *q.name() == wt.name)
                });
                if matches && let Some(wt) = waiting.remove(&r.metadata.id) {
                    let _ = wt.tx.send(r);
                }
            }
        });
        Ok(Upstream {
            server,
            vetted: Vetted::new(metrics.clone()),
            sock,
            waiting,
            slots: Semaphore::new(MAX_INFLIGHT),
            clients: Arc::default(),
            metrics,
        })
    }

    /// [`Upstream::ask`] for a resolver's client: no client holds more than
    /// a quarter of the questions waiting upstream, so one client's flood
    /// (a slow zone asked thousands of times a second) never makes the
    /// others' questions fail.
    pub async fn ask_for(
        &self,
        client: crate::listener::Client,
        name: &Name,
        kind: RecordType,
    ) -> Result<Message, LookupError> {
        let _share = self
            .clients
            .hold(client, crate::listener::share(MAX_INFLIGHT))
            .ok_or(LookupError::Busy)?;
        self.ask(name, kind).await
    }

    /// Asks the upstream server one question; its response, whose id and
    /// question match.
    pub async fn ask(&self, name: &Name, kind: RecordType) -> Result<Message, LookupError> {
        let _slot = self.slots.try_acquire().map_err(|_| LookupError::Busy)?;
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut waiting = self.waiting.lock().map_err(|_| LookupError::Poisoned)?;
            let mut id = rand_id();
            while waiting.contains_key(&id) {
                id = id.wrapping_add(rand_id() | 1);
            }
            waiting.insert(
                id,
                Waiter {
                    name: name.clone(),
                    kind,
                    tx,
                },
            );
            id
        };
        // Whatever happens, the question leaves the table.
        struct Leave<'a>(&'a Waiting, u16, &'a Metrics);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                if let Ok(mut w) = self.0.lock() {
                    w.remove(&self.1);
                }
                self.2.dns_upstream_inflight.dec();
            }
        }
        self.metrics.dns_upstream_inflight.inc();
        let _leave = Leave(&self.waiting, id, &self.metrics);
        let mut q = Message::new(id, MessageType::Query, OpCode::Query);
        q.metadata.recursion_desired = true;
        q.add_query(hickory_proto::op::Query::query(name.clone(), kind));
        let bytes = q.to_vec().map_err(|e| LookupError::Encode(e.to_string()))?;
        self.sock.send(&bytes).await.map_err(LookupError::Send)?;
        tokio::time::timeout(TIMEOUT, rx)
            .await
            .map_err(|_| LookupError::Timeout)?
            .map_err(|_| LookupError::Gone)
    }

    /// The A then AAAA addresses of `name` (CNAME chains followed, records
    /// of other owners dropped), and the fresh answers they came from.
    pub async fn lookup(&self, name: &str) -> Result<Resolution, LookupError> {
        let fq = Name::from_ascii(format!("{}.", name.trim_end_matches('.')))
            .map_err(|_| LookupError::BadName(name.to_string()))?;
        let (a, aaaa) = tokio::join!(
            self.ask(&fq, RecordType::A),
            self.ask(&fq, RecordType::AAAA)
        );
        let mut out = Resolution {
            addrs: Vec::new(),
            literal: false,
            loopback: false,
            fresh: Vec::new(),
        };
        for (kind, r) in [(RecordType::A, a?), (RecordType::AAAA, aaaa?)] {
            let chain = follow(&fq, kind, &r.answers).ok_or(LookupError::BrokenChain)?;
            out.addrs.extend(chain.addrs.iter().copied());
            out.fresh
                .push((kind, chain.addrs, Duration::from_secs(u64::from(chain.ttl))));
        }
        Ok(out)
    }

    /// The addresses the proxy may dial for `host`: a literal is itself;
    /// a name takes the vetted answers, or is looked up now. The caller
    /// checks them with `resolved` and then [`Upstream::remember`]s them.
    pub async fn addresses_for(&self, host: &str) -> Result<Resolution, LookupError> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let fixed = |addrs| Resolution {
            addrs,
            literal: false,
            loopback: false,
            fresh: Vec::new(),
        };
        if let Ok(ip) = bare.parse::<IpAddr>() {
            // Dial what was decided: a mapped or compatible IPv6 literal
            // (`[::ffff:a.b.c.d]`, `[::a.b.c.d]`) is decided as its IPv4
            // address, so it is dialled as that address too.
            return Ok(Resolution {
                literal: true,
                ..fixed(vec![gatehouse::normalize::canonical_ip(ip)])
            });
        }
        // `localhost` and its subdomains are loopback without asking anyone
        // (RFC 6761 §6.3), as every stub resolver does; the policy still
        // needs its exact `allow ip` exceptions for them.
        if is_loopback_name(host) {
            return Ok(Resolution {
                loopback: true,
                ..fixed(vec![
                    IpAddr::from([127, 0, 0, 1]),
                    IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                ])
            });
        }
        if let Some(a) = self.vetted.get(host) {
            return Ok(fixed(a));
        }
        self.lookup(host).await
    }

    /// Keeps a resolution's fresh answers, once the policy has accepted
    /// them.
    pub fn remember(&self, host: &str, r: &Resolution) {
        for (kind, addrs, ttl) in &r.fresh {
            self.vetted.record(host, *kind, addrs, *ttl);
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap_or_default()
    }

    /// Issue 53, item 1: one client's flood of questions that hang upstream
    /// (a slow zone) holds at most a quarter of the wait table; another
    /// client's question still waits for its answer rather than being
    /// refused.
    #[test]
    fn one_clients_flood_never_takes_the_others_share_upstream() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            // A server that never answers: every question waits.
            let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
            let at = silent.local_addr().expect("addr");
            let up = Arc::new(
                Upstream::new(at, Arc::new(Metrics::default()))
                    .await
                    .expect("upstream"),
            );
            let a = crate::listener::Client::Sandbox(Arc::from("a"));
            let b = crate::listener::Client::Sandbox(Arc::from("b"));
            let share = crate::listener::share(MAX_INFLIGHT);
            let mut flood = Vec::new();
            for k in 0..share {
                let (up, a) = (up.clone(), a.clone());
                flood.push(tokio::spawn(async move {
                    up.ask_for(a, &name(&format!("n{k}.slow.test.")), RecordType::A)
                        .await
                }));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            // The flooder is over its share: refused at once.
            let over = up
                .ask_for(a.clone(), &name("more.slow.test."), RecordType::A)
                .await;
            assert!(matches!(over, Err(LookupError::Busy)), "{over:?}");
            // Another client is not: its question waits upstream.
            let other = tokio::time::timeout(
                Duration::from_millis(300),
                up.ask_for(b, &name("fine.test."), RecordType::A),
            )
            .await;
            assert!(
                other.is_err(),
                "refused while another client flooded: {other:?}"
            );
            for f in flood {
                f.abort();
            }
        });
    }
}
