//! Host mode's transparent listener: every TCP connection of a sandbox,
//! redirected here by the kernel ([`super::nft`]), decided with the policy
//! of the sandbox it comes from, without the program inside knowing a
//! proxy is there.
//!
//! A connection is decided by what its first bytes name:
//!
//! - a TLS ClientHello by its server name (with Encrypted Client Hello, by
//!   the outer name: docs/host.md says what that cannot see), `via https`;
//! - plain HTTP by its `Host`, `via http`, and so is every later request on
//!   the connection (another `Host` is refused);
//! - anything else — a ClientHello without a name, a protocol that names no
//!   host, a client that waits for the server to speak first — by its
//!   original destination: the names this sandbox's DNS answers gave with
//!   that address ([`super::answered`]), each decided `connect NAME:PORT`
//!   with the address checked by `resolved`, and else the address itself
//!   (`connect ADDRESS:PORT`, the policy's ip and cidr rules).
//!
//! On ports 80 and 443 a connection must open with TLS or HTTP within the
//! first-bytes deadline: the address path is never taken there (an address
//! behind a CDN serves many names). Elsewhere a client silent for
//! [`SPEAK_FIRST`] is decided by address.
//!
//! The daemon dials what the decision vetted: the name resolved on the host
//! side (through the gate, as the explicit proxy does), or the original
//! address only when it is among that name's vetted addresses. A sandbox
//! that lies about the address, or sends an allowed name to another
//! address, reaches the allowed name's own servers or nothing.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use gatehouse::query::Via;
use tokio::net::{TcpListener, TcpStream};

use super::table::{Sandbox, SandboxTable, canonical};
use crate::conn::Conn;
use crate::exchange::host_agrees;
use crate::gate::{self, Ctx};
use crate::metrics::Metrics;
use crate::outcome::{Outcome, Refusal};
use crate::policy::Request;
use crate::reply::refuse;
use crate::tunnel::{Plain, http_tunnel, plain, raw, tunnel_target_ok};
use gatehouse_wire::authority::{is_literal, split_authority};
use gatehouse_wire::http::{self as head, Head};
use gatehouse_wire::tls::{Hello, client_hello};

/// How long a client on a port other than 80 and 443 may stay silent
/// before its connection is decided by address (a server that speaks
/// first: SMTP, MySQL, FTP).
pub const SPEAK_FIRST: Duration = Duration::from_millis(500);

/// The most bytes read before the opening must be told apart.
const MAX_OPENING: usize = 16 * 1024;

/// Serves the transparent listener until the runtime stops.
pub(crate) fn serve(
    table: Arc<ArcSwap<SandboxTable>>,
    listener: TcpListener,
    cap: usize,
    metrics: Arc<Metrics>,
    clients: Arc<crate::listener::Clients>,
) {
    let m = metrics.clone();
    let t = table.clone();
    let client = move |ip| super::table::client_of(&t.load(), ip);
    crate::listener::accept_loop_by(listener, cap, metrics, clients, client, move |s, peer| {
        let (table, m) = (table.clone(), m.clone());
        async move {
            m.transparent_connections.inc();
            let sandbox = table.load().lookup(peer.ip()).cloned();
            match sandbox {
                Some(sandbox) => {
                    sandbox.tally.connections.inc();
                    handle(&sandbox, s).await
                }
                // Not a sandbox's: nothing is decided for it, and it is
                // closed unanswered.
                None => m.refusal(Refusal::UnknownSource),
            }
        }
    });
}

/// Where the connection was going before the kernel redirected it; `None`
/// when it was not redirected (a connection to the listener itself).
fn original_destination(s: &TcpStream) -> Option<SocketAddr> {
    let local = s.local_addr().ok()?;
    let orig = if local.is_ipv4() {
        SocketAddr::V4(rustix::net::sockopt::ip_original_dst(s).ok()?)
    } else {
        SocketAddr::V6(rustix::net::sockopt::ipv6_original_dst(s).ok()?)
    };
    (orig != local).then_some(orig)
}

/// The IP literal of an address as a query's host (IPv6 in brackets).
fn literal(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
}

