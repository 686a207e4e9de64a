//! Each harness's tools as gatehouse queries (docs/agents.md has the table).
//! A tool this table does not name is refused by name; a tool that touches
//! nothing outside the harness (its plan, its to-do list) asks nothing.

use gatehouse::query::{Annotations, Query, Via};

use super::Harness;

/// What a tool call is, for the policy.
#[derive(Debug, PartialEq)]
pub enum Mapped {
    /// The queries the call is decided by (every one must allow it).
    Ask(Vec<Query>),
    /// A tool of the harness's own bookkeeping: the policy has nothing to
    /// say, and the harness decides as it would without the hook.
    Nothing,
}

/// Why a call cannot be mapped: always a deny, with this reason.
#[derive(Debug, PartialEq)]
pub struct Unmapped(pub String);

/// Claude Code's tools that touch nothing outside the harness: its plan,
/// its to-do list and tasks, questions to the user, its own background
/// shells (what those run was decided as a `Bash` or `Monitor` call),
/// subagents and workflows (whose tool calls come through this hook one by
/// one), messages between its own agents, its schedules of later turns,
/// the loading of deferred tools' schemas. Checked against the tools
/// Claude Code 2.1.332 offers (tests/agents/run.sh asks the installed
/// version for its list).
const CLAUDE_OWN: [&str; 27] = [
    "TodoWrite",
    "ExitPlanMode",
    "EnterPlanMode",
    "AskUserQuestion",
    "TaskCreate",
    "TaskGet",
    "TaskUpdate",
    "TaskList",
    "TaskOutput",
    "TaskStop",
    "BashOutput",
    "KillShell",
    "KillBash",
    "SlashCommand",
    "Skill",
    "Workflow",
    "ListAgents",
    "SendMessage",
    "ReportFindings",
    "ScheduleWakeup",
    "CronCreate",
    "CronDelete",
    "CronList",
    "ToolSearch",
    "DeferredToolPlaceholder",
    "ReadNotifications",
    "PushNotification",
];

/// Codex's tools that touch nothing outside the harness: its plan and
/// goals, questions to the user, the loading of deferred tools. Checked
/// against the tools Codex 0.171.0 offers.
const CODEX_OWN: [&str; 6] = [
    "update_plan",
    "request_user_input",
    "get_goal",
    "create_goal",
    "update_goal",
    "tool_search",
];

