//! Permission profiles (`default_permissions`, `[permissions.NAME]`):
//! their `extends` chains, and the sandbox and network they come to.

use std::fmt::Write as _;

use super::config::{Config, Profile, Proxy};
use super::read::At;
use super::{Net, Writer, quote};
use crate::import::Input;

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
    pub(super) fn profile_sandbox(&mut self, p: &Profile, why: &str) -> Net {
        let write = |path: &str| p.fs.iter().any(|(q, a)| q == path && a.value == "write");
        let mut writable: Vec<String> = Vec::new();
        let mut protect: Vec<String> = Vec::new();
        let ws = write(":workspace_roots");
        for (path, access) in &p.fs {
            let c = access.comment(Input::Config);
            match (path.as_str(), access.value.as_str()) {
                (":root" | ":minimal" | ":workspace_roots" | ":slash_tmp", _) => {}
                (":tmpdir", "write") => {
                    let _ = writeln!(self.out, "  # {} (line {}): gatehouse does not make $TMPDIR writable; writes there are asked", access.key, access.line);
                }
                (p2, "write") if p2.starts_with('/') => writable.push(format!("{}{c}", quote(p2))),
                (p2, "write") => self.warn(Input::Config, access.line, format!("`{}`: `{p2}` cannot be a writable root here (an absolute path is needed); writes there are asked", access.key)),
                (p2, _) => {
                    let sub = p2.strip_prefix(":workspace_roots/");
                    match sub {
                        Some(name) if ws && !name.contains(['/', '*', '?', '[']) && name != "." && name != ".." => {
                            protect.push(format!("{}{c}", quote(name)));
                        }
                        Some(_) if !ws => {}
                        _ if access.value != "write" && !p2.starts_with(':') && !ws => {}
                        _ => self.warn(Input::Config, access.line, format!("`{}` = \"{}\" cannot be expressed: gatehouse protects single names directly under a root, so writes to `{p2}` are decided by the root around them", access.key, access.value)),
                    }
                }
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
        if write(":root") {
            let _ = writeln!(
                self.out,
                "  sandbox danger-full-access  # {why}: `:root` is writable"
            );
        } else if ws || !writable.is_empty() {
            if !ws {
                self.warn(Input::Config, p.line, format!("{why}: the workspace itself is not writable in the profile, but gatehouse's workspace-write makes it so"));
            }
            let _ = writeln!(self.out, "  sandbox workspace-write {{  # {why}");
            if !write(":slash_tmp") {
                let _ = writeln!(
                    self.out,
                    "    exclude \"/tmp\"  # {why}: /tmp is not writable in the profile"
                );
            }
            for w in &writable {
                let _ = writeln!(self.out, "    writable {w}");
            }
            for n in &protect {
                let _ = writeln!(self.out, "    protect {n}");
            }
            self.line("  }");
        } else {
            let _ = writeln!(
                self.out,
                "  sandbox read-only  # {why}: nothing is writable"
            );
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
