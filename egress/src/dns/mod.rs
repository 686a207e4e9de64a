//! The filtering DNS resolver (UDP and TCP): a front door beside the
//! proxy's, asking upstream through [`crate::resolve`], which the proxy
//! shares.
//!
//! A question is answered only when the policy allows the name (`dns`), and
//! only with addresses the policy accepts for it (`resolved`): a denied name
//! is never sent upstream, every name of a CNAME chain in the answer is
//! decided with `dns` too, records owned by names off the chain are dropped,
//! and an answer holding one unacceptable address is refused whole. What
//! was answered is recorded, and the proxy dials only addresses that passed
//! the same check — it never resolves again between the check and the
//! connection.

use std::sync::Arc;
use std::time::Duration;

use gatehouse::query::QueryRef;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

use crate::resolve::{Upstream, cache};

use crate::metrics::Metrics;
use crate::outcome::{Outcome, Refusal};
use crate::policy::Policies;

/// DNS-over-TCP connections open at once; more wait in the accept queue.
pub const MAX_TCP_CONNECTIONS: usize = 256;
/// A DNS-over-TCP connection is closed after this long without a complete
/// message (RFC 7766 §6.2.3 recommends seconds).
pub const TCP_IDLE: Duration = Duration::from_secs(10);
/// UDP questions being answered at once; more are dropped (the client asks
/// again).
pub const MAX_UDP_INFLIGHT: usize = 2048;

use gatehouse_wire::dns::{self as wire, refusal as refuse, reply as reply_to};

/// How a DNS message came: over UDP a response must fit the size the
/// client can take (512 bytes, or its EDNS payload size), over TCP any size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UDP.
    Udp,
    /// TCP.
    Tcp,
}

/// Answers one DNS message.
pub async fn answer(
    policies: &Policies,
    upstream: &Upstream,
    bytes: &[u8],
    transport: Transport,
) -> Option<Vec<u8>> {
    answer_given(policies, upstream, bytes, transport)
        .await
        .map(|(bytes, _)| bytes)
}

/// What a response gave the client: the question's name, the addresses
/// (every one accepted by the policy) and the TTL the client may keep them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Given {
    /// The name asked (lower case, no trailing dot).
    pub name: String,
    /// The addresses answered.
    pub addrs: Vec<std::net::IpAddr>,
    /// How long the answer lives.
    pub ttl: Duration,
}

/// [`answer`], and what the response gave the client (`None`: no address,
/// a refusal, or a truncated answer).
pub async fn answer_given(
    policies: &Policies,
    upstream: &Upstream,
    bytes: &[u8],
    transport: Transport,
) -> Option<(Vec<u8>, Option<Given>)> {
    answer_for(policies, upstream, None, bytes, transport).await
}

