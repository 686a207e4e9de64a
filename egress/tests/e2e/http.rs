//! Plain HTTP through the proxy: every request on a connection decided, smuggling refused, kept-alive pools, live swaps.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::support::*;

/// Heads a lenient server would read differently from the proxy (issue 13,
/// bypass classes 1 and 2), sent by real curl: through the proxy they are
/// refused with 400, and inside a CONNECT tunnel (`curl -p`) a malformed
/// head or a request target outside the tunnel is answered 400 there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggled_heads_and_targets_outside_the_tunnel_are_refused() {
    let dir = tempdir("smuggle");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1"), ("denied.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let port = server.port();
    let url = format!("http://allowed.test:{port}/");

    // The baselines pass, proxied and tunnelled, origin-form or an absolute
    // form naming the tunnel's own host.
    for extra in [
        &[][..],
        &["-p"],
        &[
            "-p",
            "--request-target",
            &format!("http://allowed.test:{port}/x"),
        ],
        &[
            "-p",
            "--request-target",
            &format!("HTTP://ALLOWED.test:{port}/x"),
        ],
    ] {
        let (code, status, _, out) = curl(d.http, extra, &url).await;
        assert_eq!((code, status.as_str()), (0, "200"), "{extra:?}: {out}");
    }
    // Bare LF, bare CR, whitespace before a colon, and Content-Length with
    // Transfer-Encoding: 400 through the proxy and inside the tunnel.
    let heads: [&[&str]; 4] = [
        &["-H", "X-A: 1\nHost: denied.test"],
        &["-H", "X-A: 1\rHost: denied.test"],
        &["-H", "X-A : 1"],
        &[
            "-H",
            "Transfer-Encoding: chunked",
            "-H",
            "Content-Length: 3",
            "--data",
            "abc",
        ],
    ];
    for h in heads {
        for tunnel in [false, true] {
            let mut args: Vec<&str> = if tunnel { vec!["-p"] } else { Vec::new() };
            args.extend(h);
            let (_, status, reason, out) = curl(d.http, &args, &url).await;
            assert_eq!(
                (status.as_str(), reason.as_str()),
                ("400", "bad_request"),
                "{args:?}: {out}"
            );
        }
    }
    // Inside a tunnel to allowed.test, an absolute target naming another
    // host (which servers prefer over `Host`) goes nowhere.
    for target in [
        "https://denied.test/".to_string(),
        format!("HTTP://denied.test:{port}/"),
        format!("http://allowed.test@denied.test:{port}/"),
        "http://allowed.test/".to_string(),
    ] {
        let (_, status, reason, out) =
            curl(d.http, &["-p", "--request-target", &target], &url).await;
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("400", "target_outside_tunnel"),
            "{target}: {out}"
        );
    }
    // The access records say why.
    let refused: Vec<String> = records(&d)
        .iter()
        .filter_map(|r| r["outcome"].as_str().map(String::from))
        .filter(|o| o.starts_with("refused"))
        .collect();
    assert!(
        refused.iter().any(|o| o.contains("target_outside_tunnel")),
        "{refused:?}"
    );
}

/// The smaller findings of issue 13, item 11: an IPv4-compatible or mapped
/// IPv6 literal is dialled as the IPv4 address it was decided as; HTTP/1.0
/// without `Host` takes the target's host; a ClientHello carrying Encrypted
/// Client Hello is refused for a name target (its outer name is a cover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn literals_dial_what_was_decided_http10_and_ech() {
    let dir = tempdir("small");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let port = server.port();

    // `[::127.0.0.1]` and `[::ffff:127.0.0.1]` are 127.0.0.1 (allowed by its
    // exact `allow ip`), and reach the server listening there.
    for host in ["[::127.0.0.1]", "[::ffff:127.0.0.1]"] {
        let (code, status, _, out) = curl(d.http, &["-g"], &format!("http://{host}:{port}/")).await;
        assert_eq!((code, status.as_str()), (0, "200"), "{host}: {out}");
    }
    // HTTP/1.0 without a Host header (curl -0, Host removed).
    let (code, status, _, out) = curl(
        d.http,
        &["-0", "-H", "Host:"],
        &format!("http://allowed.test:{port}/"),
    )
    .await;
    assert_eq!((code, status.as_str()), (0, "200"), "{out}");
    // HTTP/1.1 without one is still refused.
    let (_, status, reason, out) = curl(
        d.http,
        &["-H", "Host:"],
        &format!("http://allowed.test:{port}/"),
    )
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("403", "host_mismatch"),
        "{out}"
    );

    // A ClientHello with Encrypted Client Hello whose outer name agrees.
    let mut s = connect_tunnel(d.http, port).await;
    s.write_all(&gatehouse_wire::tls::build_client_hello_with(
        Some("allowed.test"),
        true,
    ))
    .await
    .unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
    assert!(rest.is_empty(), "the tunnel carried {rest:?}");
    assert!(
        records(&d)
            .iter()
            .any(|r| r["outcome"] == "refused: encrypted_client_hello"),
        "{:?}",
        records(&d)
    );
}

