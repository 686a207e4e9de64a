//! `policyc export cilium`: a policy's network rules as a
//! `CiliumNetworkPolicy` for Cilium ≥ 1.19, for pods whose egress Cilium
//! enforces in the kernel (docs/integrations/cilium.md).
//!
//! | gatehouse | Cilium |
//! |---|---|
//! | `allow domain x.com` | `toFQDNs: [matchName: x.com]` |
//! | `allow domain *.x.com` | `matchPattern: "**.x.com"` (one label or more; Cilium ≥ 1.19 — older ones read it as one label, narrower) |
//! | `allow domain **.x.com` | both of the above |
//! | `allow domain *` | `matchPattern: "*"` |
//! | `allow ip`/`cidr` | `toCIDRSet` |
//! | `deny ip`/`cidr` | `egressDeny` `toCIDRSet` (deny wins in Cilium as here) |
//! | `local deny` | `egressDeny` of every non-public range, `except` the exact `allow ip` exceptions |
//! | `port 80,8000-8999` | `toPorts` (`port`, `endPort`), protocol `ANY` |
//! | `dns on` | the DNS-proxy rule to kube-dns, naming exactly the allowed names |
//! | `network off` | no egress at all (`enableDefaultDeny`) |
//! | `network unrestricted` | `toEntities: [all]` |
//!
//! Refused, naming the rule: `default allow` and `deny domain` rules that
//! overlap an allowed name (Cilium cannot subtract names: `egressDeny` has
//! no `toFQDNs`), and an exact local exception with ports that a broader
//! allow would open on every port. Narrower, and said in the output's
//! header: IP literals under `allow domain *`, and with `dns off` names are
//! unreachable (Cilium learns a name's addresses from the DNS proxy).

use std::fmt::Write as _;

use ipnet::IpNet;

use super::{ExportError, Unexpressible, net_statements, network_of, policy_block};
use crate::build::Build;
use crate::normalize::pattern::DomainPattern;
use crate::syntax::ast::{Effect, NetRule, NetStmt, NetTarget, Network, PortRange, Switch};

/// Where the policy applies.
#[derive(Clone, Debug, Default)]
pub struct CiliumOptions {
    /// `metadata.namespace`; none: the namespace `kubectl apply` uses.
    pub namespace: Option<String>,
    /// `endpointSelector.matchLabels`; empty: every pod of the namespace.
    pub selector: Vec<(String, String)>,
}

