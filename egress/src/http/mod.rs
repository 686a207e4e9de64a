//! The HTTP forward proxy: absolute-form requests on kept-alive
//! connections, and `CONNECT` tunnels ([`connect`]).
//!
//! Every request is decided by its target, and the target, the `Host`
//! header and — inside a CONNECT tunnel — the TLS server name (or every
//! tunnelled request's target and `Host`) must all name the same host: a
//! mismatch is refused (no domain fronting). The name is then resolved
//! once, the answers checked with `resolved`, and only those addresses are
//! dialled, or an idle connection to one of them reused ([`pool`]).
//!
//! Messages are framed ([`head`], [`conn`]): a body is copied exactly as far
//! as its length or its chunks say, so the bytes after it are read as the
//! next request and decided like the first. Nothing undecided is forwarded.

pub mod conn;
pub mod connect;
pub mod head;
pub mod pool;
#[cfg(test)]
#[allow(
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]
mod robustness;

use std::sync::Arc;

use gatehouse::query::Via;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

pub use crate::authority::{same_host, split_authority};
use crate::gate::{self, Ctx, Refusal};
use crate::http::conn::Conn;
use crate::http::head::{Fields, Framing, Head, Response};
use crate::policy::Request;

/// Serves the proxy on `listener` until the runtime ends.
pub fn serve(ctx: Arc<Ctx>, listener: tokio::net::TcpListener) {
    let (cap, m) = (ctx.max_connections, ctx.metrics.clone());
    crate::listener::accept_loop(listener, cap, m, move |s, _| {
        let ctx = ctx.clone();
        async move {
            let _ = s.set_nodelay(true);
            let total = ctx.timeouts.tunnel_total.min(crate::relay::CAP);
            let _ = tokio::time::timeout(total, handle(&ctx, s)).await;
        }
    });
}

/// Writes a refusal (or a 400) with the reason, and `Connection: close`.
pub(crate) async fn respond<S: AsyncWrite + Unpin>(
    s: &mut S,
    status: &str,
    reason: &str,
    revision: &str,
) {
    let body = format!("gatehouse: {reason}\n");
    let msg = format!(
        "HTTP/1.1 {status}\r\nX-Gatehouse-Reason: {reason}\r\nX-Gatehouse-Revision: {revision}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(msg.as_bytes()).await;
    let _ = s.shutdown().await;
}

/// The connection loop: the one place a plain HTTP client is answered.
async fn handle(ctx: &Ctx, s: TcpStream) {
    let mut client = Conn::new(s, ctx.timeouts.tunnel_idle);
    let mut first = true;
    loop {
        let head = match next_head(ctx, &mut client, first).await {
            Next::Closed => return,
            Next::Bad => None,
            Next::Head(h) => Some(h),
        };
        let mut req = ctx.request();
        let Some(head) = head else {
            refuse(ctx, &req, &mut client.io, &"-", Refusal::BadRequest).await;
            return;
        };
        req.traced_by(head.header("traceparent"));
        if head.method().eq_ignore_ascii_case("CONNECT") {
            ctx.metrics.connect_requests.inc();
            connect::connect(ctx, &mut req, client, head).await;
            return;
        }
        ctx.metrics.http_requests.inc();
        let what = What(head.method(), head.target());
        match forward(ctx, &mut req, &mut client, &head).await {
            Ok(Forwarded::Done { client_keep }) => {
                req.finish(&what, "forwarded");
                if !client_keep {
                    return;
                }
            }
            Ok(Forwarded::CutShort) => {
                req.finish(&what, "failed: cut short");
                return;
            }
            Err(r) => {
                refuse(ctx, &req, &mut client.io, &what, r).await;
                return;
            }
        }
        first = false;
    }
}

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
    match tokio::time::timeout(ctx.timeouts.first_bytes, head::read_raw(client)).await {
        Ok(Ok(Some(raw))) => head::parse_request(raw).map_or(Next::Bad, Next::Head),
        // Closed before a byte: nothing was asked (a port probe, or the end
        // of a kept-alive connection).
        Ok(Ok(None)) => Next::Closed,
        _ => Next::Bad,
    }
}

/// Records a refusal and answers it with its status (403, 400 or 502) and
/// `X-Gatehouse-Reason`; the connection is closed after.
pub(crate) async fn refuse<S: AsyncWrite + Unpin>(
    ctx: &Ctx,
    req: &Request<'_>,
    client: &mut S,
    what: &(dyn std::fmt::Display + Sync),
    refusal: Refusal,
) {
    gate::record(ctx, req, what, refusal);
    let rev = req.revision().to_string();
    respond(client, refusal.status_line(), refusal.as_str(), &rev).await;
}

