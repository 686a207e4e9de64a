//! `policyc init --agent codex|claude-code`: puts `policyc hook` in front
//! of an agent harness by editing its settings (docs/agents.md).
//!
//! The edit is the same for both harnesses' JSON files: under `hooks`, for
//! `PreToolUse` and `PermissionRequest`, every handler that is gatehouse's
//! (its command's first word is a `policyc`, its second `hook`) is taken
//! out, groups left empty by that are dropped, and one group holding the
//! new handler is appended. Installing twice therefore changes nothing,
//! and `--remove` is the same edit without the append. A file that cannot
//! be read as the settings it should be is never overwritten: the command
//! stops and says where it is wrong. Every file is written whole to a
//! temporary file beside it and renamed over it (its mode kept), so a
//! harness starting at the same moment reads the old settings or the new,
//! never half of either.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Exit;
use crate::cli::{Harness, InitArgs};

/// The events the hook answers, in both harnesses.
const EVENTS: [&str; 2] = ["PreToolUse", "PermissionRequest"];

/// Seconds the harness gives the hook before it gives up on it. The hook
/// answers a deny at its own deadline (2 s) long before.
const HARNESS_TIMEOUT_S: u64 = 30;

/// Where the hook goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    User,
    Project,
    Managed,
}

/// Why a settings file cannot be edited.
#[derive(Debug, PartialEq)]
enum EditError {
    NotJson(String),
    Shape(String, &'static str),
    NotToml(String),
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const KEPT: &str = "init never overwrites what it cannot read";
        match self {
            EditError::NotJson(e) => write!(f, "it is not JSON ({e}); fix or move it, {KEPT}"),
            EditError::Shape(what, want) => write!(f, "`{what}` is not {want}; fix it, {KEPT}"),
            EditError::NotToml(e) => write!(f, "it is not TOML ({e}); fix or move it, {KEPT}"),
        }
    }
}

pub fn run(a: &InitArgs, harness: Harness, dir: &Path, policy: &Path) -> Exit {
    let scope = match (a.project, a.managed) {
        (true, _) => Scope::Project,
        (_, true) => Scope::Managed,
        _ => Scope::User,
    };
    let file = match settings_file(harness, scope, dir, &a.managed_root) {
        Ok(f) => f,
        Err(e) => return e,
    };
    if a.remove {
        return remove(harness, &file);
    }
    if !policy.exists() || a.force {
        match super::write_starter(a, dir, policy) {
            Exit::Ok => {}
            other => return other,
        }
    }
    let policy = std::fs::canonicalize(policy).unwrap_or_else(|_| policy.to_path_buf());
    let policy_s = policy.display().to_string();
    let set = match crate::load::sources(std::slice::from_ref(&policy_s), &[])
        .and_then(crate::load::compiled)
    {
        Ok((_, set)) => set,
        Err(e) => {
            errln!(
                "error: the hook would answer every tool call with a deny: `{policy_s}` does not build (above); nothing was installed"
            );
            return e;
        }
    };
    let pick = match set.select(None) {
        Ok(_) => None,
        Err(_) => match set.select(Some(&a.name)) {
            Ok(_) => Some(a.name.clone()),
            Err(e) => {
                return Exit::Usage(format!(
                    "`{policy_s}`: {e}; name the policy the hook asks with --name"
                ));
            }
        },
    };
    let policyc = match std::env::current_exe().and_then(std::fs::canonicalize) {
        Ok(p) => p,
        Err(e) => {
            errln!(
                "error: where this policyc is cannot be told ({e}); the hook needs its absolute path"
            );
            return Exit::Failed;
        }
    };
    let log = a.log.as_ref().map(|l| absolute(l));
    let command = hook_command(harness, &policyc, &policy, pick.as_deref(), log.as_deref());
    let edited = std::fs::read_to_string(&file)
        .map(Some)
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(None),
            _ => Err(e),
        })
        .map_err(|e| format!("cannot read `{}`: {e}", file.display()))
        .and_then(|old| {
            install(harness, old.as_deref(), &command)
                .map_err(|e| format!("`{}`: {e}", file.display()))
        });
    let text = match edited {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return Exit::Failed;
        }
    };
    if let Err(e) = write_atomically(&file, &text, scope) {
        errln!("error: cannot write `{}`: {e}", file.display());
        return Exit::Failed;
    }
    outln!(
        "gatehouse's hook is in {} for {}'s {}:\n  {command}",
        file.display(),
        harness_title(harness),
        EVENTS.join(" and ")
    );
    if harness == Harness::Codex && scope == Scope::Managed {
        let req = file.with_file_name("requirements.toml");
        if let Err(e) = pin_hooks(&req) {
            errln!("error: `{}`: {e}", req.display());
            return Exit::Failed;
        }
        outln!(
            "{} pins `[features] hooks = true`: no user setting switches the hook off",
            req.display()
        );
    }
    match (harness, scope) {
        (Harness::Codex, Scope::User | Scope::Project) => outln!(
            "Codex runs a hook from user or project settings only once it is trusted: review it in Codex's /hooks (`codex exec` runs it untrusted only with --dangerously-bypass-hook-trust){}; --managed needs no trust step",
            if scope == Scope::Project {
                ", and a project's settings only in a trusted project"
            } else {
                ""
            }
        ),
        (Harness::ClaudeCode, _) => outln!(
            "the hook blocks the tool call if it cannot be run (onFailure: block); Claude Code's own deny rules still apply after an allow"
        ),
        (Harness::Codex, Scope::Managed) => {}
    }
    Exit::Ok
}

