//! `policyc import zerocode`: a ZeroCode `config.toml` (with its profiles,
//! permission profiles and MCP servers, and optionally its managed
//! `requirements.toml`) as gatehouse policy text.
//!
//! Reading (modules `config`, `requirements`) is apart from writing (here), and
//! the output is checked before it is returned (`validated`): an import
//! never succeeds with text that `policyc check` refuses. docs/importing.md
//! holds the mapping table.

mod config;
mod keys;
mod mcp;
mod otel;
mod permissions;
mod read;
mod requirements;

pub use otel::{Telemetry, telemetry};

use std::fmt::Write as _;

use config::{Config, Proxy, Syntax};
use read::{At, Reader};

use super::{Import, Input};

pub(super) fn quote(s: &str) -> String {
    crate::query::quote_string(s)
}

/// A domain entry as a network rule: an address or a prefix becomes an
/// `ip` or `cidr` rule, `NAME:PORT` a rule on that port. `None` for
/// `"*" = "deny"`, which the caller handles.
pub(super) fn domain_rule(value: &str, allow: bool) -> Option<String> {
    let effect = if allow { "allow" } else { "deny" };
    let (host, port) = match value.rsplit_once(':') {
        Some((h, p))
            if !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (!h.contains(':') || (h.starts_with('[') && h.ends_with(']'))) =>
        {
            (h, Some(p))
        }
        _ => (value, None),
    };
    let port = port.map(|p| format!(" port {p}")).unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if host == "*" {
        return allow.then(|| format!("allow domain *{port}"));
    }
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return Some(format!("{effect} ip {bare}{port}"));
    }
    if bare.contains('/') && bare.parse::<ipnet::IpNet>().is_ok() {
        return Some(format!("{effect} cidr {bare}{port}"));
    }
    Some(format!("{effect} domain {}{port}", quote(host)))
}

/// Imports a config (and its managed requirements).
///
/// `profile` names the active `[profiles.NAME]` (else the config's own
/// `profile` key decides); `profile_file` is a profile's own file, layered
/// over the config.
pub fn import(
    config: &str,
    requirements: Option<&str>,
    profile: Option<&str>,
    profile_file: Option<&str>,
) -> Import {
    let mut r = Reader::new(config, Input::Config);
    let mut c = Config::default();
    if let Some(t) = r.parse() {
        config::read_config(&mut r, t.get_ref(), &mut c, true);
        let active = match (profile, profile_file) {
            (Some(name), None) => Some(At {
                value: name.to_string(),
                line: 1,
                key: "--profile".into(),
            }),
            (None, None) => c.active_profile.clone(),
            _ => None,
        };
        if let Some(name) = active {
            config::read_profile_overlay(&mut r, t.get_ref(), &mut c, &name);
        }
    }
    let mut notes = std::mem::take(&mut r.notes);
    if let Some(text) = profile_file {
        let mut pr = Reader::new(text, Input::Profile);
        if let Some(t) = pr.parse() {
            config::read_config(&mut pr, t.get_ref(), &mut c, false);
        }
        notes.append(&mut pr.notes);
    }
    let req = requirements.map(requirements::read);
    if let Some(q) = &req {
        // Managed permission profiles are the config's to choose by name;
        // a managed definition replaces one of the same name.
        for (name, p) in &q.permissions {
            let mut p = p.clone();
            for (_, a) in p.fs.iter_mut() {
                a.key = format!("{} in the requirements", a.key);
            }
            if let Some(own) = c.permissions.get(name) {
                notes.push(crate::import::Note::new(
                    crate::import::Severity::Warning,
                    Input::Config,
                    own.line,
                    format!("`[permissions.{name}]` is replaced by the requirements' profile of the same name"),
                ));
            }
            c.permissions.insert(name.clone(), p);
        }
    }
    let mut w = Writer {
        out: String::new(),
        notes: Vec::new(),
        defaults: Vec::new(),
        managed: req.is_some(),
        sandbox: None,
        approvals: None,
    };
    let name = profile
        .map(str::to_string)
        .or_else(|| c.active_profile.as_ref().map(|p| p.value.clone()))
        .unwrap_or_else(|| "zerocode".into());
    w.policy(&c, req.as_ref(), &name);
    notes.append(&mut w.notes);
    let mut text = w.out;
    if let Some(mut q) = req {
        notes.append(&mut q.notes);
        text.push('\n');
        text.push_str(&q.text);
    }
    super::validated(text, notes)
}

