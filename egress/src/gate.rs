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

use gatehouse::Reason;
use gatehouse::query::{QueryRef, Via};
use tokio::net::TcpStream;

use crate::dns::Upstream;
use crate::http::conn::Conn;
use crate::http::head;
use crate::metrics::Metrics;
use crate::policy::{Policies, Request};

/// Why a request or connection was not carried.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// The policy decided against it (`connect`, `resolved`, `upstream`):
    /// the engine's own reason.
    Denied(Reason),
    /// A request the proxy cannot read (malformed, too large, too slow).
    BadRequest,
    /// A plain HTTP request whose target is not `http://HOST[:PORT]/...`.
    AbsoluteFormRequired,
    /// A target whose host part is empty, holds userinfo, or does not parse.
    InvalidHost,
    /// The `Host` header names another host or port than the target.
    HostMismatch,
    /// A tunnel's TLS server name is another host than the tunnel's.
    SniMismatch,
    /// A TLS tunnel to a name sent no server name.
    SniMissing,
    /// A TLS tunnel to a name used Encrypted Client Hello (its outer name
    /// proves nothing).
    EncryptedClientHello,
    /// A tunnel's first bytes are neither TLS nor HTTP.
    UnrecognisedProtocol,
    /// A request inside a plain HTTP tunnel targets another host or port.
    TargetOutsideTunnel,
    /// A tunnel's first bytes did not arrive in time.
    FirstBytesTimeout,
    /// The name did not resolve, or to no address.
    LookupFailed,
    /// No vetted address answered.
    ConnectFailed,
    /// The server's response was missing or malformed.
    BadGateway,
    /// The upstream proxy could not be reached.
    UpstreamProxyUnreachable,
    /// The upstream proxy refused the tunnel.
    UpstreamProxyRefused,
    /// Host mode: a connection or question from an address of no sandbox.
    UnknownSource,
    /// Host mode: a connection to the transparent listener that the kernel
    /// did not redirect (it has no other destination).
    NotRedirected,
}

