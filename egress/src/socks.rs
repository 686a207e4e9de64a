//! SOCKS5 (RFC 1928): TCP CONNECT and UDP ASSOCIATE, no authentication.
//! Each connection is decided with `via socks5`, each datagram with
//! `via socks5_udp`, so the policy's `proxy { socks5 ...; socks5_udp ... }`
//! switches hold; names are resolved and checked as for HTTP.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use gatehouse::query::Via;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::gate::{self, Ctx, Refusal};
use crate::http::conn::Conn;
use crate::http::connect::{Opening, first_bytes, http_tunnel, raw};
use crate::policy::Request;

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
    let mut out = vec![5, code, 0];
    match bound.ip() {
        IpAddr::V4(a) => {
            out.push(1);
            out.extend(a.octets());
        }
        IpAddr::V6(a) => {
            out.push(4);
            out.extend(a.octets());
        }
    }
    out.extend(bound.port().to_be_bytes());
    s.write_all(&out).await
}

/// Reads ATYP + address + port; the host as text (IPv6 bracketed).
async fn read_addr(s: &mut TcpStream) -> std::io::Result<(String, u16)> {
    let atyp = s.read_u8().await?;
    let host = match atyp {
        1 => {
            let mut b = [0u8; 4];
            s.read_exact(&mut b).await?;
            Ipv4Addr::from(b).to_string()
        }
        3 => {
            let n = s.read_u8().await?;
            let mut b = vec![0u8; usize::from(n)];
            s.read_exact(&mut b).await?;
            // Not UTF-8: kept lossy, so that validation denies it.
            String::from_utf8_lossy(&b).into_owned()
        }
        4 => {
            let mut b = [0u8; 16];
            s.read_exact(&mut b).await?;
            format!("[{}]", Ipv6Addr::from(b))
        }
        _ => return Err(std::io::ErrorKind::InvalidData.into()),
    };
    let port = s.read_u16().await?;
    Ok((host, port))
}

const UNSPECIFIED: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

async fn handle(ctx: &Ctx, mut s: TcpStream, peer: SocketAddr) -> std::io::Result<()> {
    // The greeting and the request within 10 s.
    let request = tokio::time::timeout(std::time::Duration::from_secs(10), handshake(&mut s)).await;
    let Ok(Ok(Some((cmd, host, port)))) = request else {
        return Ok(());
    };
    dispatch(ctx, s, peer, cmd, host, port).await
}

/// The greeting and the request: (command, host, port), or `None` when the
/// client offers no acceptable method.
async fn handshake(s: &mut TcpStream) -> std::io::Result<Option<(u8, String, u16)>> {
    // Greeting: only "no authentication".
    if s.read_u8().await? != 5 {
        return Ok(None);
    }
    let n = s.read_u8().await?;
    let mut methods = vec![0u8; usize::from(n)];
    s.read_exact(&mut methods).await?;
    if !methods.contains(&0) {
        s.write_all(&[5, 0xff]).await?;
        return Ok(None);
    }
    s.write_all(&[5, 0]).await?;
    // Request.
    let mut h = [0u8; 3];
    s.read_exact(&mut h).await?;
    let (host, port) = read_addr(s).await?;
    Ok(Some((h[1], host, port)))
}

async fn dispatch(
    ctx: &Ctx,
    mut s: TcpStream,
    peer: SocketAddr,
    cmd: u8,
    host: String,
    port: u16,
) -> std::io::Result<()> {
    ctx.metrics.socks_requests.inc();
    let mut req = ctx.request();
    match cmd {
        1 => {
            let what = format!("socks5 CONNECT {host}:{port}");
            match gate::tunnel(ctx, &mut req, &host, port, Via::Socks5).await {
                Ok(up) => {
                    let bound = up.stream.local_addr().unwrap_or(UNSPECIFIED);
                    reply(&mut s, 0, bound).await?;
                    tunnel(ctx, &mut req, s, up, (&host, port), &what).await;
                    Ok(())
                }
                Err(r) => {
                    gate::record(ctx, &req, &what, r);
                    reply(&mut s, r.socks_reply(), UNSPECIFIED).await
                }
            }
        }
        3 => associate(ctx, s, peer).await,
        _ => reply(&mut s, 7, UNSPECIFIED).await,
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
            req.finish(what, "tunnel");
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
            raw(ctx, &mut client.io, &mut up.io, what, &allowed).await;
        }
        Ok(Opening::Http(head, named)) => {
            req.finish(what, "tunnel");
            let up = Conn::new(up, ctx.timeouts.tunnel_idle);
            let target = (named.as_str(), port, Via::Socks5);
            http_tunnel(ctx, req, client, up, head, target, what).await;
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
    reply(&mut control, 0, SocketAddr::new(local.ip(), port)).await?;
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
                    let mut out = vec![0, 0, 0];
                    match canonical(from).ip() {
                        IpAddr::V4(a) => { out.push(1); out.extend(a.octets()); }
                        IpAddr::V6(a) => { out.push(4); out.extend(a.octets()); }
                    }
                    out.extend(from.port().to_be_bytes());
                    out.extend_from_slice(data);
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
    let (&frag, rest) = d.get(2..)?.split_first()?;
    if frag != 0 {
        return None; // fragments are not supported: dropped
    }
    let (&atyp, rest) = rest.split_first()?;
    let (host, rest) = match atyp {
        1 => (
            Ipv4Addr::from(<[u8; 4]>::try_from(rest.get(..4)?).ok()?).to_string(),
            rest.get(4..)?,
        ),
        3 => {
            let (&n, rest) = rest.split_first()?;
            let n = usize::from(n);
            (
                String::from_utf8_lossy(rest.get(..n)?).into_owned(),
                rest.get(n..)?,
            )
        }
        4 => (
            format!(
                "[{}]",
                Ipv6Addr::from(<[u8; 16]>::try_from(rest.get(..16)?).ok()?)
            ),
            rest.get(16..)?,
        ),
        _ => return None,
    };
    let port = u16::from_be_bytes(<[u8; 2]>::try_from(rest.get(..2)?).ok()?);
    let payload = rest.get(2..)?;
    let mut req = ctx.request();
    let what = format!("socks5 UDP {host}:{port}");
    let addrs = match gate::vet(ctx, &mut req, &host, port, Via::Socks5Udp).await {
        Ok(a) => a,
        Err(reason) => {
            req.finish(&what, &format!("dropped: {reason}"));
            return None;
        }
    };
    let to = SocketAddr::new(*addrs.first()?, port);
    req.finish(&what, "relayed");
    relay.send_to(payload, to).await.ok()?;
    Some(to)
}
