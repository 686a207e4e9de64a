//! Passes, established flows and revocation (issue 52, findings 4–6):
//! passes gate new flows; an established kernel-passed flow is kept while
//! its sandbox's policy in force allows it, whatever its DNS answer's TTL;
//! every change in force cuts, within a second, exactly the flows it no
//! longer allows, and no other sandbox's. Real TCP flows held open by a
//! client inside the sandbox, conntrack read back with `conntrack -L`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::world::World;

/// A client holding one TCP connection to `host:22` (resolved through the
/// sandbox's resolver, connected a second later, once the answer's pass is
/// in the kernel), echoing a ping every 100 ms and writing `ok` or
/// `dead` with a timestamp to its log; it stops by itself after 40 s.
const HOLDER: &str = r#"
import socket, sys, time
host, log = sys.argv[1], sys.argv[2]
# Resolve first and give the daemon's writer time to put the answer's pass
# in the kernel: the flow is then a kernel-passed one, not the proxy's.
addr = socket.getaddrinfo(host, 22, socket.AF_INET, socket.SOCK_STREAM)[0][4]
time.sleep(1)
s = socket.create_connection(addr, timeout=3)
banner = s.recv(64)
out = open(log, "w", buffering=1)
out.write("banner %s\n" % banner.decode(errors="replace").strip())
s.settimeout(0.5)
end = time.time() + 40
while time.time() < end:
    try:
        s.sendall(b"ping\n")
        got = b""
        while len(got) < 5:
            chunk = s.recv(5 - len(got))
            if not chunk:
                raise OSError("closed")
            got += chunk
        out.write("%.3f ok\n" % time.time())
    except OSError:
        out.write("%.3f dead\n" % time.time())
    time.sleep(0.1)
"#;

