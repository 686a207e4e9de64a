//! `policyc import zoo`: a JSON document that mirrors the Zoo sandbox
//! service's API calls, as gatehouse policy text.
//!
//! ```json
//! {"sandbox": "coding-agent", "calls": [
//!   {"set_network": {"default": "deny", "allow_dns": true}},
//!   {"add_rule": {"kind": "domain", "value": "github.com"}},
//!   {"add_rule": {"kind": "cidr", "value": "192.168.0.0/16", "effect": "deny"}},
//!   {"set_permission": {"permission": "input", "action": "control", "effect": "deny"}},
//!   {"set_app_policy": {"deny": ["firefox"]}}
//! ]}
//! ```

use std::fmt::Write as _;

use serde::Deserialize;

use super::{Import, Input, Note, Severity};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    sandbox: Option<String>,
    calls: Vec<Call>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Call {
    SetNetwork {
        default: String,
        #[serde(default = "yes")]
        allow_dns: bool,
    },
    AddRule {
        kind: String,
        value: String,
        #[serde(default = "allow")]
        effect: String,
        comment: Option<String>,
    },
    SetPermission {
        permission: String,
        action: String,
        effect: String,
    },
    SetAppPolicy {
        deny: Vec<String>,
    },
}

fn yes() -> bool {
    true
}
fn allow() -> String {
    "allow".into()
}

/// The line of the `n`th call in the document (for notes), best effort.
fn call_line(text: &str, n: usize) -> usize {
    let mut seen = 0;
    for (i, line) in text.lines().enumerate() {
        for key in [
            "\"set_network\"",
            "\"add_rule\"",
            "\"set_permission\"",
            "\"set_app_policy\"",
        ] {
            seen += line.matches(key).count();
        }
        if seen > n {
            return i + 1;
        }
    }
    1
}

/// Imports a Zoo policy document (JSON).
pub fn import(text: &str) -> Import {
    let mut notes = Vec::new();
    let doc: Doc = match serde_json::from_str(text) {
        Ok(d) => d,
        Err(e) => {
            notes.push(Note::new(
                Severity::Error,
                Input::Config,
                e.line(),
                format!("not a Zoo policy document: {e}"),
            ));
            return Import {
                text: String::new(),
                notes,
            };
        }
    };
    let name = doc.sandbox.as_deref().unwrap_or("zoo");
    let mut network: Option<(String, bool, usize)> = None;
    let mut rules: Vec<String> = Vec::new();
    let mut perms: Vec<String> = Vec::new();
    let mut apps: Vec<String> = Vec::new();
    let mut deny_all_names: Option<usize> = None;
    for (i, call) in doc.calls.iter().enumerate() {
        let line = call_line(text, i);
        let mut error =
            |message: String| notes.push(Note::new(Severity::Error, Input::Config, line, message));
        match call {
            Call::SetNetwork { default, allow_dns } => match default.as_str() {
                "allow" | "deny" => network = Some((default.clone(), *allow_dns, line)),
                other => error(format!(
                    "set_network: default \"{other}\" is not \"allow\" or \"deny\""
                )),
            },
            Call::AddRule {
                kind,
                value,
                effect,
                comment,
            } => {
                if !matches!(effect.as_str(), "allow" | "deny") {
                    error(format!(
                        "add_rule: effect \"{effect}\" is not \"allow\" or \"deny\""
                    ));
                    continue;
                }
                if kind == "domain" && value == "*" && effect == "deny" {
                    // Deny wins: no name can be allowed any more.
                    deny_all_names = Some(line);
                    continue;
                }
                let target = match kind.as_str() {
                    "domain" => crate::query::quote_string(value),
                    "ip" | "cidr" => value.clone(),
                    other => {
                        error(format!(
                            "add_rule: kind \"{other}\" is not \"domain\", \"ip\" or \"cidr\""
                        ));
                        continue;
                    }
                };
                let note = comment
                    .as_ref()
                    .map(|c| format!(" {c}"))
                    .unwrap_or_default();
                rules.push(format!(
                    "    {effect} {kind} {target}  # add_rule (line {line}){note}"
                ));
            }
            Call::SetPermission {
                permission,
                action,
                effect,
            } => {
                if !matches!(effect.as_str(), "allow" | "deny") {
                    error(format!(
                        "set_permission: effect \"{effect}\" is not \"allow\" or \"deny\""
                    ));
                    continue;
                }
                perms.push(format!(
                    "    {effect} {permission}.{action}  # set_permission (line {line})"
                ));
            }
            Call::SetAppPolicy { deny } => {
                apps.extend(deny.iter().map(|a| crate::query::quote_string(a)))
            }
        }
    }
    if let Some(at) = deny_all_names {
        rules.retain(|r| !r.trim_start().starts_with("allow domain"));
        rules.push(format!(
            "    # add_rule (line {at}): deny domain \"*\" denies every name; no name is allowed"
        ));
        if network.as_ref().is_some_and(|(d, _, _)| d == "allow") {
            notes.push(Note::new(
                Severity::Error,
                Input::Config,
                at,
                "deny domain \"*\" under set_network default allow cannot be expressed (every name denied, addresses allowed); use set_network default deny".into(),
            ));
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Imported from a Zoo policy document by `policyc import zoo`."
    );
    let _ = writeln!(out, "policy {} {{", crate::query::quote_word(name));
    match network {
        Some((default, allow_dns, line)) => {
            let _ = writeln!(out, "  network {{");
            let _ = writeln!(out, "    default {default}  # set_network (line {line})");
            let _ = writeln!(
                out,
                "    dns {}  # allow_dns",
                if allow_dns { "on" } else { "off" }
            );
            for r in &rules {
                let _ = writeln!(out, "{r}");
            }
            let _ = writeln!(out, "  }}");
        }
        None if !rules.is_empty() => {
            notes.push(Note::new(
                Severity::Warning,
                Input::Config,
                1,
                "rules without set_network: gatehouse denies what no rule allows".into(),
            ));
            let _ = writeln!(out, "  network {{\n    default deny  # no set_network call");
            for r in &rules {
                let _ = writeln!(out, "{r}");
            }
            let _ = writeln!(out, "  }}");
        }
        None => {}
    }
    if !perms.is_empty() {
        let _ = writeln!(out, "  permissions {{\n{}\n  }}", perms.join("\n"));
    }
    if !apps.is_empty() {
        let _ = writeln!(
            out,
            "  apps {{\n    deny {}  # set_app_policy\n  }}",
            apps.join(" ")
        );
    }
    let _ = writeln!(out, "}}");
    super::validated(out, notes)
}
