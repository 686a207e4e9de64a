//! One HTTP request and its response, carried: the head rebuilt from the
//! decision (never copied from the client's target), the body copied by its
//! framing, the response relayed back. Shared by the forward proxy, plain
//! HTTP inside a tunnel (`CONNECT`, SOCKS5) and host mode's transparent
//! listener; it answers no refusal itself (its caller does, through
//! [`crate::reply`]).

#[cfg(test)]
#[allow(
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]
mod robustness;

use tokio::net::TcpStream;

use crate::conn::Conn;
use crate::gate::Ctx;
use gatehouse_wire::authority::{same_host, split_authority};
use gatehouse_wire::http::{self as head, Fields, Framing, Head, Response};

/// What comes next on a client connection.
pub(crate) enum Next {
    /// Closed (or idle too long) before a byte of another request.
    Closed,
    /// A head that is malformed, too large, or too slow to arrive.
    Bad,
    Head(Head),
}

/// The next request head on a client connection. Between requests a
/// kept-alive connection may idle for `keepalive_idle` (the `first` request
/// is not waited for); once a head starts, all of it must arrive within
/// `first_bytes` (no slow-loris holding).
pub(crate) async fn next_head(ctx: &Ctx, client: &mut Conn<TcpStream>, first: bool) -> Next {
    if !first && client.buffered().is_empty() {
        match tokio::time::timeout(ctx.timeouts.keepalive_idle, client.fill()).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return Next::Closed,
        }
    }
    match tokio::time::timeout(ctx.timeouts.first_bytes, client.read_head()).await {
        Ok(Ok(Some(raw))) => head::parse_request(raw).map_or(Next::Bad, Next::Head),
        // Closed before a byte: nothing was asked (a port probe, or the end
        // of a kept-alive connection).
        Ok(Ok(None)) => Next::Closed,
        _ => Next::Bad,
    }
}

/// How one request and its response went.
pub(crate) enum Exchange {
    /// Complete; whether each side may carry another message.
    Done {
        client_keep: bool,
        upstream_keep: bool,
    },
    /// A reused upstream connection failed before any byte of a response;
    /// the request is idempotent and had no body, so it can be sent again.
    Retry,
    /// The upstream's response is missing or malformed; nothing of it
    /// reached the client.
    BadGateway,
    /// Failed midway (a malformed request body, a client gone, a response
    /// cut short): close both.
    Failed,
}

/// Sends `head` (and its body, by its framing) upstream and the response
/// back, by the response's framing.
pub(crate) async fn exchange(
    ctx: &Ctx,
    client: &mut Conn<TcpStream>,
    up: &mut Conn<TcpStream>,
    head: &Head,
    decided: &Decided<'_>,
    keep_upstream: bool,
    reused: bool,
) -> Exchange {
    let framing = head.framing();
    // Sent again only when nothing of it can have taken effect twice: an
    // idempotent method without a body (RFC 9110 §9.2.2).
    let idempotent = ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]
        .iter()
        .any(|m| head.method().eq_ignore_ascii_case(m));
    let retryable = reused && framing == Framing::None && idempotent;
    let expect = head
        .header("Expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    if up
        .write_all(&rebuild_request(head, decided, keep_upstream))
        .await
        .is_err()
    {
        return if retryable {
            Exchange::Retry
        } else {
            Exchange::BadGateway
        };
    }
    // The proxy answers `Expect: 100-continue` itself (it was decided) and
    // does not pass the expectation on.
    if expect
        && framing != Framing::None
        && client
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .is_err()
    {
        return Exchange::Failed;
    }
    match client.copy_body(&mut up.io, framing).await {
        Ok(n) => ctx.metrics.tunnel_bytes_up.add(n),
        Err(_) => return Exchange::Failed,
    }
    loop {
        let raw = match up.read_head().await {
            Ok(Some(raw)) => raw,
            Ok(None) | Err(crate::conn::ReadError::Io) if retryable => return Exchange::Retry,
            _ => return Exchange::BadGateway,
        };
        let Some(resp) = head::parse_response(raw) else {
            return Exchange::BadGateway;
        };
        if (100..200).contains(&resp.code) {
            // No upgrade is ever asked for, so a 101 is a broken server.
            if resp.code == 101 {
                return Exchange::BadGateway;
            }
            if head.version == "HTTP/1.1"
                && !(expect && resp.code == 100)
                && client
                    .write_all(&rebuild_response(&resp, true))
                    .await
                    .is_err()
            {
                return Exchange::Failed;
            }
            continue;
        }
        let rf = resp.framing(head.method());
        let client_keep = head.keep_alive() && rf != Framing::Close;
        if client
            .write_all(&rebuild_response(&resp, client_keep))
            .await
            .is_err()
        {
            return Exchange::Failed;
        }
        match up.copy_body(&mut client.io, rf).await {
            Ok(n) => ctx.metrics.tunnel_bytes_down.add(n),
            Err(_) => return Exchange::Failed,
        }
        let upstream_keep =
            keep_upstream && resp.keep_alive() && rf != Framing::Close && up.buffered().is_empty();
        return Exchange::Done {
            client_keep,
            upstream_keep,
        };
    }
}

