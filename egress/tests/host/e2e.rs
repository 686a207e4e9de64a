//! Host mode end to end (issue 30): the daemon in a namespace of its own
//! ("host") serving three sandboxes — each a namespace behind a veth pair,
//! with its own policy — and origins in a fourth namespace, on addresses
//! that look public (11.0.0.0/24: nothing leaves the test's namespaces).
//! The clients are real programs with no proxy settings, run inside the
//! sandboxes: curl (HTTP and HTTPS against a test CA), `openssl s_client`,
//! `dig`, bash's `/dev/tcp` and `/dev/udp`.

use std::time::Duration;

use super::world::{Seen, World, daemon_err};

#[test]
fn three_sandboxes_each_reach_exactly_what_their_policy_allows() {
    let mut w = World::new("a");
    let seen = w.seen.clone();

    // HTTP by Host: each sandbox its own policy.
    let (code, out) = w.curl(1, "http://allowed.test/");
    assert_eq!(code, 0, "{out}\n{}", daemon_err(&w));
    assert!(
        out.contains("origin allowed.test saw host allowed.test"),
        "{out}"
    );
    let (code, out) = w.curl(2, "http://other.test/");
    assert!(code == 0 && out.contains("origin other.test"), "{out}");
    let (code, out) = w.curl(3, "http://denied.test/");
    assert!(code == 0 && out.contains("origin denied.test"), "{out}");
    // Names a sandbox's policy does not allow do not even resolve (curl 6).
    assert_eq!(w.curl(1, "http://denied.test/").0, 6);
    assert_eq!(w.curl(2, "http://allowed.test/").0, 6);
    assert_eq!(w.curl(3, "http://allowed.test/").0, 6);

    // HTTPS by server name, against the test CA: the certificate is the
    // origin's own (nothing is terminated).
    let (code, out) = w.curl(1, "https://allowed.test/");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("HTTP/1.0 200"), "{out}");
    let (code, _) = w.curl(2, "https://allowed.test/");
    assert_eq!(code, 6);

    // IPv6: the sandbox's IPv6 traffic and questions are held the same
    // way (a v6 listener, a v6 resolver, the v6 sets).
    let (code, out) = w.curl(1, "-6 http://allowed.test/");
    assert_eq!(code, 0, "{out}\n{}", daemon_err(&w));
    assert!(
        out.contains("origin allowed.test saw host allowed.test"),
        "{out}"
    );
    assert!(seen.get("allowed.test:v6:80") >= 1);
    let (_, out) = w.curl(
        1,
        "-6 --resolve denied.test:80:[2a00:1::1] http://denied.test/",
    );
    assert!(out.contains("X-Gatehouse-Reason: not_allowed"), "{out}");
    let (_, out, _) = w.sh(
        1,
        "dig -6 +short +time=3 +tries=1 @2001:4860:4860::8888 AAAA allowed.test",
    );
    assert_eq!(out.trim(), "2a00:1::1");
    let (_, out, _) = w.sh(
        1,
        "dig -6 +time=3 +tries=1 @2001:4860:4860::8888 AAAA denied.test",
    );
    assert!(out.contains("status: REFUSED"), "{out}");
    assert_eq!(seen.get("denied.test:v6:80"), 0);

    // A Host the policy denies, sent to an allowed address: 403 from the
    // daemon, nothing reaches an origin.
    let before = seen.get("allowed.test:80") + seen.get("denied.test:80");
    let (code, out) = w.curl(1, "--resolve denied.test:80:11.0.0.1 http://denied.test/");
    assert_eq!(code, 0);
    assert!(
        out.contains("403") && out.contains("X-Gatehouse-Reason: not_allowed"),
        "{out}"
    );
    assert_eq!(
        seen.get("allowed.test:80") + seen.get("denied.test:80"),
        before
    );
    // The refusal's line on the daemon's stderr names the sandbox (issue
    // 59: an operator tailing the journal sees who was refused).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let refusal = loop {
        let err = std::fs::read_to_string(w.dir.join("daemon.err")).unwrap_or_default();
        let line = err
            .lines()
            .find(|l| l.contains("\"refused") && l.contains("denied.test"))
            .map(str::to_string);
        if line.is_some() || std::time::Instant::now() > deadline {
            break line.unwrap_or(err);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let v: serde_json::Value = serde_json::from_str(&refusal).unwrap_or_default();
    assert_eq!(v["sandbox"], "sandbox-one", "{refusal}");

    // A lie about the address: the allowed name sent to the denied
    // origin's address reaches the allowed name's own server, never the
    // other one.
    let denied_before = seen.get("denied.test:80");
    let (code, out) = w.curl(1, "--resolve allowed.test:80:11.0.0.2 http://allowed.test/");
    assert_eq!(code, 0);
    assert!(
        out.contains("origin allowed.test saw host allowed.test"),
        "{out}"
    );
    assert_eq!(seen.get("denied.test:80"), denied_before);

    // A second request with another Host on the same connection: refused
    // before it is sent.
    let (code, out, _) = w.sh(
        1,
        "exec 3<>/dev/tcp/11.0.0.1/80; printf 'GET / HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n' >&3; sleep 0.5; printf 'GET / HTTP/1.1\\r\\nHost: denied.test\\r\\n\\r\\n' >&3; timeout 3 cat <&3",
    );
    assert!(
        out.contains("origin allowed.test saw host allowed.test"),
        "{code} {out}"
    );
    assert!(out.contains("X-Gatehouse-Reason: host_mismatch"), "{out}");
    assert!(!out.contains("saw host denied.test"), "{out}");

    // A forged server name: a denied name to an allowed address is closed
    // unanswered; an allowed name to another address reaches the allowed
    // name's server (its certificate), never the other.
    let s_client = |k: usize, to: &str, sni: &str| {
        w.sh(
            k,
            &format!(
                "echo | openssl s_client -connect {to}:443 -servername {sni} -CAfile ca.pem 2>&1"
            ),
        )
        .1
    };
    let out = s_client(1, "11.0.0.1", "denied.test");
    assert!(
        !out.contains("CN=denied.test") && !out.contains("CN=allowed.test"),
        "{out}"
    );
    let out = s_client(1, "11.0.0.2", "allowed.test");
    assert!(
        out.contains("CN=allowed.test") || out.contains("CN = allowed.test"),
        "{out}"
    );
    assert!(!out.contains("denied.test"), "{out}");

    // dig, any nameserver: the sandbox's own resolver answers.
    let (_, out, _) = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    assert_eq!(out.trim(), "11.0.0.1");
    let (_, out, _) = w.sh(1, "dig +time=3 +tries=1 @1.1.1.1 denied.test");
    assert!(out.contains("status: REFUSED"), "{out}");
    let (_, out, _) = w.sh(
        3,
        "dig +short +tcp +time=3 +tries=1 @192.0.2.53 denied.test",
    );
    assert_eq!(out.trim(), "11.0.0.2");

    // A protocol the proxy cannot read, to an allowed name's port: passes
    // (in the kernel, from the DNS answer) while the answer lives; a denied
    // name's never.
    let (_, out, _) = w.sh(1, "exec 3<>/dev/tcp/ssh.test/22; head -n 1 <&3");
    assert!(out.starts_with("SSH-2.0-origin-ssh.test"), "{out}");
    let listed = w.passes();
    assert!(listed.contains("10.200.1.2 . 11.0.0.3 . 22"), "{listed}");
    let (_, out, _) = w.sh(1, "exec 3<>/dev/tcp/11.0.0.2/22 && timeout 2 head -n 1 <&3");
    assert!(!out.contains("SSH-2.0"), "{out}");
    assert_eq!(seen.get("denied.test:22"), 0);
    assert!(!w.passes().contains("11.0.0.2"));
    // The answer lived 2 s: after it, the element is gone and the address
    // alone is not allowed.
    std::thread::sleep(Duration::from_secs(4));
    let listed = w.passes();
    assert!(!listed.contains("11.0.0.3"), "{listed}");
    let ssh_before = seen.get("ssh.test:22");
    let (_, out, _) = w.sh(1, "exec 3<>/dev/tcp/11.0.0.3/22 && timeout 2 head -n 1 <&3");
    assert!(!out.contains("SSH-2.0"), "{out}");
    assert_eq!(seen.get("ssh.test:22"), ssh_before);

    // Below the passes, the policy's kernel layer: a pass to an address
    // the policy denies (put there by hand, as a stale or forged element
    // would be) is dropped in the kernel all the same.
    let forged = gatehouse_egress::host::nft::passes(&[gatehouse_egress::host::nft::Pass {
        source: "10.200.1.2".parse().unwrap(),
        addr: "11.0.0.2".parse().unwrap(),
        port: 22,
        ttl: 60,
    }]);
    w.host.nft(
        &["-j", "-f", "-"],
        &gatehouse_egress::host::nft::to_json(&forged).unwrap(),
    );
    assert!(w.passes().contains("11.0.0.2"));
    let (_, out, _) = w.sh(
        1,
        "timeout 2 bash -c 'exec 3<>/dev/tcp/11.0.0.2/22 && head -n 1 <&3'",
    );
    assert!(!out.contains("SSH-2.0"), "{out}");
    assert_eq!(seen.get("denied.test:22"), 0);

    // UDP other than DNS (QUIC) is dropped.
    w.sh(
        1,
        "for i in 1 2 3; do echo quic > /dev/udp/11.0.0.1/443; done",
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(seen.get("allowed.test:udp443"), 0);

    // Decision records carry the sandbox.
    let log = std::fs::read_to_string(w.dir.join("decisions.jsonl")).unwrap();
    assert!(log.contains("\"sandbox\":\"sandbox-one\""), "{log}");
    assert!(log.contains("\"sandbox\":\"sandbox-three\""));

    // Metrics carry the sandbox.
    let out = w
        .host
        .exec("curl", &["-s", "http://127.0.0.1:9464/metrics"]);
    let metrics = String::from_utf8_lossy(&out.stdout);
    let count = |line: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(line))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    assert!(
        count("gatehouse_egress_sandbox_connections_total{sandbox=\"sandbox-one\"}") >= 5,
        "{metrics}"
    );
    assert!(
        count("gatehouse_egress_sandbox_dns_questions_total{sandbox=\"sandbox-two\"}") >= 2,
        "{metrics}"
    );
    assert!(
        count("gatehouse_egress_sandbox_decisions_total{sandbox=\"sandbox-one\",outcome=\"deny\"}")
            >= 1,
        "{metrics}"
    );
    assert!(
        count("gatehouse_egress_requests_total{kind=\"transparent\"}") >= 8,
        "{metrics}"
    );

    // kill -9: the rules stay, and every new connection fails; nothing
    // reaches an origin. After a restart, everything works again.
    let mut d = w.daemon.take().unwrap();
    d.kill().unwrap();
    d.wait().unwrap();
    let total =
        |s: &Seen| s.get("allowed.test:80") + s.get("denied.test:80") + s.get("other.test:80");
    let before = total(&seen);
    assert_ne!(w.curl(1, "http://allowed.test/").0, 0);
    assert_ne!(
        w.curl(1, "--resolve allowed.test:80:11.0.0.1 http://allowed.test/")
            .0,
        0
    );
    assert_ne!(
        w.curl(3, "--resolve denied.test:80:11.0.0.2 http://denied.test/")
            .0,
        0
    );
    assert_ne!(
        w.curl(
            1,
            "https://allowed.test/ --resolve allowed.test:443:11.0.0.1"
        )
        .0,
        0
    );
    assert_eq!(total(&seen), before);
    w.start_daemon();
    let (code, out) = w.curl(1, "http://allowed.test/");
    assert!(code == 0 && out.contains("origin allowed.test"), "{out}");
}