/// Nothing beside a request stalls it (issue 13, item 8): with stderr on a
/// pipe nobody reads, a thousand refusals are answered as fast as ever; an
/// edit of the policy that keeps its modification time and size is seen
/// (changes are found by content); and a FIFO put at the policy path stalls
/// nothing. The binary runs as a user runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_beside_a_request_stalls_it() {
    let dir = tempdir("stalls");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1"), ("denied.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let path = dir.join("egress.policy");
    std::fs::write(&path, POLICY).unwrap();
    /// The daemon, killed however the test ends (a failed assertion must
    /// not leave it holding the test's output open).
    struct Daemon(std::process::Child);
    impl Drop for Daemon {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // stderr is a pipe that this test never reads.
    let (child, proxy) = spawn_binary(&path, dns.addr).await;
    let _daemon = Daemon(child);
    let sport = server.port();
    /// One request by hand: the status code, within 5 s.
    async fn status(proxy: SocketAddr, host: &str, port: u16) -> String {
        let go = async {
            let mut s = TcpStream::connect(proxy).await.ok()?;
            let req = format!(
                "GET http://{host}:{port}/ HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
            );
            s.write_all(req.as_bytes()).await.ok()?;
            let mut out = Vec::new();
            s.read_to_end(&mut out).await.ok()?;
            String::from_utf8_lossy(&out)
                .split(' ')
                .nth(1)
                .map(String::from)
        };
        tokio::time::timeout(Duration::from_secs(5), go)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| "timeout".into())
    }

    // A thousand refusals, each a line the daemon would put on stderr.
    let t = std::time::Instant::now();
    for i in 0..1000 {
        let s = status(proxy, "denied.test", sport).await;
        assert_eq!(s, "403", "refusal {i}");
    }
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert_eq!(status(proxy, "allowed.test", sport).await, "200");

    // An edit that keeps the size and the modification time.
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let edited = POLICY.replace("allow domain allowed.test", "deny  domain allowed.test");
    assert_eq!(edited.len(), POLICY.len());
    std::fs::write(&path, &edited).unwrap();
    let f = std::fs::File::options().write(true).open(&path).unwrap();
    f.set_modified(mtime).unwrap();
    drop(f);
    let mut seen = String::new();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = status(proxy, "allowed.test", sport).await;
        if seen == "403" {
            break;
        }
    }
    assert_eq!(seen, "403", "an edit keeping mtime and size was not seen");

    // A FIFO at the policy path: requests are still answered, and the
    // policy in force stays.
    std::fs::remove_file(&path).unwrap();
    let made = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success());
    tokio::time::sleep(Duration::from_millis(700)).await;
    for _ in 0..20 {
        assert_eq!(status(proxy, "denied.test", sport).await, "403");
        assert_eq!(status(proxy, "allowed.test", sport).await, "403");
    }
    let _ = std::fs::remove_file(&path);
}

