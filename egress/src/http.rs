//! The HTTP forward proxy: absolute-form requests and `CONNECT` tunnels.
//!
//! Every request is decided by its target, and the target, the `Host`
//! header and — inside a CONNECT tunnel — the TLS server name (or the
//! tunnelled request's `Host`) must all name the same host: a mismatch is
//! refused (no domain fronting). The name is then resolved once, the answers
//! checked with `resolved`, and only those addresses are dialled.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use gatehouse::query::{Query, Via};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::dns::Upstream;
use crate::policy::{Policies, Request};
use crate::tls::{Hello, client_hello};

const MAX_HEAD: usize = 64 * 1024;

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

pub struct Ctx {
    pub policies: Arc<Policies>,
    pub resolver: Arc<Upstream>,
    pub upstream_proxy: Option<UpstreamProxy>,
    pub timeouts: crate::relay::Timeouts,
}

/// At most this many client connections at once (per listener); more wait
/// in the kernel's accept queue.
pub const MAX_CONNECTIONS: usize = 4096;

/// Accepts on `listener` until the runtime ends, each connection handled on
/// its own task, at most [`MAX_CONNECTIONS`] at once.
pub(crate) fn accept_loop<F, Fut>(listener: TcpListener, handle: F)
where
    F: Fn(TcpStream, SocketAddr) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let Ok((s, peer)) = listener.accept().await else {
                continue;
            };
            let work = handle(s, peer);
            tokio::spawn(async move {
                work.await;
                drop(permit);
            });
        }
    });
}

/// Serves the proxy on `listener` until the runtime ends.
pub fn serve(ctx: Arc<Ctx>, listener: TcpListener) {
    accept_loop(listener, move |s, _| {
        let ctx = ctx.clone();
        async move {
            let _ = s.set_nodelay(true);
            handle(&ctx, s).await;
        }
    });
}

/// A request head: the request line and the headers, as read.
pub struct Head {
    pub method: String,
    pub target: String,
    pub version: String,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads up to the end of the head; returns it and what followed it.
pub async fn read_head<S: AsyncRead + Unpin>(
    s: &mut S,
    mut buf: Vec<u8>,
) -> Option<(Head, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = parse_head(buf.get(..end)?)?;
            return Some((head, buf.get(end + 4..)?.to_vec()));
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(chunk.get(..n)?);
    }
}

/// A header name's characters (RFC 9110 `tchar`).
fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// Parses a head strictly: lines end in CRLF only; no bare CR or LF, NUL or
/// other control character (HTAB only inside header values); no whitespace
/// before a header's colon; no obs-fold; at most one `Host`; and a message
/// with both `Content-Length` and `Transfer-Encoding`, or with differing or
/// malformed lengths, is refused. Whatever a lenient server might read
/// differently from this proxy is refused (RFC 9112 §2.2, §5, §6.3).
fn parse_head(b: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(b).ok()?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next()?;
    if request_line.bytes().any(|c| c.is_ascii_control()) {
        return None;
    }
    let mut first = request_line.split(' ');
    let (method, target, version) = (first.next()?, first.next()?, first.next()?);
    if first.next().is_some()
        || !version.starts_with("HTTP/1.")
        || method.is_empty()
        || !method.bytes().all(is_tchar)
        || target.is_empty()
    {
        return None;
    }
    let mut headers: Vec<(String, String)> = Vec::new();
    for l in lines {
        if l.bytes().any(|c| c.is_ascii_control() && c != b'\t') {
            return None;
        }
        let (k, v) = l.split_once(':')?;
        // An empty name, whitespace before the colon, and obs-fold (a line
        // starting with blanks) all fail `tchar`.
        if k.is_empty() || !k.bytes().all(is_tchar) {
            return None;
        }
        headers.push((k.to_string(), v.trim_matches([' ', '\t']).to_string()));
    }
    let named = |n: &'static str| {
        headers
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(n))
    };
    if named("Host").count() > 1 {
        return None;
    }
    let mut lengths = named("Content-Length").map(|(_, v)| v.as_str());
    if let Some(len) = lengths.next() {
        let digits = !len.is_empty() && len.bytes().all(|c| c.is_ascii_digit());
        if !digits || lengths.any(|other| other != len) || named("Transfer-Encoding").count() > 0 {
            return None;
        }
    }
    Some(Head {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
    })
}

