//! `CONNECT` tunnels, and what the proxy reads of their first bytes.
//!
//! After `200 Connection established` the tunnel's first bytes must name
//! the tunnel's host: a TLS ClientHello by its server name (an Encrypted
//! Client Hello hides it, so it is refused for name targets), or a plain
//! HTTP request by its target and `Host`. A TLS tunnel is then relayed as
//! it is. A plain HTTP tunnel is framed like the proxy's own connections:
//! every request on it is checked the same way before it is sent, and
//! nothing the proxy did not check reaches the server.

use tokio::net::TcpStream;

use gatehouse::query::Via;

use crate::authority::{is_literal, same_host, split_authority};
use crate::gate::{self, Ctx, Refusal};
use crate::http::conn::Conn;
use crate::http::head::{self, Head, is_tchar};
use crate::http::{Decided, Exchange, Next, exchange, host_agrees, next_head, refuse, respond};
use crate::policy::Request;
use crate::tls::{Hello, client_hello};

/// What the first bytes of a tunnel turned out to be.
enum Opening {
    /// TLS (or a literal target's anything): relayed as it is.
    Raw,
    /// A plain HTTP request, checked.
    Http(Head),
}

/// A `CONNECT` request, answered here: refused with its status before the
/// `200`, and after it (the tunnel's first bytes) recorded, with a `400`
/// inside the tunnel for what is not HTTP it can read.
pub(crate) async fn connect(
    ctx: &Ctx,
    req: &mut Request<'_>,
    mut client: Conn<TcpStream>,
    head: Head,
) {
    let what = crate::http::What("CONNECT", head.target());
    let (tunnel, host, port) = match establish(ctx, req, &head).await {
        Ok(t) => t,
        Err(r) => return refuse(ctx, req, &mut client.io, &what, r).await,
    };
    let dialled = tunnel.dialled;
    let mut up = Conn::new(tunnel.stream, ctx.timeouts.tunnel_idle);
    let rev = crate::policy::short(req.revision()).to_string();
    let ok = format!("HTTP/1.1 200 Connection established\r\nX-Gatehouse-Revision: {rev}\r\n\r\n");
    if client.write_all(ok.as_bytes()).await.is_err() {
        return;
    }
    // The first bytes of the tunnel must name the same host, and must all
    // arrive within `first_bytes` of the `200` (a drip does not extend it).
    let verdict = tokio::time::timeout(
        ctx.timeouts.first_bytes,
        opening(&mut client, &host, port, is_literal(&host)),
    )
    .await
    .unwrap_or(Err(Refusal::FirstBytesTimeout));
    match verdict {
        Err(r) => {
            gate::record(ctx, req, &what, r);
            if r.status() == 400 {
                respond(&mut client.io, r.status_line(), r.as_str(), &rev).await;
            }
            // Dropping both streams closes the tunnel.
        }
        Ok(Opening::Raw) => {
            req.finish(&what, "tunnel");
            let first = client.take_buffered();
            if up.write_all(&first).await.is_err() {
                return;
            }
            ctx.metrics.tunnel_bytes_up.add(first.len() as u64);
            let allowed = gate::Allowed {
                host: &host,
                port,
                via: Via::Https,
                claimed: None,
                dialled,
            };
            raw(ctx, &mut client.io, &mut up.io, &what, &allowed).await;
        }
        Ok(Opening::Http(first)) => {
            req.finish(&what, "tunnel");
            let target = (host.as_str(), port, Via::Https);
            http_tunnel(ctx, req, client, up, first, target, &what).await;
        }
    }
}

