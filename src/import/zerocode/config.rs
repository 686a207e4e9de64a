//! Reading a config (and a profile's overlay) into what decides.

use std::collections::BTreeMap;

use toml::de::{DeTable, DeValue};

use super::keys;
use super::read::{At, Effects, Reader, Spanned, get};

/// Everything of a config that decides something.
/// Which settings decide the sandbox: `sandbox_mode` (legacy) or a
/// permission profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Syntax {
    Legacy,
    Profiles,
}

#[derive(Default)]
pub(super) struct Config {
    pub approval: Option<At<String>>,
    pub granular: Vec<At<(String, bool)>>,
    pub sandbox: Option<At<String>>,
    pub reviewer: Option<At<String>>,
    pub web_search: Option<At<String>>,
    pub login_shell: Option<At<bool>>,
    pub network_access: Option<At<bool>>,
    pub writable_roots: Vec<At<String>>,
    pub exclude_slash_tmp: Option<At<bool>>,
    pub proxy: Proxy,
    pub mcp: BTreeMap<String, Server>,
    pub default_permissions: Option<At<String>>,
    pub permissions: BTreeMap<String, Profile>,
    /// The permission syntax the layers select (the last layer that sets
    /// either key decides).
    pub syntax: Option<Syntax>,
    /// A `[profiles.NAME]` sets `sandbox_mode`: the legacy settings decide.
    pub force_legacy: bool,
    pub active_profile: Option<At<String>>,
    /// Known keys that decide nothing, by name, each once.
    pub skipped: Vec<String>,
}

/// The network proxy's settings.
#[derive(Clone, Default)]
pub(super) struct Proxy {
    pub enabled: Option<At<bool>>,
    pub domains: Effects,
    pub sockets: Effects,
    pub switches: BTreeMap<&'static str, At<bool>>,
    pub managed_only: Option<At<bool>>,
    /// Where the table was written, when it was.
    pub at: Option<At<()>>,
}

/// One MCP server's approvals.
#[derive(Default)]
pub(super) struct Server {
    pub line: usize,
    pub enabled: Option<At<bool>>,
    pub enabled_tools: Option<Vec<At<String>>>,
    pub disabled_tools: Vec<At<String>>,
    pub default_mode: Option<At<String>>,
    pub tools: Vec<(String, At<String>)>,
}

/// One `[permissions.NAME]` profile.
#[derive(Clone, Default)]
pub(super) struct Profile {
    pub line: usize,
    pub extends: Option<At<String>>,
    /// Filesystem entries: a path key (`:workspace_roots`,
    /// `:workspace_roots/.env`, `:tmpdir`, `/abs`, `~/x`, ...) and its access.
    pub fs: Vec<(String, At<String>)>,
    /// Extra workspace roots.
    pub roots: Vec<At<String>>,
    pub net: Proxy,
}

impl Config {
    fn skip(&mut self, key: &str) {
        if !self.skipped.iter().any(|s| s == key) {
            self.skipped.push(key.to_string());
        }
    }
}

