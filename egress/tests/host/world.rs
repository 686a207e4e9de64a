//! The world host mode's end-to-end tests run in: the daemon in a
//! namespace of its own ("host") serving three sandboxes — each a
//! namespace behind a veth pair, with its own policy — and origins in a
//! fourth namespace, on addresses that look public (11.0.0.0/24: nothing
//! leaves the test's namespaces). The clients are real programs with no
//! proxy settings, run inside the sandboxes.

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
    ("db.test", "11.0.0.5", 60),
];

/// Origins over IPv6 (addresses that look public; inside the namespaces).
pub(crate) const ORIGINS6: &[(&str, &str)] =
    &[("allowed.test", "2a00:1::1"), ("denied.test", "2a00:1::2")];

const POLICY_ONE: &str = "policy one {
  network {
    default deny
    allow domain allowed.test
    allow domain ssh.test port 22
    allow domain db.test port 22
    allow domain **.slow.test
    deny cidr 11.0.0.2/32
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
pub(crate) struct Seen(Arc<std::sync::Mutex<Vec<Counted>>>);

/// One listener's key and its count.
type Counted = (String, Arc<AtomicUsize>);

impl Seen {
    fn counter(&self, key: &str) -> Arc<AtomicUsize> {
        let c = Arc::new(AtomicUsize::new(0));
        self.0.lock().unwrap().push((key.to_string(), c.clone()));
        c
    }

    pub(crate) fn get(&self, key: &str) -> usize {
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

/// A server that speaks first (as SSH does), naming itself, then echoes
/// what it is sent (a held connection's liveness can be asked).
async fn banner_origin(addr: SocketAddr, name: &'static str, seen: Arc<AtomicUsize>) {
    let l = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let _ = s
                    .write_all(format!("SSH-2.0-origin-{name}\r\n").as_bytes())
                    .await;
                let mut buf = [0u8; 256];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(buf.get(..n).unwrap_or_default()).await.is_err() {
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
        // A zone whose server never answers (a slow authoritative server,
        // for the fairness tests): the question waits upstream.
        if name.trim_end_matches('.').ends_with(".slow.test") {
            return None;
        }
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
            Some((n, _, ttl)) if kind == RecordType::AAAA => Some((
                ResponseCode::NoError,
                ORIGINS6
                    .iter()
                    .filter(|(o, _)| o == n)
                    .filter_map(|(_, ip)| addr_record(name, ip.parse().unwrap(), *ttl))
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
pub(crate) struct World {
    pub(crate) dir: PathBuf,
    pub(crate) host: Netns,
    pub(crate) sandboxes: Vec<Netns>,
    _origins: Netns,
    pub(crate) seen: Seen,
    pub(crate) daemon: Option<Child>,
    tls: Vec<Child>,
    /// More arguments for the daemon (`restart_with`).
    extra: Vec<String>,
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
    /// A world whose namespaces and files carry `tag` (tests run at once).
    pub(crate) fn new(tag: &str) -> World {
        let dir =
            std::env::temp_dir().join(format!("gatehouse-host-e2e-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let host = Netns::new(&format!("{tag}h"));
        let origins = Netns::new(&format!("{tag}o"));
        host.link("o0", "11.0.0.254/24", &origins, "eth0", "11.0.0.1/24");
        for (_, ip, _) in ORIGINS.iter().skip(1) {
            origins.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
        }
        origins.ip(&["addr", "add", "11.0.0.53/24", "dev", "eth0"]);
        origins.ip(&["route", "add", "10.200.0.0/16", "via", "11.0.0.254"]);
        let fwd = host.exec("sysctl", &["-qw", "net.ipv4.ip_forward=1"]);
        assert!(fwd.status.success());
        // IPv6: the host and the origins on 2a00:1::/64, sandbox one also
        // at fd00:200:1::2 (no duplicate address detection: usable at once).
        host.ip(&["-6", "addr", "add", "2a00:1::fe/64", "dev", "o0", "nodad"]);
        for (_, ip) in ORIGINS6 {
            origins.ip(&[
                "-6",
                "addr",
                "add",
                &format!("{ip}/64"),
                "dev",
                "eth0",
                "nodad",
            ]);
        }
        origins.ip(&["-6", "route", "add", "fd00:200::/48", "via", "2a00:1::fe"]);
        let mut sandboxes = Vec::new();
        for k in 1..=3 {
            let s = host.sandbox(&format!("{tag}s{k}"), k, "127.0.0.1 localhost\n");
            sandboxes.push(s);
        }
        host.ip(&[
            "-6",
            "addr",
            "add",
            "fd00:200:1::1/64",
            "dev",
            "s1",
            "nodad",
        ]);
        sandboxes[0].ip(&[
            "-6",
            "addr",
            "add",
            "fd00:200:1::2/64",
            "dev",
            "eth0",
            "nodad",
        ]);
        sandboxes[0].ip(&["-6", "route", "add", "default", "via", "fd00:200:1::1"]);
        let seen = Seen::default();
        let s2 = seen.clone();
        origins.serve(move || async move {
            for (name, ip) in ORIGINS6 {
                let at = SocketAddr::new(ip.parse().unwrap(), 80);
                http_origin(at, name, s2.counter(&format!("{name}:v6:80"))).await;
                let udp = SocketAddr::new(ip.parse().unwrap(), 443);
                udp_origin(udp, s2.counter(&format!("{name}:v6:udp443"))).await;
            }
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
        let mut table = String::from(
            "networks = [\"10.200.0.0/16\", \"fd00:200::/48\"]\ninterfaces = [\"s1\", \"s2\", \"s3\"]\n\n",
        );
        for (k, name) in ["one", "two", "three"].iter().enumerate() {
            let k1 = k + 1;
            let v6 = if k1 == 1 { ", \"fd00:200:1::2\"" } else { "" };
            table.push_str(&format!(
                "[[sandbox]]\nid = \"sandbox-{name}\"\naddresses = [\"10.200.{k1}.2\"{v6}]\npolicy = \"{name}.policy\"\n\n"
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
            extra: Vec::new(),
        };
        w.start_daemon();
        w
    }

    /// Starts the daemon in the host namespace, as a user runs it; returns
    /// once its resolver answers.
    pub(crate) fn start_daemon(&mut self) {
        let err = std::fs::File::create(self.dir.join("daemon.err")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.host.0])
            .arg(env!("CARGO_BIN_EXE_gatehouse-egress"))
            .args(["host", "--sandboxes"])
            .arg(self.dir.join("sandboxes.toml"))
            .arg("--control")
            .arg(self.dir.join("control.sock"))
            .args(["--metrics", "127.0.0.1:9464"])
            .args(["--upstream-dns", "11.0.0.53:53", "--log"])
            .arg(self.dir.join("decisions.jsonl"))
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        self.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let log = std::fs::read_to_string(self.dir.join("daemon.err")).unwrap_or_default();
            if log.contains("host mode for 3 sandboxes") && self.dir.join("control.sock").exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "the daemon did not start:\n{}",
            std::fs::read_to_string(self.dir.join("daemon.err")).unwrap_or_default()
        );
    }

    /// Stops the daemon and starts it again with `args` added.
    pub(crate) fn restart_with(&mut self, args: &[&str]) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
        let _ = std::fs::remove_file(self.dir.join("control.sock"));
        self.extra = args.iter().map(|a| a.to_string()).collect();
        self.start_daemon();
    }

    /// `bash -c SCRIPT` inside sandbox `k` (1-based), bounded to 15 s:
    /// (exit code, stdout, stderr).
    pub(crate) fn sh(&self, k: usize, script: &str) -> (i32, String, String) {
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
    pub(crate) fn curl(&self, k: usize, args: &str) -> (i32, String) {
        let (code, out, _) = self.sh(
            k,
            &format!("env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY curl -s -i --max-time 8 --cacert ca.pem {args}"),
        );
        (code, out)
    }

    /// The host's DNS-fed kernel passes for IPv4, as `nft` lists them.
    pub(crate) fn passes(&self) -> String {
        self.host
            .nft(&["list", "set", "inet", "gatehouse_host", "pass_v4"], "")
    }
}

impl World {
    /// The origins' namespace's name (for a probe of its own).
    pub(crate) fn origins_name(&self) -> String {
        self._origins.0.clone()
    }

    /// `PUT /v1/sandboxes/ID/policy` with `text`; asserts it is in force.
    pub(crate) fn put_policy(&self, id: &str, text: &str) {
        let (code, body) = self.control("PUT", &format!("/v1/sandboxes/{id}/policy"), Some(text));
        assert_eq!(code, 200, "{body}");
    }

    /// Whether a new TCP connection from sandbox `k` to `addr` (`IP/PORT`,
    /// bash's spelling) gets an origin's SSH-style banner within 2 s.
    pub(crate) fn banner_from(&self, k: usize, addr: &str) -> bool {
        let (_, out, _) = self.sh(
            k,
            &format!("exec 3<>/dev/tcp/{addr} && timeout 2 head -n 1 <&3"),
        );
        out.contains("SSH-2.0")
    }

    /// curl on the control socket, from the host: (HTTP status, body).
    pub(crate) fn control(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        let mut cmd = Command::new("curl");
        cmd.args([
            "-s",
            "--max-time",
            "10",
            "-w",
            "\n%{http_code}",
            "-X",
            method,
        ])
        .arg("--unix-socket")
        .arg(self.dir.join("control.sock"));
        if let Some(b) = body {
            cmd.args(["--data-binary", b]);
        }
        let out = cmd.arg(format!("http://gatehouse{path}")).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }
}

pub(crate) fn daemon_err(w: &World) -> String {
    std::fs::read_to_string(w.dir.join("daemon.err")).unwrap_or_default()
}