/// [`answer_given`] for a client of the resolver: its question waits
/// upstream within that client's share ([`Upstream::ask_for`]).
async fn answer_for(
    policies: &Policies,
    upstream: &Upstream,
    client: Option<crate::listener::Client>,
    bytes: &[u8],
    transport: Transport,
) -> Option<(Vec<u8>, Option<Given>)> {
    let q = wire::query(bytes)?;
    policies.metrics.dns_questions.inc();
    let question = match wire::question(&q) {
        Ok(question) => question,
        Err(code) => return Some((refuse(&q, code), None)),
    };
    let kind = question.query_type();
    let name = question.name().to_ascii();
    let mut req = policies.request();
    let what = format!("dns {name} {kind}");
    // Only class IN, and only A and AAAA, and only for allowed names.
    if let Err(why) = wire::answerable(question) {
        req.finish(&what, Outcome::Unanswered(why));
        return Some((refuse(&q, ResponseCode::Refused), None));
    }
    let d = req.decide(QueryRef::Dns { name: &name });
    if !d.is_allow() {
        req.finish(&what, Outcome::Refused(Refusal::Denied(d.reason)));
        return Some((refuse(&q, ResponseCode::Refused), None));
    }
    if wire::is_loopback_name(&name) {
        return Some(loopback(&q, &mut req, &what, &name, kind));
    }
    let asked = match client {
        Some(c) => upstream.ask_for(c, question.name(), kind).await,
        None => upstream.ask(question.name(), kind).await,
    };
    let Ok(r) = asked else {
        req.finish(&what, Outcome::UpstreamFailed);
        return Some((refuse(&q, ResponseCode::ServFail), None));
    };
    let Some(chain) = wire::follow(question.name(), kind, &r.answers) else {
        req.finish(&what, Outcome::BrokenChain);
        return Some((refuse(&q, ResponseCode::ServFail), None));
    };
    // Every name the chain leads through is a name the client resolves.
    for alias in chain.names.iter().skip(1) {
        let d = req.decide(QueryRef::Dns { name: alias });
        if !d.is_allow() {
            req.finish(
                &what,
                Outcome::RefusedAlias {
                    reason: d.reason,
                    alias,
                },
            );
            return Some((refuse(&q, ResponseCode::Refused), None));
        }
    }
    if !chain.addrs.is_empty() {
        let d = req.decide(QueryRef::Resolved {
            host: &name,
            addrs: &chain.addrs,
            port: None,
        });
        if !d.is_allow() {
            req.finish(&what, Outcome::Refused(Refusal::Denied(d.reason)));
            return Some((refuse(&q, ResponseCode::Refused), None));
        }
    }
    // Only answers that passed are kept, and a fresh one replaces the old
    // (an empty one removes it).
    if r.metadata.response_code == ResponseCode::NoError {
        upstream.vetted.record(
            &name,
            kind,
            &chain.addrs,
            Duration::from_secs(u64::from(chain.ttl)),
        );
    }
    let mut out = reply_to(&q, r.metadata.response_code);
    for rec in chain.records {
        out.add_answer(rec);
    }
    let bytes = out.to_vec().ok()?;
    // Over UDP, an answer larger than the client can take is sent empty
    // with TC set, and the client asks again over TCP (RFC 1035 §4.2.1,
    // RFC 6891 §6.2.3), never cut at a record boundary the client cannot
    // see.
    let room = wire::udp_room(&q);
    if transport == Transport::Udp && bytes.len() > room {
        let mut tc = reply_to(&q, r.metadata.response_code);
        tc.metadata.truncation = true;
        req.finish(&what, Outcome::Truncated(chain.addrs.len()));
        return tc.to_vec().ok().map(|b| (b, None));
    }
    req.finish(&what, Outcome::Answered(chain.addrs.len()));
    let given = (r.metadata.response_code == ResponseCode::NoError && !chain.addrs.is_empty())
        .then(|| Given {
            name: cache::key(&name),
            addrs: chain.addrs.clone(),
            ttl: Duration::from_secs(u64::from(chain.ttl)),
        });
    Some((bytes, given))
}

/// How long a loopback answer may be kept.
const LOOPBACK_TTL: u32 = 300;

/// `localhost` and the names under it are the loopback addresses, answered
/// here and never asked upstream (RFC 6761 §6.3), as the proxy dials them:
/// 127.0.0.1 for A, ::1 for AAAA, each checked with `resolved` (a policy
/// that allows one and not the other gets the one it allows).
fn loopback(
    q: &Message,
    req: &mut crate::policy::Request<'_>,
    what: &str,
    name: &str,
    kind: RecordType,
) -> (Vec<u8>, Option<Given>) {
    use hickory_proto::rr::{RData, Record, rdata};
    let Some(question) = q.queries.first() else {
        return (refuse(q, ResponseCode::FormErr), None);
    };
    let (ip, data): (std::net::IpAddr, RData) = match kind {
        RecordType::A => (
            std::net::Ipv4Addr::LOCALHOST.into(),
            RData::A(rdata::A(std::net::Ipv4Addr::LOCALHOST)),
        ),
        _ => (
            std::net::Ipv6Addr::LOCALHOST.into(),
            RData::AAAA(rdata::AAAA(std::net::Ipv6Addr::LOCALHOST)),
        ),
    };
    let d = req.decide(QueryRef::Resolved {
        host: name,
        addrs: &[ip],
        port: None,
    });
    let mut out = reply_to(q, ResponseCode::NoError);
    if !d.is_allow() {
        // The name is allowed, its loopback address of this kind is not:
        // no address of this kind (the other kind may be answered).
        req.finish(
            &what,
            Outcome::Withheld {
                reason: d.reason,
                ip,
            },
        );
        return (out.to_vec().unwrap_or_default(), None);
    }
    out.add_answer(Record::from_rdata(
        question.name().clone(),
        LOOPBACK_TTL,
        data,
    ));
    req.finish(&what, Outcome::AnsweredLoopback);
    let given = Given {
        name: cache::key(name),
        addrs: vec![ip],
        ttl: Duration::from_secs(u64::from(LOOPBACK_TTL)),
    };
    (out.to_vec().unwrap_or_default(), Some(given))
}

