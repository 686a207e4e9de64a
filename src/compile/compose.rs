//! Composition of a policy with the requirements of its set (docs/language.md#requirements), at the AST level, before compiling.
//!
//! Requirement deny, forbid and prompt rules join the policy with their own
//! spans, so a decision names the requirement's file and line. A capped
//! setting the policy does not write takes the language default when that
//! lies within the cap, otherwise the cap's value; an absent listed setting
//! takes the first entry of the first list that every block allows.
//! Violations and conflicts are the checker's business.

use crate::syntax::ast::*;

/// The policy with every requirements block applied: the policy itself
/// when the set has none (no copy of a large policy's AST).
pub(crate) fn compose<'p>(
    policy: &'p Block,
    requirements: &[&Block],
) -> std::borrow::Cow<'p, Block> {
    if requirements.is_empty() {
        return std::borrow::Cow::Borrowed(policy);
    }
    let mut p = policy.clone();
    let agreed = Agreed::of(requirements);
    for r in requirements {
        for rs in &r.sections {
            apply(&mut p, rs, &agreed);
        }
    }
    std::borrow::Cow::Owned(p)
}

/// The default of each listed setting under several requirements blocks:
/// the first entry of the first list that every block allows
/// (docs/language.md#requirements). `None` where the blocks allow no common
/// value: the checker refuses that set (`requirement_conflict`).
struct Agreed {
    approvals: Option<Spanned<ApprovalMode>>,
    reviewer: Option<Spanned<Reviewer>>,
    web_search: Option<Spanned<WebSearchMode>>,
}

impl Agreed {
    fn of(requirements: &[&Block]) -> Self {
        Agreed {
            approvals: agreed_default(requirements, |k| match k {
                SectionKind::Approvals(a) => Some(&a.modes),
                _ => None,
            }),
            reviewer: agreed_default(requirements, |k| match k {
                SectionKind::Reviewer(v) => Some(v),
                _ => None,
            }),
            web_search: agreed_default(requirements, |k| match k {
                SectionKind::WebSearch(v) => Some(v),
                _ => None,
            }),
        }
    }
}

fn find<'a>(p: &'a mut Block, keyword: &str) -> Option<&'a mut SectionKind> {
    p.sections
        .iter_mut()
        .find(|s| s.kind.keyword() == keyword)
        .map(|s| &mut s.kind)
}

/// The policy's section of this kind, created (empty) from the requirement's
/// section when the policy has none.
fn find_or_add<'a>(
    p: &'a mut Block,
    rs: &Section,
    empty: SectionKind,
) -> Option<&'a mut SectionKind> {
    let keyword = rs.kind.keyword();
    if !p.sections.iter().any(|s| s.kind.keyword() == keyword) {
        p.sections.push(Section {
            kind: empty,
            span: rs.span,
            keyword: rs.keyword,
        });
    }
    find(p, keyword)
}