/// Every request on a connection is framed and decided (issue 13, item 3):
/// a pipelined request, one after a chunked or sized body, or one inside a
/// plain HTTP tunnel, is decided like the first, and a request the proxy
/// refuses never reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_on_a_connection_is_decided() {
    let dir = tempdir("pipelined");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1"), ("denied.test", "127.0.0.1")]).await;
    let (port, seen) = recording_server().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let allowed =
        format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n");
    let hosts = || -> Vec<String> {
        seen.lock()
            .unwrap()
            .iter()
            .map(|(_, h)| h.clone())
            .collect()
    };
    let cases: Vec<(&str, String, Vec<&str>, usize)> = vec![
        // An origin-form request after the first, naming a denied Host.
        (
            "pipelined origin-form",
            format!("{allowed}GET /x HTTP/1.1\r\nHost: denied.test:{port}\r\n\r\n"),
            vec!["200", "403"],
            1,
        ),
        // An absolute request for a denied host after the first.
        (
            "pipelined denied",
            format!(
                "{allowed}GET http://denied.test:{port}/ HTTP/1.1\r\nHost: denied.test:{port}\r\n\r\n"
            ),
            vec!["200", "403"],
            1,
        ),
        // A request hidden after the end of a chunked body.
        (
            "after a chunked body",
            format!(
                "POST http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /x HTTP/1.1\r\nHost: denied.test\r\n\r\n"
            ),
            vec!["200", "403"],
            1,
        ),
        // A request inside a sized body is body, not a request.
        (
            "inside a sized body",
            {
                let inner = "GET /x HTTP/1.1\r\nHost: denied.test\r\n\r\n";
                format!(
                    "POST http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{inner}",
                    inner.len()
                )
            },
            vec!["200"],
            1,
        ),
        // A `Connection` header naming the length cannot strip it and turn
        // the body into a request.
        (
            "connection names the length",
            {
                let inner = "GET /x HTTP/1.1\r\nHost: denied.test\r\n\r\n";
                format!(
                    "POST http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\nConnection: Content-Length, close\r\nContent-Length: {}\r\n\r\n{inner}",
                    inner.len()
                )
            },
            vec!["200"],
            1,
        ),
        // A malformed chunk: the request is cut, nothing after it read.
        (
            "a malformed chunk",
            format!(
                "POST http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\nGET /x HTTP/1.1\r\nHost: denied.test\r\n\r\n"
            ),
            vec![],
            0,
        ),
        // Two allowed requests: both forwarded, on one connection.
        (
            "two allowed",
            format!(
                "{allowed}{}",
                allowed.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n")
            ),
            vec!["200", "200"],
            2,
        ),
    ];
    for (name, bytes, want, reached) in cases {
        seen.lock().unwrap().clear();
        let mut s = TcpStream::connect(d.http).await.unwrap();
        let got = statuses(&mut s, bytes.as_bytes()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(got, want, "{name}");
        let h = hosts();
        assert_eq!(h.len(), reached, "{name}: the server saw {h:?}");
        assert!(
            h.iter().all(|h| h.starts_with("allowed.test")),
            "{name}: {h:?}"
        );
    }

    // Inside a plain HTTP tunnel to allowed.test: each request is checked.
    for (second, want, reached) in [
        (
            format!("GET / HTTP/1.1\r\nHost: denied.test:{port}\r\n\r\n"),
            vec!["200", "403"],
            1,
        ),
        (
            format!("GET https://denied.test/ HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n"),
            vec!["200", "400"],
            1,
        ),
        (
            format!("GET /b HTTP/1.1\r\nHost: allowed.test:{port}\r\nConnection: close\r\n\r\n"),
            vec!["200", "200"],
            2,
        ),
    ] {
        seen.lock().unwrap().clear();
        let mut s = connect_tunnel(d.http, port).await;
        let first = format!("GET /a HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n");
        let got = statuses(&mut s, format!("{first}{second}").as_bytes()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(got, want, "tunnel: {second:?}");
        let h = hosts();
        assert_eq!(h.len(), reached, "tunnel: the server saw {h:?}");
        assert!(h.iter().all(|h| h.starts_with("allowed.test")), "{h:?}");
    }
}

/// Keep-alive with a real client (issue 13, item 13): curl sends several
/// requests on one connection; each is decided (a denied one in the middle
/// gets its 403), and the allowed ones share one pooled upstream
/// connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_alive_connections_decide_every_request_and_pool_upstream() {
    let dir = tempdir("keepalive");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1"), ("denied.test", "127.0.0.1")]).await;
    let (port, seen) = recording_server().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let a = format!("http://allowed.test:{port}/");
    let (code, out) = run(
        "curl",
        vec![
            "-s".into(),
            "-v".into(),
            "--max-time".into(),
            "10".into(),
            "-x".into(),
            format!("http://{}", d.http),
            "-o".into(),
            "/dev/null".into(),
            "-o".into(),
            "/dev/null".into(),
            "-o".into(),
            "/dev/null".into(),
            "-w".into(),
            "%{http_code} %{num_connects}\\n".into(),
            format!("{a}1"),
            format!("{a}2"),
            format!("{a}3"),
        ],
    )
    .await;
    assert_eq!(code, 0);
    // Three answers over one client connection (curl connected once).
    assert_eq!(out, "200 1\n200 0\n200 0\n", "{out}");
    let conns: std::collections::HashSet<usize> =
        seen.lock().unwrap().iter().map(|(c, _)| *c).collect();
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert_eq!(conns.len(), 1, "one pooled upstream connection");
    // A denied request in the middle of a kept-alive run: refused, and the
    // server never sees it; curl reconnects for the next.
    seen.lock().unwrap().clear();
    let (_, out) = run(
        "curl",
        vec![
            "-s".into(),
            "--max-time".into(),
            "10".into(),
            "-x".into(),
            format!("http://{}", d.http),
            "-o".into(),
            "/dev/null".into(),
            "-o".into(),
            "/dev/null".into(),
            "-o".into(),
            "/dev/null".into(),
            "-w".into(),
            "%{http_code}\\n".into(),
            format!("{a}1"),
            format!("http://denied.test:{port}/"),
            format!("{a}3"),
        ],
    )
    .await;
    assert_eq!(out, "200\n403\n200\n");
    assert_eq!(seen.lock().unwrap().len(), 2);
    // A request's record is written once its response is out: the last
    // may land just after curl has read it.
    let forwarded = || {
        records(&d)
            .iter()
            .filter(|r| r["outcome"] == "forwarded")
            .count()
    };
    for _ in 0..50 {
        if forwarded() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(forwarded(), 5, "every request decided and recorded");
}

/// A pooled connection that the server closes on the next request: an
/// idempotent request is sent again on a new connection and answered; a
/// POST is not sent twice (502).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_idempotent_requests_are_sent_again() {
    let dir = tempdir("retry");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    // Answers the first request of each connection, keeps it open, and
    // closes it on the second without answering.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 2048];
                for answered in [true, false] {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&buf)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_string();
                    seen.lock().unwrap().push(line);
                    buf.clear();
                    if answered {
                        let _ = s
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
                            .await;
                    }
                }
            });
        }
    });
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let mut c = TcpStream::connect(d.http).await.unwrap();
    let get =
        format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n");
    let post = format!(
        "POST http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\nContent-Length: 0\r\n\r\n"
    );
    let mut one = async |req: &str| {
        c.write_all(req.as_bytes()).await.unwrap();
        // Reads one whole response: the server's `ok` or the proxy's
        // refusal body.
        let mut out = Vec::new();
        let mut b = [0u8; 1024];
        loop {
            let text = String::from_utf8_lossy(&out).to_string();
            if text.ends_with("ok\n") || (text.contains("gatehouse: ") && text.ends_with('\n')) {
                break;
            }
            match tokio::time::timeout(Duration::from_secs(5), c.read(&mut b)).await {
                Ok(Ok(n)) if n > 0 => out.extend_from_slice(&b[..n]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&out)
            .split(' ')
            .nth(1)
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(one(&get).await, "200");
    // The pooled connection is closed under the second GET: sent again.
    assert_eq!(one(&get).await, "200");
    assert_eq!(
        heads
            .lock()
            .unwrap()
            .iter()
            .filter(|h| h.starts_with("GET"))
            .count(),
        3
    );
    // Now the pooled connection (the retry's) is closed under a POST: not
    // sent again.
    assert_eq!(one(&post).await, "502");
    assert_eq!(
        heads
            .lock()
            .unwrap()
            .iter()
            .filter(|h| h.starts_with("POST"))
            .count(),
        1
    );
}

/// The revision is one length everywhere (issue 37, item 7): the
/// `X-Gatehouse-Revision` a client reads is the whole revision the decision
/// log, `/metrics` and `policyc compile` write, so one finds the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_revision_is_written_whole_everywhere() {
    let dir = tempdir("revision");
    let dns = fake_dns(&[]).await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let (_, status, _, out) = curl(d.http, &[], "http://denied.test/").await;
    assert_eq!(status, "403", "{out}");
    let header = out
        .lines()
        .find_map(|l| l.strip_prefix("X-Gatehouse-Revision: "))
        .unwrap_or_default()
        .trim()
        .to_string();
    let rev = d.policies.store.load().revision().to_string();
    assert_eq!(rev.len(), 16);
    assert_eq!(header, rev, "{out}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = std::fs::read_to_string(dir.join("decisions.jsonl")).unwrap();
    assert!(log.contains(&format!("\"revision\":\"{rev}\"")), "{log}");
}