fn harness_title(h: Harness) -> &'static str {
    match h {
        Harness::Codex => "Codex",
        Harness::ClaudeCode => "Claude Code",
    }
}

/// The settings file for the harness and scope.
fn settings_file(h: Harness, scope: Scope, dir: &Path, root: &Path) -> Result<PathBuf, Exit> {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .ok_or_else(|| Exit::Usage("$HOME is not an absolute path: the user's settings cannot be found (use --project or --managed)".into()))
    };
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    Ok(match (h, scope) {
        (Harness::Codex, Scope::User) => match env_dir("CODEX_HOME") {
            Some(d) => d.join("hooks.json"),
            None => home()?.join(".codex/hooks.json"),
        },
        (Harness::ClaudeCode, Scope::User) => match env_dir("CLAUDE_CONFIG_DIR") {
            Some(d) => d.join("settings.json"),
            None => home()?.join(".claude/settings.json"),
        },
        (Harness::Codex, Scope::Project) => dir.join(".codex/hooks.json"),
        (Harness::ClaudeCode, Scope::Project) => dir.join(".claude/settings.json"),
        (Harness::Codex, Scope::Managed) => root.join("etc/codex/hooks.json"),
        (Harness::ClaudeCode, Scope::Managed) => root.join("etc/claude-code/managed-settings.json"),
    })
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    std::env::current_dir()
        .map(|d| d.join(p))
        .unwrap_or_else(|_| p.to_path_buf())
}

