//! Requirements (docs/language.md#requirements): what a managed layer may hold, and
//! every cap a policy must respect. A violation points at both the policy
//! line and the requirement line.

use super::{CheckError, error};
use crate::diag::Diagnostic;
use crate::normalize::pattern::DomainPattern;
use crate::source::Span;
use crate::syntax::ast::*;

/// Errors specific to requirements.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RequirementError {
    #[error("`{0}` cannot appear in requirements")]
    SectionNotAllowed(&'static str),
    #[error("requirements may only add `forbid` and `prompt` command rules")]
    AllowCommand,
    #[error("requirements may only add guardian `deny` rules")]
    GuardianNotDeny,
    #[error("requirements cap the sandbox mode only")]
    SandboxBlock,
    #[error("requirements list approval policies, without a `granular` block")]
    GranularBlock,
    #[error("this policy breaks a requirement: {0}")]
    Violation(String),
    #[error("requirements {blocks} allow no common {what}")]
    Conflict { what: &'static str, blocks: String },
}

impl RequirementError {
    pub fn code(&self) -> &'static str {
        match self {
            RequirementError::Violation(_) => "requirement_violation",
            RequirementError::Conflict { .. } => "requirement_conflict",
            _ => "invalid_requirement",
        }
    }
    pub fn help(&self) -> Option<String> {
        Some(match self {
            RequirementError::SectionNotAllowed(_) => "requirements hold network, proxy, permissions, apps, commands, guardian, sandbox, approvals, reviewer and web_search".into(),
            RequirementError::AllowCommand => "caps on commands are forbid and prompt rules; allow rules belong in policies".into(),
            RequirementError::GuardianNotDeny => "use `deny category CATEGORY` or `deny MATCHER`".into(),
            RequirementError::SandboxBlock => "write the most permissive mode allowed, for example `sandbox workspace-write`".into(),
            RequirementError::GranularBlock => "write `approvals granular` in the list; policies set the categories".into(),
            RequirementError::Conflict { what, .. } => format!(
                "no policy can satisfy every block: list at least one {what} in each of them"
            ),
            RequirementError::Violation(_) => return None,
        })
    }
}

fn req_error(e: RequirementError, span: Span) -> Diagnostic {
    let help = e.help();
    Diagnostic::error(e.code(), e.to_string(), span).with_help(help)
}

fn violation(what: String, at: Span, requirement: Span, help: impl Into<String>) -> Diagnostic {
    req_error(RequirementError::Violation(what), at)
        .with_label(requirement, "required here")
        .with_help(Some(help.into()))
}

/// Checks the shape of a requirements block.
pub(super) fn check_block(b: &Block, diags: &mut Vec<Diagnostic>) {
    for s in &b.sections {
        match &s.kind {
            SectionKind::Mcp(_) | SectionKind::Log(_) => diags.push(req_error(
                RequirementError::SectionNotAllowed(s.kind.keyword()),
                s.keyword,
            )),
            SectionKind::Commands(rules) => {
                for r in rules.iter().filter(|r| r.effect == CommandEffect::Allow) {
                    diags.push(req_error(RequirementError::AllowCommand, r.span));
                }
            }
            SectionKind::Guardian(stmts) => {
                for st in stmts {
                    if let GuardianStmt::Risk { span, .. }
                    | GuardianStmt::Allow { span, .. }
                    | GuardianStmt::Authorize { span, .. } = st
                    {
                        diags.push(req_error(RequirementError::GuardianNotDeny, *span));
                    }
                }
            }
            SectionKind::Sandbox(sb) => {
                if sb.modes.len() != 1 {
                    diags.push(error(CheckError::OneValue("sandbox mode"), s.span));
                }
                if sb.block.is_some() {
                    diags.push(req_error(RequirementError::SandboxBlock, s.span));
                }
            }
            SectionKind::Approvals(a) if a.granular.is_some() => {
                diags.push(req_error(RequirementError::GranularBlock, s.span));
            }
            _ => {}
        }
    }
}

