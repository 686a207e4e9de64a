//! Permission profiles (`default_permissions`, `[permissions.NAME]`):
//! their `extends` chains, and the sandbox and network they come to.

use std::fmt::Write as _;

use super::config::{Config, Profile, Proxy};
use super::read::At;
use super::{Net, Writer, quote};
use crate::import::Input;

/// `:minimal`: the system directories a program needs to run, readable
/// when `:root` is not (the platform defaults of the real sandbox).
const MINIMAL: &str = "\"/bin\" \"/sbin\" \"/usr\" \"/lib\" \"/lib64\" \"/etc\" \"/dev\" \"/proc\"";

impl Writer {
    /// A permission profile with its `extends` chain resolved: the parent's
    /// entries first, the child's replacing those of the same path.
    pub(super) fn resolve(
        &mut self,
        c: &Config,
        name: &At<String>,
        depth: usize,
    ) -> Option<(Profile, String)> {
        let fs = |entries: &[(&str, &str)]| -> Vec<(String, At<String>)> {
            entries
                .iter()
                .map(|(p, a)| {
                    (
                        p.to_string(),
                        At {
                            value: a.to_string(),
                            line: name.line,
                            key: format!("{} (built in)", name.value),
                        },
                    )
                })
                .collect()
        };
        let why = format!(
            "default_permissions = \"{}\" (line {})",
            name.value, name.line
        );
        let builtin = match name.value.as_str() {
            ":read-only" => Some(Profile {
                fs: fs(&[(":root", "read")]),
                ..Profile::default()
            }),
            ":workspace" => Some(Profile {
                fs: fs(&[
                    (":root", "read"),
                    (":workspace_roots", "write"),
                    (":tmpdir", "write"),
                    (":slash_tmp", "write"),
                ]),
                ..Profile::default()
            }),
            ":danger-full-access" => Some(Profile {
                fs: fs(&[(":root", "write")]),
                net: Proxy {
                    enabled: Some(At {
                        value: true,
                        line: name.line,
                        key: name.value.clone(),
                    }),
                    ..Proxy::default()
                },
                ..Profile::default()
            }),
            _ => None,
        };
        if let Some(b) = builtin {
            return Some((b, why));
        }
        let Some(p) = c.permissions.get(&name.value) else {
            let names: Vec<&str> = c
                .permissions
                .keys()
                .map(String::as_str)
                .chain([":read-only", ":workspace", ":danger-full-access"])
                .collect();
            let hint = crate::diag::did_you_mean(&name.value, names)
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            self.error(Input::Config, name.line, format!("no permission profile `{}`: expected `[permissions.{}]` or a built-in profile{hint}", name.value, name.value));
            return None;
        };
        let mut merged = match &p.extends {
            Some(_) if depth > 8 => {
                self.error(
                    Input::Config,
                    p.line,
                    format!(
                        "`permissions.{}.extends` goes round in a circle",
                        name.value
                    ),
                );
                return None;
            }
            Some(parent) => self.resolve(c, parent, depth + 1)?.0,
            None => Profile::default(),
        };
        for (path, access) in &p.fs {
            merged.fs.retain(|(q, _)| q != path);
            merged.fs.push((path.clone(), access.clone()));
        }
        merged.roots.extend(p.roots.iter().cloned());
        let net = &p.net;
        if net.enabled.is_some() {
            merged.net.enabled = net.enabled.clone();
        }
        for (d, allow) in &net.domains {
            merged.net.domains.retain(|(e, _)| e.value != d.value);
            merged.net.domains.push((d.clone(), *allow));
        }
        merged.net.sockets.extend(net.sockets.iter().cloned());
        for (k, v) in &net.switches {
            merged.net.switches.insert(k, v.clone());
        }
        merged.line = p.line;
        Some((
            merged,
            format!("permissions.{} (line {})", name.value, p.line),
        ))
    }