struct Writer {
    out: String,
    notes: Vec<crate::import::Note>,
    /// Settings the config leaves out, and what was assumed for each.
    defaults: Vec<&'static str>,
    /// Requirements are imported too: an open setting is left open, for
    /// their caps and lists to decide.
    managed: bool,
    /// The `sandbox` mode the policy states, once written.
    sandbox: Option<String>,
    /// The `approvals` mode the policy states, once written.
    approvals: Option<String>,
}

impl Writer {
    fn line(&mut self, text: &str) {
        self.out.push_str(text);
        self.out.push('\n');
    }
    fn warn(&mut self, input: Input, line: usize, message: String) {
        self.notes.push(crate::import::Note::new(
            crate::import::Severity::Warning,
            input,
            line,
            message,
        ));
    }
    fn error(&mut self, input: Input, line: usize, message: String) {
        self.notes.push(crate::import::Note::new(
            crate::import::Severity::Error,
            input,
            line,
            message,
        ));
    }

    fn policy(&mut self, c: &Config, req: Option<&requirements::Requirements>, name: &str) {
        self.line("# Imported from a ZeroCode config by `policyc import zerocode`.");
        if !c.skipped.is_empty() {
            let _ = writeln!(
                self.out,
                "# Skipped (known keys that decide nothing): {}.",
                c.skipped.join(", ")
            );
        }
        let _ = writeln!(self.out, "policy {} {{", crate::query::quote_word(name));
        let profile = match self.selected_profile(c, req) {
            Some(d) => self.resolve(c, &d, 0),
            None => None,
        };
        if let (Some(d), Some(list)) = (
            &c.default_permissions,
            req.and_then(|q| q.profiles.as_ref()),
        ) && !list.value.contains(&d.value)
        {
            self.error(
                Input::Config,
                d.line,
                format!(
                    "conflicts with the requirements: `default_permissions` = \"{}\" is not among `allowed_permission_profiles` ({}) (see line {} of the requirements)",
                    d.value,
                    list.value.join(", "),
                    list.line
                ),
            );
        }
        let network = match &profile {
            Some((p, d)) => {
                let mut net = self.profile_sandbox(p, d);
                // A legacy `[experimental_network]` table still configures
                // the proxy: its rules join the profile's (its denies
                // would otherwise be lost).
                if let (Net::Rules(n, _), Some(_)) = (&mut net, &c.proxy.at) {
                    n.domains.extend(c.proxy.domains.iter().cloned());
                    n.sockets.extend(c.proxy.sockets.iter().cloned());
                } else if let Some(at) = &c.proxy.at {
                    if !c.proxy.domains.is_empty() {
                        self.warn(Input::Config, at.line, format!("`{}` is left out: the permission profile's network is off or unrestricted, and the profile decides", at.key));
                    }
                }
                net
            }
            None => self.legacy_sandbox(c, req),
        };
        self.approvals(c, req);
        if self.approvals.as_deref() == Some("never")
            && self.sandbox.as_deref() == Some("danger-full-access")
        {
            let line = c.approval.as_ref().map_or(0, |a| a.line);
            self.warn(Input::Config, line, "`approval_policy` = \"never\" with `danger-full-access`: the language lets a dangerous command (`rm -f…`) run unsandboxed, as the Codex it was written from did; current Codex refuses it. To decide as current Codex does, state `approvals never` in a `requirements` block instead of the policy: a dangerous command is then denied `approval_never` (docs/importing.md)".into());
        }
        if let Some(rv) = &c.reviewer {
            let _ = writeln!(
                self.out,
                "  reviewer {}{}",
                rv.value,
                rv.comment(Input::Config)
            );
        } else {
            self.kept_default(
                req.and_then(|q| q.reviewers.as_ref()),
                "reviewer",
                "approvals_reviewer",
                "user",
            );
        }
        if let Some(ws) = &c.web_search {
            let _ = writeln!(
                self.out,
                "  web_search {}{}",
                ws.value,
                ws.comment(Input::Config)
            );
        } else {
            let full = self.sandbox.as_deref() == Some("danger-full-access");
            let default = if full { "live" } else { "cached" };
            self.kept_default(
                req.and_then(|q| q.web_search.as_ref()),
                "web_search",
                "web_search",
                default,
            );
        }
        if let Some(l) = c.login_shell.as_ref().filter(|l| !l.value) {
            self.line("  commands {");
            let _ = writeln!(
                self.out,
                "    forbid [bash sh zsh] -lc because \"login shells are disallowed\"{}",
                l.comment(Input::Config)
            );
            self.line("  }");
        }
        self.network(network, req);
        self.mcp(c, req);
        self.line("}");
        if !self.defaults.is_empty() {
            let what = self.defaults.join("; ");
            self.warn(Input::Config, 0, format!("not set, so assumed: {what}"));
        }
    }