pub(super) fn read_config(r: &mut Reader<'_>, table: &DeTable<'_>, c: &mut Config, top: bool) {
    // Which permission syntax this layer selects, as Codex decides it
    // (`resolve_permission_config_syntax`, docs/importing.md): a layer's
    // `sandbox_mode` first, then its `default_permissions`, so a layer that
    // sets both selects the profile.
    if get(table, "sandbox_mode").is_some() {
        c.syntax = Some(Syntax::Legacy);
    }
    if get(table, "default_permissions").is_some() {
        c.syntax = Some(Syntax::Profiles);
    }
    for (k, v) in table.iter() {
        let key = k.get_ref().as_ref();
        let line = r.line_of(k);
        match key {
            "approval_policy" => match v.get_ref() {
                DeValue::Table(t) => read_granular(r, t, c, line),
                _ => c.approval = r.string(key, v, keys::APPROVALS),
            },
            "sandbox_mode" => {
                c.sandbox = r.string(
                    key,
                    v,
                    &["read-only", "workspace-write", "danger-full-access"],
                )
            }
            "approvals_reviewer" => {
                c.reviewer = r.string(key, v, &["user", "auto_review", "guardian_subagent"]);
                // Codex reads `guardian_subagent` as an alias of `auto_review`.
                if let Some(rv) = c
                    .reviewer
                    .as_mut()
                    .filter(|rv| rv.value == "guardian_subagent")
                {
                    rv.value = "auto_review".into();
                }
            }
            "web_search" => {
                c.web_search = r.string(key, v, &["cached", "disabled", "live", "indexed"])
            }
            "tools" => {
                let Some(t) = r.table(key, v) else { continue };
                for (k2, v2) in t.iter() {
                    let sub = format!("tools.{}", k2.get_ref());
                    if k2.get_ref().as_ref() == "web_search" {
                        // The legacy switch: true is live search, false none.
                        if let Some(b) = r.boolean(&sub, v2) {
                            if c.web_search.is_none() {
                                c.web_search = Some(At {
                                    value: if b.value { "live" } else { "disabled" }.into(),
                                    line: b.line,
                                    key: sub,
                                });
                            }
                        }
                    } else {
                        c.skip(&sub);
                    }
                }
            }
            "allow_login_shell" => c.login_shell = r.boolean(key, v),
            "sandbox_workspace_write" => {
                let Some(t) = r.table(key, v) else { continue };
                for (k2, v2) in t.iter() {
                    let sub = format!("sandbox_workspace_write.{}", k2.get_ref());
                    match k2.get_ref().as_ref() {
                        "network_access" => c.network_access = r.boolean(&sub, v2),
                        "writable_roots" => c.writable_roots = r.strings(&sub, v2, &[]),
                        "exclude_slash_tmp" => c.exclude_slash_tmp = r.boolean(&sub, v2),
                        // gatehouse never makes $TMPDIR writable: excluding
                        // it changes nothing, keeping it is stricter here.
                        "exclude_tmpdir_env_var" => {
                            if let Some(b) = r.boolean(&sub, v2).filter(|b| !b.value) {
                                r.warn(
                                    b.line,
                                    format!("`{sub}` = false: gatehouse does not make $TMPDIR writable; writes there are asked unless another root holds them"),
                                );
                            }
                        }
                        other => {
                            let l = r.line_of(k2);
                            r.unknown(
                                l,
                                &format!("sandbox_workspace_write.{other}"),
                                keys::WORKSPACE_WRITE,
                            );
                        }
                    }
                }
            }
            "features" => {
                let Some(t) = r.table(key, v) else { continue };
                for (k2, v2) in t.iter() {
                    let sub = format!("features.{}", k2.get_ref());
                    match k2.get_ref().as_ref() {
                        "network_proxy" => match v2.get_ref() {
                            DeValue::Boolean(_) => c.proxy.enabled = r.boolean(&sub, v2),
                            DeValue::Table(p) => {
                                read_proxy(r, p, &mut c.proxy, &sub, r.line_of(k2))
                            }
                            _ => {
                                let l = r.line_of(v2);
                                r.error(l, format!("`{sub}` must be true, false or a table"));
                            }
                        },
                        "web_search_request" => {
                            if let Some(b) = r.boolean(&sub, v2).filter(|b| b.value) {
                                if c.web_search.is_none() {
                                    c.web_search = Some(At {
                                        value: "live".into(),
                                        line: b.line,
                                        key: sub,
                                    });
                                }
                            }
                        }
                        // Feature flags switch experiments on; none decides.
                        _ => c.skip(&sub),
                    }
                }
            }
            "experimental_network" => {
                let Some(t) = r.table(key, v) else { continue };
                read_proxy(r, t, &mut c.proxy, key, line);
                // The legacy table configures the proxy by being there.
                if c.proxy.enabled.is_none() {
                    c.proxy.enabled = Some(At {
                        value: true,
                        line,
                        key: key.into(),
                    });
                }
            }
            "mcp_servers" => {
                let Some(t) = r.table(key, v) else { continue };
                for (name, sv) in t.iter() {
                    let name = name.get_ref().to_string();
                    let server = read_server(r, &name, sv);
                    c.mcp.insert(name, server);
                }
            }
            "default_permissions" => c.default_permissions = r.string(key, v, &[]),
            "permissions" => {
                let Some(t) = r.table(key, v) else { continue };
                for (name, pv) in t.iter() {
                    let name = name.get_ref().to_string();
                    if let Some(p) = read_profile(r, &name, pv) {
                        c.permissions.insert(name, p);
                    }
                }
            }
            "profile" if top => c.active_profile = r.string(key, v, &[]),
            // Applied after every top-level key (see `read_profile_overlay`).
            "profiles" if top => {}
            // A profile's text for people; it decides nothing.
            "description" if !top => {}
            k if keys::IRRELEVANT.contains(&k) => c.skip(k),
            other => r.unknown(line, other, &keys::top_level()),
        }
    }
}