    /// `sandbox ...` for a permission profile; returns the network plan.
    ///
    /// Every filesystem entry maps (docs/importing.md has the table):
    /// `:root`, `:minimal`, `:workspace_roots` (and paths, globs and `.`
    /// below it), `:slash_tmp`, absolute and `~/` paths become the mode and
    /// `writable` / `read` / `none` file rules; `"deny"` is read as
    /// `"none"`. Only `:tmpdir` (a directory gatehouse cannot name) and a
    /// glob given `write` (a glob never grants) are left out, each with a
    /// note.
    pub(super) fn profile_sandbox(&mut self, p: &Profile, why: &str) -> Net {
        let access = |path: &str| {
            p.fs.iter().rev().find(|(q, _)| q == path).map(|(_, a)| {
                if a.value == "deny" {
                    "none"
                } else {
                    a.value.as_str()
                }
            })
        };
        let root = access(":root");
        let minimal = access(":minimal").is_some_and(|a| a != "none");
        // Without `:root` readable, reads are restricted to what is listed.
        let restricted = root.is_none_or(|a| a == "none");
        let ws = access(":workspace_roots").unwrap_or(if restricted { "none" } else { "read" });
        let extra: Vec<&str> = p
            .roots
            .iter()
            .map(|r| r.value.as_str())
            .filter(|r| r.starts_with('/'))
            .collect();
        let mut writable: Vec<String> = Vec::new();
        let mut read: Vec<String> = Vec::new();
        let mut none: Vec<String> = Vec::new();
        let mut protect: Vec<String> = Vec::new();
        for (path, a) in &p.fs {
            let c = a.comment(Input::Config);
            let value = if a.value == "deny" {
                "none"
            } else {
                a.value.as_str()
            };
            // The places the entry names: workspace-relative paths hold in
            // the workspace and in every other workspace root.
            let (places, in_ws): (Vec<String>, bool) = match path.as_str() {
                ":root" | ":minimal" | ":workspace_roots" => continue,
                ":slash_tmp" => (vec!["/tmp".into()], false),
                ":tmpdir" => {
                    if value == "none" {
                        self.warn(Input::Config, a.line, format!("`{}` = \"none\": gatehouse cannot name $TMPDIR; reads there are decided by the rules around it", a.key));
                    } else if value == "write" {
                        let _ = writeln!(
                            self.out,
                            "  # {} (line {}): gatehouse does not make $TMPDIR writable; writes there are asked",
                            a.key, a.line
                        );
                    }
                    continue;
                }
                q if q.starts_with('/') || q == "~" || q.starts_with("~/") => {
                    (vec![q.to_string()], false)
                }
                q => {
                    let sub = q.strip_prefix(":workspace_roots/").unwrap_or(q);
                    let mut v = vec![sub.to_string()];
                    v.extend(
                        extra
                            .iter()
                            .map(|r| format!("{}/{sub}", r.trim_end_matches('/'))),
                    );
                    (v, true)
                }
            };
            if path == ":slash_tmp" {
                if value == "none" {
                    none.push(format!("\"/tmp\"{c}"));
                }
                continue;
            }
            let Some(first) = places.first() else {
                continue;
            };
            if let Err(e) = crate::normalize::FilePattern::parse(first) {
                self.warn(
                    Input::Config,
                    a.line,
                    format!(
                        "`{}`: `{first}` is not a path gatehouse can name ({e}); left out",
                        a.key
                    ),
                );
                continue;
            }
            let glob = first.contains(['*', '?', '[']);
            let single = in_ws && !glob && !first.contains('/') && first != "." && first != "..";
            match value {
                "write" if glob => self.warn(Input::Config, a.line, format!("`{}` = \"write\": a glob cannot make paths writable in gatehouse (globs only take access away); writes there are asked", a.key)),
                "write" => writable.extend(places.iter().map(|q| format!("{}{c}", quote(q)))),
                "read" if single && ws == "write" => protect.push(format!("{}{c}", quote(first))),
                "read" => read.extend(places.iter().map(|q| format!("{}{c}", quote(q)))),
                _ => none.extend(places.iter().map(|q| format!("{}{c}", quote(q)))),
            }
        }
        for root in &p.roots {
            if root.value.starts_with('/') {
                writable.push(format!(
                    "{}{}",
                    quote(&root.value),
                    root.comment(Input::Config)
                ));
            } else {
                self.warn(
                    Input::Config,
                    root.line,
                    format!(
                        "`{}`: `{}` is not an absolute path; writes there are asked",
                        root.key, root.value
                    ),
                );
            }
        }
        if root == Some("write") {
            self.sandbox = Some("danger-full-access".into());
            let _ = writeln!(
                self.out,
                "  sandbox danger-full-access  # {why}: `:root` is writable"
            );
            if !read.is_empty() || !none.is_empty() {
                self.warn(Input::Config, p.line, format!("{why}: `:root` is writable, so the profile's read and none entries restrict nothing (no sandbox)"));
            }
        } else {
            let any_write =
                ws == "write" || !writable.is_empty() || access(":slash_tmp") == Some("write");
            let mode = if any_write {
                "workspace-write"
            } else {
                "read-only"
            };
            let mut lines: Vec<String> = Vec::new();
            if any_write && access(":slash_tmp") != Some("write") {
                lines.push(format!(
                    "    exclude \"/tmp\"  # {why}: /tmp is not writable in the profile"
                ));
            }
            for w in &writable {
                lines.push(format!("    writable {w}"));
            }
            if restricted {
                lines.push(format!("    none \"/\"  # {why}: `:root` is not readable, so reads are restricted to what the profile lists"));
                if minimal {
                    lines.push(format!(
                        "    read {MINIMAL}  # {why}: `:minimal`, the platform's system directories"
                    ));
                }
            }
            match ws {
                "read" if any_write => {
                    lines.push(format!(
                        "    read \".\"  # {why}: the workspace is readable, not writable"
                    ));
                }
                "none" => {
                    lines.push(format!(
                        "    none \".\"  # {why}: the workspace is not readable"
                    ));
                }
                _ => {}
            }
            for r in &read {
                lines.push(format!("    read {r}"));
            }
            for n in &none {
                lines.push(format!("    none {n}"));
            }
            for n in &protect {
                lines.push(format!("    protect {n}"));
            }
            self.sandbox = Some(mode.to_string());
            if lines.is_empty() {
                let _ = writeln!(self.out, "  sandbox {mode}  # {why}");
            } else {
                let _ = writeln!(self.out, "  sandbox {mode} {{  # {why}");
                for l in &lines {
                    let _ = writeln!(self.out, "{l}");
                }
                self.line("  }");
            }
        }
        let on = p.net.enabled.as_ref().is_some_and(|e| e.value);
        match (on, p.net.domains.is_empty() && p.net.sockets.is_empty()) {
            (false, _) => Net::Off(format!(
                "{why}: network access is off in a profile unless enabled"
            )),
            (true, true) => Net::Unrestricted(format!("{why}: network enabled, no domain rules")),
            (true, false) => Net::Rules(
                p.net.clone(),
                format!("{why}: network enabled with domain rules"),
            ),
        }
    }
}