/// What the first bytes of a connection are.
enum Opening {
    /// A ClientHello.
    Tls(Hello),
    /// A plain HTTP request.
    Http(Head),
    /// Bytes that are neither.
    Other,
    /// Nothing within [`SPEAK_FIRST`].
    Silent,
}

/// Reads until the opening can be told; `reads`: ports 80 and 443, where
/// only TLS and HTTP are taken.
async fn opening(client: &mut Conn<TcpStream>, reads: bool) -> Result<Opening, Refusal> {
    loop {
        if !client.buffered().is_empty() {
            match client_hello(client.buffered()) {
                Hello::Incomplete => {}
                Hello::NotTls => match plain(client.buffered()) {
                    Plain::Undecided => {}
                    Plain::Other if reads => return Err(Refusal::UnrecognisedProtocol),
                    Plain::Other => return Ok(Opening::Other),
                    Plain::Http { blank } => {
                        client.consume(blank);
                        return match client.read_head().await {
                            Ok(Some(raw)) => head::parse_request(raw)
                                .map(Opening::Http)
                                .ok_or(Refusal::BadRequest),
                            _ => Err(Refusal::BadRequest),
                        };
                    }
                },
                hello => return Ok(Opening::Tls(hello)),
            }
            if client.buffered().len() > MAX_OPENING {
                return match reads {
                    true => Err(Refusal::UnrecognisedProtocol),
                    false => Ok(Opening::Other),
                };
            }
        }
        match client.fill().await {
            Ok(n) if n > 0 => {}
            _ => return Err(Refusal::UnrecognisedProtocol),
        }
    }
}

/// A decided connection: the stream to the origin, the host it was
/// allowed for, and the address dialled.
struct Dialled {
    stream: TcpStream,
    host: String,
    at: IpAddr,
    via: Via,
}

async fn handle(sandbox: &Sandbox, s: TcpStream) {
    let ctx = &*sandbox.ctx;
    let mut req = ctx.request();
    let Some(orig) = original_destination(&s) else {
        let what = format!("transparent (not redirected) from sandbox {}", sandbox.id);
        return gate::record(ctx, &req, &what, Refusal::NotRedirected);
    };
    let _ = s.set_nodelay(true);
    let what = format!("transparent {orig} from sandbox {}", sandbox.id);
    let mut client = Conn::new(s, ctx.timeouts.tunnel_idle);
    let port = orig.port();
    let reads = port == 80 || port == 443;
    let window = match reads {
        true => ctx.timeouts.first_bytes,
        false => SPEAK_FIRST.min(ctx.timeouts.first_bytes),
    };
    let opened = match tokio::time::timeout(window, opening(&mut client, reads)).await {
        Ok(o) => o,
        Err(_) if reads => Err(Refusal::FirstBytesTimeout),
        Err(_) => Ok(Opening::Silent),
    };
    let mut http = None;
    let decided = match opened {
        Err(r) => Err(r),
        Ok(Opening::Tls(Hello::Sni(name) | Hello::Ech(Some(name)))) => {
            by_name(ctx, &mut req, &name, orig, Via::Https, Refusal::SniMismatch).await
        }
        // Ports 80 and 443 never take the address path (one CDN address
        // serves many names): a ClientHello without a server name, or
        // bytes that are neither TLS nor HTTP, are refused there.
        Ok(Opening::Tls(_)) if reads => Err(Refusal::SniMissing),
        Ok(Opening::Other) if reads => Err(Refusal::UnrecognisedProtocol),
        Ok(Opening::Tls(_) | Opening::Other | Opening::Silent) => {
            by_address(sandbox, &mut req, orig).await
        }
        Ok(Opening::Http(h)) => {
            let named = h.header("Host").map(|v| split_authority(v, port));
            let d = match named {
                Some(Some((name, p))) if p == port => {
                    if !tunnel_target_ok(&h, &name, port) {
                        Err(Refusal::TargetOutsideTunnel)
                    } else if !host_agrees(&h, &name, port, port) {
                        Err(Refusal::HostMismatch)
                    } else {
                        by_name(ctx, &mut req, &name, orig, Via::Http, Refusal::HostMismatch).await
                    }
                }
                Some(Some(_)) => Err(Refusal::HostMismatch),
                Some(None) => Err(Refusal::InvalidHost),
                // HTTP/1.0 without `Host` names no host: by address, but
                // never on port 80 (see above).
                None if h.version == "HTTP/1.0" && !reads => {
                    by_address(sandbox, &mut req, orig).await
                }
                None => Err(Refusal::HostMismatch),
            };
            http = Some(h);
            d
        }
    };
    let d = match decided {
        Ok(d) => d,
        Err(r) if http.is_some() => return refuse(ctx, &req, &mut client.io, &what, r).await,
        Err(r) => return gate::record(ctx, &req, &what, r),
    };
    // The record names what was dialled beside what was asked, when they
    // differ (a connection re-targeted to the vetted address): an auditor
    // must not believe the asked address was reached.
    let what = if d.at == orig.ip() {
        what
    } else {
        format!(
            "transparent {orig} (dialled {}) from sandbox {}",
            SocketAddr::new(d.at, port),
            sandbox.id
        )
    };
    req.finish(&what, Outcome::Tunnel);
    let mut up = Conn::new(d.stream, ctx.timeouts.tunnel_idle);
    if let Some(h) = http {
        let target = (d.host.as_str(), port, Via::Http);
        if let Err(stop) = http_tunnel(ctx, &mut client, up, h, target).await {
            let by = stop.decided_by.as_ref().unwrap_or(&req);
            refuse(ctx, by, &mut client.io, &what, stop.refusal).await;
        }
        return;
    }
    let first = client.take_buffered();
    if up.write_all(&first).await.is_err() {
        return;
    }
    ctx.metrics.tunnel_bytes_up.add(first.len() as u64);
    let allowed = gate::Allowed {
        host: &d.host,
        port,
        via: d.via,
        claimed: None,
        dialled: Some(d.at),
    };
    // A tunnel a reload no longer allows is closed, and its refusal
    // recorded here (nothing more can be said inside raw bytes).
    if let Err(stop) = raw(ctx, &mut client.io, &mut up.io, &allowed).await {
        let by = stop.decided_by.as_ref().unwrap_or(&req);
        gate::record(ctx, by, &what, stop.refusal);
    }
}