/// The policy named `name` (or the only one) of a build without errors,
/// composed with the set's requirements, as a `CiliumNetworkPolicy` in
/// YAML. Rules Cilium cannot express exactly are an
/// [`ExportError::Unexpressible`] naming each of them.
///
/// ```
/// use gatehouse::export::{CiliumOptions, cilium};
/// use gatehouse::{SourceMap, build};
///
/// let mut sources = SourceMap::new();
/// sources.add("p.policy", "policy p {\n  network {\n    allow domain *.github.com port 443\n  }\n}\n");
/// let yaml = cilium(&build(sources), None, &CiliumOptions::default())?;
/// assert!(yaml.contains("matchPattern: \"**.github.com\""));
/// # Ok::<(), gatehouse::export::ExportError>(())
/// ```
pub fn cilium(
    build: &Build,
    name: Option<&str>,
    options: &CiliumOptions,
) -> Result<String, ExportError> {
    let block = policy_block(build, name)?;
    let network = network_of(&block);
    let stmts = net_statements(network);
    let mut problems: Vec<(crate::source::Span, Unexpressible)> = Vec::new();
    let problem = |problems: &mut Vec<_>, span: crate::source::Span, why: &str| {
        problems.push((span, Unexpressible::new(&build.sources, span, why)));
    };
    let mut notes: Vec<String> = Vec::new();

    let local_allow = stmts
        .iter()
        .any(|s| matches!(s, NetStmt::Local(e) if e.node == Effect::Allow));
    let dns_off = stmts
        .iter()
        .any(|s| matches!(s, NetStmt::Dns(e) if e.node == Switch::Off));
    let rules: Vec<&NetRule> = stmts
        .iter()
        .filter_map(|s| match s {
            NetStmt::Rule(r) => Some(r),
            _ => None,
        })
        .collect();
    for s in stmts {
        if let NetStmt::Default(e) = s
            && e.node == Effect::Allow
        {
            problem(
                &mut problems,
                e.span,
                "Cilium policies are allow lists: `default allow` would be an egress rule to `world`, from which Cilium cannot subtract names",
            );
        }
    }

    // Allowed names, for toFQDNs and the DNS rule.
    let mut allow_domains: Vec<(&NetRule, DomainPattern)> = Vec::new();
    for r in &rules {
        if let NetTarget::Domain(text) = &r.target
            && r.effect == Effect::Allow
            && let Ok(p) = DomainPattern::parse(text)
        {
            allow_domains.push((r, p));
        }
    }
    for r in &rules {
        if let (NetTarget::Domain(text), Effect::Deny) = (&r.target, r.effect)
            && let Ok(deny) = DomainPattern::parse(text)
        {
            if let Some((a, _)) = allow_domains
                .iter()
                .find(|(a, allow)| overlaps(&deny, allow) && ports_overlap(&r.ports, &a.ports))
            {
                let at = Unexpressible::new(&build.sources, a.span, "");
                problem(
                    &mut problems,
                    r.span,
                    &format!(
                        "it carves names out of `{}` ({}), and Cilium cannot deny names (`egressDeny` has no `toFQDNs`)",
                        at.rule, at.at
                    ),
                );
            } else {
                notes.push(format!(
                    "`{}` needs no rule: nothing here allows those names, and Cilium denies what it does not allow",
                    Unexpressible::new(&build.sources, r.span, "").rule
                ));
            }
        }
    }
    for (r, p) in &allow_domains {
        // The CRD's maxLength for matchName and matchPattern.
        if let DomainPattern::Sub(n) | DomainPattern::SelfAndSub(n) = p
            && n.len() + 3 > 255
        {
            problem(
                &mut problems,
                r.span,
                "its name is too long for Cilium's matchPattern once `**.` is added (255 characters at most)",
            );
        }
    }
    if allow_domains
        .iter()
        .any(|(_, p)| matches!(p, DomainPattern::Any))
    {
        notes.push(String::from(
            "narrower: `allow domain *` also allows IP literals in gatehouse; here it allows names only",
        ));
    }
    if dns_off && !allow_domains.is_empty() {
        notes.push(String::from(
            "narrower: `dns off` leaves no DNS rule, and Cilium learns a name's addresses only from DNS, so the allowed names are unreachable",
        ));
    }

    // Exact local exceptions: addresses the non-public deny spares.
    let mut exceptions: Vec<IpNet> = Vec::new();
    if !local_allow {
        for r in &rules {
            if let (NetTarget::Ip(ip), Effect::Allow) = (&r.target, r.effect) {
                let ip = crate::normalize::canonical_ip(*ip);
                if !crate::normalize::is_non_public(ip) {
                    continue;
                }
                if r.ports.is_some()
                    && let Some(broad) = rules.iter().find(|b| {
                        b.effect == Effect::Allow
                            && !std::ptr::eq(**b, *r)
                            && match &b.target {
                                NetTarget::Cidr(n) => {
                                    crate::normalize::addr::canonical_net(*n).contains(&ip)
                                }
                                _ => false,
                            }
                    })
                {
                    let at = Unexpressible::new(&build.sources, broad.span, "");
                    problem(
                        &mut problems,
                        r.span,
                        &format!(
                            "under `local deny` it opens {ip} on its ports only, but Cilium's exception would let `{}` ({}) open every port of it",
                            at.rule, at.at
                        ),
                    );
                }
                let net = IpNet::from(ip);
                if !exceptions.contains(&net) {
                    exceptions.push(net);
                }
            }
        }
    }
    if !problems.is_empty() {
        problems.sort_by_key(|(span, _)| (span.file.0, span.start));
        return Err(ExportError::Unexpressible {
            format: "a CiliumNetworkPolicy",
            rules: problems.into_iter().map(|(_, u)| u).collect(),
        });
    }

    let mut y = String::new();
    let _ = writeln!(
        y,
        "# gatehouse policy `{}` as a CiliumNetworkPolicy, generated by `policyc export cilium`.",
        block.name.node
    );
    let _ = writeln!(
        y,
        "# For Cilium 1.19 or later: `**.` in matchPattern is one label or more there"
    );
    let _ = writeln!(
        y,
        "# (earlier versions read it as exactly one label, which is narrower)."
    );
    for n in &notes {
        let _ = writeln!(y, "# {n}");
    }
    let _ = writeln!(y, "apiVersion: cilium.io/v2");
    let _ = writeln!(y, "kind: CiliumNetworkPolicy");
    let _ = writeln!(y, "metadata:");
    let _ = writeln!(y, "  name: {}", q(&metadata_name(&block.name.node)));
    if let Some(ns) = &options.namespace {
        let _ = writeln!(y, "  namespace: {}", q(ns));
    }
    let _ = writeln!(y, "spec:");
    let _ = writeln!(y, "  endpointSelector:");
    if options.selector.is_empty() {
        let _ = writeln!(y, "    matchLabels: {{}}");
    } else {
        let _ = writeln!(y, "    matchLabels:");
        for (k, v) in &options.selector {
            let _ = writeln!(y, "      {}: {}", q(k), q(v));
        }
    }
    let _ = writeln!(y, "  enableDefaultDeny:");
    let _ = writeln!(y, "    egress: true");
    let _ = writeln!(y, "    ingress: false");

    let mut egress = String::new();
    let mut deny = String::new();
    match network {
        None | Some(Network::Off) => {
            let _ = writeln!(y, "  # network off: no egress rule, so nothing leaves");
            let _ = writeln!(y, "  egress: []");
            return Ok(y);
        }
        Some(Network::Unrestricted) => {
            let _ = writeln!(y, "  # network unrestricted");
            let _ = writeln!(y, "  egress:");
            let _ = writeln!(y, "    - toEntities:");
            let _ = writeln!(y, "        - all");
            return Ok(y);
        }
        Some(Network::Block(_)) => {}
    }

    if !dns_off && !allow_domains.is_empty() {
        let _ = writeln!(
            egress,
            "    # DNS through Cilium's DNS proxy (needed for toFQDNs): only the allowed names resolve"
        );
        let _ = writeln!(egress, "    - toEndpoints:");
        let _ = writeln!(egress, "        - matchLabels:");
        let _ = writeln!(
            egress,
            "            k8s:io.kubernetes.pod.namespace: kube-system"
        );
        let _ = writeln!(egress, "            k8s:k8s-app: kube-dns");
        let _ = writeln!(egress, "      toPorts:");
        let _ = writeln!(egress, "        - ports:");
        let _ = writeln!(egress, "            - port: \"53\"");
        let _ = writeln!(egress, "              protocol: ANY");
        let _ = writeln!(egress, "          rules:");
        let _ = writeln!(egress, "            dns:");
        let mut seen = Vec::new();
        for (_, p) in &allow_domains {
            for sel in selectors(p) {
                if !seen.contains(&sel) {
                    let _ = writeln!(egress, "              - {sel}");
                    seen.push(sel);
                }
            }
        }
    }
    for r in &rules {
        let comment = Unexpressible::new(&build.sources, r.span, "");
        let target: Option<(&str, Vec<String>)> = match (&r.target, r.effect) {
            (NetTarget::Domain(_), Effect::Deny) | (NetTarget::Socket(_), _) => None,
            (NetTarget::Domain(text), Effect::Allow) => DomainPattern::parse(text)
                .ok()
                .map(|p| ("toFQDNs", selectors(&p))),
            (NetTarget::Ip(ip), _) => Some((
                "toCIDRSet",
                vec![format!(
                    "cidr: {}",
                    q(&IpNet::from(crate::normalize::canonical_ip(*ip)).to_string())
                )],
            )),
            (NetTarget::Cidr(n), _) => Some((
                "toCIDRSet",
                vec![format!(
                    "cidr: {}",
                    q(&crate::normalize::addr::canonical_net(*n).to_string())
                )],
            )),
        };
        let Some((key, items)) = target else { continue };
        let out = if r.effect == Effect::Allow {
            &mut egress
        } else {
            &mut deny
        };
        let _ = writeln!(out, "    # {} ({})", comment.rule, comment.at);
        let _ = writeln!(out, "    - {key}:");
        for i in &items {
            let _ = writeln!(out, "        - {i}");
        }
        write_ports(out, &r.ports);
    }
    if !local_allow {
        let _ = writeln!(
            deny,
            "    # local deny: non-public destinations only through an exact `allow ip`"
        );
        let _ = writeln!(deny, "    - toCIDRSet:");
        let v4 = crate::normalize::addr::non_public_v4().map(IpNet::V4);
        let outside = ["::/3", "4000::/2", "8000::/1"]
            .into_iter()
            .filter_map(|s| s.parse::<IpNet>().ok());
        let v6 = crate::normalize::addr::non_public_v6_in_global().map(IpNet::V6);
        for net in v4.chain(outside).chain(v6) {
            let _ = writeln!(deny, "        - cidr: {}", q(&net.to_string()));
            let inside: Vec<&IpNet> = exceptions.iter().filter(|e| net.contains(*e)).collect();
            if !inside.is_empty() {
                let _ = writeln!(deny, "          except:");
                for e in inside {
                    let _ = writeln!(deny, "            - {}", q(&e.to_string()));
                }
            }
        }
    }
    if egress.is_empty() {
        let _ = writeln!(y, "  egress: []");
    } else {
        let _ = writeln!(y, "  egress:");
        y.push_str(&egress);
    }
    if !deny.is_empty() {
        let _ = writeln!(y, "  egressDeny:");
        y.push_str(&deny);
    }
    Ok(y)
}

