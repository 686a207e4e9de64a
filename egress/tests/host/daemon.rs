//! Host mode's daemon under the signals operators send (issue 53).

use std::process::Command;
use std::time::Duration;

use super::world::{World, daemon_err};

/// Item 7: SIGHUP (logrotate, a reload command) reloads the table and the
/// policies, as the single-policy daemon does; it never stops the daemon,
/// so no sandbox is cut off.
#[test]
fn sighup_reloads_and_never_stops_the_daemon() {
    let mut w = World::new("d7");
    let pid = w.daemon.as_ref().unwrap().id().to_string();
    // A policy edit, put in force by the signal (and by the poll too).
    let policy = std::fs::read_to_string(w.dir.join("two.policy")).unwrap();
    std::fs::write(
        w.dir.join("two.policy"),
        policy.replace("allow domain other.test", "allow domain allowed.test"),
    )
    .unwrap();
    for _ in 0..2 {
        let sent = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
        assert!(sent.success());
        std::thread::sleep(Duration::from_millis(300));
    }
    let d = w.daemon.as_mut().unwrap();
    assert!(
        d.try_wait().unwrap().is_none(),
        "SIGHUP stopped the daemon:\n{}",
        daemon_err(&w)
    );
    assert!(daemon_err(&w).contains("SIGHUP"), "{}", daemon_err(&w));
    let (_, out, _) = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    assert_eq!(out.trim(), "11.0.0.1");
    let (_, out, _) = w.sh(2, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    assert_eq!(out.trim(), "11.0.0.1", "the edited policy is in force");
}

/// A policy file or a table another user could change is never taken
/// (`StrictModes`, docs/host.md "Files the daemon trusts"): an edit to a
/// policy made writable by everyone stays out of force, the policy in
/// force stays, until the file is the daemon's alone again; a table in a
/// directory everyone can write stops the daemon at start, saying how to
/// fix it.
#[test]
fn files_another_user_could_change_are_never_taken() {
    use std::os::unix::fs::PermissionsExt as _;
    let chmod = |p: &std::path::Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let mut w = World::new("d9");
    let pid = w.daemon.as_ref().unwrap().id().to_string();
    let two = w.dir.join("two.policy");
    let policy = std::fs::read_to_string(&two).unwrap();
    std::fs::write(
        &two,
        policy.replace("allow domain other.test", "allow domain allowed.test"),
    )
    .unwrap();
    chmod(&two, 0o666);
    let hup = || {
        let sent = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
        assert!(sent.success());
        std::thread::sleep(Duration::from_millis(400));
    };
    hup();
    let dig = |k| {
        w.sh(k, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test")
            .1
    };
    assert_eq!(
        dig(2).trim(),
        "",
        "an edit anyone could have made is in force"
    );
    assert!(
        daemon_err(&w).contains("is writable by others"),
        "{}",
        daemon_err(&w)
    );
    assert_eq!(dig(1).trim(), "11.0.0.1", "the other policy still decides");
    chmod(&two, 0o644);
    hup();
    assert_eq!(dig(2).trim(), "11.0.0.1", "the daemon's own file again");
    // The table's directory writable by everyone: no start.
    if let Some(mut d) = w.daemon.take() {
        let _ = d.kill();
        let _ = d.wait();
    }
    let _ = std::fs::remove_file(w.dir.join("control.sock"));
    chmod(&w.dir, 0o777);
    let out = Command::new("ip")
        .args(["netns", "exec", &w.host.0])
        .arg(env!("CARGO_BIN_EXE_gatehouse-egress"))
        .args(["host", "--sandboxes"])
        .arg(w.dir.join("sandboxes.toml"))
        .args(["--upstream-dns", "11.0.0.53:53"])
        .output()
        .unwrap();
    chmod(&w.dir, 0o755);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("writable by") && err.contains("chmod +t"),
        "{err}"
    );
}

/// `/metrics` of the daemon, read from inside the host namespace.
fn metric(w: &World, line_start: &str) -> u64 {
    let out = w.host.exec(
        "curl",
        &["-s", "--max-time", "5", "http://127.0.0.1:9464/metrics"],
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Items 8, 10, 11 and 12: what the control API writes keeps the modes it
/// found and writes new files 0600; a refused POST leaves no file; a PUT
/// starts the Zoo document afresh; a sandbox's counters survive the first
/// PUT (which moves its policy into the state directory).
#[test]
fn the_control_api_keeps_modes_leaves_nothing_behind_and_keeps_counts() {
    use std::os::unix::fs::PermissionsExt as _;
    let w = World::new("d8");
    let table = w.dir.join("sandboxes.toml");
    std::fs::set_permissions(&table, std::fs::Permissions::from_mode(0o600)).unwrap();
    let questions = "gatehouse_egress_sandbox_dns_questions_total{sandbox=\"sandbox-one\"}";
    for _ in 0..3 {
        let _ = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    }
    let before = metric(&w, questions);
    assert!(before >= 3, "{before}");
    // A Zoo call that allows denied.test, then a PUT without it, then a
    // Zoo call about something else: the PUT started the document afresh.
    let zoo = |body: &str| w.control("POST", "/v1/sandboxes/sandbox-one/rules", Some(body));
    assert_eq!(zoo(r#"{"kind": "domain", "value": "denied.test"}"#).0, 200);
    w.put_policy(
        "sandbox-one",
        "policy one {\n  network {\n    default deny\n    allow domain allowed.test\n  }\n}\n",
    );
    assert_eq!(zoo(r#"{"kind": "domain", "value": "other.test"}"#).0, 200);
    let (_, out, _) = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 denied.test");
    assert!(
        out.trim().is_empty(),
        "a PUT's replaced grant came back with the next Zoo call: {out}"
    );
    // Modes: the table kept 0600; the stored policy is 0600.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&table), 0o600);
    let state = w.dir.join("gatehouse-state");
    for e in std::fs::read_dir(&state).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }
    // Counters survive the PUT that moved the policy.
    let _ = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    let after = metric(&w, questions);
    assert!(after > before, "counters restarted: {before} then {after}");
    // A refused POST (an address already sandbox two's) leaves no file.
    let refused = serde_json::json!({
        "id": "sandbox-dup",
        "addresses": ["10.200.2.2"],
        "policy": "policy d {\n  network {\n    allow domain other.test\n  }\n}\n",
    })
    .to_string();
    let (code, body) = w.control("POST", "/v1/sandboxes", Some(&refused));
    assert!(code >= 400, "{code} {body}");
    let left: Vec<String> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("sandbox-dup"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A table named by a relative path (`--sandboxes sub/sandboxes.toml`, no
/// `--state`): the policies the API keeps are found again, on every change
/// and after a restart (the state folder is made absolute; it was taken
/// relative to the table's folder, `sub/sub/...`, and refused).
#[test]
fn a_relative_table_keeps_what_the_api_stores() {
    let api = Api::new("relative", "networks = [\"10.0.0.0/8\"]\n");
    let policy = "policy p {\n  network {\n    allow domain a.test\n  }\n}\n";
    let d = api.start();
    let add = r#"{"id":"s1","addresses":["10.1.0.2"],"policy":"policy p {\n  network off\n}\n"}"#;
    assert_eq!(api.call("POST", "/v1/sandboxes", add), 201);
    assert_eq!(api.call("PUT", "/v1/sandboxes/s1/policy", policy), 200);
    assert_eq!(api.call("PUT", "/v1/sandboxes/s1/policy", policy), 200);
    let table = api.table();
    let kept = api.dir.join("sub/gatehouse-state/s1.policy");
    assert!(table.contains(&kept.display().to_string()), "{table}");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), policy);
    // A restarted daemon adopts it.
    drop(d);
    let _d = api.start();
    assert_eq!(api.call("PUT", "/v1/sandboxes/s1/policy", policy), 200);
}

/// Issue 58: the API changes the table file as little as it can — a
/// sandbox added is added at its end, one changed or removed is cut out
/// of the file as the daemon wrote it — and the file is always the table
/// in force: the same entries, in order, as a rewrite would spell them; a
/// file edited by hand since is read and rewritten whole; a restarted
/// daemon adopts every change.
#[test]
fn the_table_file_follows_every_change_added_cut_out_or_rewritten() {
    let api = Api::new(
        "splice",
        "networks = [\"10.0.0.0/8\"]\n# by hand\n[[sandbox]]\nid = \"s0\"\naddresses = [\"10.1.0.1\"]\npolicy = \"p0.policy\"\n",
    );
    let policy =
        |name: &str| format!("policy p {{\n  network {{\n    allow domain {name}.test\n  }}\n}}\n");
    std::fs::write(api.dir.join("sub/p0.policy"), policy("zero")).unwrap();
    let d = api.start();
    let add = |id: &str, k: u8| {
        let body = serde_json::json!({"id": id, "addresses": [format!("10.1.0.{k}")], "policy": policy(id)});
        assert_eq!(
            api.call("POST", "/v1/sandboxes", &body.to_string()),
            201,
            "POST {id}"
        );
    };
    // The ids in the file, in order, and the file read as TOML.
    let ids = || -> Vec<String> {
        let text = api.table();
        let v: toml::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        v.get("sandbox")
            .and_then(|s| s.as_array())
            .map(|a| {
                a.iter()
                    .map(|e| e["id"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // A file is rewritten whole by a rename (a new inode); added to, it
    // keeps its inode.
    let inode = || {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(api.dir.join("sub/sandboxes.toml"))
            .unwrap()
            .ino()
    };
    let by_hand = inode();
    add("s1", 2); // the file was written by hand: rewritten whole
    assert!(!api.table().contains("# by hand"));
    assert_ne!(inode(), by_hand);
    let written = inode();
    add("s10", 3); // added at the end
    add("s11", 4);
    assert_eq!(inode(), written, "added to, not rewritten");
    assert_eq!(ids(), ["s0", "s1", "s10", "s11"]);
    // s0's policy moves into the state directory: its entry replaced in place.
    assert_eq!(
        api.call("PUT", "/v1/sandboxes/s0/policy", &policy("moved")),
        200
    );
    assert!(
        api.table().contains("gatehouse-state/s0.policy"),
        "{}",
        api.table()
    );
    assert_eq!(ids(), ["s0", "s1", "s10", "s11"]);
    // Cut out: the middle one, then the last (never a longer id it prefixes).
    assert_eq!(api.call("DELETE", "/v1/sandboxes/s1", ""), 204);
    assert_eq!(api.call("DELETE", "/v1/sandboxes/s11", ""), 204);
    assert_eq!(ids(), ["s0", "s10"]);
    // Edited by hand since: read and rewritten whole, the edit kept.
    let edited = api.table()
        + "\n[[sandbox]]\nid = \"s5\"\naddresses = [\"10.1.0.5\"]\npolicy = \"p0.policy\"\n";
    std::fs::write(api.dir.join("sub/sandboxes.toml"), edited).unwrap();
    add("s6", 6);
    assert_eq!(ids(), ["s0", "s10", "s5", "s6"]);
    assert_eq!(api.call("DELETE", "/v1/sandboxes/s10", ""), 204);
    assert_eq!(ids(), ["s0", "s5", "s6"]);
    // The file as written is the table a restarted daemon puts in force,
    // and takes as its own: the next sandbox is added to it.
    drop(d);
    let _d = api.start();
    let written = inode();
    add("s7", 7);
    assert_eq!(inode(), written, "added to after a restart");
    assert_eq!(ids(), ["s0", "s5", "s6", "s7"]);
    for (id, code) in [
        ("s0", 200),
        ("s5", 200),
        ("s6", 200),
        ("s1", 404),
        ("s10", 404),
        ("s11", 404),
    ] {
        assert_eq!(
            api.call(
                "PUT",
                &format!("/v1/sandboxes/{id}/policy"),
                &policy("again")
            ),
            code,
            "{id}"
        );
    }
}

/// Issue 58: a policy file is read through the first sandbox naming it;
/// when that sandbox leaves, the next change of the file is still put in
/// force for every other sandbox naming it.
#[test]
fn a_shared_file_still_reloads_after_the_sandbox_it_was_read_through_left() {
    let entry = |id: &str, k: u8| {
        format!(
            "\n[[sandbox]]\nid = \"{id}\"\naddresses = [\"10.1.0.{k}\"]\npolicy = \"p0.policy\"\n"
        )
    };
    let api = Api::new(
        "first-left",
        &format!(
            "networks = [\"10.0.0.0/8\"]\n{}{}",
            entry("s0", 1),
            entry("s1", 2)
        ),
    );
    let policy =
        |name: &str| format!("policy p {{\n  network {{\n    allow domain {name}.test\n  }}\n}}\n");
    std::fs::write(api.dir.join("sub/p0.policy"), policy("zero")).unwrap();
    let _d = api.start();
    let decide = |host: &str| {
        let q = serde_json::json!({"kind": "connect", "host": host, "port": 443}).to_string();
        api.call("POST", "/v1/sandboxes/s1/decide", &q)
    };
    assert_eq!(decide("zero.test"), 200);
    assert_eq!(decide("other.test"), 403);
    assert_eq!(api.call("DELETE", "/v1/sandboxes/s0", ""), 204);
    std::fs::write(api.dir.join("sub/p0.policy"), policy("other")).unwrap();
    let mut seen = false;
    for _ in 0..200 {
        if decide("other.test") == 200 {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let err = std::fs::read_to_string(api.dir.join("daemon.err")).unwrap_or_default();
    assert!(seen, "s1 never took the edited file: {err}");
    assert_eq!(decide("zero.test"), 403);
}

/// A host-mode daemon without nftables in a folder of its own, its table
/// at `sub/sandboxes.toml` (relative), its control socket `c.sock`.
struct Api {
    dir: std::path::PathBuf,
}

/// The daemon, killed however the test ends.
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Api {
    fn new(name: &str, table: &str) -> Api {
        let dir =
            std::env::temp_dir().join(format!("gatehouse-host-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/sandboxes.toml"), table).unwrap();
        Api { dir }
    }

    fn table(&self) -> String {
        std::fs::read_to_string(self.dir.join("sub/sandboxes.toml")).unwrap()
    }

    /// Starts the daemon and waits until its API answers (up to 30 s: on
    /// a loaded CI machine a start has taken over 10).
    fn start(&self) -> Daemon {
        let _ = std::fs::remove_file(self.dir.join("c.sock"));
        let mut d = Daemon(
            std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse-egress"))
                .current_dir(&self.dir)
                .args(["host", "--sandboxes", "sub/sandboxes.toml", "--no-nftables"])
                .args(["--transparent-port", "0", "--dns-port", "0"])
                .args(["--upstream-dns", "127.0.0.1:9", "--control", "c.sock"])
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(self.dir.join("daemon.err")).unwrap())
                .spawn()
                .unwrap(),
        );
        let err = || std::fs::read_to_string(self.dir.join("daemon.err")).unwrap_or_default();
        for _ in 0..600 {
            if self.dir.join("c.sock").exists() && self.call("GET", "/v1/sandboxes", "") == 200 {
                return d;
            }
            if let Ok(Some(status)) = d.0.try_wait() {
                panic!("the daemon ended ({status}): {}", err());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the daemon did not start in 30 s: {}", err());
    }

    /// One call of the control API; its HTTP status.
    fn call(&self, method: &str, path: &str, body: &str) -> u16 {
        let out = std::process::Command::new("curl")
            .current_dir(&self.dir)
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "10",
            ])
            .args([
                "-X",
                method,
                "--unix-socket",
                "c.sock",
                "--data-binary",
                body,
            ])
            .arg(format!("http://h{path}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Item 9: `--control PATH` never replaces a file that is not a socket,
/// and never takes the socket of a daemon that answers on it; a stale
/// socket (nobody answers) is reused.
#[test]
fn the_control_socket_is_never_taken_from_a_file_or_a_running_daemon() {
    let dir = std::env::temp_dir().join(format!("gatehouse-control-bind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sandboxes.toml");
    std::fs::write(&file, "precious\n").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let e = gatehouse_egress::host::control::bind(&file).unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious\n");
        let sock = dir.join("control.sock");
        let live = gatehouse_egress::host::control::bind(&sock).unwrap();
        let e = gatehouse_egress::host::control::bind(&sock).unwrap_err();
        assert!(e.to_string().contains("another daemon"), "{e}");
        drop(live);
        // Nobody answers now: the stale socket is reused.
        assert!(gatehouse_egress::host::control::bind(&sock).is_ok());
    });
}

/// Item 3: on ports 443 and 80 the address path is never taken — a
/// ClientHello without a server name, and an HTTP/1.0 request without
/// `Host`, to an address the sandbox's resolver did answer for an allowed
/// name, are refused rather than passed by address.
#[test]
fn ports_80_and_443_never_take_the_address_path() {
    let w = World::new("d3");
    let (_, out, _) = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    assert_eq!(out.trim(), "11.0.0.1");
    // The control: with the name, both pass.
    let (_, out, _) = w.sh(
        1,
        "echo | timeout 8 openssl s_client -connect 11.0.0.1:443 -servername allowed.test -CAfile ca.pem 2>&1",
    );
    assert!(out.contains("BEGIN CERTIFICATE"), "{out}");
    let (_, out, _) = w.sh(
        1,
        "exec 3<>/dev/tcp/11.0.0.1/80; printf 'GET / HTTP/1.0\\r\\nHost: allowed.test\\r\\n\\r\\n' >&3; timeout 3 cat <&3",
    );
    assert!(out.contains("origin allowed.test"), "{out}");
    // Without it, neither.
    let (_, out, _) = w.sh(
        1,
        "echo | timeout 8 openssl s_client -connect 11.0.0.1:443 -noservername -CAfile ca.pem 2>&1",
    );
    assert!(
        !out.contains("BEGIN CERTIFICATE") && out.contains("no peer certificate available"),
        "a ClientHello without a server name was passed by address:\n{out}"
    );
    let (_, out, _) = w.sh(
        1,
        "exec 3<>/dev/tcp/11.0.0.1/80; printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; timeout 3 cat <&3",
    );
    assert!(
        !out.contains("origin allowed.test"),
        "an HTTP/1.0 request without Host was passed by address:\n{out}"
    );
}

/// Item 4: a connection re-targeted to the vetted address is recorded with
/// what was dialled beside what was asked.
#[test]
fn the_record_of_a_retargeted_connection_names_what_was_dialled() {
    let w = World::new("d4");
    let (_, out, _) = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    assert_eq!(out.trim(), "11.0.0.1");
    // Asked: other.test's address, with allowed.test's name.
    let (_, out, _) = w.sh(
        1,
        "echo | timeout 8 openssl s_client -connect 11.0.0.4:443 -servername allowed.test -CAfile ca.pem 2>&1",
    );
    assert!(out.contains("BEGIN CERTIFICATE"), "{out}");
    std::thread::sleep(Duration::from_millis(300));
    let log = std::fs::read_to_string(w.dir.join("decisions.jsonl")).unwrap_or_default();
    let line = log
        .lines()
        .find(|l| l.contains("transparent 11.0.0.4:443"))
        .unwrap_or_else(|| panic!("no record of the connection:\n{log}"));
    assert!(line.contains("dialled 11.0.0.1:443"), "{line}");
}

/// Holds `n` TCP connections to `to` (Python's spelling of an address)
/// from sandbox `k`, sending nothing, and prints how many the daemon
/// closed at once (over a share) after a moment.
fn held_closed(w: &World, k: usize, family: &str, to: &str, n: usize) -> usize {
    let script = format!(
        "import socket, select, time\nss = []\nfor _ in range({n}):\n    s = socket.socket(socket.{family})\n    s.connect({to})\n    ss.append(s)\ntime.sleep(0.5)\nr, _, _ = select.select(ss, [], [], 0.2)\nprint(sum(1 for s in r if s.recv(1) == b''))\n"
    );
    let (_, out, err) = w.sh(k, &format!("python3 -c \"{script}\""));
    out.trim().parse().unwrap_or_else(|_| panic!("{out} {err}"))
}

/// Item 2: shares are per sandbox, not per source address. With a cap of
/// 8 a sandbox holds at most 2 connections of the transparent listener,
/// however many addresses it has; another sandbox is served meanwhile.
#[test]
fn a_sandbox_with_many_addresses_holds_one_share() {
    let mut w = World::new("d2");
    w.restart_with(&["--max-connections", "8"]);
    // Sandbox one: two over IPv4 (its share), and one over IPv6.
    assert_eq!(held_closed(&w, 1, "AF_INET", "('11.0.0.1', 80)", 2), 0);
    let script = "import socket, select, time\nss = []\nfor to, fam in [(('11.0.0.1', 80), socket.AF_INET), (('11.0.0.1', 80), socket.AF_INET), (('2a00:1::1', 80), socket.AF_INET6)]:\n    s = socket.socket(fam)\n    s.connect(to)\n    ss.append(s)\ntime.sleep(0.5)\nr, _, _ = select.select(ss, [], [], 0.2)\nprint([ss.index(s) for s in r if s.recv(1) == b''])\n";
    let (_, out, err) = w.sh(1, &format!("python3 -c \"{script}\""));
    // Exactly one of the three is over the share (which one depends on the
    // order the two listeners accept in).
    let closed = out
        .trim()
        .trim_matches(['[', ']'])
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .count();
    assert_eq!(
        closed, 1,
        "a second address gave sandbox one a second share: {out} {err}"
    );
    // Sandbox two is served whatever sandbox one holds.
    assert_eq!(held_closed(&w, 2, "AF_INET", "('11.0.0.4', 80)", 2), 0);
}

/// Item 1: one sandbox flooding a zone whose server never answers holds at
/// most its share of the questions waiting upstream; the other sandboxes'
/// questions are answered meanwhile.
#[test]
fn one_sandboxs_dns_flood_never_starves_the_others() {
    let w = World::new("d1");
    // 3 000 distinct questions in the hanging zone within about a second
    // (paced, so the kernel's socket buffer does not drop them): every one
    // waits upstream for 3 s.
    let flood = "import socket, struct, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nfor k in range(3000):\n    time.sleep(0.0002)\n    q = struct.pack('!HHHHHH', k, 0x0100, 1, 0, 0, 0)\n    for label in ('n%d' % k, 'slow', 'test'):\n        q += bytes([len(label)]) + label.encode()\n    q += b'\\\\x00\\\\x00\\\\x01\\\\x00\\\\x01'\n    s.sendto(q, ('192.0.2.53', 53))\nprint('sent')\n";
    let (_, out, err) = w.sh(1, &format!("python3 -c \"{flood}\""));
    assert!(out.contains("sent"), "{out} {err}");
    // While sandbox one's questions wait (3 s each), the others ask.
    let mut answered = 0;
    for k in [2, 3] {
        let name = if k == 2 { "other.test" } else { "denied.test" };
        for _ in 0..5 {
            let (_, out, _) = w.sh(
                k,
                &format!("dig +short +time=2 +tries=1 @192.0.2.53 {name}"),
            );
            if out.trim().starts_with("11.0.0.") {
                answered += 1;
            }
        }
    }
    assert_eq!(
        answered, 10,
        "other sandboxes' questions failed while one flooded"
    );
}

/// Issue 58: sandboxes naming one policy file take its change from one
/// read — one compile, one "policy reloaded" line and one line for the
/// others, not a read and a line per sandbox — and every one of them
/// decides with it.
#[test]
fn a_shared_file_is_read_once_for_every_sandbox_naming_it() {
    let w = World::new("d58");
    let table_path = w.dir.join("sandboxes.toml");
    let table = std::fs::read_to_string(&table_path).unwrap();
    let before = daemon_err(&w).matches("sandbox table in force").count();
    std::fs::write(
        &table_path,
        table
            .replace("\"one.policy\"", "\"two.policy\"")
            .replace("\"three.policy\"", "\"two.policy\""),
    )
    .unwrap();
    let waited = |what: &dyn Fn(&str) -> bool| {
        for _ in 0..100 {
            if what(&daemon_err(&w)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    assert!(
        waited(&|e| e.matches("sandbox table in force").count() > before),
        "{}",
        daemon_err(&w)
    );
    let (_, out, _) = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    assert_eq!(out.trim(), "", "two.policy does not allow it yet");
    let mark = daemon_err(&w).len();
    let policy = std::fs::read_to_string(w.dir.join("two.policy")).unwrap();
    std::fs::write(
        w.dir.join("two.policy"),
        policy.replace("allow domain other.test", "allow domain allowed.test"),
    )
    .unwrap();
    assert!(
        waited(&|e| e
            .get(mark..)
            .is_some_and(|t| t.contains("took the same reload"))),
        "{}",
        daemon_err(&w)
    );
    let after = daemon_err(&w);
    let after = after.get(mark..).unwrap_or_default();
    assert_eq!(
        after.matches("policy reloaded (revision").count(),
        1,
        "{after}"
    );
    assert!(after.contains("2 more sandboxes naming"), "{after}");
    for k in 1..=3 {
        let (_, out, _) = w.sh(k, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
        assert_eq!(
            out.trim(),
            "11.0.0.1",
            "sandbox {k} decides with the edited file"
        );
    }
    // An edit that does not build is refused once, said once, and every
    // sandbox naming the file keeps the policy in force.
    let mark = daemon_err(&w).len();
    std::fs::write(
        w.dir.join("two.policy"),
        "policy two {\n  network {\n    allow domian x.test\n  }\n}\n",
    )
    .unwrap();
    assert!(
        waited(&|e| e
            .get(mark..)
            .is_some_and(|t| t.contains("refused it; theirs stay in force"))),
        "{}",
        daemon_err(&w)
    );
    let after = daemon_err(&w);
    let after = after.get(mark..).unwrap_or_default();
    assert_eq!(after.matches("policy reload refused").count(), 1, "{after}");
    assert!(!after.contains("took the same reload"), "{after}");
    for k in 1..=3 {
        let (_, out, _) = w.sh(k, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
        assert_eq!(
            out.trim(),
            "11.0.0.1",
            "sandbox {k} keeps the policy in force"
        );
    }
}
