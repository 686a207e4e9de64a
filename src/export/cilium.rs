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

use super::{ExportError, Unexpressible};
use crate::compile::{NetworkMode, NetworkRule, NetworkTarget, PolicySet, PortSpan};
use crate::decision::RuleId;
use crate::normalize::pattern::DomainPattern;

/// Where the policy applies.
#[derive(Clone, Debug, Default)]
pub struct CiliumOptions {
    /// `metadata.namespace`; none: the namespace `kubectl apply` uses.
    pub namespace: Option<String>,
    /// `endpointSelector.matchLabels`; empty: every pod of the namespace.
    pub selector: Vec<(String, String)>,
}

/// The policy named `name` (or the only one) of a compiled set,
/// composed with the set's requirements, as a `CiliumNetworkPolicy` in
/// YAML. Rules Cilium cannot express exactly are an
/// [`ExportError::Unexpressible`] naming each of them.
///
/// ```
/// use gatehouse::PolicySet;
/// use gatehouse::export::{CiliumOptions, cilium};
///
/// let set = PolicySet::from_source("p.policy", "policy p {\n  network {\n    allow domain *.github.com port 443\n  }\n}\n")?;
/// let yaml = cilium(&set, None, &CiliumOptions::default())?;
/// assert!(yaml.contains("matchPattern: \"**.github.com\""));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn cilium(
    set: &PolicySet,
    name: Option<&str>,
    options: &CiliumOptions,
) -> Result<String, ExportError> {
    let policy = super::policy(set, name)?;
    let network = policy.network();
    let vetted = vet(
        set,
        network.rules,
        network.default_allow,
        network.local_allow.is_some(),
        network.dns_off.is_some(),
    )?;

    let mut y = header(policy.name(), &vetted.notes, options);
    match network.mode {
        NetworkMode::Unrestricted => {
            let _ = writeln!(y, "  # network unrestricted");
            let _ = writeln!(y, "  egress:");
            let _ = writeln!(y, "    - toEntities:");
            let _ = writeln!(y, "        - all");
            return Ok(y);
        }
        NetworkMode::Constrained => {}
        _ => {
            let _ = writeln!(y, "  # network off: no egress rule, so nothing leaves");
            let _ = writeln!(y, "  egress: []");
            return Ok(y);
        }
    }

    let mut egress = String::new();
    let mut deny = String::new();
    if network.dns_off.is_none() && !vetted.allow_domains.is_empty() {
        dns_rule(&mut egress, &vetted.allow_domains);
    }
    for r in network.rules {
        let Some((key, items)) = selector_of(r) else {
            continue;
        };
        let comment = Unexpressible::rule(set, r.rule, "");
        let out = if r.allow { &mut egress } else { &mut deny };
        let _ = writeln!(out, "    # {} ({})", comment.rule, comment.at);
        let _ = writeln!(out, "    - {key}:");
        for i in &items {
            let _ = writeln!(out, "        - {i}");
        }
        write_ports(out, &r.ports);
    }
    if network.local_allow.is_none() {
        local_deny(&mut deny, &vetted.exceptions);
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

/// What the export needs to know before it writes anything: the allowed
/// names, the exact local exceptions and the header's notes — or every
/// rule Cilium cannot express, in source order.
struct Vetted<'a> {
    allow_domains: Vec<(&'a NetworkRule, DomainPattern)>,
    exceptions: Vec<IpNet>,
    notes: Vec<String>,
}

/// The rules' problems found all at once (rule ids follow the statements,
/// so sorting by id gives source order).
struct Problems<'a> {
    set: &'a PolicySet,
    found: Vec<(RuleId, Unexpressible)>,
}

impl Problems<'_> {
    fn add(&mut self, id: RuleId, why: &str) {
        self.found
            .push((id, Unexpressible::rule(self.set, id, why)));
    }

    /// `rule (file:line:col)` of a rule, for messages.
    fn cite(&self, id: RuleId) -> String {
        let at = Unexpressible::rule(self.set, id, "");
        format!("`{}` ({})", at.rule, at.at)
    }
}

