//! Agent decisions (docs/language.md#sandbox, #commands): sandbox writes, `exec`, MCP
//! tools and bare prompts, each resolved through one category rule.

use std::borrow::Cow;
use std::path::Path;

use super::known_safe::{basename, is_dangerous, is_known_safe, trusted_name};
use super::shell::{self, Script};
use super::words::{self, SHELLS, Word};
use crate::compile::Policy;
use crate::decision::{Decision, Outcome, Reason, RuleId};
use crate::normalize::normalize_absolute_path;
use crate::query::Annotations;
use crate::syntax::ast::{
    ApprovalMode, CommandEffect, McpMode, PromptCategory, Reviewer, SandboxMode,
};

/// A workspace as the engine sees it: its root, and the git directory that a
/// `.git` pointer file names, if any. Binding reads the file system once;
/// deciding never does.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Workspace {
    /// The workspace's root, an absolute normal path.
    pub root: String,
    /// The resolved `gitdir:` of a `.git` pointer file (protected too).
    pub gitdir: Option<String>,
    /// The home directory `~` file rules are relative to; unbound, they
    /// cover nothing. [`Workspace::bind`] leaves it unbound; the CLI binds
    /// `$HOME`.
    pub home: Option<String>,
}

impl Workspace {
    /// A workspace known only by its root.
    pub fn new(root: impl Into<String>) -> Self {
        Workspace {
            root: root.into(),
            gitdir: None,
            home: None,
        }
    }

    /// The same workspace with `~` bound to `home`.
    pub fn with_home(mut self, home: Option<String>) -> Self {
        self.home = home;
        self
    }

    /// Binds a workspace directory: when `DIR/.git` is a pointer file
    /// (`gitdir: PATH`, relative to DIR), the resolved git directory is
    /// recorded, lexically normalised.
    pub fn bind(dir: &Path) -> Workspace {
        let root = dir.to_string_lossy().into_owned();
        let gitdir = std::fs::read_to_string(dir.join(".git"))
            .ok()
            .and_then(|text| {
                let target = text
                    .lines()
                    .next()?
                    .strip_prefix("gitdir:")?
                    .trim()
                    .to_string();
                let joined = if target.starts_with('/') {
                    target
                } else {
                    format!("{root}/{target}")
                };
                normalize_absolute_path(&joined).map(Cow::into_owned)
            });
        Workspace {
            root,
            gitdir,
            home: None,
        }
    }
}

/// How strict a decision is, for "the strictest wins".
fn severity(d: &Decision) -> u8 {
    match d.outcome {
        Outcome::Deny | Outcome::Denied | Outcome::TimedOut | Outcome::Aborted => 2,
        Outcome::Ask | Outcome::Review => 1,
        _ => 0,
    }
}

/// Whether `exec` judges `argv` at all: not empty, a program that is not
/// blank, no NUL, within the query limits (otherwise `invalid_command`).
pub(crate) fn argv_valid(limits: &crate::limits::QueryLimits, argv: &[String]) -> bool {
    let bytes: usize = argv.iter().map(String::len).sum();
    let blank_program = argv.first().is_some_and(|p| p.trim().is_empty());
    !(argv.is_empty()
        || blank_program
        || argv.len() > limits.argv_words
        || bytes > limits.argv_bytes
        || argv.iter().any(|w| w.contains('\0')))
}

/// A shell wrapper's argv, `PROGRAM -c|-lc SCRIPT` with a non-blank
/// script (docs/language.md#exec, step 1): the script, and whether the
/// program is a recognised wrapper (`bash`, `sh`, `zsh`, bare or in a
/// system directory) whose plain script is split into commands, rather
/// than another shell (`./bash`, `dash`, ...) whose script is unknown.
/// `None` for every other argv, which the rules and built-in tests judge
/// as it is.
pub(crate) fn wrapper_script(argv: &[String]) -> Option<(bool, &str)> {
    let [program, flag, script] = argv else {
        return None;
    };
    if !(flag == "-c" || flag == "-lc") || script.trim().is_empty() {
        return None;
    }
    let recognised = trusted_name(program).is_some_and(|n| matches!(n, "bash" | "sh" | "zsh"));
    (recognised || SHELLS.contains(&basename(program))).then_some((recognised, script.as_str()))
}

/// At most this many shell wrappers, the outer one included.
const MAX_WRAPPERS: usize = 3;

impl Policy {
    fn category_on(&self, c: PromptCategory) -> bool {
        self.agent.granular.get(c.index()).copied().unwrap_or(false)
    }

    /// The category rule (docs/language.md#sandbox): how a prompt of category `c`
    /// raised for `reason` resolves.
    pub(crate) fn prompt_for(
        &self,
        c: PromptCategory,
        reason: Reason,
        rule: Option<RuleId>,
    ) -> Decision {
        let a = &self.agent;
        match a.approvals {
            ApprovalMode::Never => Decision::deny(Reason::ApprovalNever, rule),
            ApprovalMode::Granular if !self.category_on(c) => {
                Decision::deny(Reason::CategoryRejected, rule)
            }
            ApprovalMode::OnRequest | ApprovalMode::Granular
                if a.reviewer == Reviewer::AutoReview =>
            {
                Decision::new(Outcome::Review, reason, rule)
            }
            _ => Decision::new(Outcome::Ask, reason, rule),
        }
    }

