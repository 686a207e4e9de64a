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

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use gatehouse::query::{QueryRef, Via};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

pub use crate::authority::{same_host, split_authority};
use crate::dns::Upstream;
use crate::http::conn::Conn;
use crate::http::head::{Fields, Framing, Head, Response};
use crate::metrics::{Metrics, PROXY_REFUSALS};
use crate::policy::{Policies, Request};

/// Where to send traffic when the policy allows an upstream proxy.
#[derive(Clone, Debug)]
pub struct UpstreamProxy {
    pub addr: String,
}

impl UpstreamProxy {
    /// `HTTPS_PROXY`/`HTTP_PROXY` (either case), `http://HOST:PORT` only.
    pub fn from_env() -> Option<UpstreamProxy> {
        ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
            .iter()
            .find_map(|k| std::env::var(k).ok())
            .and_then(|v| {
                let rest = v.strip_prefix("http://")?;
                let addr = rest.trim_end_matches('/').to_string();
                (!addr.is_empty()).then_some(UpstreamProxy { addr })
            })
    }
}

/// What every connection handler shares.
pub struct Ctx {
    pub policies: Arc<Policies>,
    pub resolver: Arc<Upstream>,
    pub upstream_proxy: Option<UpstreamProxy>,
    pub timeouts: crate::relay::Timeouts,
    pub pool: pool::Pool,
    pub metrics: Arc<Metrics>,
    /// Client connections open at once, per listener.
    pub max_connections: usize,
}

/// The default cap on client connections open at once, per listener.
pub const MAX_CONNECTIONS: usize = 4096;

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

/// Decides `connect` for the target, resolves it, and checks the answers
/// with `resolved`: the addresses that may be dialled, or the refusal
/// reason.
pub async fn vet(
    ctx: &Ctx,
    req: &mut Request<'_>,
    host: &str,
    port: u16,
    via: Via,
) -> Result<Vec<IpAddr>, String> {
    let d = req.decide(QueryRef::Connect { host, port, via });
    if !d.is_allow() {
        return Err(d.reason.as_str().to_string());
    }
    let found = ctx
        .resolver
        .addresses_for(host)
        .await
        .map_err(|_| "lookup_failed".to_string())?;
    if !found.literal {
        let d = req.decide(QueryRef::Resolved {
            host,
            addrs: &found.addrs,
            port: Some(port),
        });
        if !d.is_allow() {
            return Err(d.reason.as_str().to_string());
        }
        // Only answers the policy accepted are kept for later requests.
        ctx.resolver.remember(host, &found);
    }
    if found.addrs.is_empty() {
        return Err("lookup_failed".to_string());
    }
    Ok(found.addrs)
}

/// The upstream proxy, when there is one and the policy allows it.
async fn via_upstream_proxy(ctx: &Ctx, req: &mut Request<'_>) -> Option<Result<TcpStream, String>> {
    let up = ctx.upstream_proxy.as_ref()?;
    if !req.decide(QueryRef::Upstream).is_allow() {
        return None;
    }
    Some(
        TcpStream::connect(&up.addr)
            .await
            .map_err(|_| "upstream_proxy_unreachable".to_string()),
    )
}

/// Dials the first of `addrs` that answers.
async fn dial(ctx: &Ctx, addrs: &[IpAddr], port: u16) -> Result<(TcpStream, SocketAddr), String> {
    for ip in addrs {
        let addr = SocketAddr::new(*ip, port);
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr)).await
        {
            let _ = s.set_nodelay(true);
            ctx.metrics.upstream_dialled.inc();
            return Ok((s, addr));
        }
    }
    Err("connect_failed".to_string())
}

/// Decides, resolves, checks the answers and dials: the stream to the
/// target (directly, or through the upstream proxy: `true`), or the
/// refusal reason. Used for tunnels (CONNECT, SOCKS), never pooled.
pub async fn open(
    ctx: &Ctx,
    req: &mut Request<'_>,
    host: &str,
    port: u16,
    via: Via,
) -> Result<(TcpStream, bool), String> {
    let addrs = vet(ctx, req, host, port, via).await?;
    if let Some(s) = via_upstream_proxy(ctx, req).await {
        return s.map(|s| (s, true));
    }
    dial(ctx, &addrs, port).await.map(|(s, _)| (s, false))
}