/// Hop-by-hop fields (RFC 9110 §7.6.1) and the proxy's own: never passed
/// on.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

/// Whether field `name` is dropped: hop-by-hop, or named by a `Connection`
/// field — except the framing fields and `Host`, which a `Connection`
/// field never removes (`Connection: content-length` would otherwise turn
/// the body that follows into a request the proxy never decided).
fn dropped(name: &str, headers: &Fields) -> bool {
    if HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) {
        return true;
    }
    let framing = ["host", "content-length", "transfer-encoding"]
        .iter()
        .any(|f| name.eq_ignore_ascii_case(f));
    !framing && headers.connection_has(name)
}

/// Where a request was decided to go: what the proxy writes upstream is
/// rebuilt from this, never copied from the client's target.
pub(crate) struct Decided<'a> {
    /// The decided host (an IPv6 literal in brackets).
    pub host: &'a str,
    /// The decided port.
    pub port: u16,
}

/// A request head written out again: the target rebuilt in origin-form
/// (`/path?q`; an upstream proxy is reached through its tunnel to a vetted
/// address, so the client's authority bytes never reach another parser);
/// `Host` generated from the decided target when the
/// client sent none (HTTP/1.0, RFC 9112 §3.2); hop-by-hop fields dropped
/// (the framing fields stay: the body is sent in the same framing); and
/// `Connection: close` unless the upstream connection is to be kept.
fn rebuild_request(h: &Head, decided: &Decided<'_>, keep: bool) -> Vec<u8> {
    let path = origin_form(h.target());
    // Defensive: a fragment is refused before, and never sent.
    let target = path.split('#').next().unwrap_or("/");
    let mut out = String::with_capacity(h.headers.text_len() + 64);
    for part in [h.method(), " ", target, " ", h.version, "\r\n"] {
        out.push_str(part);
    }
    if h.header("Host").is_none() {
        out.push_str("Host: ");
        out.push_str(decided.host);
        if decided.port != 80 {
            out.push_str(&format!(":{}", decided.port));
        }
        out.push_str("\r\n");
    }
    push_fields(&mut out, &h.headers, keep);
    out.into_bytes()
}

/// A response head for the client: hop-by-hop fields dropped, and
/// `Connection: close` unless the client connection is kept.
fn rebuild_response(r: &Response, keep: bool) -> Vec<u8> {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(r.headers.text_len() + 32);
    let _ = write!(out, "HTTP/1.1 {} {}\r\n", r.code, r.reason());
    push_fields(&mut out, &r.headers, keep);
    out.into_bytes()
}

fn push_fields(out: &mut String, headers: &Fields, keep: bool) {
    for (k, v) in headers.iter() {
        if dropped(k, headers) {
            continue;
        }
        for part in [k, ": ", v, "\r\n"] {
            out.push_str(part);
        }
    }
    if !keep {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
}

/// What a request asked, for its access record (formatted only when one is
/// written).
pub(crate) struct What<'a>(pub &'a str, pub &'a str);

impl std::fmt::Display for What<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str(self.1)
        } else {
            write!(f, "{} {}", self.0, self.1)
        }
    }
}

/// A target in origin-form: an absolute `SCHEME://authority/path?q` (any
/// case) becomes `/path?q` (`?q` without a path becomes `/?q`); anything
/// else stays as it is.
fn origin_form(target: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    match target.split_once("://") {
        Some((scheme, rest)) if scheme.bytes().all(|c| c.is_ascii_alphabetic()) => {
            match rest.find(['/', '?']) {
                Some(i) if rest.get(i..i + 1) == Some("?") => {
                    Cow::Owned(format!("/{}", rest.get(i..).unwrap_or("")))
                }
                Some(i) => Cow::Borrowed(rest.get(i..).unwrap_or("/")),
                None => Cow::Borrowed("/"),
            }
        }
        _ => Cow::Borrowed(target),
    }
}

