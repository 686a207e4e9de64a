//! `policyc hook codex|claude-code POLICY`: answers one permission hook
//! event of an agent harness (docs/agents.md). It reads the event from
//! standard input, turns the tool call into gatehouse queries
//! ([`map`]), decides them, logs the decision, and answers in the one form
//! that harness enforces ([`answer`]).
//!
//! It never fails open: unreadable input, an unknown tool, a policy that
//! does not load, any internal error, or no decision within the deadline
//! is a deny with its reason, in the harness's form, on standard output
//! (exit 0: both harnesses read a deny from the JSON).

mod answer;
mod guard;
mod map;
mod patch;

use std::io::Read as _;
use std::sync::mpsc;
use std::time::Duration;

use gatehouse::query::{Assessment, Query, ReviewOutcome, ReviewStatus};
use gatehouse::vocab::{AuthLevel, RiskLevel};
use gatehouse::{Outcome, Policy, PolicySet};

use crate::Exit;
use crate::cli::HookArgs;

pub use crate::cli::Harness;

impl Harness {
    /// The harness's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Harness::Codex => "codex",
            Harness::ClaudeCode => "claude-code",
        }
    }
}

/// The most bytes of one event read from standard input (a tool input
/// holds at most a file's text); more is refused.
const MAX_EVENT: u64 = 16 << 20;

/// Which hook fired.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event {
    /// Before a tool runs.
    PreToolUse,
    /// The harness would ask the user to approve.
    PermissionRequest,
}

/// What the hook answers.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// The policy allows the call.
    Allow,
    /// A person must approve it (reason).
    Ask(String),
    /// Refused (reason).
    Deny(String),
    /// The policy has nothing to say (the harness's own bookkeeping).
    Pass,
}

/// The ids a decision is logged with.
#[derive(Default)]
struct Ids {
    session: Option<String>,
    tool_use: Option<String>,
    tool: Option<String>,
    event: Option<String>,
}

/// What the deciding thread tells the waiting one.
enum Msg {
    /// The event was read: a late answer takes its form.
    Kind(Event),
    /// The answer.
    Done(Event, Verdict, Ids),
}

pub fn run(a: &HookArgs) -> Exit {
    let deadline = Duration::from_millis(a.deadline_ms.max(1));
    let harness = a.harness;
    let (tx, rx) = mpsc::channel();
    let args = a.clone();
    let worker = std::thread::Builder::new()
        .name("hook".into())
        .spawn(move || {
            let kind = tx.clone();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                decide(&args, &|e| {
                    let _ = kind.send(Msg::Kind(e));
                })
            }));
            let (e, v, ids) = result.unwrap_or_else(|_| {
                (
                    Event::PreToolUse,
                    Verdict::Deny("gatehouse: internal error while deciding".into()),
                    Ids::default(),
                )
            });
            let _ = tx.send(Msg::Done(e, v, ids));
        });
    let start = std::time::Instant::now();
    let mut event = Event::PreToolUse;
    let (event, verdict, ids) = match worker {
        Err(e) => (
            event,
            Verdict::Deny(format!("gatehouse: cannot start deciding: {e}")),
            Ids::default(),
        ),
        Ok(_) => loop {
            let left = deadline.saturating_sub(start.elapsed());
            match rx.recv_timeout(left) {
                Ok(Msg::Kind(e)) => event = e,
                Ok(Msg::Done(e, v, ids)) => break (e, v, ids),
                Err(_) => {
                    break (
                        event,
                        Verdict::Deny(format!(
                            "gatehouse: no decision within {} ms (the hook's deadline): refused",
                            deadline.as_millis()
                        )),
                        Ids::default(),
                    );
                }
            }
        },
    };
    if let Some(path) = a.log.as_deref() {
        if let Err(e) = log(path, harness, event, &verdict, &ids) {
            // The decision stands: a log that cannot be written never turns
            // a deny into an allow, nor the reverse.
            errln!("gatehouse hook: cannot write the decision log `{path}`: {e}");
        }
    }
    if let Verdict::Deny(why) | Verdict::Ask(why) = &verdict {
        errln!("{why}");
    }
    let text = answer::render(harness, event, &verdict);
    if !text.is_empty() {
        outln!("{text}");
    }
    // The worker may still be deciding (past the deadline): leave now.
    std::process::exit(0)
}