    /// The permission profile in force, if the profile syntax is selected
    /// — as Codex selects it (`resolve_permission_config_syntax` and
    /// `profiles_are_active` in `codex-rs/core/src/config/mod.rs`,
    /// docs/importing.md): a `[profiles.NAME]` with its own `sandbox_mode`
    /// forces the legacy settings; otherwise the last layer that sets
    /// `sandbox_mode` or `default_permissions` decides, and one layer that
    /// sets both selects the profile; a managed `default_permissions`
    /// always selects a profile, the config's own when it names one.
    fn selected_profile(
        &mut self,
        c: &Config,
        req: Option<&requirements::Requirements>,
    ) -> Option<At<String>> {
        let managed = req.and_then(|q| q.default_permissions.as_ref());
        if c.force_legacy {
            if let Some(d) = c.default_permissions.as_ref().or(managed) {
                self.warn(Input::Config, d.line, "`default_permissions` is ignored: the active `[profiles.NAME]` sets `sandbox_mode`, which selects the legacy settings".into());
            }
            return None;
        }
        let own = c
            .default_permissions
            .as_ref()
            .filter(|_| c.sandbox.is_none() || c.syntax == Some(Syntax::Profiles));
        match (own, managed, &c.sandbox) {
            (Some(d), _, Some(s)) => {
                self.warn(Input::Config, s.line, format!("`sandbox_mode` is ignored: `default_permissions` (line {}) is set too, and Codex selects the permission profile (resolve_permission_config_syntax)", d.line));
                Some(d.clone())
            }
            (Some(d), _, None) => Some(d.clone()),
            (None, Some(m), sandbox) => {
                if let Some(s) = sandbox {
                    self.warn(Input::Config, s.line, format!("`sandbox_mode` is ignored: the requirements set `default_permissions` (line {} of the requirements), and Codex then always selects a permission profile", m.line));
                }
                Some(At {
                    value: m.value.clone(),
                    line: m.line,
                    key: "default_permissions in the requirements".into(),
                })
            }
            (None, None, Some(s)) => {
                if let Some(d) = &c.default_permissions {
                    self.warn(Input::Config, d.line, format!("`default_permissions` is ignored: `sandbox_mode` (line {}) is set by a later layer, which selects the legacy settings", s.line));
                }
                None
            }
            (None, None, None) => None,
        }
    }

    /// A capped setting the config leaves out: ZeroCode keeps its own
    /// default when the requirements' list allows it, else takes the list's
    /// first — which is what the language does when the default is first
    /// or absent, so the default is written only when listed later.
    fn kept_default(
        &mut self,
        list: Option<&At<Vec<String>>>,
        statement: &str,
        key: &str,
        default: &str,
    ) {
        if let Some(list) = list
            && list.value.iter().skip(1).any(|v| v == default)
        {
            let _ = writeln!(
                self.out,
                "  {statement} {default}  # default: {key} is not set; ZeroCode's default is allowed by the requirements (line {})",
                list.line
            );
        }
    }

