//! The tunnel every front door shares once a connection is allowed: its
//! first bytes judged against the tunnel's host (`first_bytes`), then
//! either relayed as they are (`raw`) or, for plain HTTP, carried one
//! checked request at a time (`http_tunnel`). Used alike by `CONNECT`,
//! SOCKS5 and host mode's transparent listener; it returns a [`Refusal`]
//! and never answers a client itself.
//!
//! After a `CONNECT`'s `200 Connection established` the tunnel's first
//! bytes must name the tunnel's host: a TLS ClientHello by its server name
//! (an Encrypted Client Hello hides it, so it is refused for name targets),
//! or a plain HTTP request by its target and `Host`. A TLS tunnel is then
//! relayed as it is. A plain HTTP tunnel is framed like the proxy's own
//! connections: every request on it is checked the same way before it is
//! sent, and nothing the proxy did not check reaches the server.

use tokio::net::TcpStream;

use gatehouse::query::Via;

use crate::conn::Conn;
use crate::exchange::{Decided, Exchange, Next, exchange, host_agrees, next_head};
use crate::gate::{self, Ctx};
use crate::outcome::Refusal;
use crate::policy::Request;
use gatehouse_wire::authority::{is_literal, same_host, split_authority};
use gatehouse_wire::http::{self as head, Head, is_tchar};
use gatehouse_wire::tls::{Hello, client_hello};

/// Relays a raw tunnel (TLS, or a SOCKS5 protocol that names no host)
/// until either side ends or the timeouts end it (`Ok`), or a reload
/// denies what it was allowed for (issue 35, finding 8): then it stops with
/// that refusal, for the front door to record, and both sides are closed.
pub(crate) async fn raw<'c>(
    ctx: &'c Ctx,
    client: &mut TcpStream,
    up: &mut TcpStream,
    allowed: &gate::Allowed<'_>,
) -> Result<(), Stop<'c>> {
    tokio::select! {
        (_, upb, downb) = crate::relay::relay(client, up, ctx.timeouts) => {
            ctx.metrics.tunnel_bytes_up.add(upb);
            ctx.metrics.tunnel_bytes_down.add(downb);
            Ok(())
        }
        (refusal, req) = gate::revoked(ctx, allowed) => Err(Stop {
            refusal,
            decided_by: Some(req),
        }),
    }
}

/// Requests through a plain HTTP tunnel, one after the other, each checked
/// before it is sent and decided again (`via`) with the policy in force.
///
/// It answers nothing itself: it ends `Ok` when either side closes or
/// stops keeping the connection, and with the [`Stop`] the caller answers
/// (inside the tunnel, in HTTP) otherwise.
pub(crate) async fn http_tunnel<'c>(
    ctx: &'c Ctx,
    client: &mut Conn<TcpStream>,
    mut up: Conn<TcpStream>,
    mut head: Head,
    (host, port, via): (&str, u16, Via),
) -> Result<(), Stop<'c>> {
    let stop = |refusal| Stop {
        refusal,
        decided_by: None,
    };
    loop {
        ctx.metrics.http_requests.inc();
        let decided = Decided { host, port };
        match exchange(ctx, client, &mut up, &head, &decided, true, false).await {
            Exchange::Done {
                client_keep: true,
                upstream_keep: true,
            } => {}
            Exchange::BadGateway => return Err(stop(Refusal::BadGateway)),
            _ => return Ok(()),
        }
        let next = match next_head(ctx, client, false).await {
            Next::Closed => return Ok(()),
            Next::Bad => return Err(stop(Refusal::BadRequest)),
            Next::Head(h) => h,
        };
        if !tunnel_target_ok(&next, host, port) {
            return Err(stop(Refusal::TargetOutsideTunnel));
        }
        if !host_agrees(&next, host, port, port) {
            return Err(stop(Refusal::HostMismatch));
        }
        // Each later request is decided again with the policy in force now:
        // a reload that denies the host ends the tunnel at its next
        // request (issue 35, finding 8).
        let mut now = ctx.request();
        if let Err(refusal) = gate::admit(&mut now, host, port, via) {
            return Err(Stop {
                refusal,
                decided_by: Some(now),
            });
        }
        head = next;
    }
}

/// Why a plain HTTP tunnel was stopped, for its caller to answer.
pub(crate) struct Stop<'c> {
    /// The refusal.
    pub refusal: Refusal,
    /// The request whose decision refused it, when it was a later one
    /// decided with the policy in force then (its record names that
    /// policy's revision); else the tunnel's own.
    pub decided_by: Option<Request<'c>>,
}

/// What the first bytes of a tunnel are.
pub(crate) enum Opening {
    /// TLS whose server name holds, a server that spoke first, or (SOCKS5)
    /// a protocol that names no host: relayed as it is. The name a
    /// ClientHello gave, when it was decided apart from the target (a
    /// tunnel to an address), to decide again after a reload.
    Raw(Option<String>),
    /// A plain HTTP request, checked; later requests are held to the host
    /// it names.
    Http(Head, String),
}

/// The longest method this reads before calling the bytes "not HTTP".
const MAX_METHOD: usize = 32;

