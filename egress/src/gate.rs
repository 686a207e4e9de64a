//! The gate: the one place a connection meets the policy.
//!
//! Every front door — the HTTP proxy ([`crate::http`]), `CONNECT` tunnels
//! ([`crate::http::connect`]), SOCKS5 ([`crate::socks`]) and, next, host
//! mode's transparent listener — asks the gate, step by step:
//!
//! 1. [`vet`]: decide `connect` for the target, resolve the name once, and
//!    check the answers with `resolved` (the DNS-rebinding check): the
//!    addresses that may be dialled;
//! 2. [`via_upstream`]: when the upstream proxy is to be used (it is
//!    configured, and the policy says `upstream on`), its `CONNECT` to a
//!    vetted address as an IP literal, so that it resolves nothing itself;
//! 3. [`dial`]: else the first vetted address that answers; or [`tunnel`]
//!    for steps 1 to 3 at once.
//!
//! Each step returns `Result<_, Refusal>`, and none of them answers the
//! client: the front door's connection loop turns a [`Refusal`] into its
//! own protocol's answer (an HTTP status with `X-Gatehouse-Reason`, a
//! SOCKS5 reply code) and records it once ([`record`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use gatehouse::query::{QueryRef, Via};
use tokio::net::TcpStream;

use crate::conn::Conn;
use crate::metrics::Metrics;
use crate::outcome::Outcome;
use crate::policy::{Policies, Request};
use crate::resolve::Upstream;
use gatehouse_wire::http as head;

pub use crate::outcome::Refusal;

/// Where to send traffic when the policy allows an upstream proxy.
#[derive(Clone, Debug)]
pub struct UpstreamProxy {
    /// `HOST:PORT`.
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

/// What every front door shares: the policy, the resolver, the way out.
pub struct Ctx {
    /// The policy in force.
    pub policies: Arc<Policies>,
    /// The upstream DNS server (and its vetted answers).
    pub resolver: Arc<Upstream>,
    /// The upstream proxy, when the policy lets one be used.
    pub upstream_proxy: Option<UpstreamProxy>,
    /// Idle and connect timeouts.
    pub timeouts: crate::relay::Timeouts,
    /// Pooled upstream connections.
    pub pool: crate::pool::Pool,
    /// The daemon's counters.
    pub metrics: Arc<Metrics>,
    /// Client connections open at once, per listener.
    pub max_connections: usize,
}

impl Ctx {
    /// One request's view of the policy: the set in force now, used for
    /// every decision of the request, and its access record.
    pub fn request(&self) -> Request<'_> {
        self.policies.request()
    }
}

/// The default cap on client connections open at once, per listener.
pub const MAX_CONNECTIONS: usize = 4096;

/// The decision alone: `connect` for the target. The adapters (ext-authz,
/// the squid helper, the srt decider), which carry no traffic, stop here.
pub fn admit(req: &mut Request<'_>, host: &str, port: u16, via: Via) -> Result<(), Refusal> {
    let d = req.decide(QueryRef::Connect { host, port, via });
    if d.is_allow() {
        Ok(())
    } else {
        Err(Refusal::Denied(d.reason))
    }
}

/// The DNS-rebinding check alone: `resolved` for the addresses a name
/// resolved to.
pub fn admit_resolved(
    req: &mut Request<'_>,
    host: &str,
    addrs: &[IpAddr],
    port: u16,
) -> Result<(), Refusal> {
    let d = req.decide(QueryRef::Resolved {
        host,
        addrs,
        port: Some(port),
    });
    if d.is_allow() {
        Ok(())
    } else {
        Err(Refusal::Denied(d.reason))
    }
}

