//! `network` and `proxy`: the domain automaton, the address intervals,
//! sockets, and the proxy's switches.

use super::super::*;

impl Compiler<'_> {
    /// Where a statement that is no rule is written.
    fn place(&self, span: Span) -> Place {
        match self.sources.get(span.file) {
            Some(f) => {
                let lc = f.line_col(span.start);
                Place {
                    file: f.name.clone(),
                    line: lc.line,
                    column: lc.column,
                    source: folded(f.slice(span)).into_owned(),
                }
            }
            None => Place {
                file: String::new(),
                line: 0,
                column: 0,
                source: String::new(),
            },
        }
    }

    pub(in crate::compile) fn network(
        &mut self,
        n: &Network,
        span: Span,
    ) -> Result<Net, Inconsistency> {
        let mut net = Net::empty(NetMode::Constrained);
        let stmts = match n {
            Network::Off => {
                net.mode = NetMode::Off;
                net.mode_rule = Some(self.rule(span));
                return Ok(net);
            }
            Network::Unrestricted => {
                net.mode = NetMode::Unrestricted;
                net.mode_rule = Some(self.rule(span));
                return Ok(net);
            }
            Network::Block(stmts) => stmts,
        };
        // Sized before they fill: a large policy's rule lists would
        // otherwise be copied as they grow, at the build's peak.
        let (mut domains, mut v4, mut v6) = (0, 0, 0);
        for s in stmts {
            if let NetStmt::Rule(r) = s {
                match &r.target {
                    NetTarget::Domain(_) => domains += 1,
                    NetTarget::Ip(std::net::IpAddr::V4(_)) => v4 += 1,
                    NetTarget::Cidr(c) if c.addr().is_ipv4() => v4 += 1,
                    NetTarget::Ip(_) | NetTarget::Cidr(_) => v6 += 1,
                    NetTarget::Socket(_) => {}
                }
            }
        }
        let mut domain_rules = Vec::with_capacity(domains);
        let mut v4_rules = Vec::with_capacity(v4);
        let mut v6_rules = Vec::with_capacity(v6);
        for s in stmts {
            match s {
                // A statement becomes a rule only where a decision can
                // name it (so that test coverage counts what tests can
                // reach): `default deny`, `dns on` and `local` never
                // decide by themselves (spec: a `not_allowed` or
                // `local_address` decision names no rule).
                NetStmt::Default(v) => {
                    net.default_allow = v.node == Effect::Allow;
                    net.default_rule = net.default_allow.then(|| self.rule(v.span));
                }
                NetStmt::Dns(v) => {
                    net.dns_off = (v.node == Switch::Off).then(|| self.rule(v.span));
                }
                NetStmt::Local(v) => {
                    net.local_allow = v.node == Effect::Allow;
                    net.local_allow_at = net.local_allow.then(|| self.place(v.span));
                    net.local_allow_next = u32::try_from(self.rules.len()).unwrap_or(u32::MAX);
                }
                NetStmt::Rule(r) => {
                    let id = self.rule(r.span);
                    let ports = r.ports.as_deref();
                    net.rules.push(&NetworkRule {
                        allow: r.effect == Effect::Allow,
                        target: match &r.target {
                            NetTarget::Domain(d) => NetworkTarget::Domain(d.clone()),
                            NetTarget::Ip(ip) => {
                                NetworkTarget::Ip(crate::normalize::canonical_ip(*ip))
                            }
                            NetTarget::Cidr(c) => NetworkTarget::Cidr(*c),
                            NetTarget::Socket(SocketTarget::Path(p)) => {
                                NetworkTarget::Socket(p.clone())
                            }
                            NetTarget::Socket(SocketTarget::Any) => NetworkTarget::AnySocket,
                        },
                        ports: r
                            .ports
                            .as_ref()
                            .map(|v| v.iter().map(|p| PortSpan { lo: p.lo, hi: p.hi }).collect()),
                        rule: id,
                    });
                    match &r.target {
                        NetTarget::Domain(text) => {
                            let pattern = DomainPattern::parse(text)?;
                            if pattern == DomainPattern::Any && r.effect == Effect::Deny {
                                return Err(Inconsistency::Table(
                                    "`deny domain *` reached the compiler",
                                ));
                            }
                            domain_rules.push(DomainRule {
                                pattern,
                                effect: r.effect,
                                rule: id,
                                ports,
                            });
                        }
                        NetTarget::Ip(ip) => {
                            // A mapped or compatible address is its IPv4
                            // address, in rules as in queries
                            // (docs/language.md#host-normalisation).
                            let net_ = ipnet::IpNet::from(crate::normalize::canonical_ip(*ip));
                            push_ranges(
                                &mut v4_rules,
                                &mut v6_rules,
                                net_,
                                true,
                                r.effect,
                                id,
                                ports,
                            );
                        }
                        NetTarget::Cidr(c) => push_ranges(
                            &mut v4_rules,
                            &mut v6_rules,
                            *c,
                            false,
                            r.effect,
                            id,
                            ports,
                        ),
                        NetTarget::Socket(SocketTarget::Any) => {
                            if r.effect == Effect::Allow {
                                net.socket_any.get_or_insert(id);
                                net.sockets_allowed = true;
                            } else {
                                return Err(Inconsistency::Table(
                                    "`deny socket *` reached the compiler",
                                ));
                            }
                        }
                        NetTarget::Socket(SocketTarget::Path(p)) => {
                            let e = net.sockets.entry(p.clone()).or_insert(SocketEntry {
                                deny: None,
                                allow: None,
                            });
                            if r.effect == Effect::Deny {
                                e.deny.get_or_insert(id);
                            } else {
                                e.allow.get_or_insert(id);
                                net.sockets_allowed = true;
                            }
                        }
                    }
                }
            }
        }
        net.rules.shrink();
        net.domains = DomainTrie::build(&domain_rules);
        net.v4 = Intervals::build(&v4_rules, u128::from(u32::MAX));
        net.v6 = Intervals::build(&v6_rules, u128::MAX);
        Ok(net)
    }

    pub(in crate::compile) fn proxy(&mut self, proxy: &mut Proxy, stmts: &[ProxyStmt]) {
        for s in stmts {
            let (named, on) = match s {
                // `socks5 on` is never named: only a refusal names it.
                ProxyStmt::Socks5(v) => (v.node == Switch::Off, v.node == Switch::On),
                ProxyStmt::Socks5Udp(v) => (v.node == Switch::Off, v.node == Switch::On),
                ProxyStmt::Upstream(v) => (true, v.node == Switch::On),
                ProxyStmt::Listen(v) => (true, v.node == ListenScope::Any),
            };
            let rule = named.then(|| self.rule(s.span()));
            let slot = match s {
                ProxyStmt::Socks5(_) => &mut proxy.socks5,
                ProxyStmt::Socks5Udp(_) => &mut proxy.socks5_udp,
                ProxyStmt::Upstream(_) => &mut proxy.upstream,
                ProxyStmt::Listen(_) => &mut proxy.listen_any,
            };
            *slot = SwitchSetting { on, rule };
        }
    }
}

pub(in crate::compile) fn push_ranges<'a>(
    v4: &mut Vec<PrefixRule<'a>>,
    v6: &mut Vec<PrefixRule<'a>>,
    net: ipnet::IpNet,
    exact: bool,
    effect: Effect,
    rule: RuleId,
    ports: Option<&'a [PortRange]>,
) {
    let (r4, r6) = rule_ranges(net);
    for (first, last) in r4 {
        v4.push(PrefixRule {
            first,
            last,
            exact: exact && first == last,
            effect,
            rule,
            ports,
        });
    }
    if let Some((first, last)) = r6 {
        v6.push(PrefixRule {
            first,
            last,
            exact,
            effect,
            rule,
            ports,
        });
    }
}
