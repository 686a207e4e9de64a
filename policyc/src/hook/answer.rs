//! A verdict in the one form each harness enforces (docs/agents.md).
//!
//! Codex enforces only a deny, and only as `permissionDecision: "deny"`
//! with a non-empty reason: its `ask` and `allow` let the tool run. So in
//! Codex an `ask` of the policy is a deny whose reason says a person must
//! approve, and an `allow` prints nothing (Codex's own rules still apply).
//! Claude Code enforces `allow`, `ask` (a prompt; a block in `-p` mode) and
//! `deny`. A permission request is answered `allow` or `deny` in both.

use super::{Event, Harness, Verdict};

/// The text for standard output; empty for nothing.
pub fn render(harness: Harness, event: Event, verdict: &Verdict) -> String {
    let json = match (event, verdict) {
        (_, Verdict::Pass) => return String::new(),
        (Event::PreToolUse, Verdict::Allow) => match harness {
            Harness::Codex => return String::new(),
            Harness::ClaudeCode => pre("allow", "gatehouse: allowed by the policy"),
        },
        (Event::PreToolUse, Verdict::Ask(why)) => match harness {
            Harness::Codex => pre(
                "deny",
                &format!(
                    "{why} — Codex cannot ask from this hook, so it is refused until a person runs it or changes the policy"
                ),
            ),
            Harness::ClaudeCode => pre("ask", why),
        },
        (Event::PreToolUse, Verdict::Deny(why)) => pre("deny", why),
        (Event::PermissionRequest, Verdict::Allow) => serde_json::json!({
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": { "behavior": "allow" }
            }
        }),
        (Event::PermissionRequest, Verdict::Ask(why) | Verdict::Deny(why)) => serde_json::json!({
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": { "behavior": "deny", "message": non_empty(why) }
            }
        }),
    };
    json.to_string()
}

fn pre(decision: &str, why: &str) -> serde_json::Value {
    serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": non_empty(why)
        }
    })
}

/// Codex ignores a deny without a reason: there is always one.
fn non_empty(why: &str) -> &str {
    if why.trim().is_empty() {
        "gatehouse: refused"
    } else {
        why
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn parsed(h: Harness, e: Event, v: &Verdict) -> serde_json::Value {
        serde_json::from_str(&render(h, e, v)).unwrap()
    }

    #[test]
    fn every_deny_carries_a_reason_in_the_enforced_form() {
        for h in [Harness::Codex, Harness::ClaudeCode] {
            let v = parsed(h, Event::PreToolUse, &Verdict::Deny(String::new()));
            assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
            assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
            assert!(
                !v["hookSpecificOutput"]["permissionDecisionReason"]
                    .as_str()
                    .unwrap()
                    .is_empty()
            );
            let v = parsed(h, Event::PermissionRequest, &Verdict::Deny("no".into()));
            assert_eq!(v["hookSpecificOutput"]["decision"]["behavior"], "deny");
            assert_eq!(v["hookSpecificOutput"]["decision"]["message"], "no");
        }
    }

    #[test]
    fn ask_is_a_deny_in_codex_and_a_prompt_in_claude_code() {
        let v = parsed(
            Harness::Codex,
            Event::PreToolUse,
            &Verdict::Ask("a person".into()),
        );
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        assert!(
            v["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap()
                .starts_with("a person")
        );
        let v = parsed(
            Harness::ClaudeCode,
            Event::PreToolUse,
            &Verdict::Ask("a person".into()),
        );
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "ask");
        assert_eq!(
            render(Harness::Codex, Event::PreToolUse, &Verdict::Allow),
            ""
        );
        assert_eq!(
            render(Harness::ClaudeCode, Event::PreToolUse, &Verdict::Pass),
            ""
        );
        let v = parsed(Harness::ClaudeCode, Event::PreToolUse, &Verdict::Allow);
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "allow");
    }
}
