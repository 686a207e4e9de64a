//! End to end, on loopback only: real `curl`, `dig` and `openssl s_server`
//! against the proxy and the resolver, with a fake upstream DNS server that
//! records every question it is asked.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use gatehouse_egress::testing::{self, FakeDns};
use gatehouse_egress::{Config, Running, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

const POLICY: &str = "policy egress {
  network {
    default deny
    local deny
    dns on
    allow domain allowed.test
    allow domain other.test
    allow domain private.test
    deny domain denied.test
    allow ip 127.0.0.1
  }
  proxy { socks5 on; socks5_udp on; upstream off }
}
";

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gatehouse-egress-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn fake_dns(table: &[(&str, &str)]) -> FakeDns {
    testing::fake_dns(table).await.unwrap()
}

async fn http_server() -> SocketAddr {
    testing::http_server("hello from the test server\n")
        .await
        .unwrap()
}

/// `openssl s_server -www` on a free loopback port, with a throwaway
/// self-signed certificate.
struct TlsServer {
    port: u16,
    child: std::process::Child,
}
impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

async fn tls_server(dir: &Path) -> TlsServer {
    let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
    let ok = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=allowed.test",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("openssl")
        .args(["s_server", "-www", "-quiet", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    TlsServer { port, child }
}

async fn daemon(
    dir: &Path,
    policy: &str,
    dns: SocketAddr,
    upstream_proxy: Option<String>,
) -> Running {
    daemon_with(dir, policy, dns, upstream_proxy, Default::default()).await
}

async fn daemon_with(
    dir: &Path,
    policy: &str,
    dns: SocketAddr,
    upstream_proxy: Option<String>,
    timeouts: gatehouse_egress::relay::Timeouts,
) -> Running {
    let path = dir.join("egress.policy");
    std::fs::write(&path, policy).unwrap();
    start(Config {
        http: "127.0.0.1:0".parse().unwrap(),
        socks: Some("127.0.0.1:0".parse().unwrap()),
        dns: Some("127.0.0.1:0".parse().unwrap()),
        log: Some(dir.join("decisions.jsonl")),
        upstream_proxy,
        keep_access_records: true,
        timeouts,
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..Config::new(path, dns)
    })
    .await
    .unwrap()
}

/// Runs a command off the runtime; (exit code, stdout).
async fn run(cmd: &str, args: Vec<String>) -> (i32, String) {
    let cmd = cmd.to_string();
    tokio::task::spawn_blocking(move || {
        let out = Command::new(&cmd).args(&args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    })
    .await
    .unwrap()
}

/// curl through the HTTP proxy: (exit code, status, X-Gatehouse-Reason, body).
async fn curl(proxy: SocketAddr, extra: &[&str], url: &str) -> (i32, String, String, String) {
    let mut args: Vec<String> = vec![
        "-s".into(),
        "-k".into(),
        "--max-time".into(),
        "10".into(),
        "-x".into(),
        format!("http://{proxy}"),
        "-D".into(),
        "-".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(url.to_string());
    let (code, out) = run("curl", args).await;
    let status = out
        .lines()
        .rev()
        .find(|l| l.starts_with("HTTP/"))
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("")
        .to_string();
    let reason = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("X-Gatehouse-Reason: ")
                .or_else(|| l.strip_prefix("x-gatehouse-reason: "))
        })
        .unwrap_or("")
        .trim()
        .to_string();
    (code, status, reason, out)
}

fn records(r: &Running) -> Vec<serde_json::Value> {
    r.policies.records.as_ref().unwrap().lock().unwrap().clone()
}

/// A UDP echo target on loopback: its port, and where each datagram came
/// from.
async fn udp_echo() -> (u16, tokio::sync::mpsc::UnboundedReceiver<SocketAddr>) {
    let echo = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = echo.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut b = [0u8; 512];
        loop {
            let (n, from) = echo.recv_from(&mut b).await.unwrap();
            let _ = tx.send(from);
            echo.send_to(&b[..n], from).await.unwrap();
        }
    });
    (port, rx)
}

/// A SOCKS5 UDP ASSOCIATE: the control connection (the association lives
/// as long as it does) and the relay's announced address.
async fn udp_associate(socks: SocketAddr) -> (TcpStream, SocketAddr) {
    let mut control = TcpStream::connect(socks).await.unwrap();
    control.write_all(&[5, 1, 0]).await.unwrap();
    let mut b = [0u8; 2];
    control.read_exact(&mut b).await.unwrap();
    control
        .write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let mut r = [0u8; 10];
    control.read_exact(&mut r).await.unwrap();
    assert_eq!(r[1], 0);
    let relay = SocketAddr::from(([r[4], r[5], r[6], r[7]], u16::from_be_bytes([r[8], r[9]])));
    (control, relay)
}