fn section<'a>(b: &'a Block, keyword: &str) -> Option<&'a Section> {
    b.sections.iter().find(|s| s.kind.keyword() == keyword)
}

fn net_stmts(b: &Block) -> Option<&[NetStmt]> {
    section(b, "network").and_then(|s| match &s.kind {
        SectionKind::Network(Network::Block(stmts)) => Some(stmts.as_slice()),
        _ => None,
    })
}

/// Checks what the requirements blocks of a set say together: a listed
/// setting whose lists share no value (`requirement_conflict`, at the last
/// such list, the others labelled), and a policy that writes no approval
/// policy where the agreed default is `granular`, which comes with every
/// category off (`granular_default`, a warning).
pub(super) fn check_set(reqs: &[&Block], policies: &[&Block], diags: &mut Vec<Diagnostic>) {
    conflict(reqs, "approval policy", diags, |k| match k {
        SectionKind::Approvals(a) => Some(&a.modes),
        _ => None,
    });
    conflict(reqs, "reviewer", diags, |k| match k {
        SectionKind::Reviewer(v) => Some(v),
        _ => None,
    });
    conflict(reqs, "web search mode", diags, |k| match k {
        SectionKind::WebSearch(v) => Some(v),
        _ => None,
    });
    let Some(default) = agreed_default(reqs, |k| match k {
        SectionKind::Approvals(a) => Some(&a.modes),
        _ => None,
    }) else {
        return;
    };
    if default.node != ApprovalMode::Granular {
        return;
    }
    for p in policies
        .iter()
        .filter(|p| section(p, "approvals").is_none())
    {
        diags.push(
            Diagnostic::warning(
                "granular_default",
                format!(
                    "policy `{}` writes no approval policy, so the requirements make it `approvals granular` with every category off: every prompt is rejected",
                    p.name.node
                ),
                p.name.span,
            )
            .with_label(default.span, "the default the requirements agree on")
            .with_help(Some(
                "write `approvals granular { sandbox_approval on; rules on; mcp_elicitations on }`, or another approval policy the requirements allow".into(),
            )),
        );
    }
}

fn conflict<T: PartialEq + Clone>(
    reqs: &[&Block],
    what: &'static str,
    diags: &mut Vec<Diagnostic>,
    list: impl Fn(&SectionKind) -> Option<&Vec<Spanned<T>>>,
) {
    let lists: Vec<(&Block, &Section, &Vec<Spanned<T>>)> = reqs
        .iter()
        .filter_map(|r| {
            r.sections
                .iter()
                .find_map(|s| list(&s.kind).map(|l| (*r, s, l)))
        })
        .collect();
    let common = agreed_default(reqs, &list).is_some();
    // An empty list is its own error (invalid_requirement).
    if common || lists.len() < 2 || lists.iter().any(|(_, _, l)| l.is_empty()) {
        return;
    }
    let names: Vec<String> = lists
        .iter()
        .map(|(r, _, _)| format!("`{}`", r.name.node))
        .collect();
    let Some(((_, last, _), others)) = lists.split_last() else {
        return;
    };
    let mut d = req_error(
        RequirementError::Conflict {
            what,
            blocks: names.join(", "),
        },
        last.span,
    );
    for (r, s, _) in others {
        d = d.with_label(s.span, format!("allowed by `{}`", r.name.node));
    }
    diags.push(d);
}

/// Checks one policy against one requirements block.
pub(super) fn check_policy(p: &Block, r: &Block, diags: &mut Vec<Diagnostic>) {
    network(p, r, diags);
    proxy(p, r, diags);
    permissions(p, r, diags);
    lists(p, r, diags);
}

