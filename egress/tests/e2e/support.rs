//! What every end-to-end test shares: the daemon on loopback, real `curl`,
//! `dig` and `openssl s_server`, a fake upstream DNS server that records
//! every question it is asked, and recording origins and upstreams.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use gatehouse_egress::testing::{self, FakeDns};
use gatehouse_egress::{Config, Running, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

pub(crate) const POLICY: &str = "policy egress {
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

pub(crate) fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gatehouse-egress-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) async fn fake_dns(table: &[(&str, &str)]) -> FakeDns {
    testing::fake_dns(table).await.unwrap()
}

pub(crate) async fn http_server() -> SocketAddr {
    testing::http_server("hello from the test server\n")
        .await
        .unwrap()
}

/// `openssl s_server -www` on a free loopback port, with a throwaway
/// self-signed certificate.
pub(crate) struct TlsServer {
    pub(crate) port: u16,
    child: std::process::Child,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

pub(crate) async fn tls_server(dir: &Path) -> TlsServer {
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

pub(crate) async fn daemon(
    dir: &Path,
    policy: &str,
    dns: SocketAddr,
    upstream_proxy: Option<String>,
) -> Running {
    daemon_with(dir, policy, dns, upstream_proxy, Default::default()).await
}

pub(crate) async fn daemon_with(
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
pub(crate) async fn run(cmd: &str, args: Vec<String>) -> (i32, String) {
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
pub(crate) async fn curl(
    proxy: SocketAddr,
    extra: &[&str],
    url: &str,
) -> (i32, String, String, String) {
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

pub(crate) fn records(r: &Running) -> Vec<serde_json::Value> {
    r.policies.records.as_ref().unwrap().lock().unwrap().clone()
}

/// A UDP echo target on loopback: its port, and where each datagram came
/// from.
pub(crate) async fn udp_echo() -> (u16, tokio::sync::mpsc::UnboundedReceiver<SocketAddr>) {
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
pub(crate) async fn udp_associate(socks: SocketAddr) -> (TcpStream, SocketAddr) {
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
pub(crate) async fn connect_tunnel(proxy: SocketAddr, port: u16) -> TcpStream {
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
pub(crate) async fn spawn_binary(
    policy: &Path,
    dns: SocketAddr,
) -> (std::process::Child, SocketAddr) {
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

/// A lenient HTTP/1.1 server that records every request head it reads (the
/// connection it came on, and its `Host`), reads `Content-Length` bodies,
/// and answers each with a short `200`, keeping the connection: the kind of
/// server a smuggled request would reach.
pub(crate) async fn recording_server()
-> (u16, std::sync::Arc<std::sync::Mutex<Vec<(usize, String)>>>) {
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
pub(crate) async fn statuses(s: &mut TcpStream, bytes: &[u8]) -> Vec<String> {
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

/// `dig` against the daemon's resolver: its output.
pub(crate) async fn dig(server: SocketAddr, args: &[&str]) -> String {
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
pub(crate) type Script = std::sync::Arc<
    std::sync::Mutex<std::collections::HashMap<String, Vec<hickory_proto::rr::Record>>>,
>;

pub(crate) async fn scripted_dns() -> (FakeDns, Script) {
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

pub(crate) fn a_rec(owner: &str, ip: &str, ttl: u32) -> hickory_proto::rr::Record {
    testing::addr_record(owner, ip.parse().unwrap(), ttl).unwrap()
}

/// The binary with extra arguments, under a descriptor limit when given:
/// (child, the HTTP proxy's address); the child has not necessarily started
/// listening when it exits at once.
pub(crate) fn spawn_limited(
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
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

pub(crate) fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Whether dig's answer section has an A record `owner ... ip`.
pub(crate) fn answers(out: &str, owner: &str, ip: &str) -> bool {
    out.lines()
        .any(|l| l.starts_with(owner) && l.contains("\tA\t") && l.ends_with(ip))
}

/// An upstream proxy that records each request head it is sent and answers
/// `200 ok`: what gatehouse writes to an upstream, byte for byte.
pub(crate) async fn recording_upstream() -> (SocketAddr, Arc<std::sync::Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                // A `CONNECT` is answered 200, and the request inside the
                // tunnel is recorded and answered too.
                loop {
                    let mut buf = Vec::new();
                    let mut b = [0u8; 1024];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut b).await {
                            Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).into_owned();
                    let connect = head.starts_with("CONNECT ");
                    seen.lock().unwrap().push(head);
                    if connect {
                        let _ = s
                            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                            .await;
                        continue;
                    }
                    let _ = s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        )
                        .await;
                    return;
                }
            });
        }
    });
    (addr, heads)
}

/// Sends raw bytes to the proxy; the response's status line.
pub(crate) async fn raw_status(proxy: SocketAddr, request: &str) -> String {
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

/// Reads one response (head and `Content-Length` body) from a stream,
/// within 5 s: the head's text, or "" when none came.
pub(crate) async fn one_response(s: &mut TcpStream) -> String {
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
