//! A managed `requirements.toml` as a `requirements` block.

use std::fmt::Write as _;

use toml::de::DeValue;

use super::config::{Proxy, read_proxy};
use super::read::{At, Effects, Reader, get};
use super::{domain_rule, quote};
use crate::import::{Input, Note};

/// Requirement keys the importer maps.
const KNOWN: &[&str] = &[
    "allowed_approval_policies",
    "allowed_approvals_reviewers",
    "allowed_web_search_modes",
    "allowed_sandbox_modes",
    "guardian_policy_config",
    "experimental_network",
    "network",
    "mcp_servers",
];

/// Requirement keys that decide nothing here.
const IRRELEVANT: &[&str] = &["remote_sandbox_config", "enforce_residency", "features"];

/// What the requirements give the policy besides their block.
#[derive(Default)]
pub(super) struct Requirements {
    pub text: String,
    pub notes: Vec<Note>,
    /// Managed domain rules, which also configure the policy's networking.
    pub domains: Effects,
    /// Only the managed allow rules count.
    pub managed_only: bool,
    /// `"*" = "deny"`: no name may be allowed.
    pub deny_all_names: bool,
    /// The MCP servers that may run, when the requirements list them.
    pub mcp_allowed: Option<Vec<String>>,
}

pub(super) fn read(text: &str) -> Requirements {
    let mut r = Reader::new(text, Input::Requirements);
    let mut q = Requirements::default();
    let Some(table) = r.parse() else {
        q.notes = r.notes;
        return q;
    };
    let mut out = String::from("# Managed requirements.\nrequirements managed {\n");
    let mut skipped = Vec::new();
    for (k, v) in table.get_ref().iter() {
        let key = k.get_ref().as_ref();
        let line = r.line_of(k);
        let at = At {
            value: (),
            line,
            key: key.to_string(),
        };
        let c = at.comment(Input::Requirements);
        match key {
            "allowed_approval_policies" => {
                let DeValue::Array(items) = v.get_ref() else {
                    r.error(line, format!("`{key}` must be a list"));
                    continue;
                };
                let mut values: Vec<&str> = Vec::new();
                for item in items {
                    let l = r.line_of(item);
                    let value = match item.get_ref() {
                        DeValue::String(s) => match s.as_ref() {
                            "untrusted" => "untrusted",
                            "on-request" => "on-request",
                            "never" => "never",
                            "on-failure" => {
                                r.warn(l, format!("`{key}`: \"on-failure\" is deprecated; decided as \"on-request\""));
                                "on-request"
                            }
                            other => {
                                let hint = crate::diag::did_you_mean(
                                    other,
                                    ["untrusted", "on-request", "never", "on-failure"],
                                )
                                .map(|h| format!(" ({h})"))
                                .unwrap_or_default();
                                r.error(
                                    l,
                                    format!("`{key}`: \"{other}\" is not an approval policy{hint}"),
                                );
                                continue;
                            }
                        },
                        DeValue::Table(t) if get(t, "granular").is_some() => {
                            r.warn(l, format!("`{key}`: a granular entry allows `approvals granular` with any categories; gatehouse requirements cannot pin the categories"));
                            "granular"
                        }
                        _ => {
                            r.error(l, format!("`{key}` entries are policy names or `{{ granular = {{ ... }} }}`"));
                            continue;
                        }
                    };
                    if !values.contains(&value) {
                        values.push(value);
                    }
                }
                if !values.is_empty() {
                    let _ = writeln!(out, "  approvals {}{c}", values.join(" "));
                }
            }
            "allowed_approvals_reviewers" | "allowed_web_search_modes" => {
                let (statement, allowed): (&str, &[&str]) = if key == "allowed_approvals_reviewers"
                {
                    ("reviewer", &["user", "auto_review"])
                } else {
                    ("web_search", &["cached", "disabled", "live", "indexed"])
                };
                let mut values: Vec<String> = r
                    .strings(key, v, allowed)
                    .into_iter()
                    .map(|a| a.value)
                    .collect();
                // The real system always allows turning web search off.
                if statement == "web_search" && !values.iter().any(|s| s == "disabled") {
                    values.push("disabled".into());
                }
                if !values.is_empty() {
                    let _ = writeln!(out, "  {statement} {}{c}", values.join(" "));
                }
            }
            "allowed_sandbox_modes" => {
                let order = ["read-only", "workspace-write", "danger-full-access"];
                let l = r.strings(key, v, &order);
                if let Some(max) = l
                    .iter()
                    .filter_map(|a| order.iter().position(|o| *o == a.value))
                    .max()
                {
                    let _ = writeln!(
                        out,
                        "  sandbox {}{c}: the most permissive listed",
                        order.get(max).unwrap_or(&"read-only")
                    );
                }
            }
            "guardian_policy_config" => {
                let _ = writeln!(
                    out,
                    "  # guardian_policy_config (line {line}) is the auto-reviewer's prompt text, kept here as a comment:"
                );
                if let DeValue::String(s) = v.get_ref() {
                    for l in s.lines() {
                        let _ = writeln!(out, "  #   {l}");
                    }
                }
            }
            "mcp_servers" => {
                let Some(t) = r.table(key, v) else { continue };
                q.mcp_allowed = Some(t.iter().map(|(k, _)| k.get_ref().to_string()).collect());
            }
            "experimental_network" | "network" => {
                let Some(t) = r.table(key, v) else { continue };
                let mut p = Proxy::default();
                read_proxy(&mut r, t, &mut p, key, line);
                let mut deny_all = None;
                network(&mut out, &p, &c, &mut deny_all);
                if let Some(l) = deny_all {
                    if p.domains.iter().any(|(_, allow)| *allow) {
                        r.error(l, format!("`{key}.domains.\"*\"` = \"deny\" with allowed domains beside it cannot be expressed as a requirement"));
                    } else {
                        q.deny_all_names = true;
                    }
                }
                q.managed_only = p.managed_only.as_ref().is_some_and(|m| m.value);
                q.domains = p.domains;
            }
            k if IRRELEVANT.contains(&k) => skipped.push(k.to_string()),
            other => {
                let known: Vec<&str> = KNOWN.iter().chain(IRRELEVANT).copied().collect();
                r.unknown(line, other, &known);
            }
        }
    }
    if !skipped.is_empty() {
        let _ = writeln!(
            out,
            "  # Skipped (they decide nothing): {}.",
            skipped.join(", ")
        );
    }
    out.push_str("}\n");
    q.text = out;
    q.notes = r.notes;
    q
}

