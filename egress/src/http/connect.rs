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
use crate::http::conn::Conn;
use crate::http::head::{self, Head, is_tchar};
use crate::http::{Ctx, Exchange, Next, exchange, host_agrees, next_head, open, refuse, respond};
use crate::policy::Request;
use crate::tls::{Hello, client_hello};

/// What the first bytes of a tunnel turned out to be.
enum Opening {
    /// TLS (or a literal target's anything): relayed as it is.
    Raw,
    /// A plain HTTP request, checked.
    Http(Head),
}

pub(crate) async fn connect(
    ctx: &Ctx,
    req: &mut Request<'_>,
    mut client: Conn<TcpStream>,
    head: Head,
) {
    let what = crate::http::What("CONNECT", head.target());
    let Some((host, port)) = split_authority(head.target(), 443) else {
        return refuse(ctx, req, &mut client.io, &what, "invalid_host").await;
    };
    if let Some(h) = head.header("Host") {
        let agrees =
            split_authority(h, port).is_some_and(|(hh, hp)| same_host(&hh, &host) && hp == port);
        if !agrees {
            return refuse(ctx, req, &mut client.io, &what, "host_mismatch").await;
        }
    }
    let (upstream, via_proxy) = match open(ctx, req, &host, port, Via::Https).await {
        Ok(s) => s,
        Err(reason) => return refuse(ctx, req, &mut client.io, &what, &reason).await,
    };
    let mut up = Conn::new(upstream, ctx.timeouts.tunnel_idle);
    if via_proxy {
        let line = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
        if up.write_all(line.as_bytes()).await.is_err() {
            return refuse(
                ctx,
                req,
                &mut client.io,
                &what,
                "upstream_proxy_unreachable",
            )
            .await;
        }
        let answer = tokio::time::timeout(ctx.timeouts.first_bytes, head::read_raw(&mut up)).await;
        let ok = matches!(&answer, Ok(Ok(Some(raw))) if head::parse_response(raw.clone()).is_some_and(|r| (200..300).contains(&r.code)));
        if !ok || !up.buffered().is_empty() {
            return refuse(ctx, req, &mut client.io, &what, "upstream_proxy_refused").await;
        }
    }
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
    .unwrap_or(Err("first_bytes_timeout"));
    match verdict {
        Err(reason) => {
            ctx.metrics.refusal(reason);
            req.finish(&what, &format!("refused: {reason}"));
            if matches!(reason, "bad_request" | "target_outside_tunnel") {
                respond(&mut client.io, "400 Bad Request", reason, &rev).await;
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
            let (_, upb, downb) =
                crate::relay::relay(&mut client.io, &mut up.io, ctx.timeouts).await;
            ctx.metrics.tunnel_bytes_up.add(upb);
            ctx.metrics.tunnel_bytes_down.add(downb);
        }
        Ok(Opening::Http(first)) => {
            req.finish(&what, "tunnel");
            http_tunnel(ctx, req, client, up, first, &host, port, &what).await;
        }
    }
}

/// Requests through a plain HTTP tunnel, one after the other, each checked
/// before it is sent.
#[allow(clippy::too_many_arguments)]
async fn http_tunnel(
    ctx: &Ctx,
    req: &mut Request<'_>,
    mut client: Conn<TcpStream>,
    mut up: Conn<TcpStream>,
    mut head: Head,
    host: &str,
    port: u16,
    what: &(dyn std::fmt::Display + Sync),
) {
    loop {
        ctx.metrics.http_requests.inc();
        match exchange(ctx, &mut client, &mut up, &head, false, true, false).await {
            Exchange::Done {
                client_keep: true,
                upstream_keep: true,
            } => {}
            Exchange::BadGateway => {
                return refuse(ctx, req, &mut client.io, what, "bad_gateway").await;
            }
            _ => return,
        }
        let next = match next_head(ctx, &mut client, false).await {
            Next::Closed => return,
            Next::Bad => return refuse(ctx, req, &mut client.io, what, "bad_request").await,
            Next::Head(h) => h,
        };
        if !tunnel_target_ok(&next, host, port) {
            return refuse(ctx, req, &mut client.io, what, "target_outside_tunnel").await;
        }
        if !host_agrees(&next, host, port, port) {
            return refuse(ctx, req, &mut client.io, what, "host_mismatch").await;
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
) -> Result<Opening, &'static str> {
    loop {
        match client_hello(client.buffered()) {
            Hello::Sni(sni) => {
                return if same_host(&sni, host) {
                    Ok(Opening::Raw)
                } else {
                    Err("sni_mismatch")
                };
            }
            Hello::NoSni => {
                return if literal {
                    Ok(Opening::Raw)
                } else {
                    Err("sni_missing")
                };
            }
            // The outer name of an Encrypted Client Hello is a cover name:
            // for a name target it proves nothing, so it is refused.
            Hello::Ech => {
                return if literal {
                    Ok(Opening::Raw)
                } else {
                    Err("encrypted_client_hello")
                };
            }
            Hello::NotTls if !client.buffered().is_empty() => {
                let http = looks_like_http(client.buffered());
                let parsed = match head::read_raw(client).await {
                    Ok(Some(raw)) => head::parse_request(raw),
                    _ => None,
                };
                return match parsed {
                    Some(h) if !tunnel_target_ok(&h, host, port) => Err("target_outside_tunnel"),
                    Some(h) if !host_agrees(&h, host, port, port) => Err("host_mismatch"),
                    Some(h) => Ok(Opening::Http(h)),
                    None if http => Err("bad_request"),
                    None => Err("unrecognised_protocol"),
                };
            }
            _ => {
                if client.buffered().len() > 16 * 1024 {
                    return Err("unrecognised_protocol");
                }
                match client.fill().await {
                    Ok(n) if n > 0 => {}
                    _ => return Err("unrecognised_protocol"),
                }
            }
        }
    }
}

/// Where a request inside a tunnel to `host:port` may go: origin-form
/// (`/path`), `*` for `OPTIONS`, or an absolute form naming the tunnel's own
/// host and port (servers prefer an absolute target's host over `Host`).
fn tunnel_target_ok(h: &Head, host: &str, port: u16) -> bool {
    let t = h.target();
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
        ] {
            assert!(!ok(bad), "{bad}");
        }
        assert!(looks_like_http(b"GET /") && !looks_like_http(b"\x16\x03"));
    }
}
