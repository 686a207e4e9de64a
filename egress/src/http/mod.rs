//! The HTTP forward proxy: absolute-form requests on kept-alive
//! connections, and `CONNECT` tunnels ([`connect`]).
//!
//! Every request is decided by its target, and the target, the `Host`
//! header and — inside a CONNECT tunnel — the TLS server name (or every
//! tunnelled request's target and `Host`) must all name the same host: a
//! mismatch is refused (no domain fronting). The name is then resolved
//! once, the answers checked with `resolved`, and only those addresses are
//! dialled, or an idle connection to one of them reused ([`crate::pool`]).
//!
//! Messages are framed ([`gatehouse_wire::http`], [`crate::conn`]): a body is copied exactly as far
//! as its length or its chunks say, so the bytes after it are read as the
//! next request and decided like the first. Nothing undecided is forwarded.

pub mod connect;

use std::sync::Arc;

use gatehouse::query::Via;
use tokio::net::TcpStream;

use crate::conn::Conn;
use crate::exchange::{Decided, Exchange, Next, What, exchange, host_agrees, next_head};
use crate::gate::{self, Ctx};
use crate::outcome::{Outcome, Refusal};
use crate::policy::Request;
use crate::reply::refuse;
use gatehouse_wire::authority::split_authority;
use gatehouse_wire::http::Head;

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
                req.finish(&what, Outcome::Forwarded);
                if !client_keep {
                    return;
                }
            }
            Ok(Forwarded::CutShort) => {
                req.finish(&what, Outcome::CutShort);
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
        // A fragment is refused before anything is decided.
        for t in [
            "http://allowed.test:18080#@denied.test:18081/",
            "http://allowed.test:18080/#x",
        ] {
            assert_eq!(absolute_http_target(t), Err(Refusal::BadRequest), "{t}");
        }
    }
}
