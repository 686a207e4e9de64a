//! The policy text of merged Claude Code settings (docs/importing.md,
//! "Claude Code settings", has the table and the reasons).

use std::fmt::Write as _;

use super::rules::{self, Command, Rule};
use super::{At, Layer, Merged, Notes, cite};
use crate::import::Severity;

/// The programs gatehouse runs without asking under `approvals untrusted`
/// (the language's known-safe list): a `prompt` rule on each makes every
/// command ask, as `ask: ["Bash"]` does.
const KNOWN_SAFE_PROGRAMS: &str = "[base64 cat cd cut echo expr false find git grep head id ls nl numfmt paste pwd rev rg sed seq stat tac tail tr true uname uniq wc which whoami]";

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Effect {
    Allow,
    Ask,
    Deny,
}

impl Effect {
    fn key(self) -> &'static str {
        match self {
            Effect::Allow => "permissions.allow",
            Effect::Ask => "permissions.ask",
            Effect::Deny => "permissions.deny",
        }
    }
    fn command(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Ask => "prompt",
            Effect::Deny => "forbid",
        }
    }
}

/// What is being written, section by section.
#[derive(Default)]
pub(super) struct Out {
    pub(super) files: Vec<String>,
    pub(super) commands: Vec<String>,
    pub(super) net: Vec<String>,
    pub(super) mcp_servers: Vec<(String, Effect, String)>,
    pub(super) mcp_tools: Vec<(String, String, Effect, String)>,
    pub(super) permissions: Vec<String>,
    pub(super) web_search: Option<(bool, String)>,
    pub(super) default_allow: Option<String>,
    /// Rules that refuse in Claude Code and ask a person here.
    pub(super) softened: Vec<String>,
    /// Allow rules left out: gatehouse asks where Claude Code would not.
    pub(super) stricter: Vec<String>,
    pub(super) ask_every_command: Option<String>,
    pub(super) allow_every_command: Option<String>,
    pub(super) ask_every_write: bool,
    pub(super) fetch_denied: Option<String>,
}