/// The queries of one tool call. `cwd` is the session's folder (relative
/// paths are taken from it); `input` is the tool's input as the harness
/// sent it.
pub fn queries(
    harness: Harness,
    tool: &str,
    input: &serde_json::Value,
    cwd: &str,
) -> Result<Mapped, Unmapped> {
    if let Some(rest) = tool.strip_prefix("mcp__") {
        return mcp(rest).map(|q| Mapped::Ask(vec![q]));
    }
    let one = |q: Query| Ok(Mapped::Ask(vec![q]));
    match (harness, tool) {
        (_, "Bash") => one(exec(text(input, "command", tool)?)),
        // Codex's shell tools under their own names, as older versions and
        // some models call them: the command as a list of words.
        (Harness::Codex, "shell" | "local_shell" | "exec_command" | "container.exec") => {
            one(exec_words(input, tool)?)
        }
        // Input to a command Codex left running: empty input only polls
        // it; anything else is judged as the command line it would be to
        // a shell (the stricter reading: the process may well be one).
        (Harness::Codex, "write_stdin") => match input.get("chars") {
            None | Some(serde_json::Value::Null) => Ok(Mapped::Nothing),
            Some(serde_json::Value::String(c)) if c.is_empty() => Ok(Mapped::Nothing),
            Some(serde_json::Value::String(c)) => one(exec(c)),
            Some(_) => Err(Unmapped(format!("`{tool}`: `chars` is not a string"))),
        },
        (Harness::Codex, "apply_patch") => {
            let patch = text(input, "command", tool).or_else(|_| text(input, "input", tool))?;
            let paths = super::patch::paths(patch).map_err(|why| {
                Unmapped(format!("the patch of `apply_patch` cannot be read: {why}"))
            })?;
            Ok(Mapped::Ask(
                paths
                    .iter()
                    .map(|p| write(p, cwd))
                    .collect::<Result<_, _>>()?,
            ))
        }
        (Harness::ClaudeCode, "Write" | "Edit" | "MultiEdit") => {
            one(write(text(input, "file_path", tool)?, cwd)?)
        }
        (Harness::ClaudeCode, "NotebookEdit") => {
            let path =
                text(input, "notebook_path", tool).or_else(|_| text(input, "file_path", tool))?;
            one(write(path, cwd)?)
        }
        (Harness::ClaudeCode, "Read") => one(read(text(input, "file_path", tool)?, cwd)?),
        (Harness::ClaudeCode, "NotebookRead") => {
            let path =
                text(input, "notebook_path", tool).or_else(|_| text(input, "file_path", tool))?;
            one(read(path, cwd)?)
        }
        // Searches read under their folder, the session's by default; a
        // glob pattern also reads the folder its literal part reaches.
        (Harness::ClaudeCode, "Glob" | "Grep" | "LS") => {
            let path = match input.get("path") {
                None | Some(serde_json::Value::Null) => cwd,
                Some(serde_json::Value::String(p)) if !p.is_empty() => p.as_str(),
                Some(_) => return Err(Unmapped(format!("`{tool}`: `path` is not a path"))),
            };
            let mut q = vec![read(path, cwd)?];
            let pattern = match (tool, input.get("pattern"), input.get("glob")) {
                ("Glob", Some(serde_json::Value::String(p)), _)
                | ("Grep", _, Some(serde_json::Value::String(p))) => Some(p.as_str()),
                _ => None,
            };
            if let Some(p) = pattern {
                let base = absolute(path, cwd)?;
                q.push(read(&glob_root(&base, p), cwd)?);
            }
            Ok(Mapped::Ask(q))
        }
        // An MCP server's resources: reading one is a call to that server,
        // decided by its `mcp` rules under the tool's own name (`tool
        // S/read_mcp_resource deny` refuses it); listing every server's
        // catalogue names no server and asks nothing.
        (
            Harness::Codex,
            "list_mcp_resources" | "list_mcp_resource_templates" | "read_mcp_resource",
        )
        | (Harness::ClaudeCode, "ListMcpResourcesTool" | "ReadMcpResourceTool") => {
            match input.get("server") {
                Some(serde_json::Value::String(server)) if !server.is_empty() => one(Query::Mcp {
                    server: server.clone(),
                    tool: tool.to_string(),
                    annotations: Annotations::default(),
                }),
                None | Some(serde_json::Value::Null)
                    if !matches!(tool, "read_mcp_resource" | "ReadMcpResourceTool") =>
                {
                    Ok(Mapped::Nothing)
                }
                _ => Err(Unmapped(format!("`{tool}`: no `server` it reads from"))),
            }
        }
        (Harness::Codex, "view_image") => one(read(text(input, "path", tool)?, cwd)?),
        (Harness::ClaudeCode, "WebFetch") => one(fetch(tool, text(input, "url", tool)?)?),
        // A background command (judged as `Bash` is) or a WebSocket (a
        // connection to its host).
        (Harness::ClaudeCode, "Monitor") => match (input.get("command"), input.get("ws")) {
            (Some(_), None) => one(exec(text(input, "command", tool)?)),
            (None, Some(ws)) => one(fetch(tool, text(ws, "url", tool)?)?),
            _ => Err(Unmapped(format!(
                "`{tool}`: neither one `command` nor one `ws` in its input"
            ))),
        },
        // A subagent's tool calls come through this hook, unless it runs
        // remotely, where no hook of this machine sees them.
        (Harness::ClaudeCode, "Agent" | "Task") => match input.get("isolation") {
            Some(serde_json::Value::String(i)) if i == "remote" => Err(Unmapped(format!(
                "`{tool}` with `isolation: remote` runs where this hook never sees its tool calls"
            ))),
            _ => Ok(Mapped::Nothing),
        },
        // A git worktree is made or removed under the repository's `.git`:
        // a write there, as `git worktree add` would be.
        (Harness::ClaudeCode, "EnterWorktree") => match input.get("path") {
            Some(serde_json::Value::String(p)) if !p.is_empty() => one(read(p, cwd)?),
            _ => one(write(".git/worktrees", cwd)?),
        },
        (Harness::ClaudeCode, "ExitWorktree") => match input.get("action") {
            Some(serde_json::Value::String(a)) if a == "keep" => Ok(Mapped::Nothing),
            _ => one(write(".git/worktrees", cwd)?),
        },
        (Harness::ClaudeCode, "WebSearch") | (Harness::Codex, "web_search") => {
            one(Query::WebSearch)
        }
        (Harness::ClaudeCode, t) if CLAUDE_OWN.contains(&t) => Ok(Mapped::Nothing),
        (Harness::Codex, t) if CODEX_OWN.contains(&t) => Ok(Mapped::Nothing),
        _ => Err(Unmapped(format!(
            "the tool `{tool}` is not in gatehouse's table for {} (docs/agents.md): refused until the table names it",
            harness.name()
        ))),
    }
}

