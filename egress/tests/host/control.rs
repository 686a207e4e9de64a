//! Host mode's control API end to end: a running sandbox's policy put,
//! the Zoo calls, tool calls decided, sandboxes removed and added, each in
//! force at once (docs/host.md, "Control API").

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::world::World;

#[test]
fn the_control_api_changes_a_running_sandbox_at_once() {
    let w = World::new("c");
    // Only root (the daemon's user) may use the socket.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(w.dir.join("control.sock"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let (code, body) = w.control("GET", "/v1/sandboxes", None);
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("sandbox-one") && body.contains("10.200.3.2"),
        "{body}"
    );

    // An open TLS tunnel to a name the next policy denies is closed when
    // that policy is put.
    let mut tunnel = Command::new("ip")
        .args(["netns", "exec", &w.sandboxes[0].0])
        .args(["openssl", "s_client", "-quiet", "-connect", "11.0.0.1:443"])
        .args(["-servername", "allowed.test", "-CAfile", "ca.pem"])
        .current_dir(&w.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        tunnel.try_wait().unwrap().is_none(),
        "the tunnel did not open"
    );
    let (code, body) = w.control(
        "PUT",
        "/v1/sandboxes/sandbox-one/policy",
        Some("policy one {\n  network {\n    allow domain other.test\n  }\n}\n"),
    );
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("revision"), "{body}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while tunnel.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let closed = tunnel.try_wait().unwrap().is_some();
    let _ = tunnel.kill();
    assert!(closed, "the tunnel to a now-denied name stayed open");
    // In force for the next connection.
    assert_eq!(w.curl(1, "http://allowed.test/").0, 6);
    let (code, out) = w.curl(1, "http://other.test/");
    assert!(code == 0 && out.contains("origin other.test"), "{out}");
    // A policy that does not build is refused with its diagnostics, and
    // the one in force stays.
    let (code, body) = w.control(
        "PUT",
        "/v1/sandboxes/sandbox-one/policy",
        Some("policy one {\n  network {\n    allow domian x.test\n  }\n}\n"),
    );
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("domian"), "{body}");
    assert_eq!(w.curl(1, "http://other.test/").0, 0);

    // The Zoo calls, as the seed spells them.
    let zoo = [
        ("network", r#"{"default": "deny", "allow_dns": true}"#),
        ("rules", r#"{"kind": "domain", "value": "denied.test"}"#),
        (
            "permissions",
            r#"{"permission": "shell", "action": "exec", "effect": "deny"}"#,
        ),
        ("apps", r#"{"deny": ["firefox"]}"#),
    ];
    for (endpoint, body) in zoo {
        let (code, answer) = w.control(
            "POST",
            &format!("/v1/sandboxes/sandbox-two/{endpoint}"),
            Some(body),
        );
        assert_eq!(code, 200, "{endpoint}: {answer}");
    }
    let (code, out) = w.curl(2, "http://denied.test/");
    assert!(code == 0 && out.contains("origin denied.test"), "{out}");
    assert_eq!(w.curl(2, "http://other.test/").0, 6);
    // The rest of docs/host.md's vocabulary: an address with a comment, a
    // prefix denied; a value outside it is refused (422) and the policy in
    // force stays.
    for body in [
        r#"{"kind":"ip","value":"10.9.9.9","effect":"allow","comment":"the build cache"}"#,
        r#"{"kind":"cidr","value":"192.168.0.0/16","effect":"deny"}"#,
    ] {
        let (code, answer) = w.control("POST", "/v1/sandboxes/sandbox-two/rules", Some(body));
        assert_eq!(code, 200, "{body}: {answer}");
    }
    for (endpoint, body) in [
        ("rules", r#"{"kind":"url","value":"https://x.test/"}"#),
        (
            "rules",
            r#"{"kind":"domain","value":"x.test","effect":"block"}"#,
        ),
        (
            "rules",
            r#"{"kind":"domain","value":"x.test","colour":"red"}"#,
        ),
        ("network", r#"{"default":"maybe"}"#),
        ("permissions", r#"{"permission":"shell","action":"exec"}"#),
    ] {
        let (code, answer) = w.control(
            "POST",
            &format!("/v1/sandboxes/sandbox-two/{endpoint}"),
            Some(body),
        );
        assert_eq!(code, 422, "{body}: {answer}");
    }
    let (code, out) = w.curl(2, "http://denied.test/");
    assert!(code == 0 && out.contains("origin denied.test"), "{out}");
    // `deny` of the domain `*`: no name is allowed any more.
    let (code, answer) = w.control(
        "POST",
        "/v1/sandboxes/sandbox-two/rules",
        Some(r#"{"kind":"domain","value":"*","effect":"deny"}"#),
    );
    assert_eq!(code, 200, "{answer}");
    assert_ne!(w.curl(2, "http://denied.test/").0, 0);
    // Tool calls are decided for the sandbox: a denied one is 403.
    let (code, body) = w.control(
        "POST",
        "/v1/sandboxes/sandbox-two/decide",
        Some(r#"{"kind": "tool", "permission": "shell.exec"}"#),
    );
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("\"decision\":\"deny\"") && body.contains("denied_by_rule"),
        "{body}"
    );
    let (code, body) = w.control(
        "POST",
        "/v1/sandboxes/sandbox-two/decide",
        Some(r#"{"kind": "tool", "permission": "screen.read"}"#),
    );
    assert_eq!(code, 200, "{body}");
    let (code, _) = w.control(
        "POST",
        "/v1/sandboxes/sandbox-two/decide",
        Some(r#"{"kind": "app", "program": "firefox"}"#),
    );
    assert_eq!(code, 403);
    assert_eq!(
        w.control("POST", "/v1/sandboxes/nobody/decide", Some("{}"))
            .0,
        404
    );

    // Removed, a sandbox's address is no one's: denied everything. Added
    // again under another id with its own policy, it is in force at once,
    // and the table file holds it (a restarted daemon adopts it).
    assert_eq!(
        w.control("DELETE", "/v1/sandboxes/sandbox-three", None).0,
        204
    );
    assert_ne!(w.curl(3, "http://denied.test/").0, 0);
    assert_ne!(
        w.curl(3, "--resolve denied.test:80:11.0.0.2 http://denied.test/")
            .0,
        0
    );
    let new = serde_json::json!({
        "id": "sandbox-new",
        "addresses": ["10.200.3.2"],
        "policy": "policy fresh {\n  network {\n    allow domain other.test\n  }\n}\n",
    })
    .to_string();
    let (code, body) = w.control("POST", "/v1/sandboxes", Some(&new));
    assert_eq!(code, 201, "{body}");
    let (code, out) = w.curl(3, "http://other.test/");
    assert!(code == 0 && out.contains("origin other.test"), "{out}");
    let table = std::fs::read_to_string(w.dir.join("sandboxes.toml")).unwrap();
    assert!(
        table.contains("sandbox-new") && !table.contains("sandbox-three"),
        "{table}"
    );
    assert_eq!(w.control("POST", "/v1/sandboxes", Some(&new)).0, 409);
}