/// Where a request inside a tunnel to `host:port` may go: origin-form
/// (`/path`), `*` for `OPTIONS`, or an absolute form naming the tunnel's own
/// host and port (servers prefer an absolute target's host over `Host`).
fn tunnel_target_ok(h: &Head, host: &str, port: u16) -> bool {
    let t = h.target.as_str();
    if t.starts_with('/') {
        return true;
    }
    if t == "*" {
        return h.method.eq_ignore_ascii_case("OPTIONS");
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

/// `HOST:PORT` (IPv6 in brackets) into the host (brackets kept) and port.
pub fn split_authority(a: &str, default_port: u16) -> Option<(String, u16)> {
    if let Some(rest) = a.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default_port,
            None => return None,
        };
        return Some((format!("[{h}]"), port));
    }
    match a.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), p.parse().ok()?)),
        None => Some((a.to_string(), default_port)),
    }
}

/// Hosts compared as a resolver would see them: ASCII case and one trailing
/// dot do not matter; anything else does.
pub fn same_host(a: &str, b: &str) -> bool {
    let n = |s: &str| s.trim_end_matches('.').to_ascii_lowercase();
    !a.is_empty() && n(a) == n(b)
}

async fn respond<S: AsyncWrite + Unpin>(s: &mut S, status: &str, reason: &str, revision: &str) {
    let body = format!("gatehouse: {reason}\n");
    let msg = format!(
        "HTTP/1.1 {status}\r\nX-Gatehouse-Reason: {reason}\r\nX-Gatehouse-Revision: {revision}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(msg.as_bytes()).await;
    let _ = s.shutdown().await;
}

/// Decides, resolves, checks the answers and dials: the stream to the
/// target (directly or through the upstream proxy), or the refusal reason.
pub async fn open(
    ctx: &Ctx,
    req: &mut Request<'_>,
    host: &str,
    port: u16,
    via: Via,
) -> Result<(TcpStream, bool), String> {
    let d = req.decide(&Query::Connect {
        host: host.to_string(),
        port: i64::from(port),
        via,
    });
    if !d.is_allow() {
        return Err(d.reason.as_str().to_string());
    }
    let literal = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok();
    let addrs = ctx
        .resolver
        .addresses_for(host)
        .await
        .map_err(|_| "lookup_failed".to_string())?;
    if !literal {
        let text: Vec<String> = addrs.iter().map(IpAddr::to_string).collect();
        let d = req.decide(&Query::Resolved {
            host: host.to_string(),
            addrs: text,
            port: Some(i64::from(port)),
        });
        if !d.is_allow() {
            return Err(d.reason.as_str().to_string());
        }
    }
    // An upstream proxy from the environment, when the policy allows one.
    if let Some(up) = &ctx.upstream_proxy
        && req.decide(&Query::Upstream).is_allow()
    {
        let s = TcpStream::connect(&up.addr)
            .await
            .map_err(|_| "upstream_proxy_unreachable".to_string())?;
        return Ok((s, true));
    }
    for ip in addrs {
        if let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_secs(10),
            TcpStream::connect(SocketAddr::new(ip, port)),
        )
        .await
        {
            let _ = s.set_nodelay(true);
            return Ok((s, false));
        }
    }
    Err("connect_failed".to_string())
}

async fn handle(ctx: &Ctx, mut client: TcpStream) {
    // A client gets `first_bytes` to send its request head, in all (no
    // slow-loris holding).
    let head =
        tokio::time::timeout(ctx.timeouts.first_bytes, read_head(&mut client, Vec::new())).await;
    let Ok(Some((head, rest))) = head else {
        respond(&mut client, "400 Bad Request", "bad_request", "-").await;
        return;
    };
    let mut req = ctx.policies.request();
    if head.method.eq_ignore_ascii_case("CONNECT") {
        connect(ctx, &mut req, client, head, rest).await;
    } else {
        forward(ctx, &mut req, client, head, rest).await;
    }
}