fn network(p: &Block, r: &Block, diags: &mut Vec<Diagnostic>) {
    let Some(rs) = section(r, "network") else {
        return;
    };
    let ps = section(p, "network");
    match (&rs.kind, ps.map(|s| &s.kind)) {
        (SectionKind::Network(Network::Off), Some(SectionKind::Network(Network::Off)) | None) => {
            return;
        }
        (SectionKind::Network(Network::Off), Some(_)) => {
            if let Some(ps) = ps {
                diags.push(violation(
                    "no network is allowed".into(),
                    ps.span,
                    rs.span,
                    "write `network off`, or remove the section",
                ));
            }
            return;
        }
        (
            SectionKind::Network(Network::Block(_)),
            Some(SectionKind::Network(Network::Unrestricted)),
        ) => {
            if let Some(ps) = ps {
                diags.push(violation(
                    "`network unrestricted` is not allowed".into(),
                    ps.span,
                    rs.span,
                    "write a `network { ... }` block within the requirements",
                ));
            }
            return;
        }
        _ => {}
    }
    let (Some(req), Some(pol)) = (net_stmts(r), net_stmts(p)) else {
        return;
    };
    // Settings.
    for rst in req {
        for pst in pol {
            let (what, pspan, rspan) = match (rst, pst) {
                (NetStmt::Default(rv), NetStmt::Default(pv))
                    if rv.node == Effect::Deny && pv.node == Effect::Allow =>
                {
                    ("`default allow` is not allowed", pv.span, rv.span)
                }
                (NetStmt::Local(rv), NetStmt::Local(pv))
                    if rv.node == Effect::Deny && pv.node == Effect::Allow =>
                {
                    ("`local allow` is not allowed", pv.span, rv.span)
                }
                (NetStmt::Dns(rv), NetStmt::Dns(pv))
                    if rv.node == Switch::Off && pv.node == Switch::On =>
                {
                    ("`dns on` is not allowed", pv.span, rv.span)
                }
                _ => continue,
            };
            diags.push(violation(
                what.into(),
                pspan,
                rspan,
                "remove the setting, or stay within the requirement",
            ));
        }
    }
    // Sockets.
    let req_sockets: Vec<(&SocketTarget, Span)> = req
        .iter()
        .filter_map(|s| match s {
            NetStmt::Rule(NetRule {
                effect: Effect::Allow,
                target: NetTarget::Socket(t),
                span,
                ..
            }) => Some((t, *span)),
            _ => None,
        })
        .collect();
    let req_any = req_sockets.iter().any(|(t, _)| **t == SocketTarget::Any);
    for pst in pol {
        let NetStmt::Rule(NetRule {
            effect: Effect::Allow,
            target: NetTarget::Socket(t),
            span,
            ..
        }) = pst
        else {
            continue;
        };
        let ok = match t {
            SocketTarget::Any => req_any,
            SocketTarget::Path(_) => {
                req_sockets.is_empty() || req_any || req_sockets.iter().any(|(rt, _)| *rt == t)
            }
        };
        if !ok {
            let what = if *t == SocketTarget::Any {
                "`allow socket *` needs `allow socket *` in the requirements"
            } else {
                "this socket is not among the sockets the requirements allow"
            };
            diags.push(violation(
                what.into(),
                *span,
                rs.keyword,
                "allow only sockets the requirements list",
            ));
        }
    }
    // Domain allow coverage.
    let req_domains: Vec<(DomainPattern, Span)> = req
        .iter()
        .filter_map(|s| match s {
            NetStmt::Rule(NetRule {
                effect: Effect::Allow,
                target: NetTarget::Domain(d),
                span,
                ..
            }) => DomainPattern::parse(d).ok().map(|p| (p, *span)),
            _ => None,
        })
        .collect();
    if req_domains.is_empty() {
        return;
    }
    for pst in pol {
        let NetStmt::Rule(NetRule {
            effect: Effect::Allow,
            target: NetTarget::Domain(d),
            span,
            ..
        }) = pst
        else {
            continue;
        };
        let Ok(pat) = DomainPattern::parse(d) else {
            continue;
        };
        if !req_domains.iter().any(|(rp, _)| pat.covered_by(rp)) {
            let allowed: Vec<String> = req_domains
                .iter()
                .map(|(p, _)| format!("`{}`", p.text()))
                .collect();
            diags.push(violation(
                format!(
                    "`{}` is not covered by the domains the requirements allow",
                    pat.text()
                ),
                *span,
                rs.keyword,
                format!("the requirements allow {}", allowed.join(", ")),
            ));
        }
    }
}

