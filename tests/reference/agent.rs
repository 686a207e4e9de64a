//! The oracle for agent queries (language spec §9–§11), read straight off
//! the spec: linear scans over the AST, no indexes.
//!
//! Shared with the engine, deliberately: the shell splitter, the
//! shell-word reader (whose oracle is a real bash: tests/shell_words.rs
//! runs generated scripts under bash and checks every argv it ran against
//! the reader), the known-safe classifier and the glob matcher. Each has
//! its own unit tables; what this oracle checks is everything built on them
//! (mode tables, the category rule, rule matching and strictness, paths,
//! annotations, the verdict).

use gatehouse::query::{Annotations, Assessment, Query, ReviewOutcome, ReviewStatus};
use gatehouse::testing::ast::*;
use gatehouse::testing::{Script, ShellWord, read_words, split};
use gatehouse::testing::{basename, is_known_safe, trusted_name};

use super::{RefDecision, RefPolicy, d};

fn rank(r: &RefDecision) -> u8 {
    match r.outcome {
        "deny" | "denied" | "timed_out" | "aborted" => 2,
        "ask" | "review" => 1,
        _ => 0,
    }
}

impl RefPolicy<'_> {
    pub(super) fn sections(&self) -> impl Iterator<Item = &SectionKind> {
        self.block.sections.iter().map(|s| &s.kind)
    }
    /// The policy's mode; when it writes none, the language default
    /// (workspace-write) unless a requirement caps the mode lower.
    pub(super) fn sandbox(&self) -> SandboxMode {
        let own = self.sections().find_map(|k| match k {
            SectionKind::Sandbox(s) => s.modes.first().map(|m| m.node),
            _ => None,
        });
        own.unwrap_or_else(|| {
            self.all_sections()
                .filter_map(|k| match k {
                    SectionKind::Sandbox(s) => s.modes.first().map(|m| m.node),
                    _ => None,
                })
                .fold(SandboxMode::WorkspaceWrite, std::cmp::min)
        })
    }
    /// The approval policy the policy writes itself.
    fn own_approvals(&self) -> Option<ApprovalMode> {
        self.sections().find_map(|k| match k {
            SectionKind::Approvals(a) => a.modes.first().map(|m| m.node),
            _ => None,
        })
    }
    /// The policy's own; else the first entry of the first requirements
    /// list that every requirements list holds (issue 29, ruling 3); else
    /// on-request.
    pub(super) fn approvals(&self) -> ApprovalMode {
        self.own_approvals()
            .or_else(|| {
                super::requirements::agreed(&self.reqs, |k| match k {
                    SectionKind::Approvals(a) => Some(a.modes.iter().map(|m| m.node).collect()),
                    _ => None,
                })
            })
            .unwrap_or(ApprovalMode::OnRequest)
    }
    fn reviewer(&self) -> Reviewer {
        self.sections()
            .find_map(|k| match k {
                SectionKind::Reviewer(r) => r.first().map(|m| m.node),
                _ => None,
            })
            .or_else(|| {
                super::requirements::agreed(&self.reqs, |k| match k {
                    SectionKind::Reviewer(r) => Some(r.iter().map(|m| m.node).collect()),
                    _ => None,
                })
            })
            .unwrap_or(Reviewer::User)
    }
    /// `web_search` (docs/language.md#sandbox): the policy's own mode; else
    /// the requirements' agreed default, at the first requirements
    /// statement of the setting; else `live` under danger-full-access and
    /// `cached` otherwise.
    pub fn web_search(&self) -> RefDecision {
        let word = |m: WebSearchMode| match m {
            WebSearchMode::Cached => "cached",
            WebSearchMode::Disabled => "disabled",
            WebSearchMode::Live => "live",
            WebSearchMode::Indexed => "indexed",
        };
        for s in &self.block.sections {
            if let SectionKind::WebSearch(v) = &s.kind
                && let Some(m) = v.first()
            {
                return d(word(m.node), "configured", Some(s.span.start));
            }
        }
        let list = |k: &SectionKind| match k {
            SectionKind::WebSearch(v) => Some(v.iter().map(|m| m.node).collect()),
            _ => None,
        };
        if let Some(m) = super::requirements::agreed(&self.reqs, list) {
            let at = self
                .reqs
                .iter()
                .flat_map(|r| &r.sections)
                .find(|s| list(&s.kind).is_some())
                .map(|s| s.span.start);
            return d(word(m), "configured", at);
        }
        if self.sandbox() == SandboxMode::DangerFullAccess {
            d("live", "default", None)
        } else {
            d("cached", "default", None)
        }
    }
    fn category_on(&self, c: PromptCategory) -> bool {
        self.sections()
            .find_map(|k| match k {
                SectionKind::Approvals(a) => a.granular.as_ref(),
                _ => None,
            })
            .into_iter()
            .flatten()
            .any(|g| g.category.node == c && g.value.node == Switch::On)
    }

    /// The category rule.
    pub(super) fn prompt(
        &self,
        c: PromptCategory,
        reason: &'static str,
        rule_at: Option<u32>,
    ) -> RefDecision {
        match self.approvals() {
            ApprovalMode::Never => d("deny", "approval_never", rule_at),
            ApprovalMode::Granular if !self.category_on(c) => {
                d("deny", "category_rejected", rule_at)
            }
            ApprovalMode::Untrusted => d("ask", reason, rule_at),
            _ if self.reviewer() == Reviewer::AutoReview => d("review", reason, rule_at),
            _ => d("ask", reason, rule_at),
        }
    }

    pub fn prompt_query(&self, c: PromptCategory) -> RefDecision {
        self.prompt(c, "category_prompt", None)
    }

    // ------------------------------------------------------------------ exec

    /// The policy's rules and the requirements' (forbid and prompt only).
    fn command_rules(&self) -> Vec<&CommandRule> {
        self.all_sections()
            .filter_map(|k| {
                if let SectionKind::Commands(r) = k {
                    Some(r)
                } else {
                    None
                }
            })
            .flatten()
            .collect()
    }

    /// The strictest matching rule: a linear scan in source order.
    fn rule_decision(&self, argv: &[String]) -> Option<RefDecision> {
        let program = argv.first()?;
        let mut best: Option<&CommandRule> = None;
        for r in self.command_rules() {
            if r.pattern.len() > argv.len() {
                continue;
            }
            let prog_ok = r.pattern[0].alternatives.iter().any(|a| {
                a == program
                    || (a == basename(program)
                        && (r.effect != CommandEffect::Allow || trusted_name(program).is_some()))
            });
            let rest_ok = r
                .pattern
                .iter()
                .skip(1)
                .zip(&argv[1..])
                .all(|(w, a)| w.alternatives.contains(a));
            if prog_ok && rest_ok && best.is_none_or(|b| r.effect > b.effect) {
                best = Some(r);
            }
        }
        let r = best?;
        Some(match r.effect {
            CommandEffect::Forbid => d("deny", "forbidden_by_rule", Some(r.span.start)),
            CommandEffect::Prompt => {
                self.prompt(PromptCategory::Rules, "prompt_rule", Some(r.span.start))
            }
            CommandEffect::Allow => d("allow", "allowed_by_rule", Some(r.span.start)),
        })
    }

    /// The dangerous-command predicate read straight off §9, apart from the
    /// engine's: `rm` with a force flag, as the program or as any later word
    /// when the program is one of the command-running wrappers.
    fn is_dangerous(argv: &[String]) -> bool {
        const WRAPPERS: [&str; 11] = [
            "sudo", "doas", "env", "timeout", "nice", "nohup", "ionice", "stdbuf", "time",
            "command", "exec",
        ];
        let Some(program) = argv.first() else {
            return false;
        };
        let wrapped = WRAPPERS.contains(&basename(program));
        (0..argv.len()).any(|i| {
            (i == 0 || wrapped) && basename(&argv[i]) == "rm" && Self::forced(&argv[i + 1..])
        })
    }

    /// `-f`, `-rf`, `--force`, `--fo`, ...: a force flag in any spelling.
    fn forced(words: &[String]) -> bool {
        words.iter().any(|w| {
            if w.starts_with("--") {
                w.len() > 2 && "--force".starts_with(w.as_str())
            } else {
                w.starts_with('-') && w.contains('f')
            }
        })
    }

    /// The full-access exception holds only for a policy that writes
    /// `approvals never` itself (a documented choice: requirements never
    /// loosen).
    fn dangerous(&self) -> RefDecision {
        if self.own_approvals() == Some(ApprovalMode::Never)
            && self.sandbox() == SandboxMode::DangerFullAccess
        {
            d("allow", "unsandboxed", None)
        } else {
            self.prompt(PromptCategory::SandboxApproval, "dangerous_command", None)
        }
    }

    fn plain_argv(&self, argv: &[String], escalate: bool, may_be_safe: bool) -> RefDecision {
        let without = self.no_rule(argv, escalate, may_be_safe);
        match self.rule_decision(argv) {
            // A prompt rule is weighed against the command without rules.
            Some(r) if r.reason == "prompt_rule" && rank(&without) > rank(&r) => without,
            Some(r) => r,
            None => without,
        }
    }

    fn no_rule(&self, argv: &[String], escalate: bool, may_be_safe: bool) -> RefDecision {
        if Self::is_dangerous(argv) {
            return self.dangerous();
        }
        let full = self.sandbox() == SandboxMode::DangerFullAccess;
        let escalate = escalate && !full;
        let ran = if full { "unsandboxed" } else { "sandboxed" };
        match self.approvals() {
            ApprovalMode::Untrusted => {
                let safe = may_be_safe && is_known_safe(argv);
                if !safe {
                    d("ask", "not_known_safe", None)
                } else if escalate {
                    d("ask", "escalation", None)
                } else {
                    d("allow", "known_safe", None)
                }
            }
            ApprovalMode::Never if escalate => d("deny", "approval_never", None),
            ApprovalMode::Never => d("allow", ran, None),
            _ if escalate => self.prompt(PromptCategory::SandboxApproval, "escalation", None),
            _ => d("allow", ran, None),
        }
    }

    fn unknown(&self, argv: &[String], script: &str, escalate: bool) -> RefDecision {
        let own = self.plain_argv(argv, escalate, false);
        // Words the shell passes on, or "?" for a part that cannot be
        // decoded (it may hold any program and any flag).
        let words: Vec<Option<String>> = if script.len() > 64 * 1024 {
            vec![None]
        } else {
            read_words(script)
                .into_iter()
                .map(|w| match w {
                    ShellWord::Text(t) => Some(t),
                    ShellWord::Opaque => None,
                })
                .collect()
        };
        let raising: Vec<&str> = self
            .command_rules()
            .iter()
            .filter(|r| r.effect != CommandEffect::Allow)
            .flat_map(|r| r.pattern[0].alternatives.iter().map(String::as_str))
            .collect();
        let mut raise: Option<RefDecision> = None;
        for (i, w) in words.iter().enumerate() {
            let mut here = Vec::new();
            let names_rule = match w {
                Some(w) => raising.iter().any(|p| *p == *w || *p == basename(w)),
                None => !raising.is_empty(),
            };
            if names_rule {
                here.push(self.prompt(PromptCategory::Rules, "prompt_rule", None));
            }
            let forced_after = words[i + 1..].iter().any(|r| {
                r.as_ref()
                    .is_none_or(|r| Self::forced(std::slice::from_ref(r)))
            });
            let rm = match w {
                Some(w) => basename(w) == "rm" && forced_after,
                None => true,
            };
            if rm {
                here.push(self.dangerous());
            }
            for h in here {
                if raise.as_ref().is_none_or(|r| rank(&h) > rank(r)) {
                    raise = Some(h);
                }
            }
        }
        match raise {
            Some(r) if rank(&r) >= rank(&own) => r,
            _ => own,
        }
    }

    fn judge(&self, argv: &[String], escalate: bool, depth: usize) -> RefDecision {
        if argv.len() == 3 && (argv[1] == "-c" || argv[1] == "-lc") && !argv[2].trim().is_empty() {
            let recognised = matches!(trusted_name(&argv[0]), Some("bash" | "sh" | "zsh"));
            if recognised {
                let script = if argv[2].len() > 64 * 1024 {
                    Script::Unknown
                } else {
                    split(&argv[2])
                };
                return match script {
                    Script::Plain(cmds) if depth <= 3 => {
                        let mut best = self.rule_decision(argv);
                        for c in &cmds {
                            let r = self.judge(c, escalate, depth + 1);
                            if best.as_ref().is_none_or(|b| rank(&r) > rank(b)) {
                                best = Some(r);
                            }
                        }
                        best.unwrap()
                    }
                    _ => self.unknown(argv, &argv[2], escalate),
                };
            }
            let shells = [
                "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash", "yash",
                "busybox",
            ];
            if shells.contains(&basename(&argv[0])) {
                return self.unknown(argv, &argv[2], escalate);
            }
        }
        self.plain_argv(argv, escalate, true)
    }

    pub fn exec(&self, argv: &[String], escalate: bool) -> RefDecision {
        let bytes: usize = argv.iter().map(String::len).sum();
        if argv.is_empty()
            || argv[0].trim().is_empty()
            || argv.len() > 10_000
            || bytes > 1024 * 1024
            || argv.iter().any(|w| w.contains('\0'))
        {
            return d("deny", "invalid_command", None);
        }
        self.judge(argv, escalate, 1)
    }

    // ------------------------------------------------------------ mcp, prompt

    pub fn mcp(&self, server: &str, tool: &str, a: &Annotations) -> RefDecision {
        let mut server_mode = None;
        let mut tool_mode = None;
        for k in self.sections() {
            if let SectionKind::Mcp(stmts) = k {
                for st in stmts {
                    match st {
                        McpStmt::Server {
                            server: s,
                            mode,
                            span,
                        } if s.node == server && server_mode.is_none() => {
                            server_mode = Some((mode.node, span.start))
                        }
                        McpStmt::Tool {
                            server: s,
                            tool: t,
                            mode,
                            span,
                            ..
                        } if s == server && t == tool && tool_mode.is_none() => {
                            tool_mode = Some((mode.node, span.start))
                        }
                        _ => {}
                    }
                }
            }
        }
        let (mode, at) = tool_mode
            .or(server_mode)
            .map_or((McpMode::Auto, None), |(m, s)| (m, Some(s)));
        let p = |reason| self.prompt(PromptCategory::McpElicitations, reason, at);
        if mode == McpMode::Off {
            return d("deny", "tool_disabled", at);
        }
        if mode == McpMode::Prompt {
            return p("approval_mode");
        }
        if mode == McpMode::ApproveDestructive {
            return d("allow", "approval_mode", at);
        }
        if a.destructive_hint == Some(true) {
            return p("destructive_tool");
        }
        if mode == McpMode::Approve {
            return d("allow", "approval_mode", at);
        }
        if a.read_only_hint == Some(true) {
            return d("allow", "read_only_tool", at);
        }
        if mode == McpMode::Writes {
            // Asks unless the tool says it only reads.
            return p("approval_mode");
        }
        if a.destructive_hint == Some(false) && a.open_world_hint == Some(false) {
            return d("allow", "closed_world_tool", at);
        }
        p("tool_annotations")
    }

    // ---------------------------------------------------------------- review

    /// The policy's guardian and the requirements' (deny rules only).
    fn guardian(&self) -> Vec<&GuardianStmt> {
        self.all_sections()
            .filter_map(|k| {
                if let SectionKind::Guardian(g) = k {
                    Some(g)
                } else {
                    None
                }
            })
            .flatten()
            .collect()
    }

    /// A path word with `.`, empty and resolvable `..` segments removed
    /// (absolute paths keep their root; `..` at the root stays there).
    fn lexical(w: &str) -> String {
        if w.contains('\0') {
            return w.to_string();
        }
        let absolute = w.starts_with('/');
        let mut out: Vec<&str> = Vec::new();
        for seg in w.split('/').filter(|s| !s.is_empty() && *s != ".") {
            let climbs = seg == "..";
            let poppable = absolute || matches!(out.last(), Some(p) if *p != ".." && *p != "~");
            if climbs && poppable {
                out.pop();
            } else if !climbs || !absolute {
                out.push(seg);
            }
        }
        let body = out.join("/");
        if absolute { format!("/{body}") } else { body }
    }

    fn matches(m: &Matcher, action: &Query) -> bool {
        let (lines, argvs, paths): (Vec<String>, Vec<Vec<String>>, Vec<String>) = match action {
            Query::Exec { argv, .. } => {
                let mut lines = vec![argv.join(" ")];
                let mut argvs = Vec::new();
                let mut words: Vec<String> = Vec::new();
                // A breadth-first walk over wrappers: (argv, wrappers so far).
                let mut todo = vec![(argv.clone(), 1usize)];
                while let Some((a, depth)) = todo.pop() {
                    words.extend(a.iter().cloned());
                    argvs.push(a.clone());
                    if a.len() == 3 && (a[1] == "-c" || a[1] == "-lc") {
                        lines.push(a[2].clone());
                        words.extend(gatehouse::testing::script_words(&a[2]));
                        if depth <= 3 && trusted_name(&a[0]).is_some() {
                            if let Script::Plain(c) = split(&a[2]) {
                                todo.extend(c.into_iter().map(|x| (x, depth + 1)));
                            }
                        }
                    }
                }
                let paths = words
                    .into_iter()
                    .filter(|w| w.contains('/') || w.starts_with('.') || w.starts_with('~'))
                    .flat_map(|w| [Self::lexical(&w), w])
                    .collect();
                (lines, argvs, paths)
            }
            Query::Write { path, .. } => (vec![], vec![], vec![path.clone(), Self::lexical(path)]),
            _ => (vec![], vec![], vec![]),
        };
        match m {
            Matcher::CommandRegex(s) => {
                let re = regex_automata::meta::Regex::new(&s.value).unwrap();
                lines.iter().any(|l| re.is_match(l))
            }
            Matcher::CommandPrefix(words) => argvs.iter().any(|a| {
                words.len() <= a.len()
                    && words.iter().zip(a).enumerate().all(|(i, (w, x))| {
                        w.alternatives
                            .iter()
                            .any(|alt| alt == x || (i == 0 && alt == basename(x)))
                    })
            }),
            Matcher::Path(globs) => paths.iter().any(|p| {
                globs
                    .iter()
                    .any(|g| gatehouse::testing::Glob::new(&g.node).matches(p))
            }),
            // The target of a connect or a dns action; a host that does not
            // normalise is matched as written, lower-cased (a risk rule only
            // makes a verdict stricter).
            Matcher::Host(pats) => match action {
                Query::Connect { host, .. } | Query::Dns { name: host } => {
                    let h = match super::normalize(host) {
                        Ok(super::H::Name(n)) => n,
                        Ok(super::H::Ip(ip)) => ip.to_string(),
                        Err(_) => host.to_ascii_lowercase(),
                    };
                    pats.iter().any(|p| super::pattern_matches(&p.node, &h))
                }
                _ => false,
            },
            Matcher::Tool(tools) => match action {
                Query::Mcp { server, tool, .. } => tools.iter().any(|t| {
                    let (s, n) = t.node.split_once('/').unwrap();
                    (s == "*" || s == server) && (n == "*" || n == tool)
                }),
                _ => false,
            },
        }
    }

    pub fn review(&self, action: &Query, a: &Assessment) -> RefDecision {
        match a.status.unwrap_or(ReviewStatus::Ok) {
            ReviewStatus::Failed => return d("denied", "failed_closed", None),
            ReviewStatus::Timeout => return d("timed_out", "timeout", None),
            ReviewStatus::Cancelled => return d("aborted", "cancelled", None),
            ReviewStatus::Ok => {}
        }
        let g = self.guardian();
        let mut risk = a.risk.unwrap_or(RiskLevel::Low);
        let mut risk_at = None;
        let mut categories: Vec<RiskCategory> = a.category.into_iter().collect();
        for st in &g {
            if let GuardianStmt::Risk {
                level,
                category,
                matcher,
                span,
            } = st
            {
                if Self::matches(matcher, action) {
                    categories.push(category.node);
                    if level.node > risk || (level.node == risk && risk_at.is_none()) {
                        risk = level.node;
                        risk_at = Some(span.start);
                    }
                }
            }
        }
        // A rule at the assessed level counts as the deciding one only when
        // no rule is higher; a level above every rule is the assessment's.
        let mut deny_at: Option<u32> = None;
        for st in &g {
            let at = match st {
                GuardianStmt::DenyAction { matcher, span } if Self::matches(matcher, action) => {
                    Some(span.start)
                }
                GuardianStmt::DenyCategory { category, span }
                    if categories.contains(&category.node) =>
                {
                    Some(span.start)
                }
                _ => None,
            };
            if deny_at.is_none() {
                deny_at = at;
            }
        }
        if let Some(at) = deny_at {
            return d("denied", "denied_by_rule", Some(at));
        }
        if a.outcome == Some(ReviewOutcome::Deny) {
            return d("denied", "reviewer_denied", risk_at);
        }
        let mut allow = vec![RiskLevel::Low, RiskLevel::Medium];
        let mut allow_at = None;
        let mut authorize = AuthLevel::Medium;
        let mut authorize_at = None;
        for st in &g {
            match st {
                GuardianStmt::Allow { levels, span } => {
                    allow = levels.iter().map(|l| l.node).collect();
                    allow_at = Some(span.start);
                }
                GuardianStmt::Authorize { with, span, .. } => {
                    authorize = with.node;
                    authorize_at = Some(span.start);
                }
                _ => {}
            }
        }
        match risk {
            RiskLevel::Critical => d("denied", "critical_risk", risk_at),
            RiskLevel::High if a.user_authorization.unwrap_or(AuthLevel::Unknown) >= authorize => {
                d("approved", "approved", risk_at)
            }
            RiskLevel::High => d(
                "denied",
                "insufficient_authorization",
                authorize_at.or(risk_at),
            ),
            // `allow` is closed downwards: `allow medium` lets low through.
            level if allow.iter().any(|a| level <= *a) => d("approved", "approved", risk_at),
            _ => d("denied", "level_not_allowed", allow_at),
        }
    }
}
