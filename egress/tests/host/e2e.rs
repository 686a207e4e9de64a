//! Host mode end to end (issue 30): the daemon in a namespace of its own
//! ("host") serving three sandboxes — each a namespace behind a veth pair,
//! with its own policy — and origins in a fourth namespace, on addresses
//! that look public (11.0.0.0/24: nothing leaves the test's namespaces).
//! The clients are real programs with no proxy settings, run inside the
//! sandboxes: curl (HTTP and HTTPS against a test CA), `openssl s_client`,
//! `dig`, bash's `/dev/tcp` and `/dev/udp`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gatehouse_egress::testing::{Answerer, Body, addr_record, fake_dns_at, http_server_with};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

use super::Netns;

/// Origins: name, address, and the DNS TTL of its answer.
const ORIGINS: &[(&str, &str, u32)] = &[
    ("allowed.test", "11.0.0.1", 60),
    ("denied.test", "11.0.0.2", 60),
    ("ssh.test", "11.0.0.3", 2),
    ("other.test", "11.0.0.4", 60),
];

const POLICY_ONE: &str = "policy one {
  network {
    default deny
    allow domain allowed.test
    allow domain ssh.test port 22
  }
}
";

const POLICY_TWO: &str = "policy two {
  network {
    default deny
    allow domain other.test
  }
}
";

const POLICY_THREE: &str = "policy three {
  network {
    default deny
    allow domain denied.test
  }
}
";

/// Connections (or datagrams) each origin listener saw, by "name:port".
#[derive(Clone, Default)]
struct Seen(Arc<std::sync::Mutex<Vec<Counted>>>);

/// One listener's key and its count.
type Counted = (String, Arc<AtomicUsize>);

impl Seen {
    fn counter(&self, key: &str) -> Arc<AtomicUsize> {
        let c = Arc::new(AtomicUsize::new(0));
        self.0.lock().unwrap().push((key.to_string(), c.clone()));
        c
    }

    fn get(&self, key: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .find(|(k, _)| k == key)
            .map_or(0, |(_, c)| c.load(Ordering::SeqCst))
    }
}

/// An HTTP origin answering every request with its own name and the
/// `Host` it was sent, keeping the connection.
async fn http_origin(addr: SocketAddr, name: &'static str, seen: Arc<AtomicUsize>) {
    let body: Body = Arc::new(move |head: &str| {
        let host = head
            .lines()
            .find_map(|l| l.strip_prefix("Host: "))
            .unwrap_or("");
        format!("origin {name} saw host {host}\n")
    });
    http_server_with(addr, body, Some(seen)).await.unwrap();
}

/// A server that speaks first (as SSH does), naming itself.
async fn banner_origin(addr: SocketAddr, name: &'static str, seen: Arc<AtomicUsize>) {
    let l = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let _ = s
                    .write_all(format!("SSH-2.0-origin-{name}\r\n").as_bytes())
                    .await;
                let mut sink = [0u8; 256];
                while let Ok(n) = s.read(&mut sink).await {
                    if n == 0 {
                        break;
                    }
                }
            });
        }
    });
}

/// A UDP port counting what reaches it.
async fn udp_origin(addr: SocketAddr, seen: Arc<AtomicUsize>) {
    let u = UdpSocket::bind(addr).await.unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while u.recv_from(&mut buf).await.is_ok() {
            seen.fetch_add(1, Ordering::SeqCst);
        }
    });
}

fn dns_table() -> Answerer {
    Arc::new(|name, kind| {
        let found = ORIGINS
            .iter()
            .find(|(n, _, _)| name.trim_end_matches('.') == *n);
        match found {
            Some((_, ip, ttl)) if kind == RecordType::A => Some((
                ResponseCode::NoError,
                addr_record(name, ip.parse().unwrap(), *ttl)
                    .into_iter()
                    .collect(),
            )),
            Some(_) => Some((ResponseCode::NoError, Vec::new())),
            None => Some((ResponseCode::NXDomain, Vec::new())),
        }
    })
}

/// `openssl` with `args`, in `dir`; panics when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test CA and, for each name, a key and a certificate it signed.
fn test_ca(dir: &Path, names: &[&str]) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec![
        "req",
        "-x509",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=gatehouse test CA",
    ];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    openssl(dir, &ca);
    for n in names {
        let (key, csr, pem, ext) = (
            format!("{n}.key"),
            format!("{n}.csr"),
            format!("{n}.pem"),
            format!("{n}.ext"),
        );
        std::fs::write(dir.join(&ext), format!("subjectAltName=DNS:{n}\n")).unwrap();
        let subj = format!("/CN={n}");
        let mut req = vec!["req", "-nodes", "-subj", &subj];
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr]);
        openssl(dir, &req);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                &ext,
                "-out",
                &pem,
            ],
        );
    }
}