/// A connection that named `name` (a server name or a `Host`): decided
/// and resolved through the gate, and dialled at the original address
/// only when it is among the name's vetted addresses, else at the vetted
/// addresses themselves. A literal name must be the original address.
async fn by_name(
    ctx: &Ctx,
    req: &mut Request<'_>,
    name: &str,
    orig: SocketAddr,
    via: Via,
    mismatch: Refusal,
) -> Result<Dialled, Refusal> {
    let o = canonical(orig.ip());
    let port = orig.port();
    if is_literal(name) {
        let named = name.trim_start_matches('[').trim_end_matches(']');
        if named.parse::<IpAddr>().map(canonical).ok() != Some(o) {
            return Err(mismatch);
        }
    }
    let vetted = gate::vet(ctx, req, name, port, via).await?;
    let target = match vetted.contains(&o) {
        true => vec![o],
        false => vetted,
    };
    let (stream, at) = gate::dial(ctx, &target, port).await?;
    Ok(Dialled {
        stream,
        host: name.to_string(),
        at: at.ip(),
        via,
    })
}

/// A connection that named nothing: decided by the names this sandbox's
/// DNS answered with its original address (the latest first), each
/// `connect` and `resolved` through the gate, and else by the address
/// itself. Only the original address is dialled.
async fn by_address(
    sandbox: &Sandbox,
    req: &mut Request<'_>,
    orig: SocketAddr,
) -> Result<Dialled, Refusal> {
    let ctx = &*sandbox.ctx;
    let (ip, port) = (canonical(orig.ip()), orig.port());
    let mut host = None;
    for name in sandbox.answered.names_for(ip) {
        if gate::vet(ctx, req, &name, port, Via::Https)
            .await
            .is_ok_and(|vetted| vetted.contains(&ip))
        {
            host = Some(name);
            break;
        }
    }
    let host = match host {
        Some(h) => h,
        None => {
            let lit = literal(ip);
            gate::vet(ctx, req, &lit, port, Via::Https).await?;
            lit
        }
    };
    let (stream, at) = gate::dial(ctx, &[ip], port).await?;
    Ok(Dialled {
        stream,
        host,
        at: at.ip(),
        via: Via::Https,
    })
}
