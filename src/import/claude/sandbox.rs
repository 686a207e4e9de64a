//! The `sandbox` keys of Claude Code's settings (sandbox-runtime's) as
//! file and network rules, when `sandbox.enabled` is true.

use super::emit::{Out, covering, words};
use super::rules::{self, Command, Rule};
use super::{At, Merged, Notes, cite};
use crate::import::Severity;

pub(super) fn lines(m: &Merged, o: &mut Out, notes: &mut Notes, n: usize) {
    let q = crate::query::quote_string;
    let c = |a: &At<String>| cite(a, n);
    let path = |a: &At<String>| match a.value.strip_prefix("user:") {
        Some(rel) => rules::sandbox_path(rel, true),
        None => rules::sandbox_path(&a.value, false),
    };
    let shown = |a: &At<String>| {
        a.value
            .strip_prefix("user:")
            .unwrap_or(&a.value)
            .to_string()
    };
    let glob = |p: &str| p.contains(['*', '?', '[']);
    let mut hidden: Vec<String> = Vec::new();
    for a in &m.allow_write {
        match path(a) {
            // Under /tmp: writable already.
            Ok(p) if p == "/tmp" || p.starts_with("/tmp/") => {}
            Ok(p) if !glob(&p) => o.files.push(format!("writable {}  # sandbox.filesystem.allowWrite {}", q(&p), c(a))),
            _ => notes.add(Severity::Warning, a.file, a.line, format!("`sandbox.filesystem.allowWrite` entry \"{}\" is a glob or not a path gatehouse can name: writes there are refused (stricter)", shown(a))),
        }
    }
    for a in &m.deny_write {
        match path(a) {
            Ok(p) => o.files.push(format!(
                "read {}  # sandbox.filesystem.denyWrite {}",
                q(&covering(&p)),
                c(a)
            )),
            Err(why) => notes.add(
                Severity::Error,
                a.file,
                a.line,
                format!(
                    "`sandbox.filesystem.denyWrite` entry \"{}\" cannot be expressed: {why}",
                    shown(a)
                ),
            ),
        }
    }
    for a in &m.deny_read {
        match path(a) {
            Ok(p) => {
                o.files.push(format!(
                    "none {}  # sandbox.filesystem.denyRead {}",
                    q(&p),
                    c(a)
                ));
                if !glob(&p) {
                    hidden.push(p);
                }
            }
            Err(why) => notes.add(
                Severity::Error,
                a.file,
                a.line,
                format!(
                    "`sandbox.filesystem.denyRead` entry \"{}\" cannot be expressed: {why}",
                    shown(a)
                ),
            ),
        }
    }
    for a in &m.allow_read {
        match path(a) {
            Ok(p) if !glob(&p) && hidden.iter().any(|h| p.starts_with(&format!("{h}/"))) => {
                o.files.push(format!(
                    "read {}  # sandbox.filesystem.allowRead {}",
                    q(&p),
                    c(a)
                ));
            }
            _ => {}
        }
    }
    for a in &m.denied_domains {
        if let Some(r) = crate::import::zerocode::domain_rule(&a.value, false) {
            o.net
                .push(format!("{r}  # sandbox.network.deniedDomains {}", c(a)));
        }
    }
    for a in &m.allowed_domains {
        if a.value == "*" {
            o.default_allow = Some(format!("sandbox.network.allowedDomains \"*\" {}", c(a)));
        } else if let Some(r) = crate::import::zerocode::domain_rule(&a.value, true) {
            o.net
                .push(format!("{r}  # sandbox.network.allowedDomains {}", c(a)));
        }
    }
    if let Some(why) = &o.fetch_denied
        && !m.allowed_domains.is_empty()
        && let Some(first) = m.allowed_domains.first()
    {
        notes.add(Severity::Warning, first.file, first.line, format!(
            "{why}: gatehouse has one network list, so WebFetch may reach the sandbox's allowed domains (more permissive)"));
    }
    for a in &m.sockets {
        if a.value.starts_with('/') {
            o.net.push(format!(
                "allow socket {}  # sandbox.network.allowUnixSockets {}",
                q(&a.value),
                c(a)
            ));
        } else {
            notes.add(Severity::Warning, a.file, a.line, format!("`sandbox.network.allowUnixSockets` entry \"{}\" is not an absolute path: left out (stricter)", a.value));
        }
    }
    if let Some(a) = m.all_sockets.as_ref().filter(|a| a.value) {
        o.net.push(format!(
            "allow socket *  # sandbox.network.allowAllUnixSockets {}",
            cite(a, n)
        ));
    }
    if let Some(a) = m.local_binding.as_ref().filter(|a| a.value) {
        o.net.push(format!("# sandbox.network.allowLocalBinding {}: binding inside the sandbox needs no rule; the host's loopback stays closed (as sandbox-runtime on Linux)", cite(a, n)));
    }
    for a in &m.excluded {
        match rules::parse(&format!("Bash({})", a.value)) {
            Ok(Rule::Bash(Command::Prefix(w) | Command::Exact(w) | Command::Partial(w))) if !w.is_empty() => {
                o.commands.push(format!("prompt {}  # sandbox.excludedCommands {}: runs outside the sandbox, so it asks", words(&w), c(a)));
            }
            _ => notes.add(Severity::Error, a.file, a.line, format!("`sandbox.excludedCommands` entry \"{}\" cannot be expressed: gatehouse matches a command by its leading words", a.value)),
        }
    }
    if let Some(a) = m.unsandboxed.as_ref().filter(|a| !a.value) {
        notes.add(Severity::Warning, a.file, a.line, "`sandbox.allowUnsandboxedCommands` false: a command asking to leave the sandbox is asked about here (`escalation`), not refused (more permissive)".into());
    }
}