/// Step 1: decides `connect` for the target, resolves it once, and checks
/// the answers with `resolved`: the addresses that may be dialled.
pub async fn vet(
    ctx: &Ctx,
    req: &mut Request<'_>,
    host: &str,
    port: u16,
    via: Via,
) -> Result<Vec<IpAddr>, Refusal> {
    admit(req, host, port, via)?;
    let found = ctx
        .resolver
        .addresses_for(host)
        .await
        .map_err(|_| Refusal::LookupFailed)?;
    if found.loopback {
        // `localhost` means the loopback addresses, each decided apart: a
        // policy that allows 127.0.0.1 and not ::1 reaches 127.0.0.1
        // (docs/egress.md#localhost).
        let mut kept = Vec::new();
        let mut first = None;
        for ip in found.addrs {
            match admit_resolved(req, host, &[ip], port) {
                Ok(()) => kept.push(ip),
                Err(r) => first = first.or(Some(r)),
            }
        }
        return match (kept.is_empty(), first) {
            (false, _) => Ok(kept),
            (true, Some(r)) => Err(r),
            (true, None) => Err(Refusal::LookupFailed),
        };
    }
    if !found.literal {
        admit_resolved(req, host, &found.addrs, port)?;
        // Only answers the policy accepted are kept for later requests.
        ctx.resolver.remember(host, &found);
    }
    if found.addrs.is_empty() {
        return Err(Refusal::LookupFailed);
    }
    Ok(found.addrs)
}

/// Step 2: through the upstream proxy, when one is configured and the
/// policy allows it (`upstream on`): the upstream's own `CONNECT` to a
/// vetted address, written as an IP literal, so that the upstream neither
/// resolves the name again nor reaches an address this proxy did not vet
/// (issue 35, finding 2); the name travels inside the tunnel, in the
/// ClientHello or the request's `Host`. Each vetted address is asked for in
/// turn. `Ok(None)`: go direct.
pub async fn via_upstream(
    ctx: &Ctx,
    req: &mut Request<'_>,
    addrs: &[IpAddr],
    port: u16,
) -> Result<Option<TcpStream>, Refusal> {
    let Some(proxy) = ctx.upstream_proxy.as_ref() else {
        return Ok(None);
    };
    if !req.decide(QueryRef::Upstream).is_allow() {
        return Ok(None);
    }
    for ip in addrs {
        let stream = TcpStream::connect(&proxy.addr)
            .await
            .map_err(|_| Refusal::UpstreamProxyUnreachable)?;
        let mut up = Conn::new(stream, ctx.timeouts.tunnel_idle);
        let authority = SocketAddr::new(*ip, port);
        let line = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        up.write_all(line.as_bytes())
            .await
            .map_err(|_| Refusal::UpstreamProxyUnreachable)?;
        let answer = tokio::time::timeout(ctx.timeouts.first_bytes, up.read_head()).await;
        let ok = matches!(&answer, Ok(Ok(Some(raw)))
            if head::parse_response(raw.clone()).is_some_and(|r| (200..300).contains(&r.code)));
        // Bytes after the 2xx would be the server's, unasked for.
        if ok && up.buffered().is_empty() {
            ctx.metrics.upstream_dialled.inc();
            return Ok(Some(up.io));
        }
    }
    Err(Refusal::UpstreamProxyRefused)
}

/// Step 3: dials the first of the vetted `addrs` that answers.
pub async fn dial(
    ctx: &Ctx,
    addrs: &[IpAddr],
    port: u16,
) -> Result<(TcpStream, SocketAddr), Refusal> {
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
    Err(Refusal::ConnectFailed)
}

/// A tunnel's connection, and the address it reached (`None` through the
/// upstream proxy, which dialled it).
pub struct Tunnel {
    /// The connection to the target (or to the upstream proxy's tunnel).
    pub stream: TcpStream,
    /// The vetted address dialled directly.
    pub dialled: Option<IpAddr>,
}

/// Steps 1 to 3 for a tunnel (`CONNECT`, SOCKS5): vetted, then dialled
/// directly or through the upstream proxy's own `CONNECT`, answered with a
/// 2xx before any byte of the tunnel. Never pooled.
pub async fn tunnel(
    ctx: &Ctx,
    req: &mut Request<'_>,
    host: &str,
    port: u16,
    via: Via,
) -> Result<Tunnel, Refusal> {
    let addrs = vet(ctx, req, host, port, via).await?;
    if let Some(stream) = via_upstream(ctx, req, &addrs, port).await? {
        return Ok(Tunnel {
            stream,
            dialled: None,
        });
    }
    let (stream, at) = dial(ctx, &addrs, port).await?;
    Ok(Tunnel {
        stream,
        dialled: Some(at.ip()),
    })
}