/// The tool permission (the `permissions` section's names) a call uses,
/// asked besides its own queries: `permissions { deny shell.exec }` takes
/// the harness's shell away, `files.write` its editing tools, `files.read`
/// its reading and searching tools (`policyc import claude-code` writes
/// these for a bare `Bash`, `Edit` or `Read` in `permissions.deny`).
pub fn permission(harness: Harness, tool: &str) -> Option<&'static str> {
    match (harness, tool) {
        (_, "Bash")
        | (Harness::ClaudeCode, "Monitor")
        | (
            Harness::Codex,
            "shell" | "local_shell" | "exec_command" | "container.exec" | "write_stdin",
        ) => Some("shell.exec"),
        (Harness::ClaudeCode, "Write" | "Edit" | "MultiEdit" | "NotebookEdit")
        | (Harness::Codex, "apply_patch") => Some("files.write"),
        (Harness::ClaudeCode, "Read" | "NotebookRead" | "Glob" | "Grep" | "LS")
        | (Harness::Codex, "view_image") => Some("files.read"),
        _ => None,
    }
}

/// A string field of the input, non-empty.
fn text<'a>(input: &'a serde_json::Value, field: &str, tool: &str) -> Result<&'a str, Unmapped> {
    match input.get(field) {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s),
        Some(_) => Err(Unmapped(format!(
            "`{tool}`: `{field}` is not a non-empty string"
        ))),
        None => Err(Unmapped(format!("`{tool}`: no `{field}` in its input"))),
    }
}

/// A shell command line: judged as `bash -c COMMAND` by gatehouse's shell
/// reader, never split on spaces.
fn exec(command: &str) -> Query {
    Query::Exec {
        argv: vec!["bash".into(), "-c".into(), command.into()],
        escalate: false,
    }
}

/// `{"command": ["bash", "-lc", "..."]}` or a command line as a string.
fn exec_words(input: &serde_json::Value, tool: &str) -> Result<Query, Unmapped> {
    match input.get("command").or_else(|| input.get("cmd")) {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(exec(s)),
        Some(serde_json::Value::Array(words)) if !words.is_empty() => {
            let argv = words
                .iter()
                .map(|w| w.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    Unmapped(format!("`{tool}`: a word of `command` is not a string"))
                })?;
            Ok(Query::Exec {
                argv,
                escalate: false,
            })
        }
        _ => Err(Unmapped(format!("`{tool}`: no command in its input"))),
    }
}

/// A write of `path`, relative paths from `cwd`.
fn write(path: &str, cwd: &str) -> Result<Query, Unmapped> {
    Ok(Query::Write {
        path: absolute(path, cwd)?,
        workspace: Some(cwd.to_string()),
        home: home(),
    })
}

/// A read of `path`, relative paths from `cwd`.
fn read(path: &str, cwd: &str) -> Result<Query, Unmapped> {
    Ok(Query::Read {
        path: absolute(path, cwd)?,
        workspace: Some(cwd.to_string()),
        home: home(),
    })
}

fn home() -> Option<String> {
    std::env::var("HOME").ok().filter(|h| h.starts_with('/'))
}