/// Where a question is decided: the policy for its source, and what to do
/// with what the answer gave (host mode keeps it per sandbox).
pub trait Route: Send + Sync + 'static {
    /// The policy deciding questions from `from`; `None`: refused without
    /// a decision (host mode: an address of no sandbox).
    fn policies(&self, from: std::net::IpAddr) -> Option<Arc<Policies>>;

    /// Whose share of the resolver's caps a question from `from` counts
    /// against: the address by default, a sandbox in host mode.
    fn client(&self, from: std::net::IpAddr) -> crate::listener::Client {
        crate::listener::Client::Addr(from)
    }

    /// Called with what an answer gave `from` (nothing by default).
    fn given(&self, from: std::net::IpAddr, given: &Given) {
        let _ = (from, given);
    }
}

/// One policy for every source: the daemon's own resolver.
impl Route for Arc<Policies> {
    fn policies(&self, _: std::net::IpAddr) -> Option<Arc<Policies>> {
        Some(self.clone())
    }
}

/// Answers one message from `from` as `route` decides it.
async fn routed<R: Route>(
    route: &R,
    upstream: &Upstream,
    from: std::net::IpAddr,
    bytes: &[u8],
    transport: Transport,
) -> Option<Vec<u8>> {
    let Some(policies) = route.policies(from) else {
        return wire::query(bytes).map(|q| refuse(&q, ResponseCode::Refused));
    };
    let client = Some(route.client(from));
    let (out, given) = answer_for(&policies, upstream, client, bytes, transport).await?;
    if let Some(g) = given {
        route.given(from, &g);
    }
    Some(out)
}

/// Serves DNS on `sock` (UDP) and `tcp` until the runtime ends, each
/// question decided with the policy `route` gives its source.
pub fn serve<R: Route>(
    route: Arc<R>,
    upstream: Arc<Upstream>,
    sock: UdpSocket,
    tcp: TcpListener,
    metrics: Arc<Metrics>,
) {
    let sock = Arc::new(sock);
    let (p, u) = (route.clone(), upstream.clone());
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_UDP_INFLIGHT));
    // No client holds more than a quarter of the questions in flight.
    let clients = Arc::new(crate::listener::Clients::default());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                continue;
            };
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                continue; // busy: dropped, the client asks again
            };
            let share = crate::listener::share(MAX_UDP_INFLIGHT);
            let Some(held) = clients.hold(p.client(from.ip()), share) else {
                continue; // over its share: dropped, the others are served
            };
            let bytes = buf.get(..n).unwrap_or_default().to_vec();
            let (p, u, sock) = (p.clone(), u.clone(), sock.clone());
            tokio::spawn(async move {
                if let Some(out) = routed(&*p, &u, from.ip(), &bytes, Transport::Udp).await {
                    let _ = sock.send_to(&out, from).await;
                }
                drop(held);
                drop(permit);
            });
        }
    });
    // Expired answers are evicted every few seconds.
    let u = upstream.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            u.vetted.evict_expired();
        }
    });
    let r = route.clone();
    let client = move |ip| r.client(ip);
    let clients = Arc::new(crate::listener::Clients::default());
    crate::listener::accept_loop_by(
        tcp,
        MAX_TCP_CONNECTIONS,
        metrics,
        clients,
        client,
        move |mut s, peer| {
            let (p, u) = (route.clone(), upstream.clone());
            async move {
                loop {
                    // Each message, length and all, within TCP_IDLE.
                    let read = async {
                        let len = s.read_u16().await.ok()?;
                        let mut bytes = vec![0u8; usize::from(len)];
                        s.read_exact(&mut bytes).await.ok()?;
                        Some(bytes)
                    };
                    let Ok(Some(bytes)) = tokio::time::timeout(TCP_IDLE, read).await else {
                        return;
                    };
                    let Some(out) = routed(&*p, &u, peer.ip(), &bytes, Transport::Tcp).await else {
                        return;
                    };
                    let Ok(len) = u16::try_from(out.len()) else {
                        return;
                    };
                    let write = async {
                        s.write_u16(len).await?;
                        s.write_all(&out).await
                    };
                    if !matches!(tokio::time::timeout(TCP_IDLE, write).await, Ok(Ok(()))) {
                        return;
                    }
                }
            }
        },
    );
}
