//! What became of a request: the [`Refusal`] that stopped it, or the
//! [`Outcome`] its access record says.
//!
//! The bottom of the crate: every layer above names its answers with these
//! types, and nothing here answers a client.

use std::net::IpAddr;

use gatehouse::Reason;
use gatehouse_wire::dns::Unanswered;

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
    /// Envoy's `ext_authz` with the destination checked: the request
    /// carried no destination address.
    NoDestination,
    /// Envoy's `ext_authz` with the destination checked: the destination
    /// is not the request's host and port.
    DestinationMismatch,
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
        Refusal::NoDestination,
        Refusal::DestinationMismatch,
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
            Refusal::NoDestination => "no_destination",
            Refusal::DestinationMismatch => "destination_mismatch",
        }
    }

    /// The proxy refusal of the same name as a policy denial, where there
    /// is one (the engine's `lookup_failed` for a name without addresses,
    /// `invalid_host`): answered, counted and replied to alike, whoever
    /// found it.
    fn same(self) -> Refusal {
        match self {
            Refusal::Denied(Reason::LookupFailed) => Refusal::LookupFailed,
            Refusal::Denied(Reason::InvalidHost) => Refusal::InvalidHost,
            other => other,
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

/// What the access record says became of a request: its `outcome` field,
/// and the `gatehouse.outcome` attribute of its span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome<'a> {
    /// An HTTP request forwarded and its response relayed.
    Forwarded,
    /// A tunnel opened (`CONNECT`, SOCKS5, host mode's transparent one).
    Tunnel,
    /// An adapter's check answered "allowed" (squid, `ext_authz`, srt).
    Allowed,
    /// An adapter's check answered "deny" (squid, `ext_authz`, srt): the
    /// proxy that asked refuses its client. Written `refused (REASON)`, as
    /// the adapters' records always read.
    Deny(Refusal),
    /// A SOCKS5 datagram relayed.
    Relayed,
    /// Refused (the client was told, in its own protocol).
    Refused(Refusal),
    /// A datagram dropped (UDP has no one to tell).
    Dropped(Refusal),
    /// A forwarded exchange failed midway (a malformed body, a peer gone).
    CutShort,
    /// A DNS question answered with this many addresses.
    Answered(usize),
    /// A loopback name answered with its loopback address.
    AnsweredLoopback,
    /// A loopback name allowed whose address of the asked kind is not:
    /// answered with none.
    Withheld {
        /// Why the address was not.
        reason: Reason,
        /// The address withheld.
        ip: IpAddr,
    },
    /// A DNS answer too large for UDP, sent empty with TC set.
    Truncated(usize),
    /// A DNS question the upstream resolver did not answer.
    UpstreamFailed,
    /// A DNS answer whose CNAME chain loops, forks or is too long.
    BrokenChain,
    /// A DNS question refused because a name its answer leads through is.
    RefusedAlias {
        /// Why that name was refused.
        reason: Reason,
        /// The name.
        alias: &'a str,
    },
    /// A DNS question of a class or type the resolver does not answer.
    Unanswered(Unanswered),
}

impl Outcome<'_> {
    /// Whether the request was refused or dropped: written to stderr, and
    /// its span's status is an error.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Outcome::Refused(_)
                | Outcome::Deny(_)
                | Outcome::Dropped(_)
                | Outcome::RefusedAlias { .. }
                | Outcome::Unanswered(_)
        )
    }
}

impl std::fmt::Display for Outcome<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Forwarded => f.write_str("forwarded"),
            Outcome::Tunnel => f.write_str("tunnel"),
            Outcome::Allowed => f.write_str("allowed"),
            Outcome::Relayed => f.write_str("relayed"),
            Outcome::Refused(r) => write!(f, "refused: {r}"),
            Outcome::Deny(r) => write!(f, "refused ({r})"),
            Outcome::Dropped(r) => write!(f, "dropped: {r}"),
            Outcome::CutShort => f.write_str("failed: cut short"),
            Outcome::Answered(n) => write!(f, "answered {n} addresses"),
            Outcome::AnsweredLoopback => f.write_str("answered 1 address (loopback)"),
            Outcome::Withheld { reason, ip } => {
                write!(f, "answered 0 addresses ({} for {ip})", reason.as_str())
            }
            Outcome::Truncated(n) => write!(f, "truncated: {n} addresses over UDP"),
            Outcome::UpstreamFailed => f.write_str("servfail: upstream"),
            Outcome::BrokenChain => f.write_str("servfail: a broken CNAME chain"),
            Outcome::RefusedAlias { reason, alias } => {
                write!(f, "refused: {} (CNAME to {alias})", reason.as_str())
            }
            Outcome::Unanswered(u) => write!(f, "refused: {}", u.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Every engine reason that shares a proxy refusal's name is that
        // refusal (a new one in either list fails here until `same` says
        // so); every other is the policy's own.
        for &r in Reason::ALL {
            let own = Refusal::ALL.iter().find(|o| o.as_str() == r.as_str());
            match own {
                Some(&o) => assert_eq!(Refusal::Denied(r).same(), o, "{r:?}"),
                None => assert_eq!(Refusal::Denied(r).same(), Refusal::Denied(r), "{r:?}"),
            }
        }
    }

    #[test]
    fn outcomes_read_as_the_records_always_said() {
        let ip = IpAddr::from([127, 0, 0, 1]);
        for (o, text, refused) in [
            (Outcome::Forwarded, "forwarded", false),
            (
                Outcome::Deny(Refusal::HostMismatch),
                "refused (host_mismatch)",
                true,
            ),
            (
                Outcome::Refused(Refusal::SniMismatch),
                "refused: sni_mismatch",
                true,
            ),
            (
                Outcome::Refused(Refusal::Denied(Reason::NotAllowed)),
                "refused: not_allowed",
                true,
            ),
            (
                Outcome::Dropped(Refusal::Denied(Reason::NotAllowed)),
                "dropped: not_allowed",
                true,
            ),
            (Outcome::Answered(2), "answered 2 addresses", false),
            (
                Outcome::Withheld {
                    reason: Reason::LocalAddress,
                    ip,
                },
                "answered 0 addresses (local_address for 127.0.0.1)",
                false,
            ),
            (
                Outcome::RefusedAlias {
                    reason: Reason::NotAllowed,
                    alias: "b.test",
                },
                "refused: not_allowed (CNAME to b.test)",
                true,
            ),
            (
                Outcome::Unanswered(Unanswered::NotClassIn),
                "refused: only class IN is answered",
                true,
            ),
            (Outcome::CutShort, "failed: cut short", false),
        ] {
            assert_eq!((o.to_string().as_str(), o.is_refusal()), (text, refused));
        }
    }
}
