//! The oracle for requirements (spec §12): whether a policy keeps within the
//! requirements blocks of its set, read off the spec's sentences one by one.
//! What a composed policy decides is answered by `RefPolicy`'s accessors,
//! which consult the requirements where the spec says they apply.

use gatehouse::testing::ast::*;

use super::{H, normalize};

fn section<'a>(b: &'a Block, pick: impl Fn(&'a SectionKind) -> bool) -> Option<&'a SectionKind> {
    b.sections.iter().map(|s| &s.kind).find(|k| pick(k))
}

fn network(b: &Block) -> Option<&Network> {
    b.sections.iter().find_map(|s| match &s.kind {
        SectionKind::Network(n) => Some(n),
        _ => None,
    })
}

/// A domain pattern as (form, normalised name): form is `""`, `"*."`,
/// `"**."` or `"*"`.
fn pattern(text: &str) -> Option<(&'static str, String)> {
    if text == "*" {
        return Some(("*", String::new()));
    }
    let (form, rest) = if let Some(r) = text.strip_prefix("**.") {
        ("**.", r)
    } else if let Some(r) = text.strip_prefix("*.") {
        ("*.", r)
    } else {
        ("", text)
    };
    match normalize(rest) {
        Ok(H::Name(n)) => Some((form, n)),
        _ => None,
    }
}

/// "a pattern covers itself; an exact name covers only itself; `*.x` covers
/// strict subdomains of x and `*.`/`**.` patterns strictly under x; `**.x`
/// covers x and everything under it; `*` covers everything."
fn covers(req: &(&'static str, String), pol: &(&'static str, String)) -> bool {
    let strictly_under = pol.1.ends_with(&format!(".{}", req.1));
    if req.0 == "*" || req == pol {
        return true;
    }
    if pol.0 == "*" {
        return false;
    }
    match req.0 {
        "*." => strictly_under,
        "**." => pol.1 == req.1 || strictly_under,
        _ => false,
    }
}

fn writes<T: PartialEq>(stmts: &[NetStmt], pick: impl Fn(&NetStmt) -> Option<T>, v: T) -> bool {
    stmts.iter().filter_map(pick).any(|x| x == v)
}

fn default_of(s: &NetStmt) -> Option<Effect> {
    match s {
        NetStmt::Default(v) => Some(v.node),
        _ => None,
    }
}

fn local_of(s: &NetStmt) -> Option<Effect> {
    match s {
        NetStmt::Local(v) => Some(v.node),
        _ => None,
    }
}

fn dns_of(s: &NetStmt) -> Option<Switch> {
    match s {
        NetStmt::Dns(v) => Some(v.node),
        _ => None,
    }
}

fn allowed_sockets(stmts: &[NetStmt]) -> Vec<&SocketTarget> {
    stmts
        .iter()
        .filter_map(|s| match s {
            NetStmt::Rule(r) if r.effect == Effect::Allow => match &r.target {
                NetTarget::Socket(t) => Some(t),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn allowed_domains(stmts: &[NetStmt]) -> Vec<(&'static str, String)> {
    stmts
        .iter()
        .filter_map(|s| match s {
            NetStmt::Rule(r) if r.effect == Effect::Allow => match &r.target {
                NetTarget::Domain(d) => pattern(d),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn network_violated(p: &Block, r: &Block) -> bool {
    let pol = network(p);
    match (network(r), pol) {
        // `network off` in requirements forbids any network.
        (Some(Network::Off), Some(Network::Unrestricted | Network::Block(_))) => true,
        // A `network { }` block forbids `network unrestricted`.
        (Some(Network::Block(_)), Some(Network::Unrestricted)) => true,
        (Some(Network::Block(rs)), Some(Network::Block(ps))) => {
            let capped = (writes(rs, default_of, Effect::Deny)
                && writes(ps, default_of, Effect::Allow))
                || (writes(rs, local_of, Effect::Deny) && writes(ps, local_of, Effect::Allow))
                || (writes(rs, dns_of, Switch::Off) && writes(ps, dns_of, Switch::On));
            let req_sockets = allowed_sockets(rs);
            let req_any = req_sockets.contains(&&SocketTarget::Any);
            let sockets = allowed_sockets(ps).into_iter().any(|t| match t {
                SocketTarget::Any => !req_any,
                path => !req_sockets.is_empty() && !req_any && !req_sockets.contains(&path),
            });
            let req_domains = allowed_domains(rs);
            let domains = !req_domains.is_empty()
                && allowed_domains(ps)
                    .iter()
                    .any(|pd| !req_domains.iter().any(|rd| covers(rd, pd)));
            capped || sockets || domains
        }
        _ => false,
    }
}

fn proxy_values(b: &Block) -> Vec<(&'static str, bool)> {
    b.sections
        .iter()
        .flat_map(|s| match &s.kind {
            SectionKind::Proxy(v) => v.as_slice(),
            _ => &[],
        })
        .map(|st| match st {
            ProxyStmt::Socks5(v) => ("socks5", v.node == Switch::On),
            ProxyStmt::Socks5Udp(v) => ("socks5_udp", v.node == Switch::On),
            ProxyStmt::Upstream(v) => ("upstream", v.node == Switch::On),
            ProxyStmt::Listen(v) => ("listen", v.node == ListenScope::Any),
        })
        .collect()
}

fn permission_default(b: &Block) -> Option<Effect> {
    b.sections.iter().find_map(|s| match &s.kind {
        SectionKind::Permissions(v) => v.iter().find_map(|st| match st {
            PermStmt::Default(d) => Some(d.node),
            _ => None,
        }),
        _ => None,
    })
}

/// A listed setting's default under several blocks: the entries of each
/// block that writes the list, in order; the first entry, over all lists
/// in order, that is in every list.
pub fn agreed<T: PartialEq + Copy>(
    reqs: &[&Block],
    list: impl Fn(&SectionKind) -> Option<Vec<T>>,
) -> Option<T> {
    let lists: Vec<Vec<T>> = reqs
        .iter()
        .filter_map(|r| r.sections.iter().find_map(|s| list(&s.kind)))
        .collect();
    for l in &lists {
        for v in l {
            if lists.iter().all(|other| other.contains(v)) {
                return Some(*v);
            }
        }
    }
    None
}

/// Two or more blocks list a setting, and no value is in all their lists.
fn conflicting(reqs: &[&Block]) -> bool {
    let count = |pick: &dyn Fn(&SectionKind) -> bool| {
        reqs.iter()
            .filter(|r| r.sections.iter().any(|s| pick(&s.kind)))
            .count()
    };
    let approvals = count(&|k| matches!(k, SectionKind::Approvals(_))) > 1
        && agreed(reqs, |k| match k {
            SectionKind::Approvals(a) => Some(a.modes.iter().map(|m| m.node).collect()),
            _ => None,
        })
        .is_none();
    let reviewer = count(&|k| matches!(k, SectionKind::Reviewer(_))) > 1
        && agreed(reqs, |k| match k {
            SectionKind::Reviewer(v) => Some(v.iter().map(|m| m.node).collect()),
            _ => None,
        })
        .is_none();
    let web = count(&|k| matches!(k, SectionKind::WebSearch(_))) > 1
        && agreed(reqs, |k| match k {
            SectionKind::WebSearch(v) => Some(v.iter().map(|m| m.node).collect()),
            _ => None,
        })
        .is_none();
    approvals || reviewer || web
}

/// Whether policy `p` breaks any of the requirements blocks `reqs`, or the
/// blocks conflict among themselves.
pub fn violated(p: &Block, reqs: &[&Block]) -> bool {
    conflicting(reqs)
        || reqs.iter().any(|r| {
            let proxy = proxy_values(r).iter().any(|(k, open)| {
                !open && proxy_values(p).iter().any(|(pk, popen)| pk == k && *popen)
            });
            let permissions = permission_default(r) == Some(Effect::Deny)
                && permission_default(p) == Some(Effect::Allow);
            let sandbox = match (
                section(r, |k| matches!(k, SectionKind::Sandbox(_))),
                section(p, |k| matches!(k, SectionKind::Sandbox(_))),
            ) {
                (Some(SectionKind::Sandbox(rs)), Some(SectionKind::Sandbox(ps))) => {
                    ps.modes.first().map(|m| m.node) > rs.modes.first().map(|m| m.node)
                }
                _ => false,
            };
            let approvals = match (
                section(r, |k| matches!(k, SectionKind::Approvals(_))),
                section(p, |k| matches!(k, SectionKind::Approvals(_))),
            ) {
                (Some(SectionKind::Approvals(ra)), Some(SectionKind::Approvals(pa))) => pa
                    .modes
                    .iter()
                    .any(|m| !ra.modes.iter().any(|x| x.node == m.node)),
                _ => false,
            };
            let reviewer = match (
                section(r, |k| matches!(k, SectionKind::Reviewer(_))),
                section(p, |k| matches!(k, SectionKind::Reviewer(_))),
            ) {
                (Some(SectionKind::Reviewer(rv)), Some(SectionKind::Reviewer(pv))) => {
                    pv.iter().any(|m| !rv.iter().any(|x| x.node == m.node))
                }
                _ => false,
            };
            let web = match (
                section(r, |k| matches!(k, SectionKind::WebSearch(_))),
                section(p, |k| matches!(k, SectionKind::WebSearch(_))),
            ) {
                (Some(SectionKind::WebSearch(rv)), Some(SectionKind::WebSearch(pv))) => {
                    pv.iter().any(|m| !rv.iter().any(|x| x.node == m.node))
                }
                _ => false,
            };
            network_violated(p, r)
                || proxy
                || permissions
                || sandbox
                || approvals
                || reviewer
                || web
        })
}
