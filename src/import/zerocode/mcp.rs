//! MCP servers: each server's and tool's approval mode, and what is off.

use std::fmt::Write as _;

use super::config::{Config, Server};
use super::read::At;
use super::{Writer, requirements, tool_word};
use crate::import::Input;

impl Writer {
    /// `mcp { ... }`: a tool's own approval mode, else its server's default,
    /// else `auto`; a disabled server, a tool left out of `enabled_tools`
    /// or listed in `disabled_tools`, and a server the requirements do not
    /// list, are `off`.
    pub(super) fn mcp(&mut self, c: &Config, req: Option<&requirements::Requirements>) {
        if c.mcp.is_empty() {
            return;
        }
        let allowed = req.and_then(|q| q.mcp_allowed.as_ref());
        // `never` with no sandbox: ZeroCode approves MCP tool calls itself,
        // destructive ones too (nothing may prompt and nothing is
        // contained), so every server and tool that is on is
        // `approve_destructive`.
        let auto_approve = self.approvals.as_deref() == Some("never")
            && self.sandbox.as_deref() == Some("danger-full-access");
        self.line("  mcp {");
        for (name, s) in &c.mcp {
            let server = tool_word(name);
            if allowed.is_some_and(|a| !a.contains(name)) {
                let _ = writeln!(
                    self.out,
                    "    server {server} off  # mcp_servers.{name} (line {}): not among the servers the requirements allow",
                    s.line
                );
                continue;
            }
            if let Some(e) = s.enabled.as_ref().filter(|e| !e.value) {
                let _ = writeln!(
                    self.out,
                    "    server {server} off{}",
                    e.comment(Input::Config)
                );
                continue;
            }
            self.server(name, s, auto_approve);
        }
        self.line("  }");
    }

    /// The language's mode for a ZeroCode `approval_mode`: `approve` needs
    /// no approval whatever the tool's annotations (Codex's MCP tool-call
    /// approval path), which the language spells `approve_destructive` —
    /// each time with a warning, since it loosens the rule for destructive
    /// tools.
    fn mode_for(&mut self, m: &At<String>) -> String {
        if m.value == "approve" {
            self.warn(
                Input::Config,
                m.line,
                format!("`{}` = \"approve\" is written `approve_destructive`: Codex runs such a tool without approval whatever its annotations, destructive ones too", m.key),
            );
            "approve_destructive".into()
        } else {
            m.value.clone()
        }
    }

    fn server(&mut self, name: &str, s: &Server, auto_approve: bool) {
        let server = tool_word(name);
        let never = "  # approval_policy = never under danger-full-access: ZeroCode approves MCP tool calls";
        let mode = |m: &str| {
            if auto_approve {
                "approve_destructive".to_string()
            } else {
                m.to_string()
            }
        };
        let mode_of = |tool: &str| {
            s.tools
                .iter()
                .rev()
                .find(|(t, _)| t == tool)
                .map(|(_, m)| m)
                .or(s.default_mode.as_ref())
        };
        match &s.enabled_tools {
            Some(list) => {
                let _ = writeln!(
                    self.out,
                    "    server {server} off  # mcp_servers.{name}.enabled_tools (line {}): only the listed tools",
                    list.first().map_or(s.line, |l| l.line)
                );
                for t in list {
                    if s.disabled_tools.iter().any(|d| d.value == t.value) {
                        continue;
                    }
                    let (m, why) = match mode_of(&t.value) {
                        Some(m) if !auto_approve => (self.mode_for(m), m.comment(Input::Config)),
                        Some(m) => (m.value.clone(), m.comment(Input::Config)),
                        None => ("auto".to_string(), t.comment(Input::Config)),
                    };
                    let why = if auto_approve { never.to_string() } else { why };
                    let _ = writeln!(
                        self.out,
                        "    tool {server}/{} {}{why}",
                        tool_word(&t.value),
                        mode(&m)
                    );
                }
            }
            None if auto_approve => {
                let _ = writeln!(self.out, "    server {server} approve_destructive{never}");
            }
            None => {
                if let Some(m) = &s.default_mode {
                    let mode = self.mode_for(m);
                    let _ = writeln!(
                        self.out,
                        "    server {server} {mode}{}",
                        m.comment(Input::Config)
                    );
                }
                for (t, m) in &s.tools {
                    if !s.disabled_tools.iter().any(|d| &d.value == t) {
                        let mode = self.mode_for(m);
                        let _ = writeln!(
                            self.out,
                            "    tool {server}/{} {mode}{}",
                            tool_word(t),
                            m.comment(Input::Config)
                        );
                    }
                }
            }
        }
        for d in &s.disabled_tools {
            let _ = writeln!(
                self.out,
                "    tool {server}/{} off{}",
                tool_word(&d.value),
                d.comment(Input::Config)
            );
        }
    }
}
