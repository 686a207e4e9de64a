//! Network decisions (docs/language.md#network), in the spec's order, top to bottom:
//! `connect`, `dns`, `resolved`, `socket`, `listen`, `upstream`.
//!
//! These are the hot path: inputs are borrowed, ASCII hosts are normalised
//! into a stack buffer, and nothing allocates.

use std::net::IpAddr;

use crate::compile::ports::{PortQ, id};
use crate::compile::prefixes::widen;
use crate::compile::{NetMode, Policy};
use crate::decision::{Decision, Escalation, Outcome, Reason, RuleId};
use crate::normalize::{
    Host, HostBuf, HostError, Labels, Split, is_loopback, is_non_public, is_normal_absolute_path,
    normalize_split,
};
use crate::query::Via;
use crate::syntax::ast::{ApprovalMode, PromptCategory, Reviewer, SandboxMode};

fn host_error(e: HostError) -> Decision {
    match e {
        HostError::Invalid(_) => Decision::deny(Reason::InvalidHost, None),
        HostError::AmbiguousIp => Decision::deny(Reason::AmbiguousIpLiteral, None),
    }
}

/// A resolver question must be a name: an address or a numeric spelling is
/// `invalid_host`.
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
fn question_name<'b>(name: &'b str, buf: &'b mut HostBuf) -> Result<Named<'b>, Decision> {
    match normalize_split(name, buf) {
        Ok(Split {
            host: Host::Name(name),
            labels,
        }) => Ok(Named { name, labels }),
        Ok(Split {
            host: Host::Ip(_), ..
        })
        | Err(HostError::AmbiguousIp) => Err(Decision::deny(Reason::InvalidHost, None)),
        Err(e) => Err(host_error(e)),
    }
}

/// A normalised name and, when the normaliser's fast path took it, its
/// layout for the domain automaton.
#[derive(Clone, Copy)]
struct Named<'b> {
    name: &'b str,
    labels: Option<Labels<'b>>,
}

/// The first checks of `resolved`, in order: the name, then the list (an
/// empty answer is a failed lookup).
fn answered_name<'b>(
    name: &'b str,
    buf: &'b mut HostBuf,
    empty: bool,
) -> Result<Named<'b>, Decision> {
    let name = question_name(name, buf)?;
    if empty {
        return Err(Decision::deny(Reason::LookupFailed, None));
    }
    Ok(name)
}

/// What the rules say about one target.
struct Hit {
    deny: Option<RuleId>,
    allow: Option<RuleId>,
    exact_allow: Option<RuleId>,
    local: bool,
}