/// Refuses with 403 and the reason, and logs the request.
async fn refuse(req: &Request<'_>, client: &mut TcpStream, what: &str, reason: &str) {
    let rev = crate::policy::short(req.revision()).to_string();
    let status = if reason == "connect_failed"
        || reason == "lookup_failed"
        || reason == "upstream_proxy_unreachable"
    {
        "502 Bad Gateway"
    } else {
        "403 Forbidden"
    };
    req.finish(what, &format!("refused: {reason}"));
    respond(client, status, reason, &rev).await;
}

async fn connect(
    ctx: &Ctx,
    req: &mut Request<'_>,
    mut client: TcpStream,
    head: Head,
    rest: Vec<u8>,
) {
    let what = format!("CONNECT {}", head.target);
    let Some((host, port)) = split_authority(&head.target, 443) else {
        return refuse(req, &mut client, &what, "invalid_host").await;
    };
    if let Some(h) = head.header("Host") {
        let agrees =
            split_authority(h, port).is_some_and(|(hh, hp)| same_host(&hh, &host) && hp == port);
        if !agrees {
            return refuse(req, &mut client, &what, "host_mismatch").await;
        }
    }
    let (mut upstream, via_proxy) = match open(ctx, req, &host, port, Via::Https).await {
        Ok(s) => s,
        Err(reason) => return refuse(req, &mut client, &what, &reason).await,
    };
    if via_proxy {
        let line = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
        if upstream.write_all(line.as_bytes()).await.is_err() {
            return refuse(req, &mut client, &what, "upstream_proxy_unreachable").await;
        }
        match read_head_response(&mut upstream).await {
            Some(code) if code.starts_with('2') => {}
            _ => return refuse(req, &mut client, &what, "upstream_proxy_refused").await,
        }
    }
    let rev = crate::policy::short(req.revision()).to_string();
    let ok = format!("HTTP/1.1 200 Connection established\r\nX-Gatehouse-Revision: {rev}\r\n\r\n");
    if client.write_all(ok.as_bytes()).await.is_err() {
        return;
    }
    // The first bytes of the tunnel must name the same host, and must all
    // arrive within `first_bytes` of the `200` (a drip does not extend it).
    let mut first = rest;
    let literal = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok();
    let verdict = tokio::time::timeout(
        ctx.timeouts.first_bytes,
        tunnel_verdict(&mut client, &mut first, &host, port, literal),
    )
    .await
    .unwrap_or(Err("first_bytes_timeout"));
    if let Err(reason) = verdict {
        req.finish(&what, &format!("refused: {reason}"));
        if matches!(reason, "bad_request" | "target_outside_tunnel") {
            respond(&mut client, "400 Bad Request", reason, &rev).await;
        }
        return; // dropping both streams closes the tunnel
    }
    req.finish(&what, "tunnel");
    if upstream.write_all(&first).await.is_err() {
        return;
    }
    crate::relay::relay(&mut client, &mut upstream, ctx.timeouts).await;
}