/// Everything one run needs: the namespaces, the daemon, the origins.
struct World {
    dir: PathBuf,
    host: Netns,
    sandboxes: Vec<Netns>,
    _origins: Netns,
    seen: Seen,
    daemon: Option<Child>,
    tls: Vec<Child>,
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
        for c in &mut self.tls {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl World {
    fn new() -> World {
        let dir = std::env::temp_dir().join(format!("gatehouse-host-e2e-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let host = Netns::new("h");
        let origins = Netns::new("o");
        host.link("o0", "11.0.0.254/24", &origins, "eth0", "11.0.0.1/24");
        for (_, ip, _) in ORIGINS.iter().skip(1) {
            origins.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
        }
        origins.ip(&["addr", "add", "11.0.0.53/24", "dev", "eth0"]);
        origins.ip(&["route", "add", "10.200.0.0/16", "via", "11.0.0.254"]);
        let fwd = host.exec("sysctl", &["-qw", "net.ipv4.ip_forward=1"]);
        assert!(fwd.status.success());
        let mut sandboxes = Vec::new();
        for k in 1..=3 {
            let s = Netns::new(&format!("s{k}"));
            host.link(
                &format!("s{k}"),
                &format!("10.200.{k}.1/24"),
                &s,
                "eth0",
                &format!("10.200.{k}.2/24"),
            );
            s.ip(&["route", "add", "default", "via", &format!("10.200.{k}.1")]);
            // What the sandbox's programs read: any nameserver will do, the
            // kernel sends every question to the daemon's resolver.
            let etc = PathBuf::from(format!("/etc/netns/{}", s.0));
            std::fs::create_dir_all(&etc).unwrap();
            std::fs::write(etc.join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
            std::fs::write(etc.join("hosts"), "127.0.0.1 localhost\n").unwrap();
            sandboxes.push(s);
        }
        let seen = Seen::default();
        let s2 = seen.clone();
        origins.serve(move || async move {
            for (name, ip, _) in ORIGINS {
                let at = |port: u16| SocketAddr::new(ip.parse().unwrap(), port);
                http_origin(at(80), name, s2.counter(&format!("{name}:80"))).await;
                banner_origin(at(22), name, s2.counter(&format!("{name}:22"))).await;
                udp_origin(at(443), s2.counter(&format!("{name}:udp443"))).await;
            }
            fake_dns_at("11.0.0.53:53".parse().unwrap(), dns_table())
                .await
                .unwrap();
        });
        test_ca(&dir, &["allowed.test", "denied.test"]);
        let mut tls = Vec::new();
        for (name, ip) in [("allowed.test", "11.0.0.1"), ("denied.test", "11.0.0.2")] {
            let child = Command::new("ip")
                .args([
                    "netns", "exec", &origins.0, "openssl", "s_server", "-quiet", "-www",
                ])
                .args(["-accept", &format!("{ip}:443")])
                .args([
                    "-cert",
                    &format!("{name}.pem"),
                    "-key",
                    &format!("{name}.key"),
                ])
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            tls.push(child);
        }
        for (file, text) in [
            ("one.policy", POLICY_ONE),
            ("two.policy", POLICY_TWO),
            ("three.policy", POLICY_THREE),
        ] {
            std::fs::write(dir.join(file), text).unwrap();
        }
        let mut table = String::new();
        for (k, name) in ["one", "two", "three"].iter().enumerate() {
            table.push_str(&format!(
                "[[sandbox]]\nid = \"sandbox-{name}\"\naddresses = [\"10.200.{}.2\"]\npolicy = \"{name}.policy\"\n\n",
                k + 1
            ));
        }
        std::fs::write(dir.join("sandboxes.toml"), table).unwrap();
        let mut w = World {
            dir,
            host,
            sandboxes,
            _origins: origins,
            seen,
            daemon: None,
            tls,
        };
        w.start_daemon();
        w
    }

    /// Starts the daemon in the host namespace, as a user runs it; returns
    /// once its resolver answers.
    fn start_daemon(&mut self) {
        let err = std::fs::File::create(self.dir.join("daemon.err")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.host.0])
            .arg(env!("CARGO_BIN_EXE_gatehouse-egress"))
            .args(["host", "--sandboxes"])
            .arg(self.dir.join("sandboxes.toml"))
            .args(["--upstream-dns", "11.0.0.53:53", "--log"])
            .arg(self.dir.join("decisions.jsonl"))
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        self.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let log = std::fs::read_to_string(self.dir.join("daemon.err")).unwrap_or_default();
            if log.contains("host mode for 3 sandboxes") {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "the daemon did not start:\n{}",
            std::fs::read_to_string(self.dir.join("daemon.err")).unwrap_or_default()
        );
    }

    /// `bash -c SCRIPT` inside sandbox `k` (1-based), bounded to 15 s:
    /// (exit code, stdout, stderr).
    fn sh(&self, k: usize, script: &str) -> (i32, String, String) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.sandboxes[k - 1].0])
            .args(["timeout", "15", "bash", "-c", script])
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// curl with no proxy settings from sandbox `k`: (exit code, output).
    fn curl(&self, k: usize, args: &str) -> (i32, String) {
        let (code, out, _) = self.sh(
            k,
            &format!("env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY curl -s -i --max-time 8 --cacert ca.pem {args}"),
        );
        (code, out)
    }

    /// The host's DNS-fed kernel passes for IPv4, as `nft` lists them.
    fn passes(&self) -> String {
        self.host
            .nft(&["list", "set", "inet", "gatehouse_host", "pass_v4"], "")
    }
}

#[test]
fn three_sandboxes_each_reach_exactly_what_their_policy_allows() {
    let mut w = World::new();
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

fn daemon_err(w: &World) -> String {
    std::fs::read_to_string(w.dir.join("daemon.err")).unwrap_or_default()
}