fn network(out: &mut String, p: &Proxy, c: &str, deny_all: &mut Option<usize>) {
    let _ = writeln!(out, "  network {{{c}");
    let _ = writeln!(out, "    default deny");
    let local = p
        .switches
        .get("allow_local_binding")
        .is_some_and(|s| s.value);
    let _ = writeln!(out, "    local {}", if local { "allow" } else { "deny" });
    for (d, allow) in &p.domains {
        match domain_rule(&d.value, *allow) {
            Some(rule) => {
                let _ = writeln!(out, "    {rule}{}", d.comment(Input::Requirements));
            }
            // `"*" = "deny"`: no name may be allowed, which a requirement
            // can say only by listing no allowed name at all.
            None => *deny_all = Some(d.line),
        }
    }
    for (s, allow) in &p.sockets {
        if *allow {
            let _ = writeln!(
                out,
                "    allow socket {}{}",
                quote(&s.value),
                s.comment(Input::Requirements)
            );
        }
    }
    if p.switches
        .get("dangerously_allow_all_unix_sockets")
        .is_some_and(|s| s.value)
    {
        let _ = writeln!(out, "    allow socket *");
    }
    let _ = writeln!(out, "  }}");
    let caps: Vec<&str> = [
        ("enable_socks5", "socks5 off"),
        ("enable_socks5_udp", "socks5_udp off"),
        ("allow_upstream_proxy", "upstream off"),
    ]
    .iter()
    .filter(|(k, _)| p.switches.get(k).is_some_and(|s| !s.value))
    .map(|(_, s)| *s)
    .collect();
    let listen = if p
        .switches
        .get("dangerously_allow_non_loopback_proxy")
        .is_some_and(|s| s.value)
    {
        vec![]
    } else {
        vec!["listen loopback"]
    };
    let all: Vec<&str> = caps.into_iter().chain(listen).collect();
    let _ = writeln!(out, "  proxy {{ {} }}", all.join("; "));
}