    /// `sandbox ...` from `sandbox_mode` and `[sandbox_workspace_write]`;
    /// returns the network plan (the seed's table: command network access
    /// × network_proxy).
    fn legacy_sandbox(&mut self, c: &Config, req: Option<&requirements::Requirements>) -> Net {
        // Silent under requirements that do not allow workspace-write:
        // ZeroCode takes the first allowed mode.
        let forced = match (&c.sandbox, req.and_then(|q| q.sandbox_modes.as_ref())) {
            (None, Some(list)) if !list.value.iter().any(|m| m == "workspace-write") => {
                list.value.first().map(|m| list.with(m.clone()))
            }
            _ => None,
        };
        let mode = c
            .sandbox
            .as_ref()
            .or(forced.as_ref())
            .map(|s| s.value.clone());
        let workspace_write = mode.as_deref().is_none_or(|m| m == "workspace-write");
        // The block: writable roots, and `/tmp` taken out when excluded.
        let mut block: Vec<String> = Vec::new();
        if workspace_write {
            for w in &c.writable_roots {
                block.push(format!(
                    "    writable {}{}",
                    quote(&w.value),
                    w.comment(Input::Config)
                ));
            }
            if let Some(x) = c.exclude_slash_tmp.as_ref().filter(|x| x.value) {
                block.push(format!("    exclude \"/tmp\"{}", x.comment(Input::Config)));
            }
        }
        let header = match &c.sandbox {
            Some(s) => format!("  sandbox {}", s.value),
            None if forced.is_some() => {
                let m = forced.as_ref().map_or("read-only", |f| f.value.as_str());
                self.defaults.push("`sandbox_mode`: ZeroCode's default is not allowed by the requirements, so their first");
                format!("  sandbox {m}")
            }
            None if self.managed && block.is_empty() => {
                self.defaults.push("`sandbox_mode` left open (workspace-write, the default, within the requirements' cap)");
                self.line("  # sandbox_mode is not set: workspace-write, the default, within the requirements' cap");
                String::new()
            }
            None => {
                self.defaults
                    .push("`sandbox_mode` = workspace-write (ZeroCode's default)");
                "  sandbox workspace-write".into()
            }
        };
        let comment = match (&c.sandbox, &forced) {
            (Some(s), _) => s.comment(Input::Config),
            (None, Some(f)) => format!("  # default: sandbox_mode is not set, and workspace-write is not allowed: the requirements' first (line {})", f.line),
            (None, None) => "  # default: `sandbox_mode` is not set: ZeroCode's default, workspace-write, is assumed".into(),
        };
        if !header.is_empty() {
            self.sandbox = Some(
                header
                    .trim_start()
                    .trim_start_matches("sandbox ")
                    .to_string(),
            );
            if block.is_empty() {
                let _ = writeln!(self.out, "{header}{comment}");
            } else {
                let _ = writeln!(self.out, "{header} {{{comment}");
                for l in &block {
                    self.line(l);
                }
                self.line("  }");
            }
        }
        let mode = mode.unwrap_or_else(|| "workspace-write".into());
        let access = match mode.as_str() {
            "danger-full-access" => true,
            "read-only" => false,
            _ => c.network_access.as_ref().is_some_and(|a| a.value),
        };
        let proxy = c.proxy.enabled.as_ref().is_some_and(|p| p.value);
        let why = match (&c.network_access, mode.as_str()) {
            (Some(a), "workspace-write") => format!("{} = {} (line {})", a.key, a.value, a.line),
            _ => format!("sandbox_mode = {mode}"),
        };
        match (access, proxy) {
            (false, _) => Net::Off(format!("{why}: command network access is off")),
            (true, false) => Net::Unrestricted(format!("{why}, network_proxy off")),
            (true, true) => Net::Rules(c.proxy.clone(), format!("{why}, network_proxy on")),
        }
    }

    fn approvals(&mut self, c: &Config, req: Option<&requirements::Requirements>) {
        match &c.approval {
            Some(a) if a.value == "granular" => {
                self.approvals = Some("granular".into());
                let _ = writeln!(
                    self.out,
                    "  approvals granular {{{}",
                    a.comment(Input::Config)
                );
                for g in &c.granular {
                    let _ = writeln!(
                        self.out,
                        "    {} {}{}",
                        g.value.0,
                        if g.value.1 { "on" } else { "off" },
                        g.comment(Input::Config)
                    );
                }
                // The three main categories must be written; the real
                // system's own default for a missing one is on.
                for required in ["sandbox_approval", "rules", "mcp_elicitations"] {
                    if !c.granular.iter().any(|g| g.value.0 == required) {
                        let _ = writeln!(
                            self.out,
                            "    {required} on  # default: not set, ZeroCode's default is on (approval_policy, line {})",
                            a.line
                        );
                    }
                }
                self.line("  }");
            }
            Some(a) if a.value == "on-failure" => {
                self.approvals = Some("on-request".into());
                self.warn(Input::Config, a.line, "`approval_policy` = \"on-failure\" is deprecated; decided as \"on-request\": ZeroCode runs an escalation request in the sandbox first and asks when the sandbox stops it; gatehouse asks before it runs".into());
                let _ = writeln!(
                    self.out,
                    "  approvals on-request{}: on-failure, deprecated",
                    a.comment(Input::Config)
                );
            }
            Some(a) => {
                self.approvals = Some(a.value.clone());
                let _ = writeln!(
                    self.out,
                    "  approvals {}{}",
                    a.value,
                    a.comment(Input::Config)
                );
            }
            None if self.managed => match req.and_then(|q| q.approvals.as_ref()) {
                // ZeroCode keeps its own default when the requirements
                // allow it (`Constrained` in its config loading): written
                // out, since the language takes the list's first.
                Some(list) if list.value.iter().any(|v| v == "on-request") => {
                    self.approvals = Some("on-request".into());
                    self.defaults.push("`approval_policy` = on-request (ZeroCode's default, allowed by the requirements)");
                    let _ = writeln!(
                        self.out,
                        "  approvals on-request  # default: approval_policy is not set; ZeroCode's default is allowed by the requirements (line {})",
                        list.line
                    );
                }
                Some(list) => {
                    self.defaults.push("`approval_policy` left open (ZeroCode's default is not allowed: the requirements' first)");
                    let _ = writeln!(
                        self.out,
                        "  # approval_policy is not set, and ZeroCode's default (on-request) is not allowed: the requirements' first allowed policy applies (line {})",
                        list.line
                    );
                }
                None => {
                    self.approvals = Some("on-request".into());
                    self.defaults
                        .push("`approval_policy` = on-request (ZeroCode's default)");
                    self.line("  approvals on-request  # default: approval_policy is not set: ZeroCode's default");
                }
            },
            None => {
                self.approvals = Some("on-request".into());
                let note =
                    "`approval_policy` is not set: ZeroCode's default, on-request, is assumed";
                self.defaults
                    .push("`approval_policy` = on-request (ZeroCode's default)");
                let _ = writeln!(self.out, "  approvals on-request  # default: {note}");
            }
        }
    }