/// A double-quoted YAML scalar (JSON's escapes are YAML's).
fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""))
}

/// A DNS-1123 name for `metadata.name`.
fn metadata_name(policy: &str) -> String {
    let mut n: String = policy
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    n = n.trim_matches('-').to_string();
    n.truncate(200);
    format!("gatehouse-{n}").trim_end_matches('-').to_string()
}

/// The FQDN selectors of a pattern, as YAML flow items.
fn selectors(p: &DomainPattern) -> Vec<String> {
    match p {
        DomainPattern::Exact(n) => vec![format!("matchName: {}", q(n))],
        DomainPattern::Sub(n) => vec![format!("matchPattern: {}", q(&format!("**.{n}")))],
        DomainPattern::SelfAndSub(n) => vec![
            format!("matchName: {}", q(n)),
            format!("matchPattern: {}", q(&format!("**.{n}"))),
        ],
        DomainPattern::Any => vec![format!("matchPattern: {}", q("*"))],
    }
}

fn write_ports(out: &mut String, ports: &Option<Vec<PortRange>>) {
    let Some(ranges) = ports else { return };
    let _ = writeln!(out, "      toPorts:");
    let _ = writeln!(out, "        - ports:");
    for r in ranges {
        let _ = writeln!(out, "            - port: \"{}\"", r.lo);
        if r.hi != r.lo {
            let _ = writeln!(out, "              endPort: {}", r.hi);
        }
        let _ = writeln!(out, "              protocol: ANY");
    }
}