/// Overlays the `[profiles.NAME]` table, after the top level is read.
pub(super) fn read_profile_overlay(
    r: &mut Reader<'_>,
    table: &DeTable<'_>,
    c: &mut Config,
    name: &At<String>,
) {
    let found = get(table, "profiles").and_then(|p| match p.get_ref() {
        DeValue::Table(t) => get(t, &name.value),
        _ => None,
    });
    match found.map(|v| v.get_ref()) {
        Some(DeValue::Table(pt)) => {
            read_config(r, pt, c, false);
            // A profile's own `sandbox_mode` forces the legacy settings.
            if get(pt, "sandbox_mode").is_some() {
                c.force_legacy = true;
            }
        }
        _ => {
            let known: Vec<String> = get(table, "profiles")
                .and_then(|p| match p.get_ref() {
                    DeValue::Table(t) => {
                        Some(t.iter().map(|(k, _)| k.get_ref().to_string()).collect())
                    }
                    _ => None,
                })
                .unwrap_or_default();
            let hint = crate::diag::did_you_mean(&name.value, known.iter().map(String::as_str))
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            r.error(
                name.line,
                format!(
                    "no profile `{}`: expected a `[profiles.{}]` table or a profile file{hint}",
                    name.value, name.value
                ),
            )
        }
    }
}

fn read_granular(r: &mut Reader<'_>, t: &DeTable<'_>, c: &mut Config, line: usize) {
    let Some(g) = get(t, "granular").or_else(|| get(t, "reject")) else {
        r.error(
            line,
            "`approval_policy` as a table must be `{ granular = { ... } }`".into(),
        );
        return;
    };
    // `reject = { C = true }` is the older spelling: true there rejects,
    // which is granular's false.
    let reject = get(t, "granular").is_none();
    let gline = r.line_of(g);
    c.approval = Some(At {
        value: "granular".into(),
        line: gline,
        key: "approval_policy".into(),
    });
    c.granular.clear();
    let DeValue::Table(g) = g.get_ref() else {
        r.error(gline, "`granular` must be a table".into());
        return;
    };
    for (k, v) in g.iter() {
        let name = k.get_ref().to_string();
        if !keys::GRANULAR.contains(&name.as_str()) {
            let l = r.line_of(k);
            r.unknown(
                l,
                &format!("approval_policy.granular.{name}"),
                keys::GRANULAR,
            );
            continue;
        }
        if let Some(b) = r.boolean(&format!("approval_policy.granular.{name}"), v) {
            c.granular.push(At {
                value: (name, b.value != reject),
                line: b.line,
                key: b.key,
            });
        }
    }
}

pub(super) fn read_proxy(
    r: &mut Reader<'_>,
    t: &DeTable<'_>,
    p: &mut Proxy,
    prefix: &str,
    line: usize,
) {
    p.at = Some(At {
        value: (),
        line,
        key: prefix.to_string(),
    });
    for (k, v) in t.iter() {
        let name = k.get_ref().to_string();
        let key = format!("{prefix}.{name}");
        match name.as_str() {
            "enabled" => p.enabled = r.boolean(&key, v),
            "domains" => p.domains.extend(r.effects(&key, v)),
            "allowed_domains" => p.domains.extend(r.listed(&key, v, true)),
            "denied_domains" => p.domains.extend(r.listed(&key, v, false)),
            "unix_sockets" => p.sockets.extend(r.effects(&key, v)),
            "allow_unix_sockets" => p.sockets.extend(r.listed(&key, v, true)),
            "managed_allowed_domains_only" => p.managed_only = r.boolean(&key, v),
            "mode" => {
                // `full` lets every method through, `limited` only reads;
                // gatehouse decides connections, not methods.
                let _ = r.string(&key, v, &["full", "limited"]);
            }
            "proxy_url" | "socks_url" | "admin_url" => {}
            s => match keys::SWITCHES.iter().find(|x| **x == s) {
                Some(x) => {
                    if let Some(b) = r.boolean(&key, v) {
                        p.switches.insert(x, b);
                    }
                }
                None => {
                    let l = r.line_of(k);
                    r.unknown(l, &key, keys::PROXY);
                }
            },
        }
    }
}