/// A listener's address as `listen` reads it (`IP:PORT`, IPv6 in
/// brackets); `Err`: the refusal every policy makes of it.
pub(crate) fn listen_addr(addr: &str) -> Result<(IpAddr, u16), Decision> {
    let Ok((host, port)) = crate::normalize::split_host_port(addr) else {
        return Err(Decision::deny(Reason::InvalidAddress, None));
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let Ok(ip) = host.parse::<IpAddr>() else {
        return Err(Decision::deny(Reason::InvalidAddress, None));
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(Decision::deny(Reason::InvalidPort, None));
    };
    Ok((ip, port))
}

impl Policy {
    #[inline(always)]
    fn ip_hit(&self, ip: IpAddr, q: PortQ) -> Hit {
        let (v4, key) = widen(ip);
        let h = if v4 {
            self.net.v4.lookup(key, q)
        } else {
            self.net.v6.lookup(key, q)
        };
        Hit {
            deny: id(h.deny),
            allow: id(h.allow.min(self.net.domains.star_raw(q))),
            exact_allow: id(h.exact_allow),
            // The class is asked only when it can matter.
            local: !self.net.local_allow && is_non_public(ip),
        }
    }

    #[inline(always)]
    fn host_hit(&self, host: Host<'_>, labels: Option<Labels<'_>>, q: PortQ) -> Hit {
        match host {
            Host::Name(n) => {
                let h = match labels {
                    Some(l) => self.net.domains.lookup_labels(l, q),
                    None => self.net.domains.lookup(n, q),
                };
                Hit {
                    deny: h.deny(),
                    allow: h.allow(),
                    exact_allow: h.exact_allow(),
                    local: !self.net.local_allow && crate::normalize::is_localhost_name(n),
                }
            }
            Host::Ip(ip) => self.ip_hit(ip, q),
        }
    }

    /// Steps 3–6 of the connect order: deny rules, local targets, allow
    /// rules, default.
    #[inline(always)]
    fn rules_decide(&self, hit: &Hit) -> Decision {
        if let Some(r) = hit.deny {
            return Decision::deny(Reason::DeniedByRule, Some(r));
        }
        if hit.local && !self.net.local_allow {
            return match hit.exact_allow {
                Some(r) => Decision::allow(Reason::AllowedByRule, Some(r)),
                None => Decision::deny(Reason::LocalAddress, None),
            };
        }
        if let Some(r) = hit.allow {
            return Decision::allow(Reason::AllowedByRule, Some(r));
        }
        if self.net.default_allow {
            return Decision::allow(Reason::DefaultAllow, self.net.default_rule);
        }
        Decision::deny(Reason::NotAllowed, None)
    }

    /// Step 2: the network mode, or `None` to go on.
    #[inline(always)]
    fn mode_decides(&self) -> Option<Decision> {
        match self.net.mode {
            NetMode::Off => Some(Decision::deny(Reason::NetworkOff, self.net.mode_rule)),
            NetMode::Unrestricted => {
                Some(Decision::allow(Reason::Unrestricted, self.net.mode_rule))
            }
            NetMode::Constrained => None,
        }
    }

    /// Who would answer a `sandbox_approval` prompt for a blocked connect.
    pub fn connect_escalation(&self) -> Escalation {
        let a = &self.agent;
        if a.sandbox == SandboxMode::DangerFullAccess {
            return Escalation::None;
        }
        let category_on = |c: PromptCategory| a.granular.get(c.index()).copied().unwrap_or(false);
        match a.approvals {
            ApprovalMode::Never => Escalation::None,
            ApprovalMode::Granular if !category_on(PromptCategory::SandboxApproval) => {
                Escalation::None
            }
            ApprovalMode::OnRequest | ApprovalMode::Granular
                if a.reviewer == Reviewer::AutoReview =>
            {
                Escalation::Review
            }
            _ => Escalation::Ask,
        }
    }

    /// May the sandbox connect to `host:port` through `via`?
    pub fn connect(&self, host: &str, port: u16, via: Via) -> Decision {
        // 1. Validation.
        let mut buf = HostBuf::new();
        let split = match normalize_split(host, &mut buf) {
            Ok(h) => h,
            Err(e) => return host_error(e),
        };
        self.connect_host(split.host, split.labels, port, via)
    }

    /// [`Policy::connect`] for an address the caller already holds (the
    /// socket's peer): no text to parse. Mapped and compatible IPv6 forms are
    /// their IPv4 address, as always.
    pub fn connect_addr(&self, ip: IpAddr, port: u16, via: Via) -> Decision {
        self.connect_host(
            Host::Ip(crate::normalize::canonical_ip(ip)),
            None,
            port,
            via,
        )
    }

    #[inline(always)]
    fn connect_host(
        &self,
        host: Host<'_>,
        labels: Option<Labels<'_>>,
        port: u16,
        via: Via,
    ) -> Decision {
        if port == 0 {
            return Decision::deny(Reason::InvalidPort, None);
        }
        // 2. Mode, then the proxy's protocol switches.
        if let Some(d) = self.mode_decides() {
            return d;
        }
        let p = &self.proxy;
        match via {
            Via::Socks5 | Via::Socks5Udp if !p.socks5.on => {
                return Decision::deny(Reason::ProtocolDisabled, p.socks5.rule);
            }
            Via::Socks5Udp if !p.socks5_udp.on => {
                return Decision::deny(Reason::ProtocolDisabled, p.socks5_udp.rule);
            }
            _ => {}
        }
        // 3.–6. Rules.
        let mut d = self.rules_decide(&self.host_hit(host, labels, PortQ::Port(port)));
        if d.reason == Reason::NotAllowed {
            d.escalation = Some(self.connect_escalation());
        }
        d
    }

    /// May the filtering resolver answer `name`?
    pub fn dns(&self, name: &str) -> Decision {
        let mut buf = HostBuf::new();
        let named = match question_name(name, &mut buf) {
            Ok(n) => n,
            Err(d) => return d,
        };
        if let Some(d) = self.mode_decides() {
            return d;
        }
        if let Some(r) = self.net.dns_off {
            return Decision::deny(Reason::DnsOff, Some(r));
        }
        self.rules_decide(&self.host_hit(Host::Name(named.name), named.labels, PortQ::NoPort))
    }

    /// May the proxy use these resolved addresses for `name` (the DNS
    /// rebinding check)? `addrs` are the resolver's answers as text; `port`
    /// the port about to be dialled, if known.
    pub fn resolved<S: AsRef<str>>(&self, name: &str, addrs: &[S], port: Option<u16>) -> Decision {
        // 1. Validation: the name, the list, every address, the port.
        let mut buf = HostBuf::new();
        let name = match answered_name(name, &mut buf, addrs.is_empty()) {
            Ok(n) => n,
            Err(d) => return d,
        };
        // Parse once: up to INLINE answers on the stack, more in a vector.
        const INLINE: usize = 16;
        let mut inline = [IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED); INLINE];
        let mut spilled = Vec::new();
        for (i, a) in addrs.iter().enumerate() {
            let Ok(ip) = a.as_ref().parse::<IpAddr>() else {
                return Decision::deny(Reason::InvalidAddress, None);
            };
            match inline.get_mut(i) {
                Some(slot) => *slot = ip,
                None => spilled.push(ip),
            }
        }
        if spilled.is_empty() {
            self.resolved_checked(name, inline.get(..addrs.len()).unwrap_or(&[]), &[], port)
        } else {
            self.resolved_checked(name, &inline, &spilled, port)
        }
    }

    /// [`Policy::resolved`] for addresses the caller already holds as
    /// [`IpAddr`] (the resolver's answers, parsed once): no text to parse.
    pub fn resolved_addrs(&self, name: &str, addrs: &[IpAddr], port: Option<u16>) -> Decision {
        let mut buf = HostBuf::new();
        let name = match answered_name(name, &mut buf, addrs.is_empty()) {
            Ok(n) => n,
            Err(d) => return d,
        };
        self.resolved_checked(name, addrs, &[], port)
    }

    /// Steps 1 (the port) to 5 of `resolved`, for a valid name and a
    /// non-empty answer (`head` then `tail`).
    fn resolved_checked(
        &self,
        name: Named<'_>,
        head: &[IpAddr],
        tail: &[IpAddr],
        port: Option<u16>,
    ) -> Decision {
        if port == Some(0) {
            return Decision::deny(Reason::InvalidPort, None);
        }
        // 2 and 3. The mode (which decides alone), then the name.
        let by_name = match self.resolved_name(name, port) {
            Ok(d) if d.is_allow() => d,
            Ok(d) | Err(d) => return d,
        };
        // 4. Every address; one bad address denies the whole answer.
        for ip in head.iter().chain(tail) {
            if let Some(d) = self.resolved_address(*ip, port) {
                return d;
            }
        }
        // 5. The name's reason.
        by_name
    }

    /// Steps 2 and 3 of `resolved`: the mode, which decides the whole
    /// answer alone (`Err`), then the name's rules (`Ok`: the addresses
    /// are looked at when it allows).
    fn resolved_name(&self, name: Named<'_>, port: Option<u16>) -> Result<Decision, Decision> {
        if let Some(d) = self.mode_decides() {
            return Err(d);
        }
        let q = port.map_or(PortQ::NoPort, PortQ::Port);
        Ok(self.rules_decide(&self.host_hit(Host::Name(name.name), name.labels, q)))
    }

    /// Step 4 of `resolved` for one address: the deny that one bad
    /// address makes of the whole answer, or `None` for an address the
    /// answer may hold.
    pub(crate) fn resolved_address(&self, ip: IpAddr, port: Option<u16>) -> Option<Decision> {
        let q = port.map_or(PortQ::NoPort, PortQ::Port);
        let hit = self.ip_hit(crate::normalize::canonical_ip(ip), q);
        if let Some(r) = hit.deny {
            return Some(Decision::deny(Reason::DeniedByRule, Some(r)));
        }
        if hit.local && !self.net.local_allow && hit.exact_allow.is_none() {
            return Some(Decision::deny(Reason::NonPublicResolution, None));
        }
        None
    }

    /// Steps 2 and 3 of `resolved` for a name as text (`None`: a name
    /// validation refuses, whatever the policy; `Err`: the mode decides
    /// alone).
    #[cfg(feature = "diff")]
    pub(crate) fn resolved_by_name(
        &self,
        name: &str,
        port: Option<u16>,
    ) -> Option<Result<Decision, Decision>> {
        let mut buf = HostBuf::new();
        let named = question_name(name, &mut buf).ok()?;
        Some(self.resolved_name(named, port))
    }

    /// May the sandbox connect to the unix socket at `path`?
    pub fn socket(&self, path: &str) -> Decision {
        if !is_normal_absolute_path(path) {
            return Decision::deny(Reason::InvalidPath, None);
        }
        if let Some(d) = self.mode_decides() {
            return d;
        }
        let entry = self.net.sockets.get(path);
        if let Some(r) = entry.and_then(|e| e.deny) {
            return Decision::deny(Reason::DeniedByRule, Some(r));
        }
        match entry.and_then(|e| e.allow).or(self.net.socket_any) {
            Some(r) => Decision::allow(Reason::AllowedByRule, Some(r)),
            None => Decision::deny(Reason::NotAllowed, None),
        }
    }

    /// May the proxy listen on `addr` (`IP:PORT`, IPv6 in brackets)?
    pub fn listen(&self, addr: &str) -> Decision {
        match listen_addr(addr) {
            Ok((ip, port)) => self.listen_on(ip, port),
            Err(d) => d,
        }
    }

    /// [`Policy::listen`] for a parsed address. Port 0 (an ephemeral port)
    /// is accepted: it is the address that matters.
    pub fn listen_on(&self, ip: IpAddr, _port: u16) -> Decision {
        if is_loopback(ip) {
            return Decision::allow(Reason::Loopback, None);
        }
        let any = self.proxy.listen_any;
        if any.on && !self.net.sockets_allowed {
            return Decision::allow(Reason::AllowedByRule, any.rule);
        }
        Decision::deny(Reason::NonLoopbackListener, any.rule)
    }

    /// May the proxy honour an upstream proxy from the environment?
    pub fn upstream(&self) -> Decision {
        let u = self.proxy.upstream;
        match (u.on, u.rule) {
            (true, Some(r)) => Decision::allow(Reason::AllowedByRule, Some(r)),
            (false, r) => Decision::deny(Reason::DeniedByRule, r),
            (true, None) => Decision::allow(Reason::DefaultAllow, None),
        }
    }

    /// The web search mode (docs/language.md#sandbox).
    pub fn web_search(&self) -> Decision {
        use crate::syntax::ast::WebSearchMode;
        let (mode, reason, rule) = match self.agent.web_search {
            Some((m, r)) => (m, Reason::Configured, Some(r)),
            None if self.agent.sandbox == SandboxMode::DangerFullAccess => {
                (WebSearchMode::Live, Reason::Default, None)
            }
            None => (WebSearchMode::Cached, Reason::Default, None),
        };
        let outcome = match mode {
            WebSearchMode::Cached => Outcome::Cached,
            WebSearchMode::Disabled => Outcome::Disabled,
            WebSearchMode::Live => Outcome::Live,
            WebSearchMode::Indexed => Outcome::Indexed,
        };
        Decision::new(outcome, reason, rule)
    }
}
