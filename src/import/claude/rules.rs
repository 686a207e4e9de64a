//! Claude Code's permission rules (`Tool`, `Tool(specifier)`,
//! `mcp__server__tool`) read into what gatehouse can say of them.
//!
//! The meaning of each form is Claude Code's, from its permissions
//! documentation (code.claude.com/docs/en/permissions) and checked on
//! Claude Code 2.1.332 (tests/agents/claude_import.py): deny, then ask, then
//! allow, the first match deciding; a bare tool name is every use of it;
//! `Bash(x:*)` is `Bash(x *)` (`:*` only at the end), a trailing ` *` is a
//! word boundary that also matches `x` alone, a `*` elsewhere spans any
//! characters (spaces too), and no `*` is the exact command; file rules
//! are gitignore patterns anchored by `//` (absolute), `~/` (home), `/`
//! (the project root) or `./` and no prefix (the current folder).

/// One rule, as Claude Code reads it.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Rule {
    /// `Bash`, `Bash(*)`: every command.
    BashAll,
    /// A command pattern.
    Bash(Command),
    /// A file tool: `Read` (with Grep, Glob, LS, NotebookRead) or `Edit`
    /// (every editing tool); `None` is every path.
    File { edit: bool, path: Option<String> },
    /// `WebFetch`, or `WebFetch(domain:NAME)`.
    Fetch(Option<String>),
    /// `WebSearch`.
    Search,
    /// `mcp__server`, `mcp__server__*` (tool `None`) or `mcp__server__tool`.
    Mcp {
        server: String,
        tool: Option<String>,
    },
    /// A tool whose calls gatehouse does not decide (its own bookkeeping,
    /// subagents whose calls come through the hook one by one).
    Inert(String),
}

/// What a command pattern says, in gatehouse's words.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Command {
    /// `x:*`, `x *`: the words `x` and anything after them.
    Prefix(Vec<String>),
    /// No `*`: exactly these words.
    Exact(Vec<String>),
    /// A `*` inside a word or before the end, or words gatehouse cannot
    /// name literally: these complete words come first (maybe none).
    Partial(Vec<String>),
}

/// Claude Code's tools that a rule may name, for a did-you-mean.
pub(super) const TOOLS: &[&str] = &[
    "Bash",
    "Read",
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Glob",
    "Grep",
    "LS",
    "WebFetch",
    "WebSearch",
    "Agent",
    "Task",
    "TodoWrite",
    "Skill",
    "SlashCommand",
    "ExitPlanMode",
    "BashOutput",
    "KillShell",
    "Monitor",
];

/// Tools whose calls the hook asks nothing about (docs/agents.md).
const INERT: &[&str] = &[
    "Agent",
    "Task",
    "TodoWrite",
    "Skill",
    "SlashCommand",
    "ExitPlanMode",
    "BashOutput",
    "KillShell",
];

/// Reads one rule; `Err` says why it is malformed.
pub(super) fn parse(rule: &str) -> Result<Rule, String> {
    if rule != rule.trim() || rule.is_empty() {
        return Err("a rule has no spaces before or after it".into());
    }
    if let Some(rest) = rule.strip_prefix("mcp__") {
        return mcp(rest);
    }
    let (tool, spec) = match rule.split_once('(') {
        None => (rule, None),
        Some((tool, rest)) => match rest.strip_suffix(')') {
            Some(spec) => (tool, Some(spec)),
            None => return Err("a `(` without its closing `)` at the end".into()),
        },
    };
    if tool.is_empty() || !tool.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("`{tool}` is not a tool name"));
    }
    if let Some(s) = spec
        && (s != s.trim())
    {
        return Err(format!(
            "the specifier `{s}` has spaces at its edges, so it matches nothing the way it reads (write `{tool}({})`)",
            tidy(s)
        ));
    }
    match (tool, spec) {
        ("Bash", None | Some("*")) => Ok(Rule::BashAll),
        ("Bash", Some(s)) => bash(s).map(Rule::Bash),
        ("Read" | "NotebookRead" | "Glob" | "Grep" | "LS", s) => file(false, s),
        ("Edit" | "Write" | "MultiEdit" | "NotebookEdit", s) => file(true, s),
        ("WebFetch", None | Some("*")) => Ok(Rule::Fetch(None)),
        ("WebFetch", Some(s)) => match s.strip_prefix("domain:") {
            Some(d) if !d.is_empty() && !d.contains(char::is_whitespace) => {
                Ok(Rule::Fetch(Some(d.to_ascii_lowercase())))
            }
            _ => Err(format!(
                "`WebFetch({s})`: a WebFetch rule names `domain:HOST`"
            )),
        },
        ("WebSearch", _) => Ok(Rule::Search),
        (t, _) if INERT.contains(&t) => Ok(Rule::Inert(t.to_string())),
        (t, _) => Err(format!(
            "`{t}` is not a Claude Code tool{}",
            crate::diag::did_you_mean(t, TOOLS.iter().copied())
                .map(|h| format!(" ({h})"))
                .unwrap_or_default()
        )),
    }
}