/// Relays a raw tunnel (TLS, or a SOCKS5 protocol that names no host)
/// until either side ends, the timeouts end it, or a reload denies what it
/// was allowed for (issue 35, finding 8): then both sides are closed.
pub(crate) async fn raw(
    ctx: &Ctx,
    client: &mut TcpStream,
    up: &mut TcpStream,
    what: &(dyn std::fmt::Display + Sync),
    allowed: &gate::Allowed<'_>,
) {
    tokio::select! {
        (_, upb, downb) = crate::relay::relay(client, up, ctx.timeouts) => {
            ctx.metrics.tunnel_bytes_up.add(upb);
            ctx.metrics.tunnel_bytes_down.add(downb);
        }
        () = gate::revoked(ctx, what, allowed) => {}
    }
}

/// The target of a `CONNECT`, checked against its `Host`, and the tunnel
/// to it through the gate.
async fn establish(
    ctx: &Ctx,
    req: &mut Request<'_>,
    head: &Head,
) -> Result<(gate::Tunnel, String, u16), Refusal> {
    let (host, port) = split_authority(head.target(), 443).ok_or(Refusal::InvalidHost)?;
    if let Some(h) = head.header("Host") {
        let agrees =
            split_authority(h, port).is_some_and(|(hh, hp)| same_host(&hh, &host) && hp == port);
        if !agrees {
            return Err(Refusal::HostMismatch);
        }
    }
    let s = gate::tunnel(ctx, req, &host, port, Via::Https).await?;
    Ok((s, host, port))
}

/// Requests through a plain HTTP tunnel, one after the other, each checked
/// before it is sent and decided again (`via`) with the policy in force.
pub(crate) async fn http_tunnel(
    ctx: &Ctx,
    req: &mut Request<'_>,
    mut client: Conn<TcpStream>,
    mut up: Conn<TcpStream>,
    mut head: Head,
    (host, port, via): (&str, u16, Via),
    what: &(dyn std::fmt::Display + Sync),
) {
    loop {
        ctx.metrics.http_requests.inc();
        let decided = Decided {
            host,
            port,
            absolute: false,
        };
        match exchange(ctx, &mut client, &mut up, &head, &decided, true, false).await {
            Exchange::Done {
                client_keep: true,
                upstream_keep: true,
            } => {}
            Exchange::BadGateway => {
                return refuse(ctx, req, &mut client.io, what, Refusal::BadGateway).await;
            }
            _ => return,
        }
        let next = match next_head(ctx, &mut client, false).await {
            Next::Closed => return,
            Next::Bad => return refuse(ctx, req, &mut client.io, what, Refusal::BadRequest).await,
            Next::Head(h) => h,
        };
        if !tunnel_target_ok(&next, host, port) {
            return refuse(ctx, req, &mut client.io, what, Refusal::TargetOutsideTunnel).await;
        }
        if !host_agrees(&next, host, port, port) {
            return refuse(ctx, req, &mut client.io, what, Refusal::HostMismatch).await;
        }
        // Each later request is decided again with the policy in force now:
        // a reload that denies the host ends the tunnel at its next
        // request (issue 35, finding 8).
        let mut now = ctx.request();
        if let Err(r) = gate::admit(&mut now, host, port, via) {
            return refuse(ctx, &now, &mut client.io, what, r).await;
        }
        head = next;
    }
}