/// `path` as the harness may open it: absolute as given; `~` and `~/...`
/// under the home folder (a harness or its shell may expand them: judging
/// them as a folder named `~` in the workspace would let a write to the
/// home folder through); anything else under `cwd`. `..` and `.` are left
/// for the engine's path normaliser, which reads them as the kernel would
/// (docs/language.md). `~user` is refused: whose home it is cannot be told
/// here.
fn absolute(path: &str, cwd: &str) -> Result<String, Unmapped> {
    if path.starts_with('/') {
        return Ok(path.to_string());
    }
    if let Some(rest) = path.strip_prefix('~') {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Err(Unmapped(format!(
                "`{path}`: another user's home folder is refused"
            )));
        }
        let home = home().ok_or_else(|| {
            Unmapped(format!(
                "`{path}`: the home folder is not known (no absolute $HOME)"
            ))
        })?;
        return Ok(format!("{}{rest}", home.trim_end_matches('/')));
    }
    Ok(format!("{}/{path}", cwd.trim_end_matches('/')))
}

/// The folder a glob pattern can reach: `base` joined with the pattern's
/// literal folders, up to the first wildcard (`/etc/*` reaches `/etc`,
/// `../../*` reaches two folders up).
fn glob_root(base: &str, pattern: &str) -> String {
    let literal = pattern
        .find(['*', '?', '[', '{'])
        .map_or(pattern, |i| pattern.get(..i).unwrap_or_default());
    let dir = literal
        .rfind('/')
        .map_or("", |i| literal.get(..i).unwrap_or_default());
    if pattern.starts_with('/') {
        if dir.is_empty() {
            "/".to_string()
        } else {
            dir.to_string()
        }
    } else if pattern.starts_with('~') {
        if dir.is_empty() {
            "~".to_string()
        } else {
            dir.to_string()
        }
    } else if dir.is_empty() {
        base.to_string()
    } else {
        format!("{}/{dir}", base.trim_end_matches('/'))
    }
}

/// `mcp__SERVER__TOOL`: the harness tells the hook nothing of the tool's
/// annotations, so the policy decides as for a tool that declares none
/// (an `auto` server prompts; docs/language.md §9).
fn mcp(rest: &str) -> Result<Query, Unmapped> {
    match rest.split_once("__") {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => Ok(Query::Mcp {
            server: server.to_string(),
            tool: tool.to_string(),
            annotations: Annotations::default(),
        }),
        _ => Err(Unmapped(format!(
            "`mcp__{rest}` does not name a server and a tool (`mcp__SERVER__TOOL`)"
        ))),
    }
}

/// A URL as a connection (`WebFetch`, `Monitor`'s WebSocket): `http`,
/// `https`, `ws` or `wss` only, the host as
/// written (the engine normalises case, trailing dots, IDN and numeric
/// spellings), the port given or the scheme's. A URL with user
/// information, a backslash or anything else unusual in its authority is
/// refused rather than guessed at.
fn fetch(tool: &str, url: &str) -> Result<Query, Unmapped> {
    let bad = |why: &str| Unmapped(format!("`{tool}` of `{url}`: {why}"));
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("not an absolute URL"))?;
    let (via, default_port) = match scheme.to_ascii_lowercase().as_str() {
        "https" | "wss" => (Via::Https, 443),
        "http" | "ws" => (Via::Http, 80),
        _ => return Err(bad("only http, https, ws and wss URLs are fetched")),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = rest.get(..end).unwrap_or_default();
    if authority.contains('@') {
        return Err(bad("a URL with user information is refused"));
    }
    if authority.is_empty()
        || authority
            .bytes()
            .any(|b| b <= b' ' || b == b'\\' || b == 0x7f || b == b'%')
    {
        return Err(bad("its host cannot be read"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (inside, after) = v6.split_once(']').ok_or_else(|| bad("an unclosed `[`"))?;
        match after {
            "" => (inside, None),
            a => (
                inside,
                Some(
                    a.strip_prefix(':')
                        .ok_or_else(|| bad("its port cannot be read"))?,
                ),
            ),
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => default_port,
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => digits
            .parse::<u16>()
            .map_err(|_| bad("its port is out of range"))?,
        Some(_) => return Err(bad("its port cannot be read")),
    };
    if host.is_empty() {
        return Err(bad("it names no host"));
    }
    Ok(Query::Connect {
        host: host.to_string(),
        port: i64::from(port),
        via,
    })
}

#[cfg(test)]
#[path = "map_tests.rs"]
mod tests;