/// A malformed specifier as it was surely meant: edges trimmed, a space
/// before `:*` dropped, runs of spaces one.
fn tidy(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.replace(" :*", ":*")
}

fn mcp(rest: &str) -> Result<Rule, String> {
    let (server, tool) = match rest.split_once("__") {
        None => (rest, None),
        Some((s, "*")) => (s, None),
        Some((s, t)) => (s, Some(t)),
    };
    let ok = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    if !ok(server) || tool.is_some_and(|t| !ok(t)) {
        return Err(format!(
            "`mcp__{rest}` is not `mcp__SERVER` or `mcp__SERVER__TOOL`"
        ));
    }
    Ok(Rule::Mcp {
        server: server.to_string(),
        tool: tool.map(str::to_string),
    })
}

/// A word gatehouse can match literally: what the shell would pass on as
/// it is written (no quote, expansion, glob or operator to undo).
fn plain(w: &str) -> bool {
    !w.is_empty()
        && !w.contains([
            '\'', '"', '$', '`', '\\', ';', '&', '|', '<', '>', '(', ')', '*', '?', '[', ']', '{',
            '}', '#', '!', '~',
        ])
}

/// The complete plain words at the start of `text` (a word cut by `*` or
/// by the end of `text` without a space after it is not complete when
/// `cut` says so).
fn leading_words(text: &str, cut: bool) -> Vec<String> {
    let mut words: Vec<&str> = text.split_whitespace().collect();
    if cut && !text.ends_with(char::is_whitespace) {
        words.pop();
    }
    words
        .into_iter()
        .take_while(|w| plain(w))
        .map(str::to_string)
        .collect()
}

fn bash(s: &str) -> Result<Command, String> {
    let star_free_prefix = |p: &str| -> Result<Command, String> {
        if p.ends_with(char::is_whitespace) || p.is_empty() {
            return Err(format!(
                "`{s}`: nothing or a space before `:*` (write `Bash({})`)",
                tidy(s)
            ));
        }
        let words: Vec<&str> = p.split_whitespace().collect();
        if words.iter().all(|w| plain(w)) {
            Ok(Command::Prefix(
                words.into_iter().map(str::to_string).collect(),
            ))
        } else {
            Ok(Command::Partial(leading_words(p, false)))
        }
    };
    if let Some(p) = s.strip_suffix(":*") {
        if p.contains('*') {
            return Ok(Command::Partial(leading_words(
                p.split('*').next().unwrap_or(""),
                true,
            )));
        }
        return star_free_prefix(p);
    }
    if s.contains(":*") {
        return Err(format!("`{s}`: `:*` is read only at the end of a rule"));
    }
    if let Some(p) = s.strip_suffix(" *")
        && !p.contains('*')
    {
        return star_free_prefix(p);
    }
    if !s.contains('*') {
        let words: Vec<&str> = s.split_whitespace().collect();
        return Ok(if words.iter().all(|w| plain(w)) {
            Command::Exact(words.into_iter().map(str::to_string).collect())
        } else {
            Command::Partial(leading_words(s, false))
        });
    }
    Ok(Command::Partial(leading_words(
        s.split('*').next().unwrap_or(""),
        true,
    )))
}

fn file(edit: bool, spec: Option<&str>) -> Result<Rule, String> {
    let path = match spec {
        None | Some("*" | "**" | "/**" | "//**") => None,
        Some(s) => Some(s.to_string()),
    };
    Ok(Rule::File { edit, path })
}

/// A permission rule's path as a gatehouse file pattern: `//x` absolute,
/// `~/x` in the home, `/x` at the project root (the workspace, where the
/// session runs), `./x` and `x/y` in the current folder (the same place),
/// and a bare name without `/` at any depth (gitignore's reading:
/// `Read(.env)` is every `.env`). `Err` says why gatehouse cannot name it.
pub(super) fn rule_path(spec: &str) -> Result<String, String> {
    let p = if let Some(abs) = spec.strip_prefix("//") {
        format!("/{abs}")
    } else if spec == "~" || spec.starts_with("~/") {
        spec.to_string()
    } else if let Some(root) = spec.strip_prefix('/') {
        root.to_string()
    } else if let Some(here) = spec.strip_prefix("./") {
        here.to_string()
    } else if !spec.trim_end_matches('/').contains('/') {
        format!("**/{spec}")
    } else {
        spec.to_string()
    };
    let p = p.trim_end_matches('/');
    let p = if p.is_empty() { "." } else { p };
    crate::normalize::FilePattern::parse(p)
        .map(|_| p.to_string())
        .map_err(|e| e.to_string())
}