    fn network(&mut self, net: Net, req: Option<&requirements::Requirements>) {
        let managed: &[(At<String>, bool)] = req.map_or(&[], |q| q.domains.as_slice());
        let managed_only = req.is_some_and(|q| q.managed_only);
        let deny_all = req.is_some_and(|q| q.deny_all_names);
        let (p, why) = match net {
            Net::Off(why) => {
                let _ = writeln!(self.out, "  network off  # {why}");
                return;
            }
            Net::Unrestricted(why) if managed.is_empty() => {
                let _ = writeln!(self.out, "  network unrestricted  # {why}");
                return;
            }
            // Managed networking configures the proxy (as the real system's
            // managed network requirements do).
            Net::Unrestricted(why) => (
                Proxy::default(),
                format!("{why}; managed network requirements"),
            ),
            Net::Rules(p, why) => (p, why),
        };
        let _ = writeln!(self.out, "  network {{  # {why}");
        self.line("    default deny");
        match p.switches.get("allow_local_binding") {
            Some(s) => {
                let _ = writeln!(
                    self.out,
                    "    local {}{}",
                    if s.value { "allow" } else { "deny" },
                    s.comment(Input::Config)
                );
            }
            None => self.line("    local deny"),
        }
        let star_deny = p
            .domains
            .iter()
            .find(|(d, allow)| !allow && d.value == "*")
            .map(|(d, _)| d.line);
        for (d, allow) in &p.domains {
            if *allow && managed_only {
                self.warn(Input::Config, d.line, format!("`{}` is left out: the requirements allow only their own domains (managed_allowed_domains_only)", d.key));
                continue;
            }
            if *allow && (star_deny.is_some() || deny_all) {
                self.warn(
                    Input::Config,
                    d.line,
                    format!(
                        "`{}` is left out: `\"*\" = \"deny\"` denies every name",
                        d.key
                    ),
                );
                continue;
            }
            if let Some(rule) = domain_rule(&d.value, *allow) {
                let _ = writeln!(self.out, "    {rule}{}", d.comment(Input::Config));
            }
        }
        for (d, _) in managed.iter().filter(|(_, allow)| *allow) {
            if let Some(rule) = domain_rule(&d.value, true) {
                let _ = writeln!(self.out, "    {rule}{}", d.comment(Input::Requirements));
            }
        }
        for (s, allow) in &p.sockets {
            let _ = writeln!(
                self.out,
                "    {} socket {}{}",
                if *allow { "allow" } else { "deny" },
                quote(&s.value),
                s.comment(Input::Config)
            );
        }
        if let Some(s) = p
            .switches
            .get("dangerously_allow_all_unix_sockets")
            .filter(|s| s.value)
        {
            let _ = writeln!(self.out, "    allow socket *{}", s.comment(Input::Config));
        }
        self.line("  }");
        let lines: Vec<String> = [
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
            p.switches.get(key).map(|s| {
                format!(
                    "    {stmt} {}{}",
                    if s.value { yes } else { no },
                    s.comment(Input::Config)
                )
            })
        })
        .collect();
        if !lines.is_empty() {
            let _ = writeln!(self.out, "  proxy {{\n{}\n  }}", lines.join("\n"));
        }
    }
}

/// An MCP server or tool name as the `mcp` section writes it (one bare
/// word); a name it cannot hold fails the output's check, with its line.
fn tool_word(name: &str) -> String {
    name.to_string()
}

/// What the network section becomes.
enum Net {
    Off(String),
    Unrestricted(String),
    Rules(Proxy, String),
}