/// Reads the event, loads the policy, decides.
fn decide(a: &HookArgs, read: &dyn Fn(Event)) -> (Event, Verdict, Ids) {
    let mut ids = Ids::default();
    let mut raw = Vec::new();
    if let Err(e) = std::io::stdin().take(MAX_EVENT + 1).read_to_end(&mut raw) {
        return (
            Event::PreToolUse,
            Verdict::Deny(format!("gatehouse: cannot read the hook event: {e}")),
            ids,
        );
    }
    if raw.len() as u64 > MAX_EVENT {
        return (
            Event::PreToolUse,
            Verdict::Deny(format!(
                "gatehouse: the hook event is over {MAX_EVENT} bytes: refused"
            )),
            ids,
        );
    }
    let event: serde_json::Value = match serde_json::from_slice(&raw) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(_) => return deny_event("the hook event is not a JSON object", ids),
        Err(e) => return deny_event(&format!("the hook event is not JSON: {e}"), ids),
    };
    let field = |k: &str| event.get(k).and_then(|v| v.as_str()).map(str::to_string);
    ids.session = field("session_id");
    ids.tool_use = field("tool_use_id");
    ids.tool = field("tool_name");
    ids.event = field("hook_event_name");
    let kind = match ids.event.as_deref() {
        Some("PreToolUse") => Event::PreToolUse,
        Some("PermissionRequest") => Event::PermissionRequest,
        Some(other) => {
            let why = format!(
                "the hook event `{other}` is not one gatehouse answers (PreToolUse, PermissionRequest)"
            );
            return deny_event(&why, ids);
        }
        None => return deny_event("the hook event has no `hook_event_name`", ids),
    };
    read(kind);
    let Some(tool) = ids.tool.clone() else {
        return (
            kind,
            Verdict::Deny("gatehouse: the hook event names no tool".into()),
            ids,
        );
    };
    let Some(cwd) = field("cwd").filter(|c| c.starts_with('/')) else {
        return (
            kind,
            Verdict::Deny("gatehouse: the hook event has no absolute `cwd`".into()),
            ids,
        );
    };
    let input = event
        .get("tool_input")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    let mapped = match map::queries(a.harness, &tool, &input, &cwd) {
        Ok(m) => m,
        Err(map::Unmapped(why)) => return (kind, Verdict::Deny(format!("gatehouse: {why}")), ids),
    };
    let set = match load(a) {
        Ok(s) => s,
        Err(why) => return (kind, Verdict::Deny(format!("gatehouse: {why}")), ids),
    };
    let policy = match set.select(a.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            return (
                kind,
                Verdict::Deny(format!("gatehouse: no policy to decide with: {e}")),
                ids,
            );
        }
    };
    let queries = match mapped {
        map::Mapped::Nothing => return (kind, Verdict::Pass, ids),
        map::Mapped::Ask(mut q) => {
            if let Some(permission) = map::permission(a.harness, &tool) {
                q.insert(
                    0,
                    Query::Tool {
                        permission: permission.into(),
                    },
                );
            }
            q
        }
    };
    let guarded = guard::Guarded::new(a);
    if let Some(why) = queries.iter().find_map(|q| guarded.refuses(q)) {
        return (kind, Verdict::Deny(why), ids);
    }
    // The session's folder, bound once as `policyc eval` binds its
    // workspace (its `.git` pointer read), with `$HOME` for `~` rules.
    let mut ws = crate::load::Workspaces::new(Some(&cwd), std::env::var("HOME").ok());
    let verdict = match kind {
        Event::PreToolUse => pre_tool_use(&set, policy, &queries, &mut ws),
        Event::PermissionRequest => permission_request(&set, policy, &queries, &mut ws),
    };
    let verdict = match verdict {
        Verdict::Ask(why)
            if a.harness == Harness::ClaudeCode
                && !asks_a_person(field("permission_mode").as_deref()) =>
        {
            Verdict::Deny(format!(
                "{why} — this session's permission mode ({}) would run the call without asking anyone, so it is refused until a person approves it",
                field("permission_mode").unwrap_or_else(|| "not given".into())
            ))
        }
        v => v,
    };
    (kind, verdict, ids)
}

/// Whether Claude Code, in this permission mode, shows a person the
/// prompt an `ask` answer asks for. In `bypassPermissions`, `acceptEdits`
/// (for edits), `dontAsk` and `auto` it runs or refuses the call without a
/// person (seen with Claude Code 2.1.332: an `ask` for a `Write` in
/// `bypassPermissions` wrote the file), so there an `ask` is a deny; a mode
/// the hook does not know, or none, is taken as one that asks no one.
fn asks_a_person(mode: Option<&str>) -> bool {
    matches!(mode, Some("default" | "plan"))
}

fn deny_event(why: &str, ids: Ids) -> (Event, Verdict, Ids) {
    (
        Event::PreToolUse,
        Verdict::Deny(format!("gatehouse: {why}")),
        ids,
    )
}

/// The policy set, from POLICY files or folders or a compiled artifact.
fn load(a: &HookArgs) -> Result<PolicySet, String> {
    if let Some(path) = a.artifact.as_deref() {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
        let trusted = crate::keys::public_all(&a.trusted_key)
            .map_err(|_| "cannot read the trusted keys".to_string())?;
        return gatehouse::bundle::load(&bytes, &trusted)
            .map_err(|e| format!("the policy artifact `{path}` does not load: {e}"));
    }
    let sources = crate::load::sources(&a.paths, &[]).map_err(|e| match e {
        Exit::Usage(m) => m,
        _ => "the policy files cannot be read".into(),
    })?;
    // The diagnostics go to standard error, as `policyc check` prints them.
    crate::load::compiled(sources).map(|(_, set)| set).map_err(|_| {
        "the policy does not load (its errors are on standard error): every call is refused until it does".into()
    })
}

