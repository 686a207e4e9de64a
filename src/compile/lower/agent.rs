//! `sandbox`, `approvals`, `commands` and `mcp`: the agent's tables.

use super::super::agent::{Access, FileRule};
use super::super::*;
use crate::normalize::FilePattern;

/// `approvals MODE { granular ... }`.
pub(in crate::compile) fn approvals(agent: &mut Agent, a: &ApprovalsSection) {
    if let Some(m) = a.modes.first() {
        agent.approvals = m.node;
    }
    for g in a.granular.iter().flatten() {
        if let Some(v) = agent.granular.get_mut(g.category.node.index()) {
            *v = g.value.node == Switch::On;
        }
    }
}

impl Compiler<'_> {
    /// `sandbox MODE { writable ...; read ...; none ...; protect ...;
    /// exclude "/tmp" }`.
    pub(in crate::compile) fn sandbox(
        &mut self,
        agent: &mut Agent,
        s: &SandboxSection,
    ) -> Result<(), Inconsistency> {
        if let Some(m) = s.modes.first() {
            agent.sandbox = m.node;
        }
        for st in s.block.iter().flatten() {
            let (access, v, span) = match st {
                SandboxStmt::Writable(v, span) => (Access::Write, v, span),
                SandboxStmt::Read(v, span) => (Access::Read, v, span),
                SandboxStmt::None(v, span) => (Access::None, v, span),
                SandboxStmt::Protect(v, _) => {
                    agent
                        .paths
                        .protect
                        .extend(v.iter().map(|p| p.node.to_ascii_lowercase()));
                    continue;
                }
                SandboxStmt::Exclude(v, _) => {
                    agent.paths.no_tmp |= v.iter().any(|p| p.node == "/tmp");
                    continue;
                }
            };
            // One rule per statement: decisions name `none "~/.ssh" ...`.
            let rule = self.rule(*span);
            for p in v {
                let pattern = FilePattern::parse(&p.node)?;
                agent.paths.files.push(FileRule {
                    access,
                    pattern,
                    rule,
                });
            }
        }
        Ok(())
    }

    pub(in crate::compile) fn commands(&mut self, agent: &mut Agent, rules: &[CommandRule]) {
        for r in rules {
            let because = r.because.as_ref().map(|b| b.value.clone());
            let rule = self.rule_because(r.span, because);
            let pattern = r.pattern.iter().map(|w| w.alternatives.clone()).collect();
            agent.commands.push(super::super::agent::CommandRule {
                effect: r.effect,
                pattern,
                rule,
            });
        }
    }

    pub(in crate::compile) fn mcp(&mut self, agent: &mut Agent, stmts: &[McpStmt]) {
        for st in stmts {
            match st {
                McpStmt::Server { server, mode, span } => {
                    let rule = self.rule(*span);
                    agent
                        .mcp
                        .servers
                        .entry(server.node.clone())
                        .or_insert((mode.node, rule));
                }
                McpStmt::Tool {
                    server,
                    tool,
                    mode,
                    span,
                    ..
                } => {
                    let rule = self.rule(*span);
                    agent
                        .mcp
                        .tools
                        .entry(server.clone())
                        .or_default()
                        .entry(tool.clone())
                        .or_insert((mode.node, rule));
                }
            }
        }
    }
}