/// Whether two patterns name a common host.
fn overlaps(a: &DomainPattern, b: &DomainPattern) -> bool {
    use DomainPattern::{Any, Exact, SelfAndSub, Sub};
    let sub = crate::normalize::pattern::is_strict_subdomain;
    // Whether pattern `p` matches the name `n`.
    let matches = |p: &DomainPattern, n: &str| match p {
        Any => true,
        Exact(x) => x == n,
        Sub(x) => sub(n, x),
        SelfAndSub(x) => x == n || sub(n, x),
    };
    match (a, b) {
        (Any, _) | (_, Any) => true,
        (Exact(n), p) | (p, Exact(n)) => matches(p, n),
        (Sub(x) | SelfAndSub(x), Sub(y) | SelfAndSub(y)) => {
            // Both hold every name under the deeper of the two bases, if
            // one base lies in (or is) the other's tree.
            x == y || sub(x, y) || sub(y, x)
        }
    }
}

fn ports_overlap(a: &Option<Vec<PortRange>>, b: &Option<Vec<PortRange>>) -> bool {
    match (a, b) {
        (None, _) | (_, None) => true,
        (Some(a), Some(b)) => a
            .iter()
            .any(|x| b.iter().any(|y| x.lo <= y.hi && y.lo <= x.hi)),
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    fn p(s: &str) -> DomainPattern {
        DomainPattern::parse(s).unwrap_or(DomainPattern::Any)
    }

    #[test]
    fn a_name_too_long_for_the_crd_is_refused() {
        let long = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        let mut sources = crate::source::SourceMap::new();
        sources.add(
            "p.policy",
            format!("policy p {{\n  network {{\n    allow domain *.{long}\n    allow domain {long}\n  }}\n}}\n"),
        );
        match cilium(&crate::build(sources), None, &CiliumOptions::default()) {
            Err(ExportError::Unexpressible { rules, .. }) => {
                assert_eq!(rules.len(), 1);
                assert!(rules.iter().all(|r| r.at == "p.policy:3:5"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn overlap() {
        assert!(overlaps(&p("a.x.com"), &p("*.x.com")));
        assert!(!overlaps(&p("x.com"), &p("*.x.com")));
        assert!(overlaps(&p("x.com"), &p("**.x.com")));
        assert!(overlaps(&p("*.a.x.com"), &p("*.x.com")));
        assert!(!overlaps(&p("*.y.com"), &p("*.x.com")));
        assert!(!overlaps(&p("x.com"), &p("y.com")));
        assert!(overlaps(&p("*"), &p("y.com")));
    }
}