/// Every query must allow the call: the first deny decides, else the first
/// that needs a person, else allow.
fn pre_tool_use(
    set: &PolicySet,
    policy: &Policy,
    queries: &[Query],
    ws: &mut crate::load::Workspaces,
) -> Verdict {
    let mut ask = None;
    for q in queries {
        let d = policy.decide_in(q, Some(ws.for_query(q)));
        match d.outcome {
            Outcome::Allow | Outcome::Approved | Outcome::Live => {}
            Outcome::Ask | Outcome::Review => {
                ask.get_or_insert_with(|| reason(set, policy, q, &d, "needs a person's approval"));
            }
            Outcome::Cached | Outcome::Indexed => {
                return Verdict::Deny(reason(
                    set,
                    policy,
                    q,
                    &d,
                    "denied: the policy allows web search only from a cache or an index, and the harness searches live",
                ));
            }
            _ => return Verdict::Deny(reason(set, policy, q, &d, "denied")),
        }
    }
    match ask {
        Some(why) => Verdict::Ask(why),
        None => Verdict::Allow,
    }
}

/// The harness asks for an approval: the call must be one the policy does
/// not refuse, and the policy's guardian must approve each of its actions
/// with no model's assessment behind them — the hook says the risk is
/// high, the user's authorization unknown and the reviewer's outcome
/// allow (there is none), so that only a guardian that explicitly lets
/// such actions through (`authorize high with unknown`) approves; never
/// the spec's defaults for a missing assessment (low risk).
fn permission_request(
    set: &PolicySet,
    policy: &Policy,
    queries: &[Query],
    ws: &mut crate::load::Workspaces,
) -> Verdict {
    if let Verdict::Deny(why) = pre_tool_use(set, policy, queries, ws) {
        return Verdict::Deny(why);
    }
    for q in queries {
        // A tool permission was decided above; it is no action to review.
        if matches!(q, Query::Tool { .. }) {
            continue;
        }
        let review = Query::Review {
            action: Box::new(q.clone()),
            assessment: Assessment {
                risk: Some(RiskLevel::High),
                category: None,
                user_authorization: Some(AuthLevel::Unknown),
                outcome: Some(ReviewOutcome::Allow),
                status: Some(ReviewStatus::Ok),
            },
        };
        let d = policy.decide_in(&review, Some(ws.for_query(q)));
        if d.outcome != Outcome::Approved {
            return Verdict::Deny(reason(
                set,
                policy,
                q,
                &d,
                "not approved by the policy's guardian (no model assessed it: risk taken as high, authorization as unknown)",
            ));
        }
    }
    Verdict::Allow
}

/// `gatehouse: WHAT: QUERY (policy P, reason R, rule FILE:L:C)`.
fn reason(
    set: &PolicySet,
    policy: &Policy,
    q: &Query,
    d: &gatehouse::Decision,
    what: &str,
) -> String {
    let report = serde_json::to_value(set.report(policy, d)).unwrap_or_default();
    let text = |k: &str| {
        report
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string()
    };
    let rule = report
        .get("rule")
        .and_then(|r| {
            Some(format!(
                ", rule {}:{}:{}",
                r.get("file")?.as_str()?,
                r.get("line")?,
                r.get("column")?
            ))
        })
        .unwrap_or_default();
    let because = report
        .get("rule")
        .and_then(|r| r.get("because"))
        .and_then(|b| b.as_str())
        .map(|b| format!(": {b}"))
        .unwrap_or_default();
    format!(
        "gatehouse: {what}: {q} (policy `{}`, reason {}{rule}){because}",
        text("policy"),
        text("reason"),
    )
}

/// One JSON line a decision, appended.
fn log(
    path: &str,
    harness: Harness,
    event: Event,
    verdict: &Verdict,
    ids: &Ids,
) -> std::io::Result<()> {
    use std::io::Write as _;
    let (decision, reason) = match verdict {
        Verdict::Allow => ("allow", None),
        Verdict::Ask(r) => ("ask", Some(r.as_str())),
        Verdict::Deny(r) => ("deny", Some(r.as_str())),
        Verdict::Pass => ("pass", None),
    };
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let line = serde_json::json!({
        "time_ms": u64::try_from(time).unwrap_or(u64::MAX),
        "harness": harness.name(),
        "event": match event { Event::PreToolUse => "PreToolUse", Event::PermissionRequest => "PermissionRequest" },
        "session_id": ids.session,
        "tool_use_id": ids.tool_use,
        "tool": ids.tool,
        "decision": decision,
        "reason": reason,
    });
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut bytes = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    f.write_all(&bytes)
}
