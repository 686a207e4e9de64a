//! SOCKS5 (RFC 1928): TCP CONNECT and UDP ASSOCIATE, no authentication.
//! Each connection is decided with `via socks5`, each datagram with
//! `via socks5_udp`, so the policy's `proxy { socks5 ...; socks5_udp ... }`
//! switches hold; names are resolved and checked as for HTTP.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use gatehouse::query::Via;
use gatehouse_wire::socks;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::conn::Conn;
use crate::gate::{self, Ctx};
use crate::outcome::{Outcome, Refusal};
use crate::policy::Request;
use crate::reply::refuse;
use crate::tunnel::{Opening, first_bytes, http_tunnel, raw};

/// Serves SOCKS5 on `listener` until the runtime stops.
pub fn serve(ctx: Arc<Ctx>, listener: TcpListener) {
    let (cap, m) = (ctx.max_connections, ctx.metrics.clone());
    crate::listener::accept_loop(listener, cap, m, move |s, peer| {
        let ctx = ctx.clone();
        async move {
            let _ = handle(&ctx, s, peer).await;
        }
    });
}

async fn reply(s: &mut TcpStream, code: u8, bound: SocketAddr) -> std::io::Result<()> {
    s.write_all(&socks::reply(code, bound)).await
}

/// Reads exactly one message that `parse` accepts (never a byte past it);
/// `None` when the bytes are not that message.
async fn read_one<T>(
    s: &mut TcpStream,
    parse: impl Fn(&[u8]) -> socks::Read<T>,
) -> std::io::Result<Option<T>> {
    let mut buf = Vec::new();
    loop {
        match parse(&buf) {
            socks::Read::Done(v, _) => return Ok(Some(v)),
            socks::Read::Invalid => return Ok(None),
            socks::Read::More(need) => {
                let start = buf.len();
                if need <= start {
                    return Ok(None); // a reader that asks for nothing more never ends
                }
                buf.resize(need, 0);
                if let Some(fresh) = buf.get_mut(start..) {
                    s.read_exact(fresh).await?;
                }
            }
        }
    }
}

const UNSPECIFIED: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

async fn handle(ctx: &Ctx, mut s: TcpStream, peer: SocketAddr) -> std::io::Result<()> {
    // The greeting and the request within 10 s.
    let request = tokio::time::timeout(std::time::Duration::from_secs(10), handshake(&mut s)).await;
    let Ok(Ok(Some(r))) = request else {
        return Ok(());
    };
    dispatch(ctx, s, peer, r).await
}

/// The greeting and the request, or `None` when the client offers no
/// acceptable method or sends something else.
async fn handshake(s: &mut TcpStream) -> std::io::Result<Option<socks::Request>> {
    // Greeting: only "no authentication".
    let Some(no_auth) = read_one(s, socks::greeting).await? else {
        return Ok(None);
    };
    s.write_all(&socks::choice(no_auth)).await?;
    if !no_auth {
        return Ok(None);
    }
    read_one(s, socks::request).await
}

async fn dispatch(
    ctx: &Ctx,
    mut s: TcpStream,
    peer: SocketAddr,
    socks::Request {
        command,
        host,
        port,
    }: socks::Request,
) -> std::io::Result<()> {
    ctx.metrics.socks_requests.inc();
    let mut req = ctx.request();
    match command {
        socks::CONNECT => {
            let what = format!("socks5 CONNECT {host}:{port}");
            match gate::tunnel(ctx, &mut req, &host, port, Via::Socks5).await {
                Ok(up) => {
                    let bound = up.stream.local_addr().unwrap_or(UNSPECIFIED);
                    reply(&mut s, socks::SUCCEEDED, bound).await?;
                    tunnel(ctx, &mut req, s, up, (&host, port), &what).await;
                    Ok(())
                }
                Err(r) => {
                    gate::record(ctx, &req, &what, r);
                    reply(&mut s, r.socks_reply(), UNSPECIFIED).await
                }
            }
        }
        socks::UDP_ASSOCIATE => associate(ctx, s, peer).await,
        _ => reply(&mut s, socks::COMMAND_NOT_SUPPORTED, UNSPECIFIED).await,
    }
}