fn apply(p: &mut Block, rs: &Section, agreed: &Agreed) {
    match &rs.kind {
        SectionKind::Network(Network::Block(req)) => {
            // Only a constrained policy network has rules to join; `off` and
            // absent stay off, `unrestricted` is a checker error.
            if let Some(SectionKind::Network(Network::Block(pol))) = find(p, "network") {
                for rst in req {
                    let absent = |f: fn(&NetStmt) -> bool| !pol.iter().any(f);
                    let add = match rst {
                        NetStmt::Dns(v) => {
                            v.node == Switch::Off && absent(|s| matches!(s, NetStmt::Dns(_)))
                        }
                        NetStmt::Rule(r) => r.effect == Effect::Deny,
                        // `default deny` and `local deny` are the defaults.
                        NetStmt::Default(_) | NetStmt::Local(_) => false,
                    };
                    if add {
                        pol.push(rst.clone());
                    }
                }
            }
        }
        SectionKind::Network(_) => {}
        SectionKind::Proxy(req) => {
            if let Some(SectionKind::Proxy(pol)) =
                find_or_add(p, rs, SectionKind::Proxy(Vec::new()))
            {
                for rst in req {
                    let same =
                        |s: &ProxyStmt| std::mem::discriminant(s) == std::mem::discriminant(rst);
                    let restrictive = match rst {
                        ProxyStmt::Socks5(v) | ProxyStmt::Socks5Udp(v) | ProxyStmt::Upstream(v) => {
                            v.node == Switch::Off
                        }
                        ProxyStmt::Listen(v) => v.node == ListenScope::Loopback,
                    };
                    if restrictive && !pol.iter().any(same) {
                        pol.push(rst.clone());
                    }
                }
            }
        }
        SectionKind::Permissions(req) => {
            if let Some(SectionKind::Permissions(pol)) =
                find_or_add(p, rs, SectionKind::Permissions(Vec::new()))
            {
                let has_default = pol.iter().any(|s| matches!(s, PermStmt::Default(_)));
                for rst in req {
                    match rst {
                        PermStmt::Default(v) if v.node == Effect::Deny && !has_default => {
                            pol.push(rst.clone())
                        }
                        PermStmt::Rule {
                            effect: Effect::Deny,
                            ..
                        } => pol.push(rst.clone()),
                        _ => {}
                    }
                }
            }
        }
        SectionKind::Apps(req) => {
            if let Some(SectionKind::Apps(pol)) = find_or_add(p, rs, SectionKind::Apps(Vec::new()))
            {
                pol.extend(req.iter().cloned());
            }
        }
        SectionKind::Commands(req) => {
            if let Some(SectionKind::Commands(pol)) =
                find_or_add(p, rs, SectionKind::Commands(Vec::new()))
            {
                pol.extend(
                    req.iter()
                        .filter(|r| r.effect != CommandEffect::Allow)
                        .cloned(),
                );
            }
        }
        SectionKind::Guardian(req) => {
            if let Some(SectionKind::Guardian(pol)) =
                find_or_add(p, rs, SectionKind::Guardian(Vec::new()))
            {
                pol.extend(
                    req.iter()
                        .filter(|s| {
                            matches!(
                                s,
                                GuardianStmt::DenyCategory { .. } | GuardianStmt::DenyAction { .. }
                            )
                        })
                        .cloned(),
                );
            }
        }
        SectionKind::Sandbox(req) => {
            let cap = req
                .modes
                .first()
                .map_or(SandboxMode::WorkspaceWrite, |m| m.node);
            if find(p, "sandbox").is_none() && SandboxMode::WorkspaceWrite > cap {
                let modes = vec![Spanned::new(cap, rs.span)];
                p.sections.push(Section {
                    kind: SectionKind::Sandbox(SandboxSection { modes, block: None }),
                    ..rs.clone()
                });
            }
        }
        SectionKind::Approvals(_) => {
            if find(p, "approvals").is_none() {
                let modes: Vec<_> = agreed.approvals.iter().cloned().collect();
                // A granular default comes with every category off: every
                // prompt is rejected (the checker warns, `granular_default`).
                let granular = modes
                    .first()
                    .filter(|m| m.node == ApprovalMode::Granular)
                    .map(|_| Vec::new());
                p.sections.push(Section {
                    kind: SectionKind::Approvals(ApprovalsSection { modes, granular }),
                    ..rs.clone()
                });
            }
        }
        SectionKind::Reviewer(_) => {
            if find(p, "reviewer").is_none() {
                p.sections.push(Section {
                    kind: SectionKind::Reviewer(agreed.reviewer.iter().cloned().collect()),
                    ..rs.clone()
                });
            }
        }
        SectionKind::WebSearch(_) => {
            if find(p, "web_search").is_none() {
                p.sections.push(Section {
                    kind: SectionKind::WebSearch(agreed.web_search.iter().cloned().collect()),
                    ..rs.clone()
                });
            }
        }
        SectionKind::Mcp(_) | SectionKind::Log(_) => {}
    }
}