pub(super) fn policy(m: &Merged, labels: &[String], layers: &[Layer], notes: &mut Notes) -> String {
    let n = labels.len();
    let mut o = Out::default();
    let c = |a: &At<String>| cite(a, n);
    let managed_only = m.managed_only.as_ref().is_some_and(|a| a.value);
    let mut sets: Vec<(Effect, &At<String>)> = Vec::new();
    for (e, list) in [
        (Effect::Deny, &m.deny),
        (Effect::Ask, &m.ask),
        (Effect::Allow, &m.allow),
    ] {
        for a in list {
            let managed = layers.get(a.file).is_some_and(|l| *l == Layer::Managed);
            if managed_only && !managed {
                notes.add(
                    Severity::Warning,
                    a.file,
                    a.line,
                    format!("`{}` in {} is left out: the managed settings say `allowManagedPermissionRulesOnly`", a.value, e.key()),
                );
                continue;
            }
            sets.push((e, a));
        }
    }
    // The mode, the highest layer's.
    let mut mode = m
        .default_mode
        .as_ref()
        .map_or("default", |a| a.value.as_str());
    // Seen on Claude Code 2.1.332 (tests/agents/claude_import.py, file 08):
    // `defaultMode: bypassPermissions` in a settings file does not start
    // the session in that mode — commands and writes no rule allows were
    // asked about — so the import takes the default mode, as Claude Code
    // does (and the stricter reading anyway).
    if mode == "bypassPermissions"
        && let Some(d) = &m.default_mode
    {
        notes.add(
            Severity::Warning,
            d.file,
            d.line,
            "`permissions.defaultMode` bypassPermissions: Claude Code 2.1.332 does not start in it from a settings file (it asks, as in the default mode; only `--permission-mode bypassPermissions` bypasses), so it is imported as the default mode".into(),
        );
        mode = "default";
    }
    let sandbox_on = m.sandbox_enabled.as_ref().is_some_and(|a| a.value);
    let auto_allow = m.auto_allow.as_ref().is_none_or(|a| a.value);
    let mut on_request = sandbox_on && auto_allow;

    for (e, a) in &sets {
        let rule = match rules::parse(&a.value) {
            Ok(r) => r,
            Err(why) => {
                notes.add(
                    Severity::Error,
                    a.file,
                    a.line,
                    format!("malformed rule \"{}\" in {}: {why}", a.value, e.key()),
                );
                continue;
            }
        };
        rule_lines(*e, a, &rule, &mut o, notes, n, sandbox_on);
    }
    if o.allow_every_command.is_some() {
        on_request = true;
    }
    if o.ask_every_command.is_some() || o.ask_every_write {
        on_request = false;
    }
    // Claude Code strips `timeout`, `nice` and `nohup` (and `stdbuf`)
    // before it matches a Bash rule, so `timeout 5 git push` meets
    // `Bash(git push:*)`; gatehouse's command rules are positional. Where
    // commands run unasked, a command behind one of them asks instead, so
    // that no deny or ask rule is walked around (stricter for the rest).
    if on_request
        && o.commands
            .iter()
            .any(|l| l.starts_with("forbid") || l.starts_with("prompt"))
    {
        o.commands.push(
            "prompt [timeout nice nohup stdbuf] because \"Claude Code matches its rules behind these wrappers; gatehouse's rules are positional, so a wrapped command asks\"  # the wrappers Claude Code strips before matching a rule".into(),
        );
    }

    // Sandbox settings.
    if sandbox_on {
        super::sandbox::lines(m, &mut o, notes, n);
    } else {
        let mut unused: Vec<&At<String>> = Vec::new();
        for l in [
            &m.allow_write,
            &m.deny_write,
            &m.deny_read,
            &m.allow_read,
            &m.allowed_domains,
            &m.denied_domains,
            &m.sockets,
            &m.excluded,
        ] {
            unused.extend(l.iter());
        }
        if let Some(first) = unused.first() {
            notes.add(Severity::Warning, first.file, first.line, format!(
                "`sandbox.enabled` is not true, so Claude Code applies none of the `sandbox` lists ({} entries): left out, as Claude Code leaves them", unused.len()));
        }
    }
    for a in &m.additional {
        match rules::sandbox_path(&a.value, false) {
            Ok(p) if p.starts_with(['/', '~']) => o.files.push(format!(
                "writable {}  # permissions.additionalDirectories {}",
                crate::query::quote_string(&p),
                c(a)
            )),
            _ => notes.add(
                Severity::Warning,
                a.file,
                a.line,
                format!("`permissions.additionalDirectories` entry \"{}\" is not an absolute or home path: left out (stricter: writes there ask)", a.value),
            ),
        }
    }

    // One warning for each direction, naming the rules.
    if !o.softened.is_empty() {
        let first = &o.softened;
        notes.add(Severity::Warning, 0, 0, format!(
            "Claude Code refuses these outright; the policy asks a person instead (`no_access`, `read_only_path` and MCP prompts are questions in gatehouse): {}. Through `policyc hook` that is a refusal in every permission mode but `default` and `plan`", first.join(", ")));
    }
    if !o.stricter.is_empty() {
        notes.add(
            Severity::Warning,
            0,
            0,
            format!(
                "left out, so the policy asks where Claude Code would not (stricter): {}",
                o.stricter.join(", ")
            ),
        );
    }
    if mode == "acceptEdits" && !on_request {
        if let Some(a) = &m.default_mode {
            notes.add(Severity::Warning, a.file, a.line, "`defaultMode` acceptEdits: gatehouse cannot let edits through while commands ask; every write asks (stricter)".into());
        }
    }
    if on_request {
        let why = if o.allow_every_command.is_some() {
            "`Bash` is allowed"
        } else {
            "sandboxed commands run without asking (`autoAllowBashIfSandboxed`)"
        };
        notes.add(Severity::Warning, 0, 0, format!(
            "{why}, so the policy is `approvals on-request`: Edit and Write in the workspace are allowed too, where Claude Code asks (more permissive for the file tools only; any command could write there already)"));
    }

    // The text.
    let mut out = String::new();
    out.push_str("# Imported from Claude Code settings by `policyc import claude-code`.\n");
    let _ = writeln!(
        out,
        "# Settings, lowest layer first: {}.",
        labels
            .iter()
            .enumerate()
            .map(|(i, l)| if n > 1 {
                format!("{} = {l}", i + 1)
            } else {
                l.clone()
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !m.skipped.is_empty() {
        let _ = writeln!(
            out,
            "# Skipped (they decide nothing here): {}.",
            m.skipped.join(", ")
        );
    }
    out.push_str("policy claude_code {\n");
    let mode_cite = m
        .default_mode
        .as_ref()
        .map(|a| format!("permissions.defaultMode {mode} {}", c(a)))
        .unwrap_or_else(|| "no permissions.defaultMode: Claude Code's default mode".into());
    let kind = if mode == "plan" {
        "read-only"
    } else {
        "workspace-write"
    };
    if o.files.is_empty() {
        let _ = writeln!(out, "  sandbox {kind}  # {mode_cite}");
    } else {
        let _ = writeln!(out, "  sandbox {kind} {{  # {mode_cite}");
        for l in &o.files {
            let _ = writeln!(out, "    {l}");
        }
        out.push_str("  }\n");
    }
    if on_request {
        let _ = writeln!(
            out,
            "  approvals on-request  # commands run unless a rule stops them ({})",
            if o.allow_every_command.is_some() {
                "`Bash` allowed"
            } else {
                "sandbox.autoAllowBashIfSandboxed"
            }
        );
    } else {
        out.push_str("  approvals untrusted  # a command not known to be read-only, and every write, asks (Claude Code's prompts)\n");
    }
    out.push_str("  network {\n");
    match &o.default_allow {
        Some(why) => {
            let _ = writeln!(out, "    default allow  # {why}");
        }
        None => out.push_str(
            "    default deny  # a host no rule names: Claude Code asks, gatehouse refuses\n",
        ),
    }
    out.push_str("    local deny\n");
    for l in &o.net {
        let _ = writeln!(out, "    {l}");
    }
    out.push_str("  }\n");
    if !o.commands.is_empty() {
        out.push_str("  commands {\n");
        for l in &o.commands {
            let _ = writeln!(out, "    {l}");
        }
        out.push_str("  }\n");
    }
    mcp_block(&o, &mut out);
    let (live, why) = match &o.web_search {
        Some((live, why)) => (*live, why.clone()),
        None => (
            false,
            "no rule allows WebSearch: Claude Code asks, gatehouse refuses".into(),
        ),
    };
    let _ = writeln!(
        out,
        "  web_search {}  # {why}",
        if live { "live" } else { "disabled" }
    );
    if !o.permissions.is_empty() {
        out.push_str("  permissions {\n");
        for l in &o.permissions {
            let _ = writeln!(out, "    {l}");
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

fn mcp_block(o: &Out, out: &mut String) {
    if o.mcp_servers.is_empty() && o.mcp_tools.is_empty() {
        return;
    }
    out.push_str("  mcp {\n");
    // The strictest rule on each server and tool: deny and ask both
    // prompt, allow approves; a tool allowed under a server that prompts
    // stays prompted (Claude Code: deny and ask come before allow).
    let mut servers: Vec<(&String, Effect, &String)> = Vec::new();
    for (s, e, why) in &o.mcp_servers {
        match servers.iter_mut().find(|(x, _, _)| *x == s) {
            Some(slot) if *e > slot.1 => *slot = (s, *e, why),
            Some(_) => {}
            None => servers.push((s, *e, why)),
        }
    }
    for (s, e, why) in &servers {
        let _ = writeln!(
            out,
            "    server {} {}  # {why}",
            crate::query::quote_word(s),
            if *e == Effect::Allow {
                "approve"
            } else {
                "prompt"
            }
        );
    }
    let mut tools: Vec<(&String, &String, Effect, &String)> = Vec::new();
    for (s, t, e, why) in &o.mcp_tools {
        match tools.iter_mut().find(|(x, y, _, _)| *x == s && *y == t) {
            Some(slot) if *e > slot.2 => *slot = (s, t, *e, why),
            Some(_) => {}
            None => tools.push((s, t, *e, why)),
        }
    }
    for (s, t, e, why) in &tools {
        let server_stricter = servers
            .iter()
            .any(|(x, se, _)| x == s && *se > Effect::Allow);
        if *e == Effect::Allow && server_stricter {
            let _ = writeln!(
                out,
                "    # {why}: {s}/{t} stays asked, as the rule on the whole server comes first"
            );
            continue;
        }
        let _ = writeln!(
            out,
            "    tool {}/{} {}  # {why}",
            crate::query::quote_word(s),
            crate::query::quote_word(t),
            if *e == Effect::Allow {
                "approve"
            } else {
                "prompt"
            }
        );
    }
    out.push_str("  }\n");
}

/// A path pattern that takes access away wherever it matches, whatever
/// literal rule lies deeper (a glob; a literal path `p` as `p/**`, which
/// covers `p` itself): Claude Code's deny and ask come before any allow.
pub(super) fn covering(p: &str) -> String {
    if p.contains(['*', '?', '[']) {
        p.to_string()
    } else if p == "." {
        "**".into()
    } else if p == "/" {
        "/**".into()
    } else {
        format!("{p}/**")
    }
}

pub(super) fn words(w: &[String]) -> String {
    w.iter()
        .map(|x| crate::query::quote_word(x))
        .collect::<Vec<_>>()
        .join(" ")
}

fn because(e: Effect, a: &At<String>) -> String {
    let text = format!("Claude Code settings: {} {}", e.key(), a.value);
    format!(" because {}", crate::query::quote_string(&text))
}

#[allow(clippy::too_many_lines)]
fn rule_lines(
    e: Effect,
    a: &At<String>,
    rule: &Rule,
    o: &mut Out,
    notes: &mut Notes,
    n: usize,
    sandbox_on: bool,
) {
    let at = cite(a, n);
    let src = format!("{} \"{}\" {at}", e.key(), a.value);
    let q = crate::query::quote_string;
    match (rule, e) {
        (Rule::BashAll, Effect::Deny) => o
            .permissions
            .push(format!("deny shell.exec  # {src}: the Bash tool refused")),
        (Rule::BashAll, Effect::Ask) => {
            o.commands.push(format!(
                "prompt {KNOWN_SAFE_PROGRAMS}{}  # {src}: every command asks, read-only ones too",
                because(e, a)
            ));
            o.ask_every_command = Some(src);
        }
        (Rule::BashAll, Effect::Allow) => o.allow_every_command = Some(src),
        (Rule::Bash(Command::Prefix(w)), _) => o.commands.push(format!(
            "{} {}{}  # {src}",
            e.command(),
            words(w),
            if e == Effect::Allow {
                String::new()
            } else {
                because(e, a)
            }
        )),
        (Rule::Bash(Command::Exact(w) | Command::Partial(w)), Effect::Deny | Effect::Ask)
            if !w.is_empty() =>
        {
            o.commands.push(format!(
                "{} {}{}  # {src}",
                e.command(),
                words(w),
                because(e, a)
            ));
            notes.add(Severity::Warning, a.file, a.line, format!(
                "\"{}\": gatehouse matches a command by its leading words, so this is `{} {}`, which also covers what follows them (stricter)",
                a.value, e.command(), words(w)));
        }
        (Rule::Bash(_), Effect::Deny | Effect::Ask) => notes.add(
            Severity::Error,
            a.file,
            a.line,
            format!(
                "\"{}\" in {} cannot be expressed: gatehouse matches a command by its leading words, and this rule names none (write the program's name first, e.g. `Bash(git push:*)`)",
                a.value,
                e.key()
            ),
        ),
        // An exact command gatehouse runs without asking anyway.
        (Rule::Bash(Command::Exact(w)), Effect::Allow)
            if crate::eval::known_safe::is_known_safe(w) => {}
        (Rule::Bash(_), Effect::Allow) => o.stricter.push(format!("\"{}\" {at}", a.value)),
        (Rule::File { edit, path: None }, Effect::Deny) => o.permissions.push(format!(
            "deny {}  # {src}",
            if *edit { "files.write" } else { "files.read" }
        )),
        (Rule::File { edit: true, path: None }, Effect::Ask) => o.ask_every_write = true,
        (Rule::File { edit: false, path: None }, Effect::Ask) => notes.add(
            Severity::Warning,
            a.file,
            a.line,
            format!("\"{}\" in permissions.ask: gatehouse asks for no read but of a path a rule hides, so reads are allowed (more permissive)", a.value),
        ),
        (Rule::File { path: None, .. }, Effect::Allow) => {
            if matches!(rule, Rule::File { edit: true, .. }) {
                o.stricter.push(format!("\"{}\" {at}", a.value));
            }
        }
        (Rule::File { edit, path: Some(p) }, _) => match rules::rule_path(p) {
            Err(why) if e == Effect::Allow => notes.add(
                Severity::Warning,
                a.file,
                a.line,
                format!("\"{}\": not a path gatehouse can name ({why}); left out (stricter)", a.value),
            ),
            Err(why) => notes.add(
                Severity::Error,
                a.file,
                a.line,
                format!("\"{}\" in {} cannot be expressed: not a path gatehouse can name ({why})", a.value, e.key()),
            ),
            Ok(path) => match (edit, e) {
                (false, Effect::Deny | Effect::Ask) => {
                    o.files.push(format!("none {}  # {src}", q(&covering(&path))));
                    if e == Effect::Deny {
                        o.softened.push(format!("\"{}\" {at}", a.value));
                    }
                }
                (true, Effect::Deny | Effect::Ask) => {
                    o.files.push(format!("read {}  # {src}", q(&covering(&path))));
                    if e == Effect::Deny {
                        o.softened.push(format!("\"{}\" {at}", a.value));
                    }
                }
                (true, Effect::Allow) if path.starts_with(['/', '~']) && !path.contains(['*', '?', '[']) => {
                    o.files.push(format!("writable {}  # {src}", q(&path)));
                }
                (true, Effect::Allow) => o.stricter.push(format!("\"{}\" {at}", a.value)),
                (false, Effect::Allow) => {}
            },
        },
        (Rule::Fetch(None), Effect::Allow) => {
            if sandbox_on {
                o.stricter.push(format!("\"{}\" {at} (the sandbox's network stays allow-only)", a.value));
            } else {
                o.default_allow = Some(src);
            }
        }
        (Rule::Fetch(None), _) => o.fetch_denied = Some(src),
        (Rule::Fetch(Some(d)), _) => {
            let allow = e == Effect::Allow;
            if let Some(r) = crate::import::zerocode::domain_rule(d, allow) {
                o.net.push(format!("{r}  # {src}"));
            }
            if e == Effect::Ask {
                notes.add(Severity::Warning, a.file, a.line, format!(
                    "\"{}\" in permissions.ask: gatehouse's network rules do not ask; the host is refused (stricter)", a.value));
            }
        }
        (Rule::Search, Effect::Allow) => {
            if o.web_search.is_none() {
                o.web_search = Some((true, src));
            }
        }
        (Rule::Search, _) => o.web_search = Some((false, src)),
        (Rule::Mcp { server, tool }, _) => {
            if e == Effect::Deny {
                o.softened.push(format!("\"{}\" {at}", a.value));
            }
            match tool {
                None => o.mcp_servers.push((server.clone(), e, src)),
                Some(t) => o.mcp_tools.push((server.clone(), t.clone(), e, src)),
            }
        }
        (Rule::Inert(t), Effect::Deny) => notes.add(
            Severity::Warning,
            a.file,
            a.line,
            format!("\"{}\" in permissions.deny: the hook asks nothing of `{t}` (a subagent's or a skill's own tool calls come through it one by one); not refused (more permissive)", a.value),
        ),
        (Rule::Inert(_), _) => {}
    }
}