/// The hook's command line, every word quoted for `sh -c` (both harnesses
/// run a hook's command through a shell; a path with a space must stay
/// one word). Absolute paths only: hooks run with the session's folder as
/// their working directory.
fn hook_command(
    h: Harness,
    policyc: &Path,
    policy: &Path,
    pick: Option<&str>,
    log: Option<&Path>,
) -> String {
    let mut words = vec![
        policyc.display().to_string(),
        "hook".to_string(),
        h.name().to_string(),
    ];
    if let Some(p) = pick {
        words.extend(["--policy".to_string(), p.to_string()]);
    }
    if let Some(l) = log {
        words.extend(["--log".to_string(), l.display().to_string()]);
    }
    words.push(policy.display().to_string());
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

/// One word for `sh`: as it is when it holds nothing a shell reads
/// specially, else in single quotes.
fn quote(w: &str) -> String {
    let plain = !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:=@%".contains(&b));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// Whether a handler is gatehouse's: a command whose first word is a
/// `policyc` and whose second is `hook`.
fn is_ours(handler: &Value) -> bool {
    let Some(cmd) = handler.get("command").and_then(Value::as_str) else {
        return false;
    };
    let words = first_words(cmd, 2);
    let mut w = words.iter();
    let first = w.next().map(String::as_str).unwrap_or_default();
    let named_policyc = Path::new(first).file_name().is_some_and(|n| n == "policyc");
    named_policyc && w.next().is_some_and(|s| s == "hook")
}

/// The first `n` words of a shell command line, as `sh` reads plain,
/// single-quoted, double-quoted and backslashed words; nothing (so: not
/// ours) once anything else (a `$`, a backquote, a redirection) comes first.
fn first_words(cmd: &str, n: usize) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = cmd.trim_start().chars().peekable();
    while words.len() < n {
        let mut word = String::new();
        while let Some(&c) = chars.peek() {
            match c {
                ' ' | '\t' => break,
                '\'' => {
                    chars.next();
                    loop {
                        match chars.next() {
                            Some('\'') => break,
                            Some(c) => word.push(c),
                            None => return Vec::new(),
                        }
                    }
                }
                '"' => {
                    chars.next();
                    loop {
                        match chars.next() {
                            Some('"') => break,
                            Some('\\') => match chars.next() {
                                Some(c) => word.push(c),
                                None => return Vec::new(),
                            },
                            Some('$' | '`') | None => return Vec::new(),
                            Some(c) => word.push(c),
                        }
                    }
                }
                '\\' => {
                    chars.next();
                    match chars.next() {
                        Some(c) => word.push(c),
                        None => return Vec::new(),
                    }
                }
                '$' | '`' | ';' | '&' | '|' | '<' | '>' | '(' | ')' | '\n' => return Vec::new(),
                c => {
                    chars.next();
                    word.push(c);
                }
            }
        }
        if word.is_empty() {
            break;
        }
        words.push(word);
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
    }
    words
}

/// The handler gatehouse puts in, in the harness's form.
fn handler(h: Harness, command: &str) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::from("command"));
    m.insert("command".into(), Value::from(command));
    m.insert("timeout".into(), Value::from(HARNESS_TIMEOUT_S));
    match h {
        // Claude Code runs a tool whose hook cannot be run (missing
        // command, crash, timeout) unless told to block it.
        Harness::ClaudeCode => {
            m.insert("onFailure".into(), Value::from("block"));
        }
        Harness::Codex => {
            m.insert(
                "statusMessage".into(),
                Value::from("gatehouse: checking the tool call"),
            );
        }
    }
    Value::Object(m)
}

/// The settings text with gatehouse's hook in (any earlier one of ours
/// replaced).
fn install(h: Harness, old: Option<&str>, command: &str) -> Result<String, EditError> {
    let mut doc = parse(old)?;
    let hooks = strip(&mut doc)?;
    for event in EVENTS {
        let mut group = Map::new();
        if h == Harness::ClaudeCode {
            group.insert("matcher".into(), Value::from("*"));
        }
        group.insert("hooks".into(), Value::Array(vec![handler(h, command)]));
        if let Some(groups) = hooks.get_mut(event).and_then(Value::as_array_mut) {
            groups.push(Value::Object(group));
        }
    }
    render(&doc)
}

/// The settings text without gatehouse's hook; `None` when there was none.
fn uninstall(old: &str) -> Result<Option<String>, EditError> {
    let mut doc = parse(Some(old))?;
    let before = doc.clone();
    let hooks = strip(&mut doc)?;
    // Events this edit emptied are dropped; `hooks` too when it is empty.
    for event in EVENTS {
        if hooks
            .get(event)
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            hooks.remove(event);
        }
    }
    if hooks.is_empty()
        && let Value::Object(top) = &mut doc
    {
        top.remove("hooks");
    }
    if doc == before {
        return Ok(None);
    }
    render(&doc).map(Some)
}

fn parse(old: Option<&str>) -> Result<Value, EditError> {
    let doc = match old {
        None => Value::Object(Map::new()),
        Some(t) if t.trim().is_empty() => Value::Object(Map::new()),
        Some(t) => serde_json::from_str(t).map_err(|e| EditError::NotJson(e.to_string()))?,
    };
    match doc {
        Value::Object(_) => Ok(doc),
        _ => Err(EditError::Shape("the file".into(), "a JSON object")),
    }
}