/// What an established tunnel was allowed for, to decide again after a
/// reload: the target, and what its first bytes named.
pub struct Allowed<'a> {
    /// The tunnel's target.
    pub host: &'a str,
    /// Its port.
    pub port: u16,
    /// How it came (`https` for `CONNECT`, `socks5`).
    pub via: Via,
    /// The name a ClientHello or `Host` gave, when it was decided too (a
    /// SOCKS5 tunnel to an address).
    pub claimed: Option<&'a str>,
    /// The address dialled, for a name target reached directly.
    pub dialled: Option<IpAddr>,
}

/// Resolves when a reload puts in force a policy that no longer allows the
/// tunnel (issue 35, finding 8): its `connect`, the name its first bytes
/// gave, and the address it reached (`resolved`) are decided again after
/// every swap, and the first refusal is returned with the request that
/// decided it (the front door records it as the tunnel's). Pending for as
/// long as the tunnel stays allowed.
pub async fn revoked<'c>(ctx: &'c Ctx, a: &Allowed<'_>) -> (Refusal, Request<'c>) {
    let mut swaps = ctx.policies.swaps();
    loop {
        if swaps.changed().await.is_err() {
            return std::future::pending().await;
        }
        let mut req = ctx.request();
        let still = admit(&mut req, a.host, a.port, a.via)
            .and_then(|()| {
                a.claimed
                    .map_or(Ok(()), |n| admit(&mut req, n, a.port, a.via))
            })
            .and_then(|()| match a.dialled {
                Some(ip) if !gatehouse_wire::authority::is_literal(a.host) => {
                    admit_resolved(&mut req, a.host, &[ip], a.port)
                }
                _ => Ok(()),
            });
        if let Err(r) = still {
            return (r, req);
        }
    }
}

/// Counts a refusal and writes the request's access record; the front
/// door answers the client in its own protocol.
pub fn record(
    ctx: &Ctx,
    req: &Request<'_>,
    what: &(dyn std::fmt::Display + Sync),
    refusal: Refusal,
) {
    ctx.metrics.refusal(refusal);
    req.finish(what, Outcome::Refused(refusal));
}

#[cfg(test)]
mod tests {
    /// The front doors (and the adapters) reach the policy, the resolver
    /// and the network only through the gate: no decision, lookup or dial
    /// of their own.
    #[test]
    fn front_doors_meet_the_policy_only_through_the_gate() {
        for (file, text) in [
            ("ext_authz.rs", include_str!("ext_authz.rs")),
            ("squid.rs", include_str!("squid.rs")),
            ("srt_decider.rs", include_str!("srt_decider.rs")),
            ("http/mod.rs", include_str!("http/mod.rs")),
            ("http/connect.rs", include_str!("http/connect.rs")),
            ("tunnel.rs", include_str!("tunnel.rs")),
            ("exchange/mod.rs", include_str!("exchange/mod.rs")),
            ("reply.rs", include_str!("reply.rs")),
            ("conn.rs", include_str!("conn.rs")),
            ("pool.rs", include_str!("pool.rs")),
            ("socks.rs", include_str!("socks.rs")),
            ("host/transparent.rs", include_str!("host/transparent.rs")),
        ] {
            let code = text.split("#[cfg(test)]").next().unwrap_or(text);
            let door = file.starts_with("http")
                || ["socks.rs", "tunnel.rs", "exchange/mod.rs", "reply.rs"].contains(&file)
                || file.starts_with("host");
            for needle in [
                "QueryRef",
                "Query::",
                "store.load",
                "policies",
                "resolver",
                "TcpStream::connect",
                "addresses_for",
            ] {
                // The adapters hold the policies (they serve no Ctx) and
                // read them at start (the listen check, the hello lists);
                // each request's decision goes through the gate.
                if !door && (needle == "policies" || needle == "store.load") {
                    continue;
                }
                assert!(
                    !code.contains(needle),
                    "{file} uses `{needle}` outside the gate"
                );
            }
        }
    }
}