async fn handle(ctx: &Ctx, s: TcpStream) {
    let mut client = Conn::new(s, ctx.timeouts.tunnel_idle);
    let mut first = true;
    loop {
        let head = match next_head(ctx, &mut client, first).await {
            Next::Closed => return,
            Next::Bad => None,
            Next::Head(h) => Some(h),
        };
        let mut req = ctx.policies.request();
        let Some(head) = head else {
            ctx.metrics.refusal("bad_request");
            req.finish(&"-", "refused: bad_request");
            respond(&mut client.io, "400 Bad Request", "bad_request", "-").await;
            return;
        };
        if head.method().eq_ignore_ascii_case("CONNECT") {
            ctx.metrics.connect_requests.inc();
            connect::connect(ctx, &mut req, client, head).await;
            return;
        }
        ctx.metrics.http_requests.inc();
        if !forward(ctx, &mut req, &mut client, head).await {
            return;
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

/// Refuses with 403 (502 for upstream failures) and the reason, and logs
/// the request. The connection is closed after.
pub(crate) async fn refuse<S: AsyncWrite + Unpin>(
    ctx: &Ctx,
    req: &Request<'_>,
    client: &mut S,
    what: &(dyn std::fmt::Display + Sync),
    reason: &str,
) {
    let rev = crate::policy::short(req.revision()).to_string();
    let status = if matches!(
        reason,
        "connect_failed"
            | "lookup_failed"
            | "upstream_proxy_unreachable"
            | "upstream_proxy_refused"
            | "bad_gateway"
    ) {
        "502 Bad Gateway"
    } else if matches!(reason, "bad_request" | "target_outside_tunnel") {
        "400 Bad Request"
    } else {
        "403 Forbidden"
    };
    if PROXY_REFUSALS.contains(&reason) {
        ctx.metrics.refusal(reason);
    }
    req.finish(what, &format!("refused: {reason}"));
    respond(client, status, reason, &rev).await;
}

/// The host and port of an absolute `http://` target (scheme in any case);
/// `Err` is the refusal reason.
fn absolute_http_target(target: &str) -> Result<(String, u16), &'static str> {
    let Some((scheme, rest)) = target.split_once("://") else {
        return Err("absolute_form_required");
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err("absolute_form_required");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') || authority.is_empty() {
        return Err("invalid_host");
    }
    split_authority(authority, 80).ok_or("invalid_host")
}

/// One proxied request; whether the client connection may carry another.
async fn forward(
    ctx: &Ctx,
    req: &mut Request<'_>,
    client: &mut Conn<TcpStream>,
    head: Head,
) -> bool {
    let what = What(head.method(), head.target());
    let (host, port) = match absolute_http_target(head.target()) {
        Ok(hp) => hp,
        Err(reason) => {
            refuse(ctx, req, &mut client.io, &what, reason).await;
            return false;
        }
    };
    if !host_agrees(&head, &host, port, 80) {
        refuse(ctx, req, &mut client.io, &what, "host_mismatch").await;
        return false;
    }
    let addrs = match vet(ctx, req, &host, port, Via::Http).await {
        Ok(a) => a,
        Err(reason) => {
            refuse(ctx, req, &mut client.io, &what, &reason).await;
            return false;
        }
    };
    // Through the upstream proxy: absolute-form, one request per
    // connection. Directly: a pooled connection to a vetted address, or a
    // new one.
    let mut tries = 0;
    loop {
        tries += 1;
        let (stream, pooled_at, reused, absolute) = match via_upstream_proxy(ctx, req).await {
            Some(Ok(s)) => (s, None, false, true),
            Some(Err(reason)) => {
                refuse(ctx, req, &mut client.io, &what, &reason).await;
                return false;
            }
            None => match (tries == 1)
                .then(|| ctx.pool.take(&host, &addrs, port))
                .flatten()
            {
                Some((s, at)) => {
                    ctx.metrics.upstream_reused.inc();
                    (s, Some(at), true, false)
                }
                None => match dial(ctx, &addrs, port).await {
                    Ok((s, at)) => (s, Some(at), false, false),
                    Err(reason) => {
                        refuse(ctx, req, &mut client.io, &what, &reason).await;
                        return false;
                    }
                },
            },
        };
        let mut up = Conn::new(stream, ctx.timeouts.tunnel_idle);
        let keep_upstream = pooled_at.is_some();
        match exchange(ctx, client, &mut up, &head, absolute, keep_upstream, reused).await {
            Exchange::Done {
                client_keep,
                upstream_keep,
            } => {
                req.finish(&what, "forwarded");
                if let (true, Some(at)) = (upstream_keep, pooled_at) {
                    ctx.pool.put(&host, at, up.io);
                }
                return client_keep;
            }
            // A pooled connection the server had closed: the request
            // (idempotent, no body, nothing answered yet) goes once more on
            // a new one.
            Exchange::Retry if tries == 1 => continue,
            Exchange::Retry | Exchange::BadGateway => {
                refuse(ctx, req, &mut client.io, &what, "bad_gateway").await;
                return false;
            }
            Exchange::Failed => {
                req.finish(&what, "failed: cut short");
                return false;
            }
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
    absolute: bool,
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
        .write_all(&rebuild_request(head, absolute, keep_upstream))
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

/// A request head written out again: origin-form unless `absolute`, hop-by-
/// hop fields dropped (the framing fields stay: the body is sent in the
/// same framing), and `Connection: close` unless the upstream connection is
/// to be kept.
fn rebuild_request(h: &Head, absolute: bool, keep: bool) -> Vec<u8> {
    let target = if absolute {
        std::borrow::Cow::Borrowed(h.target())
    } else {
        origin_form(h.target())
    };
    let mut out = String::with_capacity(h.headers.text_len() + 32);
    for part in [h.method(), " ", &target, " ", h.version, "\r\n"] {
        out.push_str(part);
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
        assert_eq!(absolute_http_target("/x"), Err("absolute_form_required"));
        assert_eq!(
            absolute_http_target("https://a.test/"),
            Err("absolute_form_required")
        );
        assert_eq!(
            absolute_http_target("http://u@a.test/"),
            Err("invalid_host")
        );
        assert_eq!(absolute_http_target("http:///x"), Err("invalid_host"));
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
        let out = String::from_utf8(rebuild_request(&h, false, true)).expect("utf-8");
        assert_eq!(out, "GET / HTTP/1.1\r\nHost: a.test\r\nX-Keep: 2\r\n\r\n");
        // The framing fields and Host survive a `Connection` header naming
        // them.
        let h = head::parse_request(
            b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nConnection: Content-Length, host, Transfer-Encoding\r\nContent-Length: 3".to_vec(),
        )
        .expect("parses");
        let out = String::from_utf8(rebuild_request(&h, false, true)).expect("utf-8");
        assert_eq!(
            out,
            "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\n"
        );
        let out = String::from_utf8(rebuild_request(&h, true, false)).expect("utf-8");
        assert!(
            out.starts_with("POST http://a.test/ HTTP/1.1\r\n")
                && out.ends_with("Connection: close\r\n\r\n")
        );
    }
}