fn read_server(r: &mut Reader<'_>, name: &str, v: &Spanned<DeValue<'_>>) -> Server {
    let mut s = Server {
        line: r.line_of(v),
        ..Server::default()
    };
    let prefix = format!("mcp_servers.{name}");
    let Some(t) = r.table(&prefix, v) else {
        return s;
    };
    for (k, v) in t.iter() {
        let key = format!("{prefix}.{}", k.get_ref());
        match k.get_ref().as_ref() {
            "enabled" => s.enabled = r.boolean(&key, v),
            "enabled_tools" => s.enabled_tools = Some(r.strings(&key, v, &[])),
            "disabled_tools" => s.disabled_tools = r.strings(&key, v, &[]),
            "default_tools_approval_mode" => s.default_mode = r.string(&key, v, keys::MCP_MODES),
            "tools" => {
                let Some(tools) = r.table(&key, v) else {
                    continue;
                };
                for (tool, tv) in tools.iter() {
                    let tool = tool.get_ref().to_string();
                    let tkey = format!("{key}.{tool}");
                    let Some(tt) = r.table(&tkey, tv) else {
                        continue;
                    };
                    for (k3, v3) in tt.iter() {
                        if k3.get_ref().as_ref() == "approval_mode" {
                            if let Some(m) =
                                r.string(&format!("{tkey}.approval_mode"), v3, keys::MCP_MODES)
                            {
                                s.tools.push((tool.clone(), m));
                            }
                        } else {
                            let l = r.line_of(k3);
                            r.unknown(l, &format!("{tkey}.{}", k3.get_ref()), &["approval_mode"]);
                        }
                    }
                }
            }
            other if keys::MCP_SERVER.contains(&other) => {}
            other => {
                let l = r.line_of(k);
                r.unknown(l, &format!("{prefix}.{other}"), keys::MCP_SERVER);
            }
        }
    }
    s
}

pub(super) fn read_profile(
    r: &mut Reader<'_>,
    name: &str,
    v: &Spanned<DeValue<'_>>,
) -> Option<Profile> {
    let prefix = format!("permissions.{name}");
    let t = r.table(&prefix, v)?;
    let mut p = Profile {
        line: r.line_of(v),
        ..Profile::default()
    };
    for (k, v) in t.iter() {
        let key = format!("{prefix}.{}", k.get_ref());
        match k.get_ref().as_ref() {
            "extends" => p.extends = r.string(&key, v, &[]),
            "filesystem" => {
                let Some(fs) = r.table(&key, v) else { continue };
                for (path, pv) in fs.iter() {
                    let path = path.get_ref().to_string();
                    let pkey = format!("{key}.\"{path}\"");
                    if path == "glob_scan_max_depth" {
                        let l = r.line_of(pv);
                        match pv.get_ref() {
                            DeValue::Integer(n) if n.as_str().parse::<u64>().is_ok_and(|n| n >= 1) => r.warn(
                                l,
                                format!("`{key}.glob_scan_max_depth` = {}: Codex expands deny-read globs only that deep (looser); gatehouse matches them at any depth", n.as_str()),
                            ),
                            _ => r.error(l, format!("`{key}.glob_scan_max_depth` must be a whole number of at least 1")),
                        }
                        continue;
                    }
                    match pv.get_ref() {
                        DeValue::Table(sub) => {
                            for (sp, sv) in sub.iter() {
                                let sp = sp.get_ref().to_string();
                                let full = if sp == "." {
                                    path.clone()
                                } else {
                                    format!("{path}/{sp}")
                                };
                                if let Some(a) = r.string(
                                    &format!("{pkey}.\"{sp}\""),
                                    sv,
                                    &["read", "write", "deny", "none"],
                                ) {
                                    p.fs.push((full, a));
                                }
                            }
                        }
                        _ => {
                            if let Some(a) = r.string(&pkey, pv, &["read", "write", "deny", "none"])
                            {
                                p.fs.push((path, a));
                            }
                        }
                    }
                }
            }
            "workspace_roots" => {
                let Some(roots) = r.table(&key, v) else {
                    continue;
                };
                for (root, rv) in roots.iter() {
                    let root = root.get_ref().to_string();
                    if let Some(b) = r
                        .boolean(&format!("{key}.\"{root}\""), rv)
                        .filter(|b| b.value)
                    {
                        p.roots.push(At {
                            value: root,
                            line: b.line,
                            key: b.key,
                        });
                    }
                }
            }
            "network" => {
                let Some(n) = r.table(&key, v) else { continue };
                let l = r.line_of(k);
                read_proxy(r, n, &mut p.net, &key, l);
            }
            // Text for people; it decides nothing.
            "description" => {}
            other => {
                let l = r.line_of(k);
                r.unknown(l, &format!("{prefix}.{other}"), keys::PROFILE);
            }
        }
    }
    Some(p)
}
