//! A managed `requirements.toml` as a `requirements` block.

use std::fmt::Write as _;

use toml::de::DeValue;

use super::config::{Proxy, read_proxy};
use super::read::{At, Effects, Reader, Spanned, get};
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
    "rules",
    "allowed_permission_profiles",
    "default_permissions",
    "permissions",
];

/// Requirement keys that decide nothing here.
/// (Hooks are the user's own scripts around a turn, and remote control is
/// how a session is driven; neither widens or narrows what a decision
/// allows.)
const IRRELEVANT: &[&str] = &[
    "remote_sandbox_config",
    "enforce_residency",
    "features",
    "hooks",
    "allow_managed_hooks_only",
    "allow_remote_control",
];

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
    /// Each capped setting's allowed values as listed (in order), with the
    /// line: a config that is silent keeps ZeroCode's own default when it
    /// is allowed, else takes the first listed.
    pub approvals: Option<At<Vec<String>>>,
    pub reviewers: Option<At<Vec<String>>>,
    pub web_search: Option<At<Vec<String>>>,
    pub sandbox_modes: Option<At<Vec<String>>>,
    /// `allowed_permission_profiles`: the profiles a config may choose.
    pub profiles: Option<At<Vec<String>>>,
    /// Managed permission profiles (`[permissions.NAME]`), available to
    /// the config by name.
    pub permissions: std::collections::BTreeMap<String, super::config::Profile>,
    /// The managed `default_permissions`: the profile in force when the
    /// config chooses none (or one that is not allowed), and a profile is
    /// then always selected (Codex's `requirements_force_profile_selection`).
    pub default_permissions: Option<At<String>>,
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
                    q.approvals = Some(at.with(values.iter().map(|v| v.to_string()).collect()));
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
                    let listed = Some(at.with(values));
                    if statement == "reviewer" {
                        q.reviewers = listed;
                    } else {
                        q.web_search = listed;
                    }
                }
            }
            "allowed_sandbox_modes" => {
                let order = ["read-only", "workspace-write", "danger-full-access"];
                let l = r.strings(key, v, &order);
                // ZeroCode refuses requirements that take read-only away:
                // it is where every session can fall back to.
                if !l.is_empty() && !l.iter().any(|a| a.value == "read-only") {
                    r.error(
                        line,
                        format!("`{key}` must include \"read-only\": ZeroCode refuses to start with requirements that do not allow it"),
                    );
                }
                q.sandbox_modes = Some(at.with(l.iter().map(|a| a.value.clone()).collect()));
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
            "rules" => {
                let Some(t) = r.table(key, v) else { continue };
                rules(&mut r, t, &mut out);
            }
            "allowed_permission_profiles" => {
                // Codex reads a table of `NAME = true|false` (a false entry
                // is a profile that is not allowed); a list of names is
                // read too.
                let names: Vec<String> = match v.get_ref() {
                    DeValue::Table(t) => t
                        .iter()
                        .filter_map(|(name, allowed)| {
                            let k = format!("{key}.{}", name.get_ref());
                            r.boolean(&k, allowed)
                                .filter(|b| b.value)
                                .map(|_| name.get_ref().to_string())
                        })
                        .collect(),
                    _ => r
                        .strings(key, v, &[])
                        .into_iter()
                        .map(|a| a.value)
                        .collect(),
                };
                q.profiles = Some(at.with(names));
            }
            "default_permissions" => {
                q.default_permissions = r.string(key, v, &[]);
            }
            "permissions" => {
                let Some(t) = r.table(key, v) else { continue };
                for (name, pv) in t.iter() {
                    let name = name.get_ref().to_string();
                    if let Some(p) = super::config::read_profile(&mut r, &name, pv) {
                        q.permissions.insert(name, p);
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

/// `[rules] prefix_rules`: each rule a `forbid` or `prompt` command rule in
/// the requirements. Checked as ZeroCode checks them
/// (`config_loader/requirements_exec_policy.rs`, `to_policy`): a list that
/// is empty, a rule without a pattern or a decision, an `allow` decision, a
/// blank justification, a token that is blank or both or neither of `token`
/// and `any_of` — each refuses the import, as each stops ZeroCode.
fn rules(r: &mut Reader<'_>, t: &toml::de::DeTable<'_>, out: &mut String) {
    let mut lines = Vec::new();
    for (k, v) in t.iter() {
        let key = format!("rules.{}", k.get_ref());
        let line = r.line_of(k);
        if k.get_ref().as_ref() != "prefix_rules" {
            r.unknown(line, &key, &["prefix_rules"]);
            continue;
        }
        let DeValue::Array(items) = v.get_ref() else {
            r.error(line, format!("`{key}` must be a list of rules"));
            continue;
        };
        if items.is_empty() {
            r.error(line, format!("`{key}` cannot be empty"));
        }
        for (i, item) in items.iter().enumerate() {
            if let Some(rule) = prefix_rule(r, &format!("{key}[{i}]"), item) {
                lines.push(rule);
            }
        }
    }
    if !lines.is_empty() {
        out.push_str("  commands {\n");
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
        out.push_str("  }\n");
    }
}

/// One prefix rule as a command rule line, or `None` after its errors.
fn prefix_rule(r: &mut Reader<'_>, key: &str, item: &Spanned<DeValue<'_>>) -> Option<String> {
    let line = r.line_of(item);
    let DeValue::Table(rule) = item.get_ref() else {
        r.error(
            line,
            format!("`{key}` must be a table with `pattern` and `decision`"),
        );
        return None;
    };
    let mut ok = true;
    let effect = match get(rule, "decision").map(|d| (r.line_of(d), d.get_ref())) {
        Some((_, DeValue::String(d))) if d.as_ref() == "forbidden" => Some("forbid"),
        Some((_, DeValue::String(d))) if d.as_ref() == "prompt" => Some("prompt"),
        Some((l, DeValue::String(d))) if d.as_ref() == "allow" => {
            r.error(l, format!("`{key}.decision` = \"allow\" is not permitted in requirements (ZeroCode merges these rules and keeps the most restrictive; use \"prompt\" or \"forbidden\")"));
            None
        }
        Some((l, _)) => {
            r.error(
                l,
                format!("`{key}.decision` must be \"prompt\" or \"forbidden\""),
            );
            None
        }
        None => {
            r.error(
                line,
                format!("`{key}` has no `decision` (\"prompt\" or \"forbidden\")"),
            );
            None
        }
    };
    let because = match get(rule, "justification").map(|j| (r.line_of(j), j.get_ref())) {
        Some((_, DeValue::String(j))) if !j.trim().is_empty() => {
            format!(" because {}", super::quote(j))
        }
        Some((l, DeValue::String(_))) => {
            r.error(l, format!("`{key}.justification` cannot be blank"));
            ok = false;
            String::new()
        }
        Some((l, _)) => {
            r.error(l, format!("`{key}.justification` must be a string"));
            ok = false;
            String::new()
        }
        None => String::new(),
    };
    let mut words = Vec::new();
    match get(rule, "pattern").map(|p| (r.line_of(p), p.get_ref())) {
        Some((l, DeValue::Array(tokens))) if tokens.is_empty() => {
            r.error(l, format!("`{key}.pattern` cannot be empty"));
            ok = false;
        }
        Some((_, DeValue::Array(tokens))) => {
            for (j, token) in tokens.iter().enumerate() {
                match pattern_token(r, &format!("{key}.pattern[{j}]"), token) {
                    Some(w) => words.push(w),
                    None => ok = false,
                }
            }
        }
        Some((l, _)) => {
            r.error(l, format!("`{key}.pattern` must be a list of `{{ token = \"...\" }}` or `{{ any_of = [...] }}`"));
            ok = false;
        }
        None => {
            r.error(line, format!("`{key}` has no `pattern`"));
            ok = false;
        }
    }
    for (k, _) in rule.iter() {
        let name = k.get_ref().as_ref();
        if !["pattern", "decision", "justification"].contains(&name) {
            let l = r.line_of(k);
            r.unknown(
                l,
                &format!("{key}.{name}"),
                &["pattern", "decision", "justification"],
            );
        }
    }
    let effect = effect?;
    ok.then(|| {
        format!(
            "    {effect} {}{because}  # requirements: {key} (line {line})",
            words.join(" ")
        )
    })
}

/// `{ token = "x" }` as a word, `{ any_of = ["a", "b"] }` as `[a b]`.
fn pattern_token(r: &mut Reader<'_>, key: &str, v: &Spanned<DeValue<'_>>) -> Option<String> {
    let line = r.line_of(v);
    let DeValue::Table(t) = v.get_ref() else {
        r.error(
            line,
            format!("`{key}` must be `{{ token = \"...\" }}` or `{{ any_of = [...] }}`"),
        );
        return None;
    };
    let word = |s: &str| crate::query::quote_word(s);
    match (
        get(t, "token").map(|x| x.get_ref()),
        get(t, "any_of").map(|x| x.get_ref()),
    ) {
        (Some(DeValue::String(s)), None) if !s.trim().is_empty() => Some(word(s)),
        (Some(DeValue::String(_)), None) => {
            r.error(line, format!("`{key}.token` cannot be blank"));
            None
        }
        (None, Some(DeValue::Array(alts))) => {
            let mut out = Vec::new();
            for a in alts {
                match a.get_ref() {
                    DeValue::String(s) if !s.trim().is_empty() => out.push(word(s)),
                    _ => {
                        let l = r.line_of(a);
                        r.error(
                            l,
                            format!("`{key}.any_of` entries must be non-blank strings"),
                        );
                        return None;
                    }
                }
            }
            if out.is_empty() {
                r.error(line, format!("`{key}.any_of` cannot be empty"));
                return None;
            }
            Some(format!("[{}]", out.join(" ")))
        }
        (Some(_), Some(_)) => {
            r.error(
                line,
                format!("`{key}`: set either `token` or `any_of`, not both"),
            );
            None
        }
        _ => {
            r.error(
                line,
                format!("`{key}`: set `token` (a string) or `any_of` (a list of strings)"),
            );
            None
        }
    }
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