/// Whether a request's `Host` names `host:port` (a `Host` without a port
/// means `default_port`). HTTP/1.0 may leave `Host` out: the target's host
/// stands for it then (HTTP/1.1 may not).
pub(crate) fn host_agrees(h: &Head, host: &str, port: u16, default_port: u16) -> bool {
    match h.header("Host") {
        Some(v) => split_authority(v, default_port)
            .is_some_and(|(hh, hp)| same_host(&hh, host) && hp == port),
        None => h.version == "HTTP/1.0",
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn origin_forms() {
        assert_eq!(origin_form("HTTPS://a.test:1/p?q"), "/p?q");
        assert_eq!(origin_form("http://a.test?q"), "/?q");
        assert_eq!(origin_form("http://a.test"), "/");
        assert_eq!(origin_form("/p"), "/p");
    }

    #[test]
    fn hop_by_hop_fields_are_dropped() {
        let h = head::parse_request(
            b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nProxy-Authorization: basic x\r\nExpect: 100-continue\r\nX-Keep: 2".to_vec(),
        )
        .expect("parses");
        let out = String::from_utf8(rebuild_request(&h, &at(), true)).expect("utf-8");
        assert_eq!(out, "GET / HTTP/1.1\r\nHost: a.test\r\nX-Keep: 2\r\n\r\n");
        // The framing fields and Host survive a `Connection` header naming
        // them.
        let h = head::parse_request(
            b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nConnection: Content-Length, host, Transfer-Encoding\r\nContent-Length: 3".to_vec(),
        )
        .expect("parses");
        let out = String::from_utf8(rebuild_request(&h, &at(), true)).expect("utf-8");
        assert_eq!(
            out,
            "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\n"
        );
        let out = String::from_utf8(rebuild_request(&h, &at(), false)).expect("utf-8");
        assert!(
            out.starts_with("POST / HTTP/1.1\r\n") && out.ends_with("Connection: close\r\n\r\n")
        );
    }

    fn at() -> Decided<'static> {
        Decided {
            host: "a.test",
            port: 80,
        }
    }

    /// What goes upstream is rebuilt from what was decided: origin-form,
    /// so a query or path holding `@` or an authority cannot move the
    /// target (issue 35, finding 1), and an HTTP/1.0 request without
    /// `Host` gets the decided one (finding 4).
    #[test]
    fn the_upstream_target_is_rebuilt_from_the_decision() {
        let decided = Decided {
            host: "allowed.test",
            port: 18080,
        };
        for (target, line) in [
            (
                "http://allowed.test:18080?@denied.test:18081/",
                "GET /?@denied.test:18081/ HTTP/1.1\r\n",
            ),
            (
                "HTTP://Allowed.Test:18080/p/@denied.test:1?q=@x",
                "GET /p/@denied.test:1?q=@x HTTP/1.1\r\n",
            ),
            ("http://allowed.test:18080", "GET / HTTP/1.1\r\n"),
        ] {
            let h = head::parse_request(
                format!("GET {target} HTTP/1.1\r\nHost: allowed.test:18080").into_bytes(),
            )
            .expect("parses");
            let out = String::from_utf8(rebuild_request(&h, &decided, true)).expect("utf-8");
            assert!(out.starts_with(line), "{target}: {out}");
        }
        // HTTP/1.0 without Host: the decided one, with its port.
        let h = head::parse_request(b"GET http://allowed.test:18080/x HTTP/1.0".to_vec())
            .expect("parses");
        let out = String::from_utf8(rebuild_request(&h, &decided, false)).expect("utf-8");
        assert!(out.contains("\r\nHost: allowed.test:18080\r\n"), "{out}");
        let h = head::parse_request(b"GET http://a.test/x HTTP/1.0".to_vec()).expect("parses");
        let out = String::from_utf8(rebuild_request(&h, &at(), false)).expect("utf-8");
        assert!(
            out.starts_with("GET /x HTTP/1.0\r\nHost: a.test\r\n"),
            "{out}"
        );
    }
}