/// Reads the first bytes of a tunnel until they can be judged: a TLS
/// ClientHello's server name, or a plain HTTP head (strict, its target in
/// the tunnel, its `Host` agreeing). `first` ends holding the bytes to send
/// upstream.
async fn tunnel_verdict(
    client: &mut TcpStream,
    first: &mut Vec<u8>,
    host: &str,
    port: u16,
    literal: bool,
) -> Result<(), &'static str> {
    loop {
        match client_hello(first) {
            Hello::Sni(sni) => {
                return if same_host(&sni, host) {
                    Ok(())
                } else {
                    Err("sni_mismatch")
                };
            }
            Hello::NoSni => return if literal { Ok(()) } else { Err("sni_missing") },
            // The outer name of an Encrypted Client Hello is a cover name:
            // for a name target it proves nothing, so it is refused.
            Hello::Ech => {
                return if literal {
                    Ok(())
                } else {
                    Err("encrypted_client_hello")
                };
            }
            Hello::NotTls if !first.is_empty() => {
                // A plain HTTP request through the tunnel: parsed as strictly
                // as a proxied one, its target must stay in the tunnel and
                // its Host must agree. A malformed head or a target elsewhere
                // is answered 400 inside the tunnel.
                let http = looks_like_http(first);
                match read_head(client, std::mem::take(first)).await {
                    Some((h, body)) => {
                        if !tunnel_target_ok(&h, host, port) {
                            return Err("target_outside_tunnel");
                        }
                        let agrees = host_agrees(&h, host, port, port);
                        *first = rebuild(&h, &body, false);
                        return if agrees { Ok(()) } else { Err("host_mismatch") };
                    }
                    None if http => return Err("bad_request"),
                    None => return Err("unrecognised_protocol"),
                }
            }
            _ => {
                if first.len() > 16 * 1024 {
                    return Err("unrecognised_protocol");
                }
                let mut chunk = [0u8; 4096];
                match client.read(&mut chunk).await {
                    Ok(n) if n > 0 => first.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                    _ => return Err("unrecognised_protocol"),
                }
            }
        }
    }
}

/// The status code of an upstream proxy's response head.
async fn read_head_response(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let text = std::str::from_utf8(buf.get(..end)?).ok()?;
            return text.split(' ').nth(1).map(str::to_string);
        }
        let mut b = [0u8; 1];
        if s.read(&mut b).await.ok()? == 0 || buf.len() > MAX_HEAD {
            return None;
        }
        buf.extend_from_slice(&b);
    }
}

