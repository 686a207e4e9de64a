//! Fail closed at the command line: a malformed query line is an error line,
//! never a decision.

use std::io::Write as _;

const OPEN: &str = "policy p {
  network { default allow }
  permissions { default allow }
  sandbox danger-full-access
  approvals never
}
";

#[test]
fn policyc_eval_answers_a_malformed_query_line_with_an_error_not_a_decision() {
    // An error line, exit code 3, and no decision printed
    // for it (in particular no allow).
    let dir = std::env::temp_dir().join(format!("gatehouse-fc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("open.policy");
    std::fs::write(&policy, OPEN).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(["eval", policy.to_str().unwrap(), "--queries", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(
                b"{\"kind\":\"teleport\",\"host\":\"a.example\"}\nconnect a.example:443\n",
            )?;
            child.wait_with_output()
        })
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with("{\"error\":") && !lines[0].contains("allow"),
        "{stdout}"
    );
    assert!(lines[1].contains("\"decision\":\"allow\""), "{stdout}");
}