impl Refusal {
    /// Every refusal that is the proxy's own (not the policy's), in the
    /// order of the `gatehouse_egress_proxy_refusals_total` metric.
    pub const ALL: &'static [Refusal] = &[
        Refusal::BadRequest,
        Refusal::AbsoluteFormRequired,
        Refusal::InvalidHost,
        Refusal::HostMismatch,
        Refusal::SniMismatch,
        Refusal::SniMissing,
        Refusal::EncryptedClientHello,
        Refusal::UnrecognisedProtocol,
        Refusal::TargetOutsideTunnel,
        Refusal::FirstBytesTimeout,
        Refusal::LookupFailed,
        Refusal::ConnectFailed,
        Refusal::BadGateway,
        Refusal::UpstreamProxyUnreachable,
        Refusal::UpstreamProxyRefused,
        Refusal::UnknownSource,
        Refusal::NotRedirected,
    ];

    /// The reason as the client reads it (`X-Gatehouse-Reason`) and as the
    /// access record and the metric label write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Denied(r) => r.as_str(),
            Refusal::BadRequest => "bad_request",
            Refusal::AbsoluteFormRequired => "absolute_form_required",
            Refusal::InvalidHost => "invalid_host",
            Refusal::HostMismatch => "host_mismatch",
            Refusal::SniMismatch => "sni_mismatch",
            Refusal::SniMissing => "sni_missing",
            Refusal::EncryptedClientHello => "encrypted_client_hello",
            Refusal::UnrecognisedProtocol => "unrecognised_protocol",
            Refusal::TargetOutsideTunnel => "target_outside_tunnel",
            Refusal::FirstBytesTimeout => "first_bytes_timeout",
            Refusal::LookupFailed => "lookup_failed",
            Refusal::ConnectFailed => "connect_failed",
            Refusal::BadGateway => "bad_gateway",
            Refusal::UpstreamProxyUnreachable => "upstream_proxy_unreachable",
            Refusal::UpstreamProxyRefused => "upstream_proxy_refused",
            Refusal::UnknownSource => "unknown_source",
            Refusal::NotRedirected => "not_redirected",
        }
    }

    /// The proxy refusal of the same name as a policy denial, where there
    /// is one (the engine's `lookup_failed` for a name without addresses,
    /// `invalid_host`): answered, counted and replied to alike, whoever
    /// found it.
    fn same(self) -> Refusal {
        match self {
            Refusal::Denied(r) => Refusal::ALL
                .iter()
                .copied()
                .find(|own| own.as_str() == r.as_str())
                .unwrap_or(self),
            own => own,
        }
    }

    /// The HTTP status: 502 when the way out failed, 400 for a request
    /// the proxy cannot read or that leaves its tunnel, 403 otherwise.
    pub fn status(self) -> u16 {
        match self.same() {
            Refusal::LookupFailed
            | Refusal::ConnectFailed
            | Refusal::BadGateway
            | Refusal::UpstreamProxyUnreachable
            | Refusal::UpstreamProxyRefused => 502,
            Refusal::BadRequest | Refusal::TargetOutsideTunnel => 400,
            _ => 403,
        }
    }

    /// The status line for [`Refusal::status`].
    pub fn status_line(self) -> &'static str {
        match self.status() {
            502 => "502 Bad Gateway",
            400 => "400 Bad Request",
            _ => "403 Forbidden",
        }
    }

    /// The SOCKS5 reply code (RFC 1928 §6): 4 (host unreachable) when the
    /// name did not resolve or nothing answered, 1 (general failure) when
    /// the upstream proxy failed, 2 (not allowed by the ruleset) otherwise.
    pub fn socks_reply(self) -> u8 {
        match self.same() {
            Refusal::LookupFailed | Refusal::ConnectFailed => 4,
            Refusal::UpstreamProxyUnreachable
            | Refusal::UpstreamProxyRefused
            | Refusal::BadGateway => 1,
            _ => 2,
        }
    }

    /// The index of this refusal in [`Refusal::ALL`] (its metric); `None`
    /// for the policy's own denials, which the decision counters count
    /// (but for the two that share a proxy refusal's name).
    pub fn metric(self) -> Option<usize> {
        let own = self.same();
        Refusal::ALL.iter().position(|r| *r == own)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    pub pool: crate::http::pool::Pool,
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
        let answer = tokio::time::timeout(ctx.timeouts.first_bytes, head::read_raw(&mut up)).await;
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
/// every swap, and the first refusal is returned (recorded as the
/// tunnel's). Pending for as long as the tunnel stays allowed.
pub async fn revoked(ctx: &Ctx, what: &(dyn std::fmt::Display + Sync), a: &Allowed<'_>) {
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
                Some(ip) if !crate::authority::is_literal(a.host) => {
                    admit_resolved(&mut req, a.host, &[ip], a.port)
                }
                _ => Ok(()),
            });
        if let Err(r) = still {
            record(ctx, &req, what, r);
            return;
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
    req.finish(what, &format!("refused: {refusal}"));
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ("http/conn.rs", include_str!("http/conn.rs")),
            ("http/head.rs", include_str!("http/head.rs")),
            ("http/pool.rs", include_str!("http/pool.rs")),
            ("socks.rs", include_str!("socks.rs")),
            ("host/transparent.rs", include_str!("host/transparent.rs")),
        ] {
            let code = text.split("#[cfg(test)]").next().unwrap_or(text);
            let door = file.starts_with("http") || file == "socks.rs" || file.starts_with("host");
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

    #[test]
    fn every_refusal_has_one_name_status_and_metric() {
        let mut names: Vec<&str> = Refusal::ALL.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Refusal::ALL.len());
        for (i, r) in Refusal::ALL.iter().enumerate() {
            assert_eq!(r.metric(), Some(i));
            assert!(matches!(r.status(), 400 | 403 | 502), "{r}");
            assert!(r.status_line().starts_with(&r.status().to_string()));
        }
        let denied = Refusal::Denied(Reason::DeniedByRule);
        assert_eq!(
            (denied.as_str(), denied.status(), denied.metric()),
            ("denied_by_rule", 403, None)
        );
        assert_eq!(denied.socks_reply(), 2);
        // The engine's `lookup_failed` (a name with no address) is a 502
        // and a host-unreachable reply, as the proxy's own is.
        let none = Refusal::Denied(Reason::LookupFailed);
        assert_eq!((none.status(), none.socks_reply()), (502, 4));
        assert_eq!(none.metric(), Refusal::LookupFailed.metric());
        assert_eq!(Refusal::LookupFailed.socks_reply(), 4);
    }
}