/// Takes every handler of ours out of `PreToolUse` and `PermissionRequest`
/// (dropping groups that held only ours) and returns the `hooks` object,
/// made when missing, with an array under each of those events.
fn strip(doc: &mut Value) -> Result<&mut Map<String, Value>, EditError> {
    let Value::Object(top) = doc else {
        return Err(EditError::Shape("the file".into(), "a JSON object"));
    };
    let hooks = top
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else {
        return Err(EditError::Shape("hooks".into(), "an object"));
    };
    for event in EVENTS {
        let groups = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(groups) = groups else {
            return Err(EditError::Shape(format!("hooks.{event}"), "a list"));
        };
        let mut kept = Vec::with_capacity(groups.len());
        for (i, g) in std::mem::take(groups).into_iter().enumerate() {
            let Value::Object(mut group) = g else {
                return Err(EditError::Shape(format!("hooks.{event}[{i}]"), "an object"));
            };
            let Some(Value::Array(handlers)) = group.get_mut("hooks") else {
                kept.push(Value::Object(group));
                continue;
            };
            let had = handlers.len();
            handlers.retain(|h| !is_ours(h));
            if handlers.is_empty() && had > 0 {
                continue;
            }
            kept.push(Value::Object(group));
        }
        *groups = kept;
    }
    Ok(hooks)
}

fn render(doc: &Value) -> Result<String, EditError> {
    serde_json::to_string_pretty(doc)
        .map(|t| t + "\n")
        .map_err(|e| EditError::NotJson(e.to_string()))
}

/// `--remove`: the hook taken out; a Codex hooks file left with nothing
/// in it is deleted (Codex reads an empty one as a mistake).
fn remove(h: Harness, file: &Path) -> Exit {
    let old = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            outln!(
                "no gatehouse hook in {} (there is no such file)",
                file.display()
            );
            return Exit::Ok;
        }
        Err(e) => {
            errln!("error: cannot read `{}`: {e}", file.display());
            return Exit::Failed;
        }
    };
    let text = match uninstall(&old) {
        Ok(Some(t)) => t,
        Ok(None) => {
            outln!("no gatehouse hook in {}", file.display());
            return Exit::Ok;
        }
        Err(e) => {
            errln!("error: `{}`: {e}", file.display());
            return Exit::Failed;
        }
    };
    let empty = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.as_object().map(Map::is_empty))
        .unwrap_or(false);
    let done = if h == Harness::Codex && empty {
        std::fs::remove_file(file)
    } else {
        write_atomically(file, &text, Scope::User)
    };
    if let Err(e) = done {
        errln!("error: cannot write `{}`: {e}", file.display());
        return Exit::Failed;
    }
    outln!("gatehouse's hook is out of {}", file.display());
    if h == Harness::Codex
        && file
            .parent()
            .is_some_and(|d| d.join("requirements.toml").exists())
    {
        outln!(
            "`[features] hooks = true` stays pinned in {}: other managed hooks may need it",
            file.with_file_name("requirements.toml").display()
        );
    }
    Exit::Ok
}

/// `[features] hooks = true` in Codex's requirements.toml, every other
/// line kept as it was.
fn pin_hooks(req: &Path) -> Result<(), String> {
    let old = match std::fs::read_to_string(req) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let text = pinned(&old).map_err(|e| e.to_string())?;
    if text != old {
        write_atomically(req, &text, Scope::Managed)
            .map_err(|e| format!("cannot write it: {e}"))?;
    }
    Ok(())
}

fn pinned(old: &str) -> Result<String, EditError> {
    let mut doc: toml_edit::DocumentMut = old
        .parse()
        .map_err(|e: toml_edit::TomlError| EditError::NotToml(e.to_string()))?;
    let features = doc
        .entry("features")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
    let Some(features) = features.as_table_like_mut() else {
        return Err(EditError::Shape("features".into(), "a table"));
    };
    features.insert("hooks", toml_edit::value(true));
    Ok(doc.to_string())
}

/// Writes `text` to a temporary file beside `file`, then renames it over
/// `file`: readers see the old file or the new one. The old file's mode
/// is kept; a new one is 0644 (0600 in a user's own folder, which may
/// hold other secrets of theirs).
fn write_atomically(file: &Path, text: &str, scope: Scope) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mode = match std::fs::metadata(file) {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(_) if scope == Scope::User => 0o600,
        Err(_) => 0o644,
    };
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.gatehouse-{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