    fn sandbox_prompt(&self, reason: Reason) -> Decision {
        self.prompt_for(PromptCategory::SandboxApproval, reason, None)
    }

    // ------------------------------------------------------------- write

    /// May the agent write `path` (absolute) in `workspace`? The path is
    /// lexically normalised first, under every mode (`/tmp/a/../b` is
    /// `/tmp/b`); a relative or empty path, or one holding NUL, is denied
    /// `invalid_path`.
    pub fn write(&self, path: &str, workspace: &Workspace) -> Decision {
        let Some(path) = normalize_absolute_path(path) else {
            return Decision::deny(Reason::InvalidPath, None);
        };
        let untrusted = self.agent.approvals == ApprovalMode::Untrusted;
        let d = match self.agent.sandbox {
            SandboxMode::DangerFullAccess => return Decision::allow(Reason::Unsandboxed, None),
            SandboxMode::ReadOnly => self.sandbox_prompt(Reason::ReadOnlySandbox),
            SandboxMode::WorkspaceWrite => self.workspace_write(&path, workspace),
        };
        // Under `untrusted`, every write asks (the user, never the reviewer).
        if untrusted && d.outcome == Outcome::Allow {
            return Decision::new(Outcome::Ask, Reason::Untrusted, None);
        }
        d
    }

    // -------------------------------------------------------------- exec

    /// May the agent run `argv` (`escalate`: it asks to leave the sandbox)?
    /// An empty argv, a blank program, a word with NUL, or an argv over the
    /// policy's [`crate::limits::QueryLimits`] is denied (`invalid_command`);
    /// a wrapper's script over them is judged as unknown.
    pub fn exec(&self, argv: &[String], escalate: bool) -> Decision {
        if !argv_valid(&self.limits, argv) {
            return Decision::deny(Reason::InvalidCommand, None);
        }
        self.judge(argv, escalate, 1)
    }

    /// Step 1: shell wrappers.
    fn judge(&self, argv: &[String], escalate: bool, wrappers: usize) -> Decision {
        if let Some((recognised, script)) = wrapper_script(argv) {
            if !recognised {
                return self.judge_unknown(argv, script, escalate);
            }
            let split = if script.len() > self.limits.script_bytes {
                Script::Unknown
            } else {
                shell::split(script)
            };
            return match split {
                Script::Plain(commands) if wrappers <= MAX_WRAPPERS => {
                    self.judge_plain_script(argv, &commands, escalate, wrappers)
                }
                _ => self.judge_unknown(argv, script, escalate),
            };
        }
        self.judge_argv(argv, escalate, true)
    }

    fn judge_plain_script(
        &self,
        wrapper: &[String],
        commands: &[Vec<String>],
        escalate: bool,
        wrappers: usize,
    ) -> Decision {
        // The wrapper argv is judged by the rules too; then every command.
        let mut best = self.rules_only(wrapper);
        for cmd in commands {
            let d = self.judge(cmd, escalate, wrappers + 1);
            if best.is_none_or(|b| severity(&d) > severity(&b)) {
                best = Some(d);
            }
        }
        best.unwrap_or_else(|| Decision::deny(Reason::InvalidCommand, None))
    }

    /// An unknown script: judged as its wrapper argv (never known-safe),
    /// raised by every `forbid`/`prompt` program name and `rm -f` among the
    /// words the shell-word reader finds in it; a part it cannot decode
    /// raises as if it held both (docs/language.md#sandbox, step 1).
    fn judge_unknown(&self, argv: &[String], script: &str, escalate: bool) -> Decision {
        let own = self.judge_argv(argv, escalate, false);
        let words = if script.len() > self.limits.script_bytes {
            vec![Word::Opaque]
        } else {
            words::read(script)
        };
        let mut raise: Option<Decision> = None;
        let consider = |d: Decision, raise: &mut Option<Decision>| {
            if raise.is_none_or(|r| severity(&d) > severity(&r)) {
                *raise = Some(d);
            }
        };
        for (i, w) in words.iter().enumerate() {
            let (rule, dangerous) = match w {
                Word::Text(w) => (
                    self.agent.commands.raises_on(w),
                    basename(w) == "rm"
                        && words.get(i + 1..).is_some_and(|rest| {
                            rest.iter().any(|r| match r {
                                Word::Text(r) => super::known_safe::is_force(r),
                                Word::Opaque => true,
                            })
                        }),
                ),
                Word::Opaque => (self.agent.commands.raises_on_any(), true),
            };
            if rule {
                consider(
                    self.prompt_for(PromptCategory::Rules, Reason::PromptRule, None),
                    &mut raise,
                );
            }
            if dangerous {
                consider(self.dangerous(), &mut raise);
            }
        }
        match raise {
            Some(r) if severity(&r) >= severity(&own) => r,
            _ => own,
        }
    }