fn proxy(p: &Block, r: &Block, diags: &mut Vec<Diagnostic>) {
    let stmts = |b: &Block| -> Vec<ProxyStmt> {
        section(b, "proxy").map_or_else(Vec::new, |s| match &s.kind {
            SectionKind::Proxy(v) => v.clone(),
            _ => Vec::new(),
        })
    };
    for rst in stmts(r) {
        for pst in stmts(p) {
            let broken = match (&rst, &pst) {
                (ProxyStmt::Socks5(a), ProxyStmt::Socks5(b))
                | (ProxyStmt::Socks5Udp(a), ProxyStmt::Socks5Udp(b))
                | (ProxyStmt::Upstream(a), ProxyStmt::Upstream(b)) => {
                    a.node == Switch::Off && b.node == Switch::On
                }
                (ProxyStmt::Listen(a), ProxyStmt::Listen(b)) => {
                    a.node == ListenScope::Loopback && b.node == ListenScope::Any
                }
                _ => false,
            };
            if broken {
                diags.push(violation(
                    "this proxy setting goes beyond the requirement".into(),
                    pst.span(),
                    rst.span(),
                    "remove the setting, or stay within the requirement",
                ));
            }
        }
    }
}

fn permissions(p: &Block, r: &Block, diags: &mut Vec<Diagnostic>) {
    let default = |b: &Block| -> Option<Spanned<Effect>> {
        section(b, "permissions").and_then(|s| match &s.kind {
            SectionKind::Permissions(v) => v.iter().find_map(|st| match st {
                PermStmt::Default(d) => Some(d.clone()),
                _ => None,
            }),
            _ => None,
        })
    };
    if let (Some(rd), Some(pd)) = (default(r), default(p)) {
        if rd.node == Effect::Deny && pd.node == Effect::Allow {
            diags.push(violation(
                "`default allow` is not allowed".into(),
                pd.span,
                rd.span,
                "remove the setting",
            ));
        }
    }
}

fn lists(p: &Block, r: &Block, diags: &mut Vec<Diagnostic>) {
    for rs in &r.sections {
        let Some(ps) = section(p, rs.kind.keyword()) else {
            continue;
        };
        let (ok, allowed): (bool, Vec<String>) = match (&rs.kind, &ps.kind) {
            (SectionKind::Sandbox(rv), SectionKind::Sandbox(pv)) => {
                let cap = rv.modes.first().map(|m| m.node);
                let mode = pv.modes.first().map(|m| m.node);
                (
                    mode <= cap,
                    cap.iter().map(|c| format!("at most `{c}`")).collect(),
                )
            }
            (SectionKind::Approvals(rv), SectionKind::Approvals(pv)) => {
                in_list(&rv.modes, &pv.modes)
            }
            (SectionKind::Reviewer(rv), SectionKind::Reviewer(pv)) => in_list(rv, pv),
            (SectionKind::WebSearch(rv), SectionKind::WebSearch(pv)) => in_list(rv, pv),
            _ => continue,
        };
        if !ok {
            diags.push(violation(
                format!("this `{}` is not allowed", ps.kind.keyword()),
                ps.span,
                rs.span,
                format!("the requirements allow {}", allowed.join(", ")),
            ));
        }
    }
}

fn in_list<T: PartialEq + std::fmt::Display>(
    allowed: &[Spanned<T>],
    chosen: &[Spanned<T>],
) -> (bool, Vec<String>) {
    let ok = chosen
        .iter()
        .all(|c| allowed.iter().any(|a| a.node == c.node));
    (
        ok,
        allowed.iter().map(|a| format!("`{}`", a.node)).collect(),
    )
}