/// A sandbox setting's path (`sandbox.filesystem.*`): `/x` and `//x`
/// absolute, `~/x` in the home, `./x` and `x` relative to the project root
/// in project settings and to `~/.claude` in user settings.
pub(super) fn sandbox_path(spec: &str, user: bool) -> Result<String, String> {
    let p = if let Some(abs) = spec.strip_prefix("//") {
        format!("/{abs}")
    } else if spec.starts_with('/') || spec == "~" || spec.starts_with("~/") {
        spec.to_string()
    } else {
        let rel = spec.strip_prefix("./").unwrap_or(spec);
        if user {
            format!("~/.claude/{rel}")
        } else {
            rel.to_string()
        }
    };
    let p = p.strip_suffix("/**").unwrap_or(&p).trim_end_matches('/');
    let p = if p.is_empty() { "." } else { p };
    crate::normalize::FilePattern::parse(p)
        .map(|_| p.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn bash_forms_read_as_claude_code_reads_them() {
        let b = |s: &str| parse(&format!("Bash({s})"));
        assert_eq!(
            b("git add:*"),
            Ok(Rule::Bash(Command::Prefix(words(&["git", "add"]))))
        );
        assert_eq!(
            b("npm run *"),
            Ok(Rule::Bash(Command::Prefix(words(&["npm", "run"]))))
        );
        assert_eq!(b("ls"), Ok(Rule::Bash(Command::Exact(words(&["ls"])))));
        assert_eq!(
            b("git * main"),
            Ok(Rule::Bash(Command::Partial(words(&["git"]))))
        );
        assert_eq!(b("ls*"), Ok(Rule::Bash(Command::Partial(vec![]))));
        assert_eq!(b("* install"), Ok(Rule::Bash(Command::Partial(vec![]))));
        assert_eq!(
            b("git pus*"),
            Ok(Rule::Bash(Command::Partial(words(&["git"]))))
        );
        assert_eq!(
            b("echo \"hi\" x"),
            Ok(Rule::Bash(Command::Partial(words(&["echo"]))))
        );
        assert_eq!(parse("Bash"), Ok(Rule::BashAll));
        assert_eq!(b("*"), Ok(Rule::BashAll));
        assert!(b("git push :* ").is_err());
        assert!(b("git push :*").is_err());
        assert!(b("git:* push").is_err());
        assert!(parse("Bash(git push").is_err());
        assert!(parse(" Bash").is_err());
    }

    #[test]
    fn other_tools() {
        assert_eq!(
            parse("WebFetch(domain:GitHub.com)"),
            Ok(Rule::Fetch(Some("github.com".into())))
        );
        assert!(parse("WebFetch(github.com)").is_err());
        assert_eq!(
            parse("mcp__github__get_issue"),
            Ok(Rule::Mcp {
                server: "github".into(),
                tool: Some("get_issue".into())
            })
        );
        assert_eq!(
            parse("mcp__github__*"),
            Ok(Rule::Mcp {
                server: "github".into(),
                tool: None
            })
        );
        assert_eq!(
            parse("mcp__github"),
            Ok(Rule::Mcp {
                server: "github".into(),
                tool: None
            })
        );
        assert_eq!(parse("Agent"), Ok(Rule::Inert("Agent".into())));
        assert!(parse("Bashh(ls)").is_err_and(|e| e.contains("Bash")));
        assert!(parse("Read( ** /*token*)").is_err());
    }

    #[test]
    fn paths_take_claude_codes_anchors() {
        assert_eq!(rule_path("//etc/**").as_deref(), Ok("/etc/**"));
        assert_eq!(rule_path("~/.bashrc").as_deref(), Ok("~/.bashrc"));
        assert_eq!(rule_path("/docs/**").as_deref(), Ok("docs/**"));
        assert_eq!(rule_path("./src/**").as_deref(), Ok("src/**"));
        assert_eq!(rule_path(".env").as_deref(), Ok("**/.env"));
        assert_eq!(rule_path("secrets/").as_deref(), Ok("**/secrets"));
        assert_eq!(rule_path("src/gen/x").as_deref(), Ok("src/gen/x"));
        assert!(rule_path("../x").is_err());
        assert!(rule_path("~bob/x").is_err());
        assert_eq!(
            sandbox_path("/tmp/build", false).as_deref(),
            Ok("/tmp/build")
        );
        assert_eq!(sandbox_path("./out/**", false).as_deref(), Ok("out"));
        assert_eq!(
            sandbox_path("cache", true).as_deref(),
            Ok("~/.claude/cache")
        );
    }
}