    /// What the dangerous-command rule says. The exception for full access
    /// under `never` holds only when the policy itself writes `approvals
    /// never`: an approval policy taken from requirements never lets a
    /// dangerous command run unasked.
    fn dangerous(&self) -> Decision {
        let a = &self.agent;
        match (a.approvals, a.sandbox) {
            (ApprovalMode::Never, SandboxMode::DangerFullAccess) if a.own_approvals => {
                Decision::allow(Reason::Unsandboxed, None)
            }
            _ => self.sandbox_prompt(Reason::DangerousCommand),
        }
    }

    /// The strictest matching `commands` rule, as a decision.
    fn rules_only(&self, argv: &[String]) -> Option<Decision> {
        let best = self.agent.commands.strictest(argv)?;
        Some(self.rule_decision(best.effect, best.rule))
    }

    fn rule_decision(&self, effect: CommandEffect, rule: RuleId) -> Decision {
        match effect {
            CommandEffect::Forbid => Decision::deny(Reason::ForbiddenByRule, Some(rule)),
            CommandEffect::Prompt => {
                self.prompt_for(PromptCategory::Rules, Reason::PromptRule, Some(rule))
            }
            CommandEffect::Allow => Decision::allow(Reason::AllowedByRule, Some(rule)),
        }
    }

    /// Steps 2 and 3 for one argv.
    fn judge_argv(&self, argv: &[String], escalate: bool, may_be_safe: bool) -> Decision {
        let Some(d) = self.rules_only(argv) else {
            return self.without_rules(argv, escalate, may_be_safe);
        };
        // A `prompt` rule never makes a command more permissive than it is
        // without the rule: an escalation or a dangerous command that its
        // own category would reject stays rejected. The rule wins ties.
        if d.reason == Reason::PromptRule {
            let base = self.without_rules(argv, escalate, may_be_safe);
            if severity(&base) > severity(&d) {
                return base;
            }
        }
        d
    }

    /// Step 3: no rule matched.
    fn without_rules(&self, argv: &[String], escalate: bool, may_be_safe: bool) -> Decision {
        if is_dangerous(argv) {
            return self.dangerous();
        }
        let a = &self.agent;
        let full = a.sandbox == SandboxMode::DangerFullAccess;
        let escalate = escalate && !full;
        let ran = if full {
            Reason::Unsandboxed
        } else {
            Reason::Sandboxed
        };
        match a.approvals {
            ApprovalMode::Untrusted => {
                let safe = may_be_safe && is_known_safe(argv);
                match (safe, escalate) {
                    (true, false) => Decision::allow(Reason::KnownSafe, None),
                    (false, _) => Decision::new(Outcome::Ask, Reason::NotKnownSafe, None),
                    (true, true) => Decision::new(Outcome::Ask, Reason::Escalation, None),
                }
            }
            ApprovalMode::OnRequest | ApprovalMode::Granular if escalate => {
                self.sandbox_prompt(Reason::Escalation)
            }
            ApprovalMode::Never if escalate => Decision::deny(Reason::ApprovalNever, None),
            _ => Decision::allow(ran, None),
        }
    }

    // --------------------------------------------------------- mcp, prompt

    /// May the agent call MCP tool `server/tool` with these annotations?
    pub fn mcp(&self, server: &str, tool: &str, ann: &Annotations) -> Decision {
        let m = &self.agent.mcp;
        let (mode, rule) = match m
            .tools
            .get(server)
            .and_then(|t| t.get(tool))
            .or_else(|| m.servers.get(server))
        {
            Some((mode, rule)) => (*mode, Some(*rule)),
            None => (McpMode::Auto, None),
        };
        let destructive = ann.destructive_hint == Some(true);
        let prompt = |reason| self.prompt_for(PromptCategory::McpElicitations, reason, rule);
        match mode {
            McpMode::Off => Decision::deny(Reason::ToolDisabled, rule),
            McpMode::Prompt => prompt(Reason::ApprovalMode),
            McpMode::ApproveDestructive => Decision::allow(Reason::ApprovalMode, rule),
            _ if destructive => prompt(Reason::DestructiveTool),
            McpMode::Approve => Decision::allow(Reason::ApprovalMode, rule),
            McpMode::Auto | McpMode::Writes if ann.read_only_hint == Some(true) => {
                Decision::allow(Reason::ReadOnlyTool, rule)
            }
            McpMode::Writes => prompt(Reason::ApprovalMode),
            McpMode::Auto
                if ann.destructive_hint == Some(false) && ann.open_world_hint == Some(false) =>
            {
                Decision::allow(Reason::ClosedWorldTool, rule)
            }
            McpMode::Auto => prompt(Reason::ToolAnnotations),
        }
    }

    /// A bare prompt of one category (`request_permissions`, ...).
    pub fn prompt(&self, c: PromptCategory) -> Decision {
        self.prompt_for(c, Reason::CategoryPrompt, None)
    }
}