/// `CONNECT allowed.test:PORT` by hand, up to the proxy's `200`.
async fn connect_tunnel(proxy: SocketAddr, port: u16) -> TcpStream {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    let head = format!("CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut b).await.unwrap(), 1);
        got.push(b[0]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    s
}

/// The binary, as a user runs it, on a free loopback port, with stderr
/// piped (read or not by the caller); returns once it accepts.
async fn spawn_binary(policy: &Path, dns: SocketAddr) -> (std::process::Child, SocketAddr) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_gatehouse-egress"))
        .arg("--policy")
        .arg(policy)
        .args([
            "--http",
            &format!("127.0.0.1:{port}"),
            "--upstream-dns",
            &dns.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let proxy: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    for _ in 0..100 {
        if TcpStream::connect(proxy).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_through_the_proxy() {
    let dir = tempdir("http");
    let dns = fake_dns(&[
        ("allowed.test", "127.0.0.1"),
        ("other.test", "127.0.0.1"),
        ("private.test", "127.0.0.2"),
        ("denied.test", "127.0.0.1"),
    ])
    .await;
    let server = http_server().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let port = server.port();

    let (code, status, _, body) = curl(d.http, &[], &format!("http://allowed.test:{port}/")).await;
    assert_eq!((code, status.as_str()), (0, "200"), "{body}");
    assert!(body.contains("hello from the test server"));

    // A denied name: 403 with the reason, and a log line.
    let (_, status, reason, _) = curl(d.http, &[], &format!("http://denied.test:{port}/")).await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("403", "denied_by_rule")
    );
    let (_, status, reason, _) = curl(d.http, &[], &format!("http://unknown.test:{port}/")).await;
    assert_eq!((status.as_str(), reason.as_str()), ("403", "not_allowed"));
    // Domain fronting: the Host header names another host.
    let (_, status, reason, _) = curl(
        d.http,
        &["-H", "Host: other.test"],
        &format!("http://allowed.test:{port}/"),
    )
    .await;
    assert_eq!((status.as_str(), reason.as_str()), ("403", "host_mismatch"));
    // An allowed name that resolves to a private address (no exact
    // exception for 127.0.0.2): refused, never dialled.
    let (_, status, reason, _) = curl(d.http, &[], &format!("http://private.test:{port}/")).await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("403", "non_public_resolution")
    );
    // Hostile spellings of a denied name are denied too.
    for host in ["DENIED.test", "denied.test."] {
        let (_, status, _, _) = curl(d.http, &[], &format!("http://{host}:{port}/")).await;
        assert_eq!(status, "403", "{host}");
    }
    // The denied name was never looked up.
    assert!(
        !dns.asked
            .lock()
            .unwrap()
            .iter()
            .any(|n| n.starts_with("denied"))
    );
    // The engine's decision log has the denies with their rules.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = std::fs::read_to_string(dir.join("decisions.jsonl")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("\"reason\":\"denied_by_rule\"")
                && l.contains("deny domain denied.test")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_through_connect_with_sni_checks() {
    let dir = tempdir("https");
    let dns = fake_dns(&[
        ("allowed.test", "127.0.0.1"),
        ("other.test", "127.0.0.1"),
        ("denied.test", "127.0.0.1"),
    ])
    .await;
    let tls = tls_server(&dir).await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let port = tls.port;

    let (code, status, _, out) = curl(d.http, &[], &format!("https://allowed.test:{port}/")).await;
    assert_eq!((code, status.as_str()), (0, "200"), "{out}");
    assert!(out.contains("s_server"), "{out}");

    let (code, _, reason, _) = curl(d.http, &[], &format!("https://denied.test:{port}/")).await;
    assert_ne!(code, 0);
    assert_eq!(reason, "denied_by_rule");

    // curl asks to CONNECT to allowed.test but says other.test in the TLS
    // handshake: the tunnel is closed.
    let (code, _, _, _) = curl(
        d.http,
        &[
            "--connect-to",
            &format!("other.test:{port}:allowed.test:{port}"),
        ],
        &format!("https://other.test:{port}/"),
    )
    .await;
    assert_ne!(code, 0);
    assert!(
        records(&d)
            .iter()
            .any(|r| r["outcome"] == "refused: sni_mismatch"),
        "{:?}",
        records(&d)
    );

    // The same by hand, to see exactly where it stops.
    let mut s = TcpStream::connect(d.http).await.unwrap();
    s.write_all(
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    s.write_all(&gatehouse_egress::tls::build_client_hello(Some(
        "evil.example",
    )))
    .await
    .unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .unwrap();
    assert!(
        rest.is_empty(),
        "nothing of the server reaches a mismatched client"
    );

    // A CONNECT whose Host header disagrees with its target.
    let mut s = TcpStream::connect(d.http).await.unwrap();
    s.write_all(
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\nHost: denied.test:{port}\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(
        out.starts_with("HTTP/1.1 403") && out.contains("host_mismatch"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_on_and_off() {
    let dir = tempdir("socks");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let on = daemon(&dir, POLICY, dns.addr, None).await;
    let url = format!("http://allowed.test:{}/", server.port());
    let socks = |d: &Running| {
        vec![
            "-s".to_string(),
            "--max-time".into(),
            "10".into(),
            "--socks5-hostname".into(),
            d.socks.unwrap().to_string(),
            url.clone(),
        ]
    };
    let (code, body) = run("curl", socks(&on)).await;
    assert_eq!(code, 0);
    assert!(body.contains("hello from the test server"));
    let (code, _) = run(
        "curl",
        vec![
            "-s".into(),
            "--max-time".into(),
            "10".into(),
            "--socks5-hostname".into(),
            on.socks.unwrap().to_string(),
            format!("http://denied.test:{}/", server.port()),
        ],
    )
    .await;
    assert_ne!(code, 0);

    let dir2 = tempdir("socks-off");
    let off = daemon(
        &dir2,
        &POLICY.replace("socks5 on", "socks5 off"),
        dns.addr,
        None,
    )
    .await;
    let (code, _) = run("curl", socks(&off)).await;
    assert_ne!(code, 0, "socks5 off must refuse");
    assert!(
        records(&off)
            .iter()
            .any(|r| r["outcome"] == "refused: protocol_disabled"),
        "{:?}",
        records(&off)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_udp_relays_only_allowed_datagrams() {
    let dir = tempdir("udp");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let (echo_port, _) = udp_echo().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let (_control, relay) = udp_associate(d.socks.unwrap()).await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let datagram = |host: &str, payload: &[u8]| {
        let mut d = vec![0, 0, 0, 3, host.len() as u8];
        d.extend(host.as_bytes());
        d.extend(echo_port.to_be_bytes());
        d.extend(payload);
        d
    };
    client
        .send_to(&datagram("denied.test", b"nope"), relay)
        .await
        .unwrap();
    client
        .send_to(&datagram("allowed.test", b"ping"), relay)
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(
        buf[..n].ends_with(b"ping"),
        "only the allowed datagram comes back"
    );
    let got = tokio::time::timeout(Duration::from_millis(300), client.recv_from(&mut buf)).await;
    assert!(got.is_err(), "the denied datagram was not relayed");
    assert!(records(&d).iter().any(|r| {
        r["what"]
            .as_str()
            .is_some_and(|w| w.contains("denied.test"))
            && r["outcome"]
                .as_str()
                .is_some_and(|o| o.starts_with("dropped"))
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resolver_answers_only_allowed_names() {
    let dir = tempdir("dns");
    let dns = fake_dns(&[
        ("allowed.test", "127.0.0.1"),
        ("private.test", "127.0.0.2"),
        ("denied.test", "127.0.0.1"),
    ])
    .await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let server = d.dns.unwrap();
    let dig = |name: &str, kind: &str, tcp: bool| {
        let mut a = vec![
            format!("@{}", server.ip()),
            "-p".into(),
            server.port().to_string(),
            name.into(),
            kind.into(),
            "+tries=1".into(),
            "+time=3".into(),
        ];
        if tcp {
            a.push("+tcp".into());
        }
        a
    };
    let (_, out) = run("dig", dig("allowed.test", "A", false)).await;
    assert!(
        out.contains("status: NOERROR") && answers(&out, "allowed.test.", "127.0.0.1"),
        "{out}"
    );
    let (_, out) = run("dig", dig("allowed.test", "A", true)).await;
    assert!(
        out.contains("status: NOERROR") && answers(&out, "allowed.test.", "127.0.0.1"),
        "{out}"
    );
    let (_, out) = run("dig", dig("denied.test", "A", false)).await;
    assert!(out.contains("status: REFUSED"), "{out}");
    let (_, out) = run("dig", dig("exfil.attacker.example", "A", false)).await;
    assert!(out.contains("status: REFUSED"), "{out}");
    // Allowed name, private answer: the whole answer is refused.
    let (_, out) = run("dig", dig("private.test", "A", false)).await;
    assert!(
        out.contains("status: REFUSED") && !out.contains("127.0.0.2\n"),
        "{out}"
    );
    let (_, out) = run("dig", dig("allowed.test", "TXT", false)).await;
    assert!(out.contains("status: REFUSED"), "{out}");
    // Denied names never went upstream.
    let asked = dns.asked.lock().unwrap().clone();
    assert!(
        asked
            .iter()
            .all(|n| !n.starts_with("denied") && !n.starts_with("exfil")),
        "{asked:?}"
    );
    assert!(asked.iter().any(|n| n.starts_with("allowed")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_swap_never_mixes_two_policies_in_one_request() {
    let dir = tempdir("swap");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let path = dir.join("egress.policy");
    // B refuses what A allows, and is longer (the watcher sees every change).
    let b = POLICY.replace(
        "allow domain allowed.test",
        "deny domain allowed.test\n    allow domain also.test",
    );
    let swapper = {
        let (path, b) = (path.clone(), b.clone());
        tokio::spawn(async move {
            for i in 0..12 {
                tokio::time::sleep(Duration::from_millis(250)).await;
                std::fs::write(&path, if i % 2 == 0 { &b } else { POLICY }).unwrap();
            }
        })
    };
    let url = format!("http://allowed.test:{}/", server.port());
    let mut outcomes = Vec::new();
    while !swapper.is_finished() {
        let mut s = TcpStream::connect(d.http).await.unwrap();
        s.write_all(
            format!(
                "GET {url} HTTP/1.1\r\nHost: allowed.test:{}\r\nConnection: close\r\n\r\n",
                server.port()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        outcomes.push(out.starts_with("HTTP/1.1 200"));
    }
    let recs = records(&d);
    let mut seen = std::collections::HashSet::new();
    for r in &recs {
        let revs: Vec<&str> = r["revisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            revs.windows(2).all(|w| w[0] == w[1]),
            "one request, two policies: {r}"
        );
        if let Some(first) = revs.first() {
            seen.insert((
                first.to_string(),
                r["outcome"].as_str().unwrap().to_string(),
            ));
        }
    }
    // Both policies were in force during the stream, and each revision
    // always gave the same outcome.
    let revisions: std::collections::HashSet<_> = seen.iter().map(|(rev, _)| rev.clone()).collect();
    assert!(revisions.len() >= 2, "{seen:?}");
    assert_eq!(seen.len(), revisions.len(), "{seen:?}");
    assert!(outcomes.iter().any(|&o| o) && outcomes.iter().any(|&o| !o));

    // A broken file is refused; the policy in force stays.
    std::fs::write(&path, POLICY).unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    std::fs::write(&path, "policy egress { network { default allow ").unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (_, status, _, _) = curl(d.http, &[], &url).await;
    assert_eq!(status, "200");
    let (_, status, _, _) = curl(
        d.http,
        &[],
        &format!("http://elsewhere.test:{}/", server.port()),
    )
    .await;
    assert_eq!(
        status, "403",
        "the broken file's `default allow` is not in force"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_proxy_is_used_only_when_the_policy_says_so() {
    let dir1 = tempdir("up-outer");
    let dir2 = tempdir("up-inner");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let inner = daemon(&dir2, POLICY, dns.addr, None).await;
    let url = format!("http://allowed.test:{}/", server.port());
    // `upstream off`: the proxy goes direct although one is configured.
    let off = daemon(&dir1, POLICY, dns.addr, Some(inner.http.to_string())).await;
    let (_, status, _, _) = curl(off.http, &[], &url).await;
    assert_eq!(status, "200");
    assert!(records(&inner).is_empty());
    // `upstream on`: through the inner proxy, which decides too.
    let dir3 = tempdir("up-on");
    let on = daemon(
        &dir3,
        &POLICY.replace("upstream off", "upstream on"),
        dns.addr,
        Some(inner.http.to_string()),
    )
    .await;
    let (_, status, _, body) = curl(on.http, &[], &url).await;
    assert_eq!(status, "200", "{body}");
    // The record is written once the response is out.
    for _ in 0..50 {
        if records(&inner).iter().any(|r| r["outcome"] == "forwarded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        records(&inner).iter().any(|r| r["outcome"] == "forwarded"),
        "{:?}",
        records(&inner)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_as_the_readme_runs_it() {
    let dir = tempdir("bin");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let path = dir.join("egress.policy");
    std::fs::write(&path, POLICY).unwrap();
    let (mut child, proxy) = spawn_binary(&path, dns.addr).await;
    let url = format!("http://allowed.test:{}/", server.port());
    let (_, status, _, _) = curl(proxy, &[], &url).await;
    assert_eq!(status, "200");
    // SIGHUP reloads: a policy that denies it now.
    std::fs::write(
        &path,
        POLICY.replace("allow domain allowed.test", "deny domain allowed.test"),
    )
    .unwrap();
    let _ = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, status, reason, _) = curl(proxy, &[], &url).await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("403", "denied_by_rule")
    );
    // Refusal lines reach stderr through the daemon's own writer thread.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("http proxy on 127.0.0.1:")
            && stderr.contains("\"outcome\":\"refused: denied_by_rule\""),
        "{stderr}"
    );

    // A non-loopback listener is refused unless the policy allows it.
    let out = Command::new(env!("CARGO_BIN_EXE_gatehouse-egress"))
        .arg("--policy")
        .arg(&path)
        .args(["--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not allow listening on 0.0.0.0"));
}

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

/// Deadlines (issue 13, item 4), with short configured values: a request
/// head or a tunnel's first bytes dripped slowly are cut at the overall
/// deadline, and an established tunnel is closed when idle and when it has
/// lived too long. Every wait here is bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_and_held_tunnels_are_cut() {
    use std::time::Instant;
    let dir = tempdir("deadlines");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    // A server that accepts and says nothing, and one that trickles a byte
    // every 200 ms (for at most 20 s).
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let trickle = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let trickle_port = trickle.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = trickle.accept().await {
            tokio::spawn(async move {
                for _ in 0..100 {
                    if s.write_all(b".").await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        }
    });
    let timeouts = gatehouse_egress::relay::Timeouts {
        first_bytes: Duration::from_secs(1),
        tunnel_idle: Duration::from_secs(1),
        tunnel_total: Duration::from_secs(3),
        keepalive_idle: Duration::from_secs(1),
    };
    let d = daemon_with(&dir, POLICY, dns.addr, None, timeouts).await;

    /// Reads until the proxy closes (or 8 s pass); how long that took.
    async fn until_closed(s: &mut TcpStream) -> Duration {
        let t = Instant::now();
        let mut buf = [0u8; 1024];
        let _ = tokio::time::timeout(Duration::from_secs(8), async {
            while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
        })
        .await;
        t.elapsed()
    }
    async fn drip(s: &mut TcpStream, bytes: &[u8]) {
        for b in bytes {
            if s.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // A request head dripped a byte every 200 ms: cut at about 1 s.
    let mut s = TcpStream::connect(d.http).await.unwrap();
    let head = format!(
        "GET http://allowed.test:{}/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        server.port()
    );
    let t = Instant::now();
    tokio::select! {
        _ = drip(&mut s, head.as_bytes()) => {}
        _ = tokio::time::sleep(Duration::from_secs(6)) => {}
    }
    let t = t.elapsed() + until_closed(&mut s).await;
    assert!(t < Duration::from_secs(4), "a dripped head held for {t:?}");

    // CONNECT, then one byte and silence: closed at the first-bytes deadline.
    let mut s = connect_tunnel(d.http, server.port()).await;
    s.write_all(b"G").await.unwrap();
    let t = until_closed(&mut s).await;
    assert!(
        t < Duration::from_secs(3),
        "one byte then silence held for {t:?}"
    );

    // A ClientHello dripped a byte every 200 ms: cut at the overall deadline,
    // though no single read waits long.
    let mut s = connect_tunnel(d.http, server.port()).await;
    let hello = gatehouse_egress::tls::build_client_hello(Some("allowed.test"));
    let t = Instant::now();
    tokio::select! {
        _ = drip(&mut s, &hello) => {}
        _ = tokio::time::sleep(Duration::from_secs(6)) => {}
    }
    let t = t.elapsed() + until_closed(&mut s).await;
    assert!(
        t < Duration::from_secs(4),
        "a dripped ClientHello held for {t:?}"
    );

    // An established tunnel to a silent server: closed after 1 s idle.
    let mut s = connect_tunnel(d.http, silent_port).await;
    let get = format!("GET / HTTP/1.1\r\nHost: allowed.test:{silent_port}\r\n\r\n");
    s.write_all(get.as_bytes()).await.unwrap();
    let t = until_closed(&mut s).await;
    assert!(
        t >= Duration::from_millis(800) && t < Duration::from_secs(3),
        "idle tunnel closed after {t:?}"
    );

    // A busy tunnel (a byte every 200 ms): closed at the 3 s total.
    let mut s = connect_tunnel(d.http, trickle_port).await;
    let get = format!("GET / HTTP/1.1\r\nHost: allowed.test:{trickle_port}\r\n\r\n");
    s.write_all(get.as_bytes()).await.unwrap();
    let t = until_closed(&mut s).await;
    assert!(
        t >= Duration::from_millis(2500) && t < Duration::from_secs(5),
        "busy tunnel closed after {t:?}"
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
    s.write_all(&gatehouse_egress::tls::build_client_hello_with(
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

/// The SOCKS UDP relay (issue 13, item 9): it listens only on the
/// listener's address, and relays back only replies of peers the client
/// sent to and the policy allowed — not datagrams any local socket sends
/// to either of its ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socks_udp_relay_admits_only_replies_of_allowed_peers() {
    let dir = tempdir("udp-peers");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    // An echo target that reports where datagrams come from.
    let (echo_port, mut seen_rx) = udp_echo().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let (_control, relay) = udp_associate(d.socks.unwrap()).await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut ping = vec![0, 0, 0, 3, 12];
    ping.extend(b"allowed.test");
    ping.extend(echo_port.to_be_bytes());
    ping.extend(b"ping");
    let mut buf = [0u8; 512];
    /// Nothing arrives within 400 ms.
    async fn quiet(c: &UdpSocket, buf: &mut [u8; 512]) -> bool {
        tokio::time::timeout(Duration::from_millis(400), c.recv_from(buf))
            .await
            .is_err()
    }

    // The allowed exchange works, and shows the relay's outbound address.
    client.send_to(&ping, relay).await.unwrap();
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(buf[..n].ends_with(b"ping"));
    let outbound = seen_rx.recv().await.unwrap();

    // Another local socket writes to the client's side of the relay, and
    // to its outbound side: nothing reaches the client.
    let intruder = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    intruder
        .send_to(b"\0\0\0\x01\x7f\0\0\x01\0\x35forged", relay)
        .await
        .unwrap();
    assert!(
        quiet(&client, &mut buf).await,
        "a datagram from another socket reached the client"
    );
    intruder.send_to(b"forged reply", outbound).await.unwrap();
    assert!(
        quiet(&client, &mut buf).await,
        "a reply from a peer never sent to reached the client"
    );

    // The client's side listens on the listener's address only: the same
    // port on another loopback address relays nothing.
    let elsewhere = SocketAddr::from(([127, 0, 0, 2], relay.port()));
    client.send_to(&ping, elsewhere).await.unwrap();
    assert!(
        quiet(&client, &mut buf).await,
        "the relay answered on 127.0.0.2"
    );
    assert!(
        seen_rx.try_recv().is_err(),
        "the relay sent a datagram for 127.0.0.2"
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

/// A lenient HTTP/1.1 server that records every request head it reads (the
/// connection it came on, and its `Host`), reads `Content-Length` bodies,
/// and answers each with a short `200`, keeping the connection: the kind of
/// server a smuggled request would reach.
async fn recording_server() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<(usize, String)>>>) {
    use std::sync::{Arc, Mutex};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<(usize, String)>>> = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        let mut conn = 0;
        while let Ok((mut s, _)) = l.accept().await {
            conn += 1;
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf: Vec<u8> = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    // Lenient: a head ends at the first blank line, LF or CRLF.
                    let end = loop {
                        let text = String::from_utf8_lossy(&buf).to_string();
                        if let Some(i) = text.find("\r\n\r\n") {
                            break i + 4;
                        }
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    buf.drain(..end);
                    let field = |name: &str| {
                        head.lines().find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.trim()
                                .eq_ignore_ascii_case(name)
                                .then(|| v.trim().to_string())
                        })
                    };
                    let host = field("host").unwrap_or_default();
                    let mut len: usize = field("content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    if field("transfer-encoding").is_some() {
                        // Chunked (simply): the body ends at `0` CRLF CRLF.
                        len = loop {
                            let text = String::from_utf8_lossy(&buf).to_string();
                            if text.starts_with("0\r\n\r\n") {
                                break 5;
                            }
                            if let Some(i) = text.find("\r\n0\r\n\r\n") {
                                break i + 7;
                            }
                            match s.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                    }
                    while buf.len() < len {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..len);
                    log.lock().unwrap().push((conn, host));
                    let body = "seen\n";
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if s.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, seen)
}

/// Writes `bytes` and reads until the proxy closes (at most 5 s): the
/// status codes of the responses that came back.
async fn statuses(s: &mut TcpStream, bytes: &[u8]) -> Vec<String> {
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out)
        .split('\n')
        .filter_map(|l| l.strip_prefix("HTTP/1.1 "))
        .filter_map(|l| l.split(' ').next())
        .map(String::from)
        .collect()
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

/// `dig` against the daemon's resolver: its output.
async fn dig(server: SocketAddr, args: &[&str]) -> String {
    let mut a = vec![
        format!("@{}", server.ip()),
        "-p".into(),
        server.port().to_string(),
        "+tries=1".into(),
        "+time=3".into(),
    ];
    a.extend(args.iter().map(|s| s.to_string()));
    run("dig", a).await.1
}

/// A scripted upstream whose answers the test changes as it goes: by name,
/// the records to answer (A questions only; AAAA gets none).
type Script = std::sync::Arc<
    std::sync::Mutex<std::collections::HashMap<String, Vec<hickory_proto::rr::Record>>>,
>;

async fn scripted_dns() -> (FakeDns, Script) {
    use hickory_proto::op::ResponseCode;
    use hickory_proto::rr::RecordType;
    let script: Script = Default::default();
    let s = script.clone();
    let dns = testing::fake_dns_fn(std::sync::Arc::new(move |name: &str, kind| {
        if name.starts_with("silent.") {
            return None;
        }
        let records = match kind {
            RecordType::A => s.lock().unwrap().get(name).cloned(),
            _ => Some(Vec::new()),
        };
        Some(match records {
            Some(r) => (ResponseCode::NoError, r),
            None => (ResponseCode::NXDomain, Vec::new()),
        })
    }))
    .await
    .unwrap();
    (dns, script)
}

fn a_rec(owner: &str, ip: &str, ttl: u32) -> hickory_proto::rr::Record {
    testing::addr_record(owner, ip.parse().unwrap(), ttl).unwrap()
}

/// CNAME chains and foreign records (issue 13, item 10): every name of a
/// chain is decided with `dns`, records owned by names off the chain are
/// dropped by the resolver and ignored by the proxy's own lookup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cname_chains_are_decided_and_foreign_records_dropped() {
    let dir = tempdir("cname");
    let (dns, script) = scripted_dns().await;
    let server = http_server().await;
    let port = server.port();
    {
        let mut s = script.lock().unwrap();
        // other.test → allowed.test: both allowed; a foreign record rides along.
        s.insert(
            "other.test.".into(),
            vec![
                testing::cname_record("other.test.", "allowed.test.", 60).unwrap(),
                a_rec("allowed.test.", "127.0.0.1", 60),
                a_rec("denied.test.", "127.0.0.9", 60),
            ],
        );
        // allowed.test → denied.test.
        s.insert(
            "allowed.test.".into(),
            vec![
                testing::cname_record("allowed.test.", "denied.test.", 60).unwrap(),
                a_rec("denied.test.", "127.0.0.1", 60),
            ],
        );
        // private.test answered only with a record owned by another name.
        s.insert(
            "private.test.".into(),
            vec![a_rec("denied.test.", "127.0.0.1", 60)],
        );
    }
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let resolver = d.dns.unwrap();
    let out = dig(resolver, &["other.test", "A"]).await;
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(
        out.contains("CNAME\tallowed.test.") && answers(&out, "allowed.test.", "127.0.0.1"),
        "{out}"
    );
    assert!(
        !out.contains("127.0.0.9") && !out.contains("denied.test.\t"),
        "{out}"
    );
    let out = dig(resolver, &["allowed.test", "A"]).await;
    assert!(
        out.contains("status: REFUSED") && !out.contains("127.0.0.1\n"),
        "{out}"
    );
    let out = dig(resolver, &["private.test", "A"]).await;
    assert!(
        out.contains("status: NOERROR") && out.contains("ANSWER: 0"),
        "{out}"
    );
    // The proxy's own lookup takes only the chain's records: private.test
    // has no address of its own, so nothing is dialled.
    let (_, status, reason, _) = curl(d.http, &[], &format!("http://private.test:{port}/")).await;
    assert_eq!((status.as_str(), reason.as_str()), ("502", "lookup_failed"));
    let (_, status, _, _) = curl(d.http, &[], &format!("http://other.test:{port}/")).await;
    assert_eq!(status, "200");
}

/// The answer cache (issue 13, item 7): an answer the policy refused is
/// never kept, a fresh answer replaces the old one, and expired entries
/// are evicted (the metrics show the table shrink).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_cache_replaces_keeps_only_vetted_answers_and_evicts() {
    let dir = tempdir("cache");
    let (dns, script) = scripted_dns().await;
    // Two servers on one port: 127.0.0.1 says "old", 127.0.0.5 says "new".
    let old = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = old.local_addr().unwrap().port();
    let new = tokio::net::TcpListener::bind(("127.0.0.5", port))
        .await
        .unwrap();
    for (l, body) in [(old, "old"), (new, "new")] {
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 4096];
                    let _ = s.read(&mut b).await;
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{body}"
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
    }
    let policy = POLICY.replace(
        "allow ip 127.0.0.1",
        "allow ip 127.0.0.1\n    allow ip 127.0.0.5",
    );
    let d = daemon(&dir, &policy, dns.addr, None).await;
    let url = format!("http://allowed.test:{port}/");
    let set = |ip: &str, ttl: u32| {
        script.lock().unwrap().insert(
            "allowed.test.".into(),
            vec![a_rec("allowed.test.", ip, ttl)],
        );
    };
    // A private answer is refused, and not kept: once DNS moves on, the
    // name works at once.
    set("127.0.0.2", 300);
    let (_, status, reason, _) = curl(d.http, &[], &url).await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("403", "non_public_resolution")
    );
    set("127.0.0.1", 1);
    let (_, status, _, body) = curl(d.http, &[], &url).await;
    assert_eq!(status, "200", "{body}");
    assert!(body.ends_with("old"), "{body}");
    // DNS moves to 127.0.0.5: after the TTL, the fresh answer replaces the
    // old one, and only the new address is dialled.
    set("127.0.0.5", 1);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (_, status, _, body) = curl(d.http, &[], &url).await;
    assert_eq!(status, "200", "{body}");
    assert!(body.ends_with("new"), "{body}");
    // Names resolved through the resolver fill the table; expired ones
    // leave it.
    {
        let mut s = script.lock().unwrap();
        for i in 0..40 {
            s.insert(
                format!("n{i}.other.test."),
                vec![a_rec(&format!("n{i}.other.test."), "1.1.1.1", 1)],
            );
        }
    }
    let policy = policy.replace("allow domain other.test", "allow domain **.other.test");
    std::fs::write(dir.join("egress.policy"), &policy).unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let names = dir.join("names.txt");
    std::fs::write(
        &names,
        (0..40)
            .map(|i| format!("n{i}.other.test A\n"))
            .collect::<String>(),
    )
    .unwrap();
    let out = dig(d.dns.unwrap(), &["-f", names.to_str().unwrap()]).await;
    assert_eq!(out.matches("status: NOERROR").count(), 40, "{out}");
    let metric = |text: &str, name: &str| -> i64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(-1)
    };
    let scrape = || async {
        run(
            "curl",
            vec![
                "-s".into(),
                format!("http://{}/metrics", d.metrics.unwrap()),
            ],
        )
        .await
        .1
    };
    let cached = metric(&scrape().await, "gatehouse_egress_resolver_cache_entries");
    assert!(cached >= 40, "{cached}");
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        metric(&scrape().await, "gatehouse_egress_resolver_cache_entries"),
        0
    );
}

/// The binary with extra arguments, under a descriptor limit when given:
/// (child, the HTTP proxy's address); the child has not necessarily started
/// listening when it exits at once.
fn spawn_limited(
    policy: &Path,
    dns: SocketAddr,
    nofile: Option<u32>,
    extra: &[String],
) -> (std::process::Child, SocketAddr) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut args: Vec<String> = vec![
        "--policy".into(),
        policy.display().to_string(),
        "--http".into(),
        format!("127.0.0.1:{port}"),
        "--upstream-dns".into(),
        dns.to_string(),
    ];
    args.extend(extra.iter().cloned());
    let bin = env!("CARGO_BIN_EXE_gatehouse-egress");
    let child = match nofile {
        Some(n) => Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
            .arg(bin)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        None => Command::new(bin)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    };
    (child, format!("127.0.0.1:{port}").parse().unwrap())
}

/// CPU seconds a process has used (utime + stime from /proc).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Out of descriptors (issue 13, items 5 and 6): a cap the descriptor limit
/// cannot hold is refused at start; by default the cap fits the limit, so
/// held connections queue instead of spinning the accept loop; idle
/// DNS-over-TCP connections have a cap and a timeout of their own and
/// cannot take the HTTP proxy down; and questions that upstream never
/// answers share one socket instead of holding one each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptor_exhaustion_neither_spins_nor_starves_the_proxy() {
    let dir = tempdir("descriptors");
    let (dns, script) = scripted_dns().await;
    script.lock().unwrap().insert(
        "allowed.test.".into(),
        vec![a_rec("allowed.test.", "127.0.0.1", 60)],
    );
    let server = http_server().await;
    let policy = dir.join("egress.policy");
    std::fs::write(&policy, POLICY).unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // A cap the limit cannot hold: refused, with the reason.
    let (child, _) = spawn_limited(
        &policy,
        dns.addr,
        Some(512),
        &["--max-connections".into(), "1000".into()],
    );
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("file descriptors") && err.contains("--max-connections"),
        "{err}"
    );

    // The default cap fits the limit.
    let dns_port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let resolver: SocketAddr = format!("127.0.0.1:{dns_port}").parse().unwrap();
    let (child, proxy) = spawn_limited(
        &policy,
        dns.addr,
        Some(512),
        &["--dns".into(), resolver.to_string()],
    );
    let child = Kill(child);
    let pid = child.0.id();
    for _ in 0..100 {
        if TcpStream::connect(proxy).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = format!("http://allowed.test:{}/", server.port());
    let (_, status, _, _) = curl(proxy, &[], &url).await;
    assert_eq!(status, "200");

    // 600 held proxy connections and 600 idle DNS-over-TCP connections,
    // beyond what 512 descriptors hold.
    // Connected all at once, each given a second (beyond the accept queue
    // the kernel drops SYNs).
    let mut tries = tokio::task::JoinSet::new();
    for i in 0..1200 {
        let to = if i % 2 == 0 { proxy } else { resolver };
        tries.spawn(async move {
            tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(to)).await
        });
    }
    let mut held = Vec::new();
    while let Some(r) = tries.join_next().await {
        if let Ok(Ok(Ok(s))) = r {
            held.push(s);
        }
    }
    assert!(held.len() > 500, "{}", held.len());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spent = cpu_seconds(pid) - before;
    assert!(
        spent < 0.5,
        "the accept loops spin: {spent} s of CPU in 2 s"
    );
    assert!(open_descriptors(pid) <= 512);
    // The held proxy connections hit the first-bytes deadline (10 s) and
    // the DNS ones their idle timeout (10 s); then the proxy serves again,
    // and so does the resolver over TCP.
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, status, _, _) = curl(proxy, &[], &url).await;
    assert_eq!(status, "200");
    let out = dig(resolver, &["allowed.test", "A", "+tcp"]).await;
    assert!(out.contains("status: NOERROR"), "{out}");

    // An idle DNS-over-TCP connection is closed after its 10 s, while
    // 2 000 questions that upstream never answers share one upstream
    // socket instead of holding one each.
    let mut idle = TcpStream::connect(resolver).await.unwrap();
    let opened = std::time::Instant::now();
    let base = open_descriptors(pid);
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for i in 0..2000u16 {
        let mut q = hickory_proto::op::Message::new(
            i,
            hickory_proto::op::MessageType::Query,
            hickory_proto::op::OpCode::Query,
        );
        let name = hickory_proto::rr::Name::from_ascii("silent.allowed.test.").unwrap();
        q.add_query(hickory_proto::op::Query::query(
            name,
            hickory_proto::rr::RecordType::A,
        ));
        let _ = sock.send_to(&q.to_vec().unwrap(), resolver).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = open_descriptors(pid);
    assert!(
        during <= base + 8,
        "{base} descriptors before, {during} while 2000 questions wait"
    );
    let mut b = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(15), idle.read(&mut b)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
    let after = opened.elapsed();
    assert!(
        after >= Duration::from_secs(9) && after < Duration::from_secs(13),
        "{after:?}"
    );
}

/// Operability (issue 13, item 14): the metrics endpoint speaks the
/// Prometheus text format and counts what happened, and every request's
/// access record reaches the decision log beside its decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_access_records() {
    let dir = tempdir("metrics");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1"), ("denied.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let port = server.port();
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let (_, status, _, _) = curl(d.http, &[], &format!("http://allowed.test:{port}/")).await;
    assert_eq!(status, "200");
    let (_, status, _, _) = curl(d.http, &[], &format!("http://denied.test:{port}/")).await;
    assert_eq!(status, "403");
    let (_, status, _, _) = curl(
        d.http,
        &["-H", "X-A : 1"],
        &format!("http://allowed.test:{port}/"),
    )
    .await;
    assert_eq!(status, "400");
    let (code, text) = run(
        "curl",
        vec![
            "-s".into(),
            "-f".into(),
            format!("http://{}/metrics", d.metrics.unwrap()),
        ],
    )
    .await;
    assert_eq!(code, 0, "{text}");
    let value = |series: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    };
    assert_eq!(
        value("gatehouse_egress_requests_total{kind=\"http\"}"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value("gatehouse_egress_proxy_refusals_total{reason=\"bad_request\"}"),
        Some(1.0),
        "{text}"
    );
    assert!(
        value("gatehouse_egress_decisions_total{outcome=\"deny\",reason=\"denied_by_rule\"}")
            >= Some(1.0),
        "{text}"
    );
    assert!(
        value("gatehouse_egress_decisions_total{outcome=\"allow\",reason=\"allowed_by_rule\"}")
            >= Some(2.0),
        "{text}"
    );
    assert!(
        value("gatehouse_egress_open_connections").is_some(),
        "{text}"
    );
    assert!(
        value("gatehouse_egress_upstream_connections_total{how=\"dialled\"}") >= Some(1.0),
        "{text}"
    );
    let rev = gatehouse_egress::policy::short(d.policies.store.load().revision()).to_string();
    assert!(
        text.contains(&format!("gatehouse_egress_policy_info{{revision=\"{}", rev)),
        "{text}"
    );
    // Every series has its HELP and TYPE, every sample line is NAME{...} VALUE.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let name = l.split(['{', ' ']).next().unwrap();
        assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
        assert!(l.rsplit(' ').next().unwrap().parse::<f64>().is_ok(), "{l}");
    }
    let (_, status, _, _) = curl(d.metrics.unwrap(), &[], "http://anything.test/").await;
    assert_eq!(status, "404");
    // The decision log holds the access records too.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = std::fs::read_to_string(dir.join("decisions.jsonl")).unwrap();
    let access: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("access").cloned())
        .collect();
    let outcomes: Vec<&str> = access
        .iter()
        .filter_map(|a| a["outcome"].as_str())
        .collect();
    assert!(outcomes.contains(&"forwarded"), "{outcomes:?}");
    assert!(
        outcomes.contains(&"refused: denied_by_rule"),
        "{outcomes:?}"
    );
    assert!(outcomes.contains(&"refused: bad_request"), "{outcomes:?}");
    assert!(
        access
            .iter()
            .all(|a| a["time"].as_str().is_some_and(|t| t.ends_with('Z')))
    );
}

/// Answers are matched to questions (issue 13, item 6): an upstream reply
/// that carries the question's id but another question — what an off-path
/// spoofer who guessed the id sends first — is ignored, and the genuine
/// answer that follows is the one given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_answers_must_match_the_question() {
    use hickory_proto::op::{Message, MessageType, OpCode};
    let dir = tempdir("spoof");
    let upstream = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let up_addr = upstream.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = upstream.recv_from(&mut buf).await {
            let q = Message::from_vec(&buf[..n]).unwrap();
            let question = q.queries[0].clone();
            let reply = |name: &str, ip: &str, asked: bool| {
                let mut r = Message::new(q.metadata.id, MessageType::Response, OpCode::Query);
                let mut shown = question.clone();
                if !asked {
                    shown.set_name(hickory_proto::rr::Name::from_ascii(name).unwrap());
                }
                r.add_query(shown);
                if question.query_type() == hickory_proto::rr::RecordType::A {
                    r.add_answer(testing::addr_record(name, ip.parse().unwrap(), 60).unwrap());
                }
                r.to_vec().unwrap()
            };
            let name = question.name().to_ascii();
            // The spoof first: same id, another question and answer.
            upstream
                .send_to(&reply("denied.test.", "10.9.9.9", false), from)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            upstream
                .send_to(&reply(&name, "127.0.0.1", true), from)
                .await
                .unwrap();
        }
    });
    let d = daemon(&dir, POLICY, up_addr, None).await;
    let out = dig(d.dns.unwrap(), &["allowed.test", "A"]).await;
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(answers(&out, "allowed.test.", "127.0.0.1"), "{out}");
    assert!(!out.contains("10.9.9.9"), "{out}");
}

/// Whether dig's answer section has an A record `owner ... ip`.
fn answers(out: &str, owner: &str, ip: &str) -> bool {
    out.lines()
        .any(|l| l.starts_with(owner) && l.contains("\tA\t") && l.ends_with(ip))
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

/// An upstream proxy that records each request head it is sent and answers
/// `200 ok`: what gatehouse writes to an upstream, byte for byte.
async fn recording_upstream() -> (SocketAddr, Arc<std::sync::Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut b = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut b).await {
                        Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
                        _ => return,
                    }
                }
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf).into_owned());
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    (addr, heads)
}

/// Sends raw bytes to the proxy; the response's status line.
async fn raw_status(proxy: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Issue 35, findings 1 and 4: an upstream proxy gets a target rebuilt from
/// what was decided — never the client's bytes, which another parser may
/// read as another host (`?@denied`, `#@denied`) — and an HTTP/1.0 request
/// without `Host` gets the decided one. A fragment is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_proxy_gets_the_decided_target_not_the_clients_bytes() {
    let dir = tempdir("up-rebuilt");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let (upstream, heads) = recording_upstream().await;
    let d = daemon(
        &dir,
        &POLICY.replace("upstream off", "upstream on"),
        dns.addr,
        Some(upstream.to_string()),
    )
    .await;
    let status = raw_status(
        d.http,
        "GET http://allowed.test:18080?@denied.test:18081/ HTTP/1.1\r\nHost: allowed.test:18080\r\n\r\n",
    )
    .await;
    assert!(status.contains(" 200 "), "{status}");
    let status = raw_status(d.http, "GET http://allowed.test:18080/x HTTP/1.0\r\n\r\n").await;
    assert!(status.contains(" 200 "), "{status}");
    let status = raw_status(
        d.http,
        "GET http://allowed.test:18080#@denied.test:18081/ HTTP/1.1\r\nHost: allowed.test:18080\r\n\r\n",
    )
    .await;
    assert!(status.contains(" 400 "), "{status}");
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert!(
        heads[0].starts_with("GET http://allowed.test:18080/?@denied.test:18081/ HTTP/1.1\r\n"),
        "{heads:?}"
    );
    assert!(
        heads[1].starts_with(
            "GET http://allowed.test:18080/x HTTP/1.0\r\nHost: allowed.test:18080\r\n"
        ),
        "{heads:?}"
    );
}

/// Reads one response (head and `Content-Length` body) from a stream,
/// within 5 s: the head's text, or "" when none came.
async fn one_response(s: &mut TcpStream) -> String {
    let go = async {
        let mut buf = Vec::new();
        let mut b = [0u8; 1024];
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match s.read(&mut b).await {
                Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
                _ => return String::from_utf8_lossy(&buf).into_owned(),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        while buf.len() < end + len {
            match s.read(&mut b).await {
                Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
                _ => break,
            }
        }
        head
    };
    tokio::time::timeout(Duration::from_secs(5), go)
        .await
        .unwrap_or_default()
}

/// Issue 35, finding 8: each request inside a plain-HTTP CONNECT tunnel is
/// decided again with the policy in force, so a reload that denies the
/// host ends the tunnel at its next request (403 `denied_by_rule`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_denies_a_host_ends_its_plain_http_tunnels() {
    let dir = tempdir("tunnel-revoke");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let port = server.port();
    let mut s = TcpStream::connect(d.http).await.unwrap();
    let connect =
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n");
    s.write_all(connect.as_bytes()).await.unwrap();
    let head = one_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let get = format!("GET / HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n");
    s.write_all(get.as_bytes()).await.unwrap();
    let head = one_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The same tunnel carries another request while the policy allows it.
    s.write_all(get.as_bytes()).await.unwrap();
    let head = one_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // A reload denies the host: the tunnel's next request is refused.
    std::fs::write(
        dir.join("egress.policy"),
        POLICY.replace("allow domain allowed.test", "deny domain allowed.test"),
    )
    .unwrap();
    let mut seen = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if d.policies.store.load().single().is_some_and(|p| {
            !p.connect("allowed.test", port, gatehouse::Via::Https)
                .is_allow()
        }) {
            seen = true;
            break;
        }
    }
    assert!(seen, "the reload was not seen");
    s.write_all(get.as_bytes()).await.unwrap();
    let head = one_response(&mut s).await;
    assert!(
        head.starts_with("HTTP/1.1 403") && head.contains("X-Gatehouse-Reason: denied_by_rule"),
        "{head}"
    );
}