/// Judges the first bytes of a tunnel to `host:port` (`CONNECT`, SOCKS5)
/// until they can be: a TLS ClientHello by its server name, a plain HTTP
/// request (after any empty lines) by its target and `Host`. To a name,
/// the name they give must be the target's; to an address (a client that
/// resolved the name itself, or this proxy's own upstream leg, issue 35,
/// finding 2), a name they give must itself be allowed (`connect NAME:PORT`
/// with the tunnel's `via`), and an address must be the target's (issue
/// 35, finding 5). An Encrypted Client Hello or a ClientHello without a
/// name proves nothing, so only a tunnel to an address takes one.
///
/// A `CONNECT` tunnel (`server: None`) carries only TLS and HTTP: anything
/// else is refused. A SOCKS5 tunnel carries any TCP (`server: Some`): a
/// server that speaks first (SSH, SMTP, MySQL) makes it raw, and so do
/// bytes that are neither TLS nor an HTTP request line; bytes that could
/// still become an HTTP method are waited on, never guessed.
pub(crate) async fn first_bytes(
    req: &mut Request<'_>,
    client: &mut Conn<TcpStream>,
    server: Option<&TcpStream>,
    (host, port, via): (&str, u16, Via),
) -> Result<Opening, Refusal> {
    let literal = is_literal(host);
    // The name a ClientHello or `Host` gives, held to the target.
    let mut claimed = |name: &str, mismatch: Refusal| -> Result<(), Refusal> {
        if same_host(name, host) {
            Ok(())
        } else if literal && !is_literal(name) {
            gate::admit(req, name, port, via)
        } else {
            Err(mismatch)
        }
    };
    loop {
        if client.buffered().is_empty() {
            let Some(server) = server else {
                match client.fill().await {
                    Ok(n) if n > 0 => continue,
                    _ => return Err(Refusal::UnrecognisedProtocol),
                }
            };
            tokio::select! {
                r = client.fill() => match r {
                    Ok(n) if n > 0 => {}
                    _ => return Err(Refusal::UnrecognisedProtocol),
                },
                _ = server.readable() => return Ok(Opening::Raw(None)),
            }
            continue;
        }
        match client_hello(client.buffered()) {
            Hello::Sni(sni) => {
                claimed(&sni, Refusal::SniMismatch)?;
                let apart = (literal && !same_host(&sni, host)).then_some(sni);
                return Ok(Opening::Raw(apart));
            }
            Hello::NoSni if literal => return Ok(Opening::Raw(None)),
            Hello::NoSni => return Err(Refusal::SniMissing),
            // The outer name of an Encrypted Client Hello is a cover name:
            // for a name target it proves nothing, so it is refused.
            Hello::Ech(_) if literal => return Ok(Opening::Raw(None)),
            Hello::Ech(_) => return Err(Refusal::EncryptedClientHello),
            Hello::Incomplete => {}
            Hello::NotTls => {
                let blank = match plain(client.buffered()) {
                    Plain::Undecided => None,
                    Plain::Other => {
                        return match server {
                            Some(_) => Ok(Opening::Raw(None)),
                            None => Err(Refusal::UnrecognisedProtocol),
                        };
                    }
                    Plain::Http { blank } => Some(blank),
                };
                if let Some(blank) = blank {
                    client.consume(blank);
                    let h = match client.read_head().await {
                        Ok(Some(raw)) => head::parse_request(raw).ok_or(Refusal::BadRequest)?,
                        _ => return Err(Refusal::BadRequest),
                    };
                    let named = match h.header("Host").and_then(|v| split_authority(v, port)) {
                        Some((name, p)) if literal && p == port && !is_literal(&name) => {
                            claimed(&name, Refusal::HostMismatch)?;
                            name
                        }
                        _ => host.to_string(),
                    };
                    if !tunnel_target_ok(&h, &named, port) {
                        return Err(Refusal::TargetOutsideTunnel);
                    }
                    if !host_agrees(&h, &named, port, port) {
                        return Err(Refusal::HostMismatch);
                    }
                    return Ok(Opening::Http(h, named));
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

/// What bytes that are not TLS look like so far.
pub(crate) enum Plain {
    /// Still a possible HTTP method: wait for more.
    Undecided,
    /// An HTTP request line, after `blank` empty-line bytes.
    Http {
        /// The `\r`/`\n` bytes before it.
        blank: usize,
    },
    /// Anything else.
    Other,
}

/// Whether the first bytes of a stream are an HTTP request (after any
/// empty lines), something else, or cannot be told yet; bytes that could
/// still become an HTTP method are waited on, never guessed.
pub(crate) fn plain(b: &[u8]) -> Plain {
    let blank = b.iter().take_while(|c| matches!(c, b'\r' | b'\n')).count();
    let rest = b.get(blank..).unwrap_or_default();
    let method = rest.iter().take_while(|c| is_tchar(**c)).count();
    if method == rest.len() && method <= MAX_METHOD {
        Plain::Undecided
    } else if method > 0 && rest.get(method) == Some(&b' ') {
        Plain::Http { blank }
    } else {
        Plain::Other
    }
}

/// Where a request inside a tunnel to `host:port` may go: origin-form
/// (`/path`), `*` for `OPTIONS`, or an absolute form naming the tunnel's own
/// host and port (servers prefer an absolute target's host over `Host`).
pub(crate) fn tunnel_target_ok(h: &Head, host: &str, port: u16) -> bool {
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
    }
}
