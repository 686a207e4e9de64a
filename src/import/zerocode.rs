//! `policyc import zerocode`: a ZeroCode `config.toml` (and optionally its
//! managed `requirements.toml`) as gatehouse policy text.
//!
//! Longer than 700 lines on purpose: one reader of one foreign format, each
//! block of the config a function in the order the config documents them,
//! so that a reader checks the importer against that documentation top to
//! bottom. Splitting it belongs with the rework of the importers (issue
//! 15).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use toml::de::{DeTable, DeValue};

use super::{Import, Note, Severity};

type Spanned<T> = toml::Spanned<T>;

/// Keys that decide nothing; reported as skipped, by name.
const SKIPPED: &[&str] = &[
    "otel",
    "history",
    "windows",
    "model",
    "model_provider",
    "model_providers",
    "notify",
    "tui",
    "mcp_servers",
];

/// A domain or socket with its effect (`true` = allow).
type Effects = Vec<(At<String>, bool)>;

/// A value read from the TOML, with the line it was written on.
#[derive(Clone, Debug)]
struct At<T> {
    value: T,
    line: usize,
    key: String,
}

struct Reader<'t> {
    text: &'t str,
    notes: Vec<Note>,
}

impl<'t> Reader<'t> {
    fn line(&self, offset: usize) -> usize {
        self.text
            .get(..offset)
            .map_or(1, |t| t.matches('\n').count() + 1)
    }
    fn warn(&mut self, line: usize, message: String) {
        self.notes.push(Note {
            severity: Severity::Warning,
            line,
            message,
        });
    }
    fn error(&mut self, line: usize, message: String) {
        self.notes.push(Note {
            severity: Severity::Error,
            line,
            message,
        });
    }

    fn string(
        &mut self,
        key: &str,
        v: &Spanned<DeValue<'_>>,
        allowed: &[&str],
    ) -> Option<At<String>> {
        let line = self.line(v.span().start);
        match v.get_ref() {
            DeValue::String(s) if allowed.is_empty() || allowed.contains(&s.as_ref()) => Some(At {
                value: s.to_string(),
                line,
                key: key.to_string(),
            }),
            DeValue::String(s) => {
                let hint = crate::diag::did_you_mean(s, allowed.iter().copied())
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default();
                self.error(
                    line,
                    format!(
                        "`{key}` = \"{s}\" is not one of {}{hint}",
                        crate::diag::one_of(allowed)
                    ),
                );
                None
            }
            _ => {
                self.error(line, format!("`{key}` must be a string"));
                None
            }
        }
    }

    fn boolean(&mut self, key: &str, v: &Spanned<DeValue<'_>>) -> Option<At<bool>> {
        let line = self.line(v.span().start);
        match v.get_ref() {
            DeValue::Boolean(b) => Some(At {
                value: *b,
                line,
                key: key.to_string(),
            }),
            _ => {
                self.error(line, format!("`{key}` must be true or false"));
                None
            }
        }
    }

    fn strings(
        &mut self,
        key: &str,
        v: &Spanned<DeValue<'_>>,
        allowed: &[&str],
    ) -> Vec<At<String>> {
        match v.get_ref() {
            DeValue::Array(items) => items
                .iter()
                .filter_map(|i| self.string(key, i, allowed))
                .collect(),
            _ => {
                let line = self.line(v.span().start);
                self.error(line, format!("`{key}` must be a list of strings"));
                Vec::new()
            }
        }
    }