/// Reads the first bytes of a tunnel until they can be judged: a TLS
/// ClientHello's server name, or a plain HTTP head (strict, its target in
/// the tunnel, its `Host` agreeing).
async fn opening(
    client: &mut Conn<TcpStream>,
    host: &str,
    port: u16,
    literal: bool,
) -> Result<Opening, Refusal> {
    loop {
        match client_hello(client.buffered()) {
            Hello::Sni(sni) => {
                return if same_host(&sni, host) {
                    Ok(Opening::Raw)
                } else {
                    Err(Refusal::SniMismatch)
                };
            }
            Hello::NoSni => {
                return if literal {
                    Ok(Opening::Raw)
                } else {
                    Err(Refusal::SniMissing)
                };
            }
            // The outer name of an Encrypted Client Hello is a cover name:
            // for a name target it proves nothing, so it is refused.
            Hello::Ech => {
                return if literal {
                    Ok(Opening::Raw)
                } else {
                    Err(Refusal::EncryptedClientHello)
                };
            }
            Hello::NotTls if !client.buffered().is_empty() => {
                let http = looks_like_http(client.buffered());
                let parsed = match head::read_raw(client).await {
                    Ok(Some(raw)) => head::parse_request(raw),
                    _ => None,
                };
                return match parsed {
                    Some(h) if !tunnel_target_ok(&h, host, port) => {
                        Err(Refusal::TargetOutsideTunnel)
                    }
                    Some(h) if !host_agrees(&h, host, port, port) => Err(Refusal::HostMismatch),
                    Some(h) => Ok(Opening::Http(h)),
                    None if http => Err(Refusal::BadRequest),
                    None => Err(Refusal::UnrecognisedProtocol),
                };
            }
            _ => {
                if client.buffered().len() > 16 * 1024 {
                    return Err(Refusal::UnrecognisedProtocol);
                }
                match client.fill().await {
                    Ok(n) if n > 0 => {}
                    _ => return Err(Refusal::UnrecognisedProtocol),
                }
            }
        }
    }
}

/// What the first bytes of a SOCKS5 tunnel are (issue 35, finding 5).
pub(crate) enum SocksOpening {
    /// TLS whose server name holds, a server that spoke first, or a
    /// protocol that names no host: relayed as it is. The name a
    /// ClientHello gave, when it was decided apart from the target (a
    /// tunnel to an address), to decide again after a reload.
    Raw(Option<String>),
    /// A plain HTTP request, checked; later requests are held to the host
    /// it names.
    Http(Head, String),
}

/// The longest method this reads before calling the bytes "not HTTP".
const MAX_METHOD: usize = 32;

/// Judges the first bytes of a SOCKS5 tunnel to `host:port`. SOCKS5 carries
/// any TCP, so only bytes that name a host are held to it, as in a
/// `CONNECT` tunnel: a TLS ClientHello by its server name, a plain HTTP
/// request (after any empty lines) by its target and `Host`. To a name,
/// the name they give must be the target's; to an address (a client that
/// resolved the name itself), a name they give must itself be allowed
/// (`connect NAME:PORT via socks5`), and an address must be the target's.
/// A server that speaks first (SSH, SMTP, databases) makes the tunnel raw;
/// bytes that could still become an HTTP method are waited on, never
/// guessed.
pub(crate) async fn socks_opening(
    req: &mut Request<'_>,
    client: &mut Conn<TcpStream>,
    up: &TcpStream,
    host: &str,
    port: u16,
) -> Result<SocksOpening, Refusal> {
    let literal = is_literal(host);
    // The name a ClientHello or `Host` gives, held to the target.
    let mut claimed = |name: &str, mismatch: Refusal| -> Result<(), Refusal> {
        if same_host(name, host) {
            Ok(())
        } else if literal && !is_literal(name) {
            gate::admit(req, name, port, Via::Socks5)
        } else {
            Err(mismatch)
        }
    };
    loop {
        if client.buffered().is_empty() {
            tokio::select! {
                r = client.fill() => match r {
                    Ok(n) if n > 0 => {}
                    _ => return Err(Refusal::UnrecognisedProtocol),
                },
                _ = up.readable() => return Ok(SocksOpening::Raw(None)),
            }
            continue;
        }
        match client_hello(client.buffered()) {
            Hello::Sni(sni) => {
                claimed(&sni, Refusal::SniMismatch)?;
                let apart = (literal && !is_literal(&sni)).then_some(sni);
                return Ok(SocksOpening::Raw(apart));
            }
            Hello::NoSni if literal => return Ok(SocksOpening::Raw(None)),
            Hello::NoSni => return Err(Refusal::SniMissing),
            Hello::Ech if literal => return Ok(SocksOpening::Raw(None)),
            Hello::Ech => return Err(Refusal::EncryptedClientHello),
            Hello::Incomplete => {}
            Hello::NotTls => {
                let b = client.buffered();
                let blank = b.iter().take_while(|c| matches!(c, b'\r' | b'\n')).count();
                let rest = b.get(blank..).unwrap_or_default();
                let method = rest.iter().take_while(|c| is_tchar(**c)).count();
                let undecided = method == rest.len() && method <= MAX_METHOD;
                if !undecided {
                    if method == 0 || rest.get(method) != Some(&b' ') {
                        return Ok(SocksOpening::Raw(None));
                    }
                    client.consume(blank);
                    let h = match head::read_raw(client).await {
                        Ok(Some(raw)) => head::parse_request(raw).ok_or(Refusal::BadRequest)?,
                        _ => return Err(Refusal::BadRequest),
                    };
                    let named = match h.header("Host").map(|v| split_authority(v, port)) {
                        Some(Some((name, p))) if p == port => name,
                        _ => return Err(Refusal::HostMismatch),
                    };
                    claimed(&named, Refusal::HostMismatch)?;
                    if !tunnel_target_ok(&h, &named, port) {
                        return Err(Refusal::TargetOutsideTunnel);
                    }
                    return Ok(SocksOpening::Http(h, named));
                }
            }
        }
        if client.buffered().len() > 16 * 1024 {
            return Err(Refusal::UnrecognisedProtocol);
        }
        match client.fill().await {
            Ok(n) if n > 0 => {}
            _ => return Err(Refusal::UnrecognisedProtocol),
        }
    }
}