/// A request head written out again: origin-form unless `absolute`, hop-by-
/// hop and proxy headers dropped, and `Connection: close` so that the
/// connection carries this one request (a second one, perhaps for another
/// host, would not be decided).
fn rebuild(h: &Head, body: &[u8], absolute: bool) -> Vec<u8> {
    let target = if absolute {
        h.target.clone()
    } else {
        origin_form(&h.target)
    };
    let mut out = format!("{} {} {}\r\n", h.method, target, h.version);
    for (k, v) in &h.headers {
        let k_l = k.to_ascii_lowercase();
        if matches!(
            k_l.as_str(),
            "connection"
                | "keep-alive"
                | "proxy-connection"
                | "proxy-authorization"
                | "te"
                | "upgrade"
        ) {
            continue;
        }
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// A target in origin-form: an absolute `SCHEME://authority/path?q` (any
/// case) becomes `/path?q`; anything else stays as it is.
fn origin_form(target: &str) -> String {
    match target.split_once("://") {
        Some((scheme, rest)) if scheme.bytes().all(|c| c.is_ascii_alphabetic()) => {
            match rest.find(['/', '?']) {
                Some(i) if rest.get(i..i + 1) == Some("?") => {
                    format!("/{}", rest.get(i..).unwrap_or(""))
                }
                Some(i) => rest.get(i..).unwrap_or("/").to_string(),
                None => "/".to_string(),
            }
        }
        _ => target.to_string(),
    }
}

/// Whether a request's `Host` names `host:port` (a `Host` without a port
/// means `default_port`). HTTP/1.0 may leave `Host` out: the target's host
/// stands for it then (HTTP/1.1 may not).
fn host_agrees(h: &Head, host: &str, port: u16, default_port: u16) -> bool {
    match h.header("Host") {
        Some(v) => split_authority(v, default_port)
            .is_some_and(|(hh, hp)| same_host(&hh, host) && hp == port),
        None => h.version == "HTTP/1.0",
    }
}

/// Whether bytes start like an HTTP request line (a method, a space).
fn looks_like_http(b: &[u8]) -> bool {
    let method = b.iter().take_while(|c| is_tchar(**c)).count();
    method > 0 && b.get(method) == Some(&b' ')
}

async fn forward(
    ctx: &Ctx,
    req: &mut Request<'_>,
    mut client: TcpStream,
    head: Head,
    rest: Vec<u8>,
) {
    let what = format!("{} {}", head.method, head.target);
    let Some(authority) = head
        .target
        .strip_prefix("http://")
        .map(|r| r.split('/').next().unwrap_or(""))
    else {
        return refuse(req, &mut client, &what, "absolute_form_required").await;
    };
    if authority.contains('@') {
        return refuse(req, &mut client, &what, "invalid_host").await;
    }
    let Some((host, port)) = split_authority(authority, 80) else {
        return refuse(req, &mut client, &what, "invalid_host").await;
    };
    if !host_agrees(&head, &host, port, 80) {
        return refuse(req, &mut client, &what, "host_mismatch").await;
    }
    let (mut upstream, via_proxy) = match open(ctx, req, &host, port, Via::Http).await {
        Ok(s) => s,
        Err(reason) => return refuse(req, &mut client, &what, &reason).await,
    };
    req.finish(&what, "forwarded");
    if upstream
        .write_all(&rebuild(&head, &rest, via_proxy))
        .await
        .is_err()
    {
        return;
    }
    crate::relay::relay(&mut client, &mut upstream, ctx.timeouts).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        assert_eq!(
            split_authority("a.example:443", 80),
            Some(("a.example".into(), 443))
        );
        assert_eq!(
            split_authority("a.example", 80),
            Some(("a.example".into(), 80))
        );
        assert_eq!(
            split_authority("[::1]:8080", 80),
            Some(("[::1]".into(), 8080))
        );
        assert_eq!(split_authority("[::1]", 80), Some(("[::1]".into(), 80)));
        assert_eq!(split_authority("a:b", 80), None);
        assert!(same_host("A.Example.", "a.example"));
        assert!(!same_host("a.example", "b.example"));
        assert!(!same_host("", ""));
    }

    fn head(text: &str) -> Option<Head> {
        parse_head(text.as_bytes())
    }

    #[test]
    fn heads_are_parsed_strictly() {
        let ok = "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: 1\t2\r\nContent-Length: 3";
        assert!(head(ok).is_some());
        for bad in [
            "GET / HTTP/1.1\r\nX-A: 1\nHost: denied.test", // bare LF
            "GET / HTTP/1.1\r\nX-A: 1\rHost: denied.test", // bare CR
            "GET / HTTP/1.1\r\nX-A: 1\0",                  // NUL
            "GET / HTTP/1.1\r\nX-A: \u{1b}[0m",            // another control
            "GET / HTTP/1.1\r\nX-A : 1",                   // whitespace before the colon
            "GET / HTTP/1.1\r\nX-A\t: 1",
            "GET / HTTP/1.1\r\nX-A: 1\r\n folded", // obs-fold
            "GET / HTTP/1.1\r\nX-A: 1\r\n\tfolded",
            "GET / HTTP/1.1\r\nHost: a.test\r\nhost: denied.test", // two Hosts
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked",
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4",
            "POST / HTTP/1.1\r\nContent-Length: +3",
            "POST / HTTP/1.1\r\nContent-Length: 3, 3",
            "GET /\t HTTP/1.1",
            "GET  / HTTP/1.1",
            "G(T / HTTP/1.1",
        ] {
            assert!(head(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn tunnel_targets_stay_in_the_tunnel() {
        let target = |method: &str, t: &str| Head {
            method: method.into(),
            target: t.into(),
            version: "HTTP/1.1".into(),
            headers: Vec::new(),
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
        assert_eq!(origin_form("HTTPS://a.test:1/p?q"), "/p?q");
        assert_eq!(origin_form("http://a.test?q"), "/?q");
        assert_eq!(origin_form("http://a.test"), "/");
        assert_eq!(origin_form("/p"), "/p");
    }
}