    /// `{ "name" = "allow" | "deny", ... }`.
    fn effects(&mut self, key: &str, v: &Spanned<DeValue<'_>>) -> Vec<(At<String>, bool)> {
        let DeValue::Table(t) = v.get_ref() else {
            let line = self.line(v.span().start);
            self.error(
                line,
                format!("`{key}` must be a table of \"name\" = \"allow\" or \"deny\""),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, val) in t.iter() {
            let name = k.get_ref().to_string();
            if let Some(e) = self.string(&format!("{key}.{name}"), val, &["allow", "deny"]) {
                out.push((
                    At {
                        value: name,
                        line: e.line,
                        key: e.key,
                    },
                    e.value == "allow",
                ));
            }
        }
        out
    }
}

/// Everything of a config that decides something.
#[derive(Default)]
struct Config {
    approval: Option<At<String>>,
    granular: Vec<At<(String, bool)>>,
    sandbox: Option<At<String>>,
    reviewer: Option<At<String>>,
    web_search: Option<At<String>>,
    login_shell: Option<At<bool>>,
    network_access: Option<At<bool>>,
    writable_roots: Vec<At<String>>,
    proxy_enabled: Option<At<bool>>,
    domains: Vec<(At<String>, bool)>,
    sockets: Vec<(At<String>, bool)>,
    switches: BTreeMap<&'static str, At<bool>>,
}

const PROXY_SWITCHES: &[&str] = &[
    "allow_local_binding",
    "enable_socks5",
    "enable_socks5_udp",
    "allow_upstream_proxy",
    "dangerously_allow_non_loopback_proxy",
    "dangerously_allow_all_unix_sockets",
];

fn read_config(r: &mut Reader<'_>, table: &DeTable<'_>, c: &mut Config, skipped: &mut Vec<String>) {
    for (k, v) in table.iter() {
        let key = k.get_ref().as_ref();
        let line = r.line(k.span().start);
        match key {
            "approval_policy" => match v.get_ref() {
                DeValue::Table(t) => read_granular(r, t, c),
                _ => c.approval = r.string(key, v, &["untrusted", "on-request", "never"]),
            },
            "sandbox_mode" => {
                c.sandbox = r.string(
                    key,
                    v,
                    &["read-only", "workspace-write", "danger-full-access"],
                )
            }
            "approvals_reviewer" => c.reviewer = r.string(key, v, &["user", "auto_review"]),
            "web_search" => {
                c.web_search = r.string(key, v, &["cached", "disabled", "live", "indexed"])
            }
            "allow_login_shell" => c.login_shell = r.boolean(key, v),
            "sandbox_workspace_write" => {
                let DeValue::Table(t) = v.get_ref() else {
                    r.error(line, "`sandbox_workspace_write` must be a table".into());
                    continue;
                };
                for (k2, v2) in t.iter() {
                    let sub = format!("sandbox_workspace_write.{}", k2.get_ref());
                    match k2.get_ref().as_ref() {
                        "network_access" => c.network_access = r.boolean(&sub, v2),
                        "writable_roots" => c.writable_roots = r.strings(&sub, v2, &[]),
                        _ => {
                            let l = r.line(k2.span().start);
                            r.warn(l, format!("unknown key `{sub}` ignored"));
                        }
                    }
                }
            }
            "features" => {
                let DeValue::Table(t) = v.get_ref() else {
                    r.error(line, "`features` must be a table".into());
                    continue;
                };
                for (k2, v2) in t.iter() {
                    if k2.get_ref().as_ref() != "network_proxy" {
                        let l = r.line(k2.span().start);
                        r.warn(
                            l,
                            format!("unknown feature `features.{}` ignored", k2.get_ref()),
                        );
                        continue;
                    }
                    match v2.get_ref() {
                        DeValue::Boolean(_) => {
                            c.proxy_enabled = r.boolean("features.network_proxy", v2)
                        }
                        DeValue::Table(p) => read_proxy(r, p, c, "features.network_proxy"),
                        _ => {
                            let l = r.line(v2.span().start);
                            r.error(
                                l,
                                "`features.network_proxy` must be true, false or a table".into(),
                            );
                        }
                    }
                }
            }
            // Applied after every top-level key, below.
            "profiles" => {}
            "auto_review" => skipped.push("auto_review (the local reviewer prompt)".into()),
            k if SKIPPED.contains(&k) => skipped.push(k.to_string()),
            other => {
                let all = [
                    "approval_policy",
                    "sandbox_mode",
                    "approvals_reviewer",
                    "web_search",
                    "allow_login_shell",
                    "sandbox_workspace_write",
                    "features",
                    "profiles",
                ];
                let hint = crate::diag::did_you_mean(other, all.iter().chain(SKIPPED).copied())
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default();
                r.warn(line, format!("unknown key `{other}` ignored{hint}"));
            }
        }
    }
}

/// Overlays the `[profiles.NAME]` table, after the top level is read (the
/// table's keys are visited in sorted order, so this cannot be inline).
fn read_profile(
    r: &mut Reader<'_>,
    table: &DeTable<'_>,
    c: &mut Config,
    skipped: &mut Vec<String>,
    name: &str,
) {
    let profiles = table
        .iter()
        .find(|(k, _)| k.get_ref().as_ref() == "profiles")
        .map(|(_, v)| v);
    let found = profiles.and_then(|p| match p.get_ref() {
        DeValue::Table(t) => t
            .iter()
            .find(|(k, _)| k.get_ref().as_ref() == name)
            .map(|(_, v)| v),
        _ => None,
    });
    match found.map(|v| v.get_ref()) {
        Some(DeValue::Table(pt)) => read_config(r, pt, c, skipped),
        _ => r.error(
            1,
            format!("no profile `{name}`: expected a `[profiles.{name}]` table or a profile file"),
        ),
    }
}

fn read_granular(r: &mut Reader<'_>, t: &DeTable<'_>, c: &mut Config) {
    let Some((_, g)) = t.iter().find(|(k, _)| k.get_ref().as_ref() == "granular") else {
        r.error(
            1,
            "`approval_policy` as a table must be `{ granular = { ... } }`".into(),
        );
        return;
    };
    let line = r.line(g.span().start);
    c.approval = Some(At {
        value: "granular".into(),
        line,
        key: "approval_policy".into(),
    });
    let DeValue::Table(g) = g.get_ref() else {
        r.error(line, "`granular` must be a table".into());
        return;
    };
    let cats = [
        "sandbox_approval",
        "rules",
        "mcp_elicitations",
        "request_permissions",
        "skill_approval",
    ];
    for (k, v) in g.iter() {
        let name = k.get_ref().to_string();
        if !cats.contains(&name.as_str()) {
            let l = r.line(k.span().start);
            let hint = crate::diag::did_you_mean(&name, cats)
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            r.warn(
                l,
                format!("unknown granular category `{name}` ignored{hint}"),
            );
            continue;
        }
        if let Some(b) = r.boolean(&format!("granular.{name}"), v) {
            c.granular.push(At {
                value: (name, b.value),
                line: b.line,
                key: b.key,
            });
        }
    }
    // The three main categories are required by gatehouse; ZeroCode's own
    // default for a missing one is on.
    for required in ["sandbox_approval", "rules", "mcp_elicitations"] {
        if !c.granular.iter().any(|g| g.value.0 == required) {
            c.granular.push(At {
                value: (required.to_string(), true),
                line,
                key: format!("granular.{required} (default)"),
            });
        }
    }
}

fn read_proxy(r: &mut Reader<'_>, t: &DeTable<'_>, c: &mut Config, prefix: &str) {
    for (k, v) in t.iter() {
        let name = k.get_ref().to_string();
        let key = format!("{prefix}.{name}");
        match name.as_str() {
            "enabled" => c.proxy_enabled = r.boolean(&key, v),
            "domains" => c.domains.extend(r.effects(&key, v)),
            "unix_sockets" => c.sockets.extend(r.effects(&key, v)),
            s => match PROXY_SWITCHES.iter().find(|p| **p == s) {
                Some(p) => {
                    if let Some(b) = r.boolean(&key, v) {
                        c.switches.insert(p, b);
                    }
                }
                None => {
                    let l = r.line(k.span().start);
                    let all = ["enabled", "domains", "unix_sockets"]
                        .iter()
                        .chain(PROXY_SWITCHES)
                        .copied();
                    let hint = crate::diag::did_you_mean(s, all)
                        .map(|h| format!(" ({h})"))
                        .unwrap_or_default();
                    r.warn(l, format!("unknown key `{key}` ignored{hint}"));
                }
            },
        }
    }
}

fn comment<T>(a: &At<T>) -> String {
    format!("  # {} (line {})", a.key, a.line)
}

fn quote(s: &str) -> String {
    crate::query::quote_string(s)
}

/// Imports a config (and its managed requirements).
pub fn import(
    config: &str,
    requirements: Option<&str>,
    profile: Option<&str>,
    profile_file: Option<&str>,
) -> Import {
    let mut r = Reader {
        text: config,
        notes: Vec::new(),
    };
    let mut skipped = Vec::new();
    let mut c = Config::default();
    match DeTable::parse(config) {
        Ok(t) => {
            read_config(&mut r, t.get_ref(), &mut c, &mut skipped);
            if let (Some(name), None) = (profile, profile_file) {
                read_profile(&mut r, t.get_ref(), &mut c, &mut skipped, name);
            }
        }
        Err(e) => {
            let line = e.span().map_or(1, |s| r.line(s.start));
            r.error(line, format!("not valid TOML: {}", e.message()));
        }
    }
    // A profile file overlays the config.
    let mut notes = std::mem::take(&mut r.notes);
    if let Some(text) = profile_file {
        let mut pr = Reader {
            text,
            notes: Vec::new(),
        };
        match DeTable::parse(text) {
            Ok(t) => read_config(&mut pr, t.get_ref(), &mut c, &mut skipped),
            Err(e) => pr.error(
                e.span().map_or(1, |s| pr.line(s.start)),
                format!("not valid TOML: {}", e.message()),
            ),
        }
        notes.extend(pr.notes.into_iter().map(|mut n| {
            n.message = format!("profile: {}", n.message);
            n
        }));
    }
    let name = profile.unwrap_or("zerocode");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Imported from a ZeroCode config by `policyc import zerocode`."
    );
    if !skipped.is_empty() {
        let _ = writeln!(
            out,
            "# Skipped (they decide nothing): {}.",
            skipped.join(", ")
        );
    }
    let mut req_out = String::new();
    let mut managed_network: Vec<(At<String>, bool)> = Vec::new();
    if let Some(text) = requirements {
        let (text_out, req_notes, domains) = import_requirements(text);
        req_out = text_out;
        managed_network = domains;
        notes.extend(req_notes.into_iter().map(|mut n| {
            n.message = format!("requirements: {}", n.message);
            n
        }));
    }
    let _ = writeln!(out, "policy {} {{", crate::query::quote_word(name));
    let sandbox = c
        .sandbox
        .as_ref()
        .map_or("workspace-write", |s| s.value.as_str());
    if let Some(s) = &c.sandbox {
        let block = if c.writable_roots.is_empty() {
            String::new()
        } else {
            let roots: Vec<String> = c.writable_roots.iter().map(|w| quote(&w.value)).collect();
            format!(" {{ writable {} }}", roots.join(" "))
        };
        let _ = writeln!(out, "  sandbox {}{block}{}", s.value, comment(s));
    } else if !c.writable_roots.is_empty() {
        let roots: Vec<String> = c.writable_roots.iter().map(|w| quote(&w.value)).collect();
        let _ = writeln!(
            out,
            "  sandbox workspace-write {{ writable {} }}  # sandbox_workspace_write.writable_roots",
            roots.join(" ")
        );
    }
    match &c.approval {
        Some(a) if a.value == "granular" => {
            let _ = writeln!(out, "  approvals granular {{{}", comment(a));
            for g in &c.granular {
                let _ = writeln!(
                    out,
                    "    {} {}{}",
                    g.value.0,
                    if g.value.1 { "on" } else { "off" },
                    comment(g)
                );
            }
            let _ = writeln!(out, "  }}");
        }
        Some(a) => {
            let _ = writeln!(out, "  approvals {}{}", a.value, comment(a));
        }
        None => {}
    }
    if let Some(rv) = &c.reviewer {
        let _ = writeln!(out, "  reviewer {}{}", rv.value, comment(rv));
    }
    if let Some(w) = &c.web_search {
        let _ = writeln!(out, "  web_search {}{}", w.value, comment(w));
    }
    if let Some(l) = c.login_shell.as_ref().filter(|l| !l.value) {
        let _ = writeln!(out, "  commands {{");
        let _ = writeln!(
            out,
            "    forbid [bash sh zsh] -lc because \"login shells are disallowed\"{}",
            comment(l)
        );
        let _ = writeln!(out, "  }}");
    }
    // The seed's three-way table: command network access × network_proxy.
    let access = match sandbox {
        "danger-full-access" => true,
        "read-only" => false,
        _ => c.network_access.as_ref().is_some_and(|a| a.value),
    };
    let proxy = c.proxy_enabled.as_ref().is_some_and(|p| p.value) || !managed_network.is_empty();
    let why = match (&c.network_access, sandbox) {
        (Some(a), "workspace-write") => format!("{} = {}", a.key, a.value),
        _ => format!("sandbox_mode = {sandbox}"),
    };
    match (access, proxy) {
        (false, _) => {
            let _ = writeln!(out, "  network off  # {why}: command network access is off");
        }
        (true, false) => {
            let _ = writeln!(out, "  network unrestricted  # {why}, network_proxy off");
        }
        (true, true) => {
            let _ = writeln!(out, "  network {{  # {why}, network_proxy on");
            let local = c
                .switches
                .get("allow_local_binding")
                .is_some_and(|s| s.value);
            let _ = writeln!(out, "    default deny");
            match c.switches.get("allow_local_binding") {
                Some(s) => {
                    let _ = writeln!(
                        out,
                        "    local {}{}",
                        if local { "allow" } else { "deny" },
                        comment(s)
                    );
                }
                None => {
                    let _ = writeln!(out, "    local deny");
                }
            }
            for (d, allow) in c
                .domains
                .iter()
                .chain(managed_network.iter().filter(|(_, allow)| *allow))
            {
                let _ = writeln!(
                    out,
                    "    {} domain {}{}",
                    if *allow { "allow" } else { "deny" },
                    quote(&d.value),
                    comment(d)
                );
            }
            for (s, allow) in &c.sockets {
                let _ = writeln!(
                    out,
                    "    {} socket {}{}",
                    if *allow { "allow" } else { "deny" },
                    quote(&s.value),
                    comment(s)
                );
            }
            if let Some(s) = c
                .switches
                .get("dangerously_allow_all_unix_sockets")
                .filter(|s| s.value)
            {
                let _ = writeln!(out, "    allow socket *{}", comment(s));
            }
            let _ = writeln!(out, "  }}");
            let proxy_lines: Vec<String> = [
                ("enable_socks5", "socks5", "on", "off"),
                ("enable_socks5_udp", "socks5_udp", "on", "off"),
                ("allow_upstream_proxy", "upstream", "on", "off"),
                (
                    "dangerously_allow_non_loopback_proxy",
                    "listen",
                    "any",
                    "loopback",
                ),
            ]
            .iter()
            .filter_map(|(key, stmt, yes, no)| {
                c.switches.get(key).map(|s| {
                    format!(
                        "    {stmt} {}{}",
                        if s.value { yes } else { no },
                        comment(s)
                    )
                })
            })
            .collect();
            if !proxy_lines.is_empty() {
                let _ = writeln!(out, "  proxy {{\n{}\n  }}", proxy_lines.join("\n"));
            }
        }
    }
    let _ = writeln!(out, "}}");
    if !req_out.is_empty() {
        out.push('\n');
        out.push_str(&req_out);
    }
    Import { text: out, notes }
}