/// Where a request inside a tunnel to `host:port` may go: origin-form
/// (`/path`), `*` for `OPTIONS`, or an absolute form naming the tunnel's own
/// host and port (servers prefer an absolute target's host over `Host`).
fn tunnel_target_ok(h: &Head, host: &str, port: u16) -> bool {
    let t = h.target();
    // A fragment is never part of a request-target (RFC 9112 §3.2).
    if t.contains('#') {
        return false;
    }
    if t.starts_with('/') {
        return true;
    }
    if t == "*" {
        return h.method().eq_ignore_ascii_case("OPTIONS");
    }
    let Some((scheme, rest)) = t.split_once("://") else {
        return false;
    };
    let default = if scheme.eq_ignore_ascii_case("http") {
        80
    } else if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    !authority.contains('@')
        && split_authority(authority, default)
            .is_some_and(|(th, tp)| same_host(&th, host) && tp == port)
}

/// Whether bytes start like an HTTP request line (a method, a space).
fn looks_like_http(b: &[u8]) -> bool {
    let method = b.iter().take_while(|c| is_tchar(**c)).count();
    method > 0 && b.get(method) == Some(&b' ')
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn tunnel_targets_stay_in_the_tunnel() {
        let target = |method: &str, t: &str| {
            head::parse_request(format!("{method} {t} HTTP/1.1").into_bytes()).expect("parses")
        };
        let ok = |t: &str| tunnel_target_ok(&target("GET", t), "allowed.test", 8080);
        assert!(ok("/x?y"));
        assert!(ok("http://allowed.test:8080/x"));
        assert!(ok("HTTP://ALLOWED.test.:8080"));
        assert!(tunnel_target_ok(
            &target("OPTIONS", "*"),
            "allowed.test",
            8080
        ));
        for bad in [
            "https://denied.test/",
            "HTTP://denied.test:8080/",
            "http://allowed.test/", // port 80, not the tunnel's
            "http://allowed.test@denied.test:8080/",
            "http://denied.test:8080@allowed.test:8080/",
            "ftp://allowed.test:8080/",
            "allowed.test:8080",
            "*",
            "/x#@denied.test",
            "http://allowed.test:8080#@denied.test:8080/",
        ] {
            assert!(!ok(bad), "{bad}");
        }
        assert!(looks_like_http(b"GET /") && !looks_like_http(b"\x16\x03"));
    }
}