struct Holder {
    child: Child,
    log: std::path::PathBuf,
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Holder {
    fn start(w: &World, k: usize, host: &str) -> Holder {
        let script = w.dir.join("holder.py");
        std::fs::write(&script, HOLDER).unwrap();
        let log = w.dir.join(format!("holder-{k}-{host}.log"));
        let child = Command::new("ip")
            .args(["netns", "exec", &w.sandboxes[k - 1].0, "python3"])
            .arg(&script)
            .arg(host)
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let h = Holder { child, log };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if read(&h.log).contains(" ok") {
                return h;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the holder to {host} did not start: {}", read(&h.log));
    }

    /// Whether the pings after `since` (seconds since the epoch) are all
    /// answered (`Some(true)`), all unanswered (`Some(false)`), or mixed or
    /// none yet (`None`).
    fn state_since(&self, since: f64) -> Option<bool> {
        let lines: Vec<bool> = read(&self.log)
            .lines()
            .filter_map(|l| {
                let (t, what) = l.split_once(' ')?;
                let t: f64 = t.parse().ok()?;
                (t > since).then_some(what == "ok")
            })
            .collect();
        if lines.len() < 3 {
            None
        } else if lines.iter().all(|x| *x) {
            Some(true)
        } else if lines.iter().all(|x| !*x) {
            Some(false)
        } else {
            None
        }
    }

    /// Asserts that the pings after `settle` are all answered (`alive`) or
    /// all unanswered within `within`, naming `what` went wrong.
    fn expect(&self, settle: Duration, within: Duration, alive: bool, what: &str) {
        assert_eq!(
            self.settles(settle, within),
            Some(alive),
            "{what}:\n{}",
            read(&self.log)
        );
    }

    /// Waits up to `within` for the pings after a moment `settle` from now
    /// to be all answered or all unanswered; returns which.
    fn settles(&self, settle: Duration, within: Duration) -> Option<bool> {
        let since = now() + settle.as_secs_f64();
        let deadline = Instant::now() + settle + within;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            if let Some(s) = self.state_since(since) {
                return Some(s);
            }
        }
        None
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The host's kernel-passed TCP flows, as `conntrack -L` lists them.
fn flows(w: &World) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &w.host.0])
        .args(["conntrack", "-L", "-p", "tcp", "-m"])
        .arg(gatehouse_egress::host::passes::PASS_MARK.to_string())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Finding 6: past its answer's TTL the element is gone (a new flow is not
/// admitted), but the open flow goes on.
#[test]
fn an_open_kernel_passed_flow_outlives_its_dns_answer() {
    let w = World::new("r6");
    let ssh = Holder::start(&w, 1, "ssh.test");
    assert!(read(&ssh.log).contains("SSH-2.0-origin-ssh.test"));
    let listed = flows(&w);
    assert!(
        listed.contains("dst=11.0.0.3"),
        "not kernel-passed: {listed}"
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(!w.passes().contains("11.0.0.3"), "{}", w.passes());
    ssh.expect(
        Duration::ZERO,
        Duration::from_secs(3),
        true,
        "an open kernel-passed flow died with its DNS answer",
    );
    // A new flow to the address alone is not admitted.
    assert!(!w.banner_from(1, "11.0.0.3/22"), "a new flow was admitted");
}

/// Finding 5: removing another sandbox leaves this one's passes and flows
/// alone.
#[test]
fn removing_a_sandbox_leaves_the_others_flows_alone() {
    let w = World::new("r5");
    let db = Holder::start(&w, 1, "db.test");
    assert!(flows(&w).contains("dst=11.0.0.5"), "{}", flows(&w));
    let (code, body) = w.control("DELETE", "/v1/sandboxes/sandbox-three", None);
    assert_eq!(code, 204, "{body}");
    assert!(w.passes().contains("11.0.0.5"), "{}", w.passes());
    db.expect(
        Duration::from_millis(300),
        Duration::from_secs(3),
        true,
        "removing another sandbox froze this one's flow",
    );
}

/// Finding 4: a change in force that stops allowing a name revokes its
/// pass and cuts its open flow within a second — a file edit, and the
/// first `PUT` (which re-points the table entry) alike — and leaves the
/// flows the policy still allows.
#[test]
fn a_revoking_change_cuts_exactly_the_flows_it_no_longer_allows() {
    let w = World::new("r4");
    let ssh = Holder::start(&w, 1, "ssh.test");
    let db = Holder::start(&w, 1, "db.test");
    let listed = flows(&w);
    assert!(
        listed.contains("dst=11.0.0.3") && listed.contains("dst=11.0.0.5"),
        "{listed}"
    );
    let policy = std::fs::read_to_string(w.dir.join("one.policy")).unwrap();
    let edited = policy.replace(
        "    allow domain db.test port 22\n",
        "    deny domain db.test\n",
    );
    assert_ne!(edited, policy);
    std::fs::write(w.dir.join("one.policy"), edited).unwrap();
    db.expect(
        Duration::from_secs(1),
        Duration::from_secs(3),
        false,
        "a revoked flow still runs a second after the change",
    );
    assert!(!w.passes().contains("11.0.0.5"), "{}", w.passes());
    assert!(!flows(&w).contains("dst=11.0.0.5"), "{}", flows(&w));
    ssh.expect(
        Duration::ZERO,
        Duration::from_secs(3),
        true,
        "a flow the changed policy still allows was cut",
    );
    assert!(!w.banner_from(1, "11.0.0.5/22"), "a new flow was admitted");
    // The first PUT (it re-points the table entry) revokes as any change.
    w.put_policy(
        "sandbox-one",
        "policy one {\n  network {\n    default deny\n    allow domain allowed.test\n  }\n}\n",
    );
    ssh.expect(
        Duration::from_secs(1),
        Duration::from_secs(3),
        false,
        "a flow the put policy denies still runs",
    );
    assert!(!flows(&w).contains("dst=11.0.0.3"), "{}", flows(&w));
}

/// Finding 8: a restart keeps the established kernel-passed flows the
/// restored policy still allows and cuts the rest. The daemon is killed
/// (SIGKILL), its policy edited while it is down, and started again.
#[test]
fn a_restart_keeps_the_flows_the_restored_policy_allows_and_cuts_the_rest() {
    let mut w = World::new("r8");
    let ssh = Holder::start(&w, 1, "ssh.test");
    let db = Holder::start(&w, 1, "db.test");
    let listed = flows(&w);
    assert!(
        listed.contains("dst=11.0.0.3") && listed.contains("dst=11.0.0.5"),
        "{listed}"
    );
    if let Some(mut d) = w.daemon.take() {
        let _ = d.kill();
        let _ = d.wait();
    }
    let policy = std::fs::read_to_string(w.dir.join("one.policy")).unwrap();
    let edited = policy.replace(
        "    allow domain db.test port 22\n",
        "    deny domain db.test\n",
    );
    assert_ne!(edited, policy);
    std::fs::write(w.dir.join("one.policy"), edited).unwrap();
    let _ = std::fs::remove_file(w.dir.join("control.sock"));
    w.start_daemon();
    db.expect(
        Duration::from_millis(500),
        Duration::from_secs(3),
        false,
        "a flow the restored policy denies survived the restart",
    );
    assert!(!flows(&w).contains("dst=11.0.0.5"), "{}", flows(&w));
    ssh.expect(
        Duration::ZERO,
        Duration::from_secs(3),
        true,
        "a flow the restored policy allows was cut by the restart",
    );
}