/// The host and port of an absolute `http://` target (scheme in any case).
fn absolute_http_target(target: &str) -> Result<(String, u16), Refusal> {
    // A fragment is never part of a request-target (RFC 9112 §3.2): a
    // target holding one is read differently by different parsers
    // (`http://a:1#@b:2/` is `b:2` to some), so it is refused.
    if target.contains('#') {
        return Err(Refusal::BadRequest);
    }
    let Some((scheme, rest)) = target.split_once("://") else {
        return Err(Refusal::AbsoluteFormRequired);
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(Refusal::AbsoluteFormRequired);
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') || authority.is_empty() {
        return Err(Refusal::InvalidHost);
    }
    split_authority(authority, 80).ok_or(Refusal::InvalidHost)
}

/// How a forwarded request ended, when it was not refused.
enum Forwarded {
    /// Answered; whether the client connection may carry another request.
    Done { client_keep: bool },
    /// Failed midway (a malformed body, a client gone, a response cut
    /// short): nothing more can be said to the client.
    CutShort,
}

/// One proxied request: checked, vetted through the gate, sent and
/// answered. A refusal is returned, never written: the loop answers it.
async fn forward(
    ctx: &Ctx,
    req: &mut Request<'_>,
    client: &mut Conn<TcpStream>,
    head: &Head,
) -> Result<Forwarded, Refusal> {
    let (host, port) = absolute_http_target(head.target())?;
    if !host_agrees(head, &host, port, 80) {
        return Err(Refusal::HostMismatch);
    }
    let addrs = gate::vet(ctx, req, &host, port, Via::Http).await?;
    // Through the upstream proxy: its tunnel to a vetted address, one
    // request per tunnel, origin-form inside. Directly: a pooled connection
    // to a vetted address, or a new one.
    let mut tries = 0;
    loop {
        tries += 1;
        let (stream, pooled_at, reused) = match gate::via_upstream(ctx, req, &addrs, port).await? {
            Some(s) => (s, None, false),
            None => match (tries == 1)
                .then(|| ctx.pool.take(&host, &addrs, port))
                .flatten()
            {
                Some((s, at)) => {
                    ctx.metrics.upstream_reused.inc();
                    (s, Some(at), true)
                }
                None => {
                    let (s, at) = gate::dial(ctx, &addrs, port).await?;
                    (s, Some(at), false)
                }
            },
        };
        let mut up = Conn::new(stream, ctx.timeouts.tunnel_idle);
        let keep_upstream = pooled_at.is_some();
        let decided = Decided { host: &host, port };
        match exchange(ctx, client, &mut up, head, &decided, keep_upstream, reused).await {
            Exchange::Done {
                client_keep,
                upstream_keep,
            } => {
                if let (true, Some(at)) = (upstream_keep, pooled_at) {
                    ctx.pool.put(&host, at, up.io);
                }
                return Ok(Forwarded::Done { client_keep });
            }
            // A pooled connection the server had closed: the request
            // (idempotent, no body, nothing answered yet) goes once more on
            // a new one.
            Exchange::Retry if tries == 1 => continue,
            Exchange::Retry | Exchange::BadGateway => return Err(Refusal::BadGateway),
            Exchange::Failed => return Ok(Forwarded::CutShort),
        }
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
        let raw = match head::read_raw(up).await {
            Ok(Some(raw)) => raw,
            Ok(None) | Err(conn::ReadError::Io) if retryable => return Exchange::Retry,
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
    fn targets() {
        assert_eq!(
            absolute_http_target("HTTP://a.test:81/x"),
            Ok(("a.test".into(), 81))
        );
        assert_eq!(
            absolute_http_target("http://a.test?q"),
            Ok(("a.test".into(), 80))
        );
        assert_eq!(
            absolute_http_target("/x"),
            Err(Refusal::AbsoluteFormRequired)
        );
        assert_eq!(
            absolute_http_target("https://a.test/"),
            Err(Refusal::AbsoluteFormRequired)
        );
        assert_eq!(
            absolute_http_target("http://u@a.test/"),
            Err(Refusal::InvalidHost)
        );
        assert_eq!(absolute_http_target("http:///x"), Err(Refusal::InvalidHost));
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
        // A fragment is refused before anything is decided.
        for t in [
            "http://allowed.test:18080#@denied.test:18081/",
            "http://allowed.test:18080/#x",
        ] {
            assert_eq!(absolute_http_target(t), Err(Refusal::BadRequest), "{t}");
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