/// A SOCKS5 CONNECT tunnel after its success reply: its first bytes judged
/// as a `CONNECT` tunnel's are (issue 35, finding 5), then relayed, or, for
/// plain HTTP, framed and every request checked and decided again.
async fn tunnel(
    ctx: &Ctx,
    req: &mut Request<'_>,
    client: TcpStream,
    tunnel: gate::Tunnel,
    (host, port): (&str, u16),
    what: &(dyn std::fmt::Display + Sync),
) {
    let (up, dialled) = (tunnel.stream, tunnel.dialled);
    let mut client = Conn::new(client, ctx.timeouts.tunnel_idle);
    let verdict = tokio::time::timeout(
        ctx.timeouts.first_bytes,
        first_bytes(req, &mut client, Some(&up), (host, port, Via::Socks5)),
    )
    .await
    .unwrap_or(Err(Refusal::FirstBytesTimeout));
    match verdict {
        // Closing both streams ends the tunnel; nothing of it was sent.
        Err(r) => gate::record(ctx, req, what, r),
        Ok(Opening::Raw(claimed)) => {
            req.finish(what, Outcome::Tunnel);
            let mut up = Conn::new(up, ctx.timeouts.tunnel_idle);
            let first = client.take_buffered();
            if up.write_all(&first).await.is_err() {
                return;
            }
            ctx.metrics.tunnel_bytes_up.add(first.len() as u64);
            let allowed = gate::Allowed {
                host,
                port,
                via: Via::Socks5,
                claimed: claimed.as_deref(),
                dialled,
            };
            // A tunnel a reload no longer allows is closed, and its refusal
            // recorded here (nothing more can be said inside raw bytes).
            if let Err(stop) = raw(ctx, &mut client.io, &mut up.io, &allowed).await {
                let by = stop.decided_by.as_ref().unwrap_or(&*req);
                gate::record(ctx, by, what, stop.refusal);
            }
        }
        Ok(Opening::Http(head, named)) => {
            req.finish(what, Outcome::Tunnel);
            let up = Conn::new(up, ctx.timeouts.tunnel_idle);
            let target = (named.as_str(), port, Via::Socks5);
            if let Err(stop) = http_tunnel(ctx, &mut client, up, head, target).await {
                let by = stop.decided_by.as_ref().unwrap_or(req);
                refuse(ctx, by, &mut client.io, what, stop.refusal).await;
            }
        }
    }
}

/// At most this many distinct targets per association are remembered as
/// peers whose replies may come back.
const MAX_PEERS: usize = 1024;

/// UDP ASSOCIATE, until the control connection closes. Two sockets: the
/// client's side bound to the listener's own address (a loopback listener
/// never opens a relay on every address), serving only the client's address;
/// and the targets' side, from which only replies of peers the client sent
/// to, and the policy allowed, are relayed back.
async fn associate(ctx: &Ctx, mut control: TcpStream, peer: SocketAddr) -> std::io::Result<()> {
    let local = control.local_addr()?;
    let any: IpAddr = if local.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let client_side = UdpSocket::bind(SocketAddr::new(local.ip(), 0)).await?;
    let targets = UdpSocket::bind(SocketAddr::new(any, 0)).await?;
    let port = client_side.local_addr()?.port();
    reply(
        &mut control,
        socks::SUCCEEDED,
        SocketAddr::new(local.ip(), port),
    )
    .await?;
    let mut client: Option<SocketAddr> = None;
    let mut peers: std::collections::HashSet<SocketAddr> = Default::default();
    let mut buf = vec![0u8; 65_536];
    let mut back = vec![0u8; 65_536];
    let mut sink = [0u8; 1];
    loop {
        tokio::select! {
            r = control.read(&mut sink) => {
                if matches!(r, Ok(0) | Err(_)) {
                    return Ok(());
                }
            }
            r = client_side.recv_from(&mut buf) => {
                let (n, from) = r?;
                let data = buf.get(..n).unwrap_or_default();
                if from.ip() == peer.ip() && client.is_none_or(|c| c == from) {
                    client = Some(from);
                    if let Some(to) = outbound(ctx, &targets, data).await
                        && peers.len() < MAX_PEERS
                    {
                        peers.insert(canonical(to));
                    }
                }
            }
            r = targets.recv_from(&mut back) => {
                let (n, from) = r?;
                let data = back.get(..n).unwrap_or_default();
                // A reply, from a peer the client sent to: wrap it for the client.
                if let (Some(c), true) = (client, peers.contains(&canonical(from))) {
                    let out = socks::datagram_from(canonical(from), data);
                    let _ = client_side.send_to(&out, c).await;
                }
            }
        }
    }
}

/// A socket address with a mapped IPv6 address as its IPv4 address.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(gatehouse::normalize::canonical_ip(a.ip()), a.port())
}

/// One datagram from the client: decided, resolved, checked, sent; where
/// it went.
async fn outbound(ctx: &Ctx, relay: &UdpSocket, d: &[u8]) -> Option<SocketAddr> {
    let socks::Datagram {
        host,
        port,
        payload,
    } = socks::datagram(d)?;
    let mut req = ctx.request();
    let what = format!("socks5 UDP {host}:{port}");
    let addrs = match gate::vet(ctx, &mut req, &host, port, Via::Socks5Udp).await {
        Ok(a) => a,
        Err(reason) => {
            req.finish(&what, Outcome::Dropped(reason));
            return None;
        }
    };
    let to = SocketAddr::new(*addrs.first()?, port);
    req.finish(&what, Outcome::Relayed);
    relay.send_to(payload, to).await.ok()?;
    Some(to)
}