fn vet<'a>(
    set: &PolicySet,
    rules: &'a [NetworkRule],
    default_allow: Option<RuleId>,
    local_allow: bool,
    dns_off: bool,
) -> Result<Vetted<'a>, ExportError> {
    let mut problems = Problems {
        set,
        found: Vec::new(),
    };
    let mut notes: Vec<String> = Vec::new();
    if let Some(id) = default_allow {
        problems.add(
            id,
            "Cilium policies are allow lists: `default allow` would be an egress rule to `world`, from which Cilium cannot subtract names",
        );
    }
    let allow_domains: Vec<(&NetworkRule, DomainPattern)> = rules
        .iter()
        .filter(|r| r.allow)
        .filter_map(|r| match &r.target {
            NetworkTarget::Domain(text) => DomainPattern::parse(text).ok().map(|p| (r, p)),
            _ => None,
        })
        .collect();
    denied_names(rules, &allow_domains, &mut problems, &mut notes);
    for (r, p) in &allow_domains {
        // The CRD's maxLength for matchName and matchPattern.
        if let DomainPattern::Sub(n) | DomainPattern::SelfAndSub(n) = p
            && n.len() + 3 > 255
        {
            problems.add(
                r.rule,
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
    let exceptions = if local_allow {
        Vec::new()
    } else {
        local_exceptions(rules, &mut problems)
    };
    if !problems.found.is_empty() {
        let mut found = problems.found;
        found.sort_by_key(|(id, _)| id.0);
        return Err(ExportError::Unexpressible {
            format: "a CiliumNetworkPolicy",
            rules: found.into_iter().map(|(_, u)| u).collect(),
        });
    }
    Ok(Vetted {
        allow_domains,
        exceptions,
        notes,
    })
}

/// `deny domain` rules: a problem where they carve names out of an allowed
/// pattern (Cilium cannot deny names), otherwise a note that they need no
/// rule.
fn denied_names(
    rules: &[NetworkRule],
    allow_domains: &[(&NetworkRule, DomainPattern)],
    problems: &mut Problems<'_>,
    notes: &mut Vec<String>,
) {
    for r in rules {
        let (NetworkTarget::Domain(text), false) = (&r.target, r.allow) else {
            continue;
        };
        let Ok(deny) = DomainPattern::parse(text) else {
            continue;
        };
        if let Some((a, _)) = allow_domains
            .iter()
            .find(|(a, allow)| overlaps(&deny, allow) && ports_overlap(&r.ports, &a.ports))
        {
            let why = format!(
                "it carves names out of {}, and Cilium cannot deny names (`egressDeny` has no `toFQDNs`)",
                problems.cite(a.rule)
            );
            problems.add(r.rule, &why);
        } else {
            notes.push(format!(
                "`{}` needs no rule: nothing here allows those names, and Cilium denies what it does not allow",
                Unexpressible::rule(problems.set, r.rule, "").rule
            ));
        }
    }
}

/// Under `local deny`, the exact `allow ip` addresses the non-public deny
/// spares; a problem where such an exception has ports a broader `allow
/// cidr` would open on every port.
fn local_exceptions(rules: &[NetworkRule], problems: &mut Problems<'_>) -> Vec<IpNet> {
    let mut exceptions: Vec<IpNet> = Vec::new();
    for r in rules {
        let (NetworkTarget::Ip(ip), true) = (&r.target, r.allow) else {
            continue;
        };
        let ip = *ip;
        if !crate::normalize::is_non_public(ip) {
            continue;
        }
        if r.ports.is_some()
            && let Some(broad) = rules.iter().find(|b| {
                b.allow
                    && b.rule != r.rule
                    && matches!(&b.target, NetworkTarget::Cidr(n)
                        if crate::normalize::addr::canonical_net(*n).contains(&ip))
            })
        {
            let why = format!(
                "under `local deny` it opens {ip} on its ports only, but Cilium's exception would let {} open every port of it",
                problems.cite(broad.rule)
            );
            problems.add(r.rule, &why);
        }
        let net = IpNet::from(ip);
        if !exceptions.contains(&net) {
            exceptions.push(net);
        }
    }
    exceptions
}

/// The comments, metadata and selector above the egress rules.
fn header(policy: &str, notes: &[String], options: &CiliumOptions) -> String {
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# gatehouse policy `{policy}` as a CiliumNetworkPolicy, generated by `policyc export cilium`."
    );
    let _ = writeln!(
        y,
        "# For Cilium 1.19 or later: `**.` in matchPattern is one label or more there"
    );
    let _ = writeln!(
        y,
        "# (earlier versions read it as exactly one label, which is narrower)."
    );
    for n in notes {
        let _ = writeln!(y, "# {n}");
    }
    let _ = writeln!(y, "apiVersion: cilium.io/v2");
    let _ = writeln!(y, "kind: CiliumNetworkPolicy");
    let _ = writeln!(y, "metadata:");
    let _ = writeln!(y, "  name: {}", q(&metadata_name(policy)));
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
    y
}

/// The rule to kube-dns through Cilium's DNS proxy, naming exactly the
/// allowed names (toFQDNs needs it).
fn dns_rule(egress: &mut String, allow_domains: &[(&NetworkRule, DomainPattern)]) {
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
    for (_, p) in allow_domains {
        for sel in selectors(p) {
            if !seen.contains(&sel) {
                let _ = writeln!(egress, "              - {sel}");
                seen.push(sel);
            }
        }
    }
}

/// A rule's Cilium selector key and items; none for what needs no rule
/// (`deny domain`, sockets).
fn selector_of(r: &NetworkRule) -> Option<(&'static str, Vec<String>)> {
    match (&r.target, r.allow) {
        (NetworkTarget::Domain(_), false)
        | (NetworkTarget::Socket(_) | NetworkTarget::AnySocket, _) => None,
        (NetworkTarget::Domain(text), true) => DomainPattern::parse(text)
            .ok()
            .map(|p| ("toFQDNs", selectors(&p))),
        (NetworkTarget::Ip(ip), _) => Some((
            "toCIDRSet",
            vec![format!("cidr: {}", q(&IpNet::from(*ip).to_string()))],
        )),
        (NetworkTarget::Cidr(n), _) => Some((
            "toCIDRSet",
            vec![format!(
                "cidr: {}",
                q(&crate::normalize::addr::canonical_net(*n).to_string())
            )],
        )),
    }
}

/// `local deny`: every non-public range denied, except the exact `allow
/// ip` addresses inside it.
fn local_deny(deny: &mut String, exceptions: &[IpNet]) {
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

fn write_ports(out: &mut String, ports: &Option<Vec<PortSpan>>) {
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

fn ports_overlap(a: &Option<Vec<PortSpan>>, b: &Option<Vec<PortSpan>>) -> bool {
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
        let set = PolicySet::from_source(
            "p.policy",
            &format!("policy p {{\n  network {{\n    allow domain *.{long}\n    allow domain {long}\n  }}\n}}\n"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        match cilium(&set, None, &CiliumOptions::default()) {
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