/// A managed `requirements.toml` as a `requirements` block. Returns the
/// text, the notes, and the managed domain rules (which also configure the
/// policy's networking, as ZeroCode's managed networking does).
fn import_requirements(text: &str) -> (String, Vec<Note>, Effects) {
    let mut r = Reader {
        text,
        notes: Vec::new(),
    };
    let mut out = String::from("# Managed requirements.\nrequirements managed {\n");
    let mut domains = Vec::new();
    let table = match DeTable::parse(text) {
        Ok(t) => t,
        Err(e) => {
            let line = e.span().map_or(1, |s| r.line(s.start));
            r.error(line, format!("not valid TOML: {}", e.message()));
            return (String::new(), r.notes, domains);
        }
    };
    for (k, v) in table.get_ref().iter() {
        let key = k.get_ref().as_ref();
        let line = r.line(k.span().start);
        let list = |r: &mut Reader<'_>, allowed: &[&str]| r.strings(key, v, allowed);
        match key {
            "allowed_approval_policies"
            | "allowed_approvals_reviewers"
            | "allowed_web_search_modes" => {
                let (statement, allowed): (&str, &[&str]) = match key {
                    "allowed_approval_policies" => (
                        "approvals",
                        &["untrusted", "on-request", "never", "granular"],
                    ),
                    "allowed_approvals_reviewers" => ("reviewer", &["user", "auto_review"]),
                    _ => ("web_search", &["cached", "disabled", "live", "indexed"]),
                };
                let l = list(&mut r, allowed);
                if !l.is_empty() {
                    let values: Vec<&str> = l.iter().map(|a| a.value.as_str()).collect();
                    let _ = writeln!(
                        out,
                        "  {statement} {}  # {key} (line {line})",
                        values.join(" ")
                    );
                }
            }
            "allowed_sandbox_modes" => {
                let order = ["read-only", "workspace-write", "danger-full-access"];
                let l = list(&mut r, &order);
                if let Some(max) = l
                    .iter()
                    .filter_map(|a| order.iter().position(|o| *o == a.value))
                    .max()
                {
                    let _ = writeln!(
                        out,
                        "  sandbox {}  # {key} (line {line}): the most permissive listed",
                        order.get(max).unwrap_or(&"read-only")
                    );
                }
            }
            "guardian_policy_config" => {
                let _ = writeln!(
                    out,
                    "  # {key} (line {line}) is the auto-reviewer's prompt text, kept here as a comment:"
                );
                if let DeValue::String(s) = v.get_ref() {
                    for l in s.lines() {
                        let _ = writeln!(out, "  #   {l}");
                    }
                }
            }
            "experimental_network" | "network" => {
                let DeValue::Table(t) = v.get_ref() else {
                    r.error(line, format!("`{key}` must be a table"));
                    continue;
                };
                let mut c = Config::default();
                read_proxy(&mut r, t, &mut c, key);
                let _ = writeln!(out, "  network {{  # {key} (line {line})");
                let _ = writeln!(out, "    default deny");
                let local = c
                    .switches
                    .get("allow_local_binding")
                    .is_some_and(|s| s.value);
                let _ = writeln!(out, "    local {}", if local { "allow" } else { "deny" });
                for (d, allow) in &c.domains {
                    let _ = writeln!(
                        out,
                        "    {} domain {}  # {} (line {})",
                        if *allow { "allow" } else { "deny" },
                        quote(&d.value),
                        d.key,
                        d.line
                    );
                }
                for (s, allow) in &c.sockets {
                    if *allow {
                        let _ = writeln!(
                            out,
                            "    allow socket {}  # {} (line {})",
                            quote(&s.value),
                            s.key,
                            s.line
                        );
                    }
                }
                if c.switches
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
                .filter(|(k, _)| c.switches.get(k).is_some_and(|s| !s.value))
                .map(|(_, s)| *s)
                .collect();
                let listen = if c
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
                domains = c.domains;
            }
            other => r.warn(line, format!("unknown requirement `{other}` ignored")),
        }
    }
    out.push_str("}\n");
    (out, r.notes, domains)
}
