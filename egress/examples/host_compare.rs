//! Host mode under load, side by side (issue 30): SANDBOXES sandboxes
//! (network namespaces behind veth pairs, default 100) on one "host"
//! namespace, an nginx origin in another, and `wrk` run from inside four of
//! the sandboxes at once, with no proxy settings, through
//!
//! - nothing (the host forwards: the yardstick);
//! - `gatehouse-egress host`, every sandbox with a policy of its own;
//! - squid (Debian's `squid-openssl`) in intercept mode, HTTP by `Host`
//!   and TLS by `ssl_bump peek` then `splice`, redirected by nftables the
//!   same way;
//!
//! each with keep-alive and with one connection per request, HTTP and
//! HTTPS. It reports requests a second, the latency p50/p99 (with one
//! connection per request: connection setup and the request), the
//! proxy's CPU per request, and the daemon's memory per sandbox. Every run
//! is bounded (SECONDS each, default 5). Root only; every address lives in
//! the namespaces it makes.
//!
//!     egress/load/host.sh [SECONDS] [SANDBOXES]

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/load.rs"]
mod load;
#[path = "../tests/host/netns.rs"]
mod netns;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_egress::testing::{addr_record, fake_dns_at};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use load::{Proc, Run, clock_ticks, cpu_seconds, fmt_us};
use netns::Netns;

/// Sandboxes `wrk` runs in at once.
const LOADERS: usize = 4;

/// The kinds of load: name, URL, one connection per request.
const KINDS: &[(&str, &str, bool)] = &[
    ("HTTP, keep-alive", "http://origin.test/", false),
    (
        "HTTP, a connection per request",
        "http://origin.test/",
        true,
    ),
    ("HTTPS, keep-alive", "https://origin.test/", false),
    (
        "HTTPS, a connection per request",
        "https://origin.test/",
        true,
    ),
];

struct World {
    dir: PathBuf,
    host: Netns,
    origins: Netns,
    sandboxes: Vec<Netns>,
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl World {
    fn new(dir: PathBuf, n: usize) -> World {
        let host = Netns::new("bh");
        let origins = Netns::new("bo");
        host.link("o0", "11.0.0.254/24", &origins, "eth0", "11.0.0.1/24");
        origins.ip(&["addr", "add", "11.0.0.53/24", "dev", "eth0"]);
        origins.ip(&["route", "add", "10.200.0.0/16", "via", "11.0.0.254"]);
        // Forwarding for the direct path; and for the proxies' own
        // connections, which all leave from one address to one origin, the
        // whole port range and reuse of TIME_WAIT ports, so that a run of
        // one connection per request measures the proxy, not port
        // exhaustion (the same for squid and gatehouse).
        for setting in [
            "net.ipv4.ip_forward=1",
            "net.ipv4.ip_local_port_range=1024 65535",
            "net.ipv4.tcp_tw_reuse=1",
            // Not for those connections: the proxies' listening ports. A
            // proxy's outgoing connection left in the port range by the
            // mode before would otherwise hold the next one's port (squid
            // then runs without its ssl-bump port: "Address already in use").
            "net.ipv4.ip_local_reserved_ports=3128-3130,15001,15053",
        ] {
            assert!(host.exec("sysctl", &["-qw", setting]).status.success());
        }
        let mut sandboxes = Vec::new();
        for k in 1..=n {
            let s = host.sandbox(
                &format!("b{k}"),
                k,
                "127.0.0.1 localhost\n11.0.0.1 origin.test denied.test\n",
            );
            sandboxes.push(s);
        }
        origins.serve(|| async {
            let answer: gatehouse_egress::testing::Answerer = Arc::new(|name, kind| {
                let known = matches!(name, "origin.test." | "denied.test.");
                Some(match (known, kind) {
                    (true, RecordType::A) => (
                        ResponseCode::NoError,
                        addr_record(name, "11.0.0.1".parse().unwrap(), 300)
                            .into_iter()
                            .collect(),
                    ),
                    (true, _) => (ResponseCode::NoError, Vec::new()),
                    _ => (ResponseCode::NXDomain, Vec::new()),
                })
            });
            fake_dns_at("11.0.0.53:53".parse().unwrap(), answer)
                .await
                .unwrap();
        });
        World {
            dir,
            host,
            origins,
            sandboxes,
        }
    }

    /// Waits until `addr:port` accepts from the host namespace.
    fn wait(&self, addr: &str, port: u16, p: &mut Proc) {
        let probe = format!("exec 3<>/dev/tcp/{addr}/{port}");
        p.wait_until(|| self.host.exec("bash", &["-c", &probe]).status.success());
    }

    /// One request from sandbox 1, `Connection: close`: the status code.
    fn status(&self, url: &str) -> String {
        let out = self.sandboxes[0].exec(
            "curl",
            &[
                "-s",
                "-k",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "5",
                url,
            ],
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// The last lines of each of `names` in `dir` that exists.
fn tail(dir: &Path, names: &[&str]) -> String {
    let mut out = String::new();
    for name in names {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(15);
            let _ = write!(out, "\n--- {name}\n{}", lines[from..].join("\n"));
        }
    }
    out
}

/// A file in `dir` for a process's stderr (printed when the run fails).
fn log(dir: &Path, name: &str) -> Stdio {
    std::fs::File::create(dir.join(name)).map_or_else(|_| Stdio::null(), Stdio::from)
}

fn nginx(w: &World) -> Proc {
    let d = w.dir.display();
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-nodes",
            "-days",
            "1",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-subj",
            "/CN=origin.test",
            "-addext",
            "subjectAltName=DNS:origin.test",
            "-keyout",
        ])
        .arg(w.dir.join("origin.key"))
        .arg("-out")
        .arg(w.dir.join("origin.pem")));
    let conf = load::nginx_conf(
        &w.dir,
        &format!(
            "  server {{
    listen 11.0.0.1:80;
    listen 11.0.0.1:443 ssl;
    ssl_certificate {d}/origin.pem;
    ssl_certificate_key {d}/origin.key;
    location / {{ return 200 \"ok\\n\"; }}
  }}
"
        ),
    );
    let child = Command::new("ip")
        .args(["netns", "exec", &w.origins.0, "nginx", "-c"])
        .arg(&conf)
        .arg("-e")
        .arg(w.dir.join("nginx-error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx (apt-get install nginx-light)");
    let mut p = Proc {
        name: "nginx",
        child,
    };
    w.wait("11.0.0.1", 443, &mut p);
    p
}

/// `gatehouse-egress host` for the first `n` sandboxes, each with a policy
/// of its own (origin.test and 50 names of its own allowed, denied.test
/// denied).
fn gatehouse(w: &World, bin: &Path, n: usize) -> Proc {
    let mut table = String::from("networks = [\"10.200.0.0/16\"]\ninterfaces = [\"s*\"]\n");
    for k in 1..=n {
        let mut policy = format!(
            "policy s{k} {{\n  network {{\n    default deny\n    allow domain origin.test\n    deny domain denied.test\n"
        );
        for i in 0..50 {
            let _ = writeln!(policy, "    allow domain d{i}.s{k}.example");
        }
        policy.push_str("  }\n}\n");
        std::fs::write(w.dir.join(format!("s{k}.policy")), policy).unwrap();
        let _ = write!(
            table,
            "\n[[sandbox]]\nid = \"s{k}\"\naddresses = [\"10.200.{k}.2\"]\npolicy = \"s{k}.policy\"\n"
        );
    }
    std::fs::write(w.dir.join("sandboxes.toml"), table).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", &w.host.0])
        .arg(bin)
        .args(["host", "--sandboxes"])
        .arg(w.dir.join("sandboxes.toml"))
        .args(["--upstream-dns", "11.0.0.53:53"])
        .stdout(Stdio::null())
        .stderr(log(&w.dir, "gatehouse-egress.log"))
        .spawn()
        .unwrap();
    let mut p = Proc {
        name: "gatehouse-egress host",
        child,
    };
    w.wait("11.0.0.254", 15001, &mut p);
    // The table is installed after the listeners are bound.
    std::thread::sleep(Duration::from_millis(300));
    p
}

fn squid(w: &World) -> Proc {
    let d = w.dir.display();
    let pem = std::fs::read_to_string(w.dir.join("origin.pem")).unwrap()
        + &std::fs::read_to_string(w.dir.join("origin.key")).unwrap();
    std::fs::write(w.dir.join("squid.pem"), pem).unwrap();
    std::fs::write(
        w.dir.join("squid.conf"),
        format!(
            "http_port 127.0.0.1:3128
http_port 3129 intercept
https_port 3130 intercept ssl-bump tls-cert={d}/squid.pem generate-host-certificates=off
pid_filename {d}/squid.pid
cache_log {d}/squid-cache.log
access_log none
cache_store_log none
cache deny all
cache_mem 8 MB
coredump_dir {d}
dns_nameservers 11.0.0.53
netdb_filename none
pinger_enable off
shutdown_lifetime 0 seconds
via off
forwarded_for delete
acl step1 at_step SslBump1
acl allowed_sni ssl::server_name origin.test
ssl_bump peek step1
ssl_bump splice allowed_sni
ssl_bump terminate all
acl allowed dstdomain origin.test
acl CONNECT method CONNECT
http_access allow CONNECT
http_access allow allowed
http_access deny all
"
        ),
    )
    .unwrap();
    w.host.nft(
        &["-f", "-"],
        "table inet squid_intercept {\n chain prerouting {\n  type nat hook prerouting priority dstnat;\n  ip saddr 10.200.0.0/16 tcp dport 80 redirect to :3129\n  ip saddr 10.200.0.0/16 tcp dport 443 redirect to :3130\n }\n}\n",
    );
    let child = Command::new("ip")
        .args(["netns", "exec", &w.host.0, "squid", "-N", "-f"])
        .arg(w.dir.join("squid.conf"))
        .stdout(Stdio::null())
        .stderr(log(&w.dir, "squid-stderr.log"))
        .spawn()
        .expect("squid (apt-get install squid-openssl)");
    let mut p = Proc {
        name: "squid",
        child,
    };
    w.wait("127.0.0.1", 3128, &mut p);
    p
}

/// `wrk` from `LOADERS` sandboxes at once: requests a second summed, the
/// median of their p50s, the largest of their p99s, and `pid`'s CPU per
/// request over the run.
fn load(w: &World, url: &str, close: bool, seconds: u32, pid: Option<u32>) -> Run {
    let script = w.dir.join(if close { "close.lua" } else { "keep.lua" });
    std::fs::write(
        &script,
        if close {
            "wrk.headers[\"Connection\"] = \"close\"\n"
        } else {
            ""
        },
    )
    .unwrap();
    let tck = clock_ticks();
    let before = pid.map(|p| cpu_seconds(p, tck));
    let stride = (w.sandboxes.len() / LOADERS).max(1);
    let runs: Vec<std::thread::JoinHandle<Run>> = (0..LOADERS.min(w.sandboxes.len()))
        .map(|i| {
            let ns = w.sandboxes[i * stride].0.clone();
            let (script, url) = (script.clone(), url.to_string());
            std::thread::spawn(move || {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", &ns, "wrk", "-t", "1", "-c", "4"])
                    .args(["-d", &format!("{seconds}s"), "--timeout", "5s", "--latency"])
                    .arg("-s")
                    .arg(&script)
                    .arg(&url);
                load::wrk(cmd, None)
            })
        })
        .collect();
    let runs: Vec<Run> = runs.into_iter().map(|h| h.join().unwrap()).collect();
    let after = pid.map(|p| cpu_seconds(p, tck));
    let mut p50: Vec<f64> = runs.iter().map(|r| r.p50_us).collect();
    p50.sort_by(f64::total_cmp);
    let mut r = Run {
        rps: runs.iter().map(|r| r.rps).sum(),
        p50_us: p50[p50.len() / 2],
        p99_us: runs.iter().map(|r| r.p99_us).fold(0.0, f64::max),
        requests: runs.iter().map(|r| r.requests).sum(),
        non_2xx: runs.iter().map(|r| r.non_2xx).sum(),
        socket_errors: runs.iter().map(|r| r.socket_errors).sum(),
        cpu_us_per_request: None,
    };
    if let (Some(b), Some(a)) = (before, after)
        && r.requests > 0.0
    {
        r.cpu_us_per_request = Some((a - b) * 1e6 / r.requests);
    }
    r
}

fn clear_nft(w: &World) {
    for t in ["gatehouse_host", "squid_intercept"] {
        let _ = w.host.exec("nft", &["delete", "table", "inet", t]);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bin = PathBuf::from(
        args.first()
            .expect("usage: host_compare PATH/TO/gatehouse-egress [SECONDS] [SANDBOXES]"),
    );
    let seconds: u32 = load::arg(&args, 1, 5, 1, 30);
    let n: usize = load::arg(&args, 2, 100, LOADERS, 200);
    let dir = std::env::temp_dir().join(format!("gatehouse-host-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // squid drops privileges when run as root: it must read and write here (sticky,
    // as /tmp: gatehouse-egress takes no policy from a directory others
    // could swap files in).
    let _ = Command::new("chmod").arg("1777").arg(&dir).status();
    let started = Instant::now();
    let w = World::new(dir, n);
    let _nginx = nginx(&w);
    let setup = started.elapsed();

    let mut report = String::new();
    let mut results: Vec<(&str, Vec<Run>)> = Vec::new();
    let mut memory = String::new();
    for mode in ["direct", "gatehouse-egress host", "squid intercept"] {
        clear_nft(&w);
        let proc = match mode {
            "direct" => None,
            "gatehouse-egress host" => Some(gatehouse(&w, &bin, n)),
            _ => Some(squid(&w)),
        };
        let pid = proc.as_ref().map(|p| p.child.id());
        // Every mode does the same job; the proxies refuse the denied name.
        // A proxy may take a moment past its port to serve (squid's first
        // DNS answer): up to 10 s, the same for each.
        for url in ["http://origin.test/", "https://origin.test/"] {
            let mut got = w.status(url);
            for _ in 0..20 {
                if got == "200" {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
                got = w.status(url);
            }
            assert_eq!(
                got,
                "200",
                "{mode}: {url}; the logs in {}: {}",
                w.dir.display(),
                tail(
                    &w.dir,
                    &[
                        "squid-cache.log",
                        "squid-stderr.log",
                        "gatehouse-egress.log"
                    ]
                )
            );
        }
        if proc.is_some() {
            assert_ne!(w.status("http://denied.test/"), "200", "{mode}");
        }
        let runs: Vec<Run> = KINDS
            .iter()
            .map(|(_, url, close)| load(&w, url, *close, seconds, pid))
            .collect();
        if let Some(pid) = pid {
            let _ = writeln!(
                memory,
                "- {mode}, serving {n} sandboxes: {} MiB resident after the runs",
                load::rss_kib(pid) / 1024
            );
        }
        drop(proc);
        results.push((mode, runs));
    }
    // The daemon's memory per sandbox: one sandbox against all of them,
    // before any traffic.
    clear_nft(&w);
    let one = gatehouse(&w, &bin, 1);
    let rss_one = load::rss_kib(one.child.id());
    drop(one);
    clear_nft(&w);
    let all = gatehouse(&w, &bin, n);
    let rss_all = load::rss_kib(all.child.id());
    drop(all);
    clear_nft(&w);
    let per = (rss_all.saturating_sub(rss_one)) as f64 * 1024.0 / (n - 1) as f64;

    let _ = writeln!(
        report,
        "{n} sandboxes, wrk -t1 -c4 from {LOADERS} of them at once, {seconds} s a run (setup {:.1} s)\n",
        setup.as_secs_f64()
    );
    let _ = writeln!(
        report,
        "| load | path | requests/s | p50 | p99 | proxy CPU per request | errors |"
    );
    let _ = writeln!(report, "|---|---|---|---|---|---|---|");
    for (i, (kind, _, _)) in KINDS.iter().enumerate() {
        for (mode, runs) in &results {
            let r = &runs[i];
            let _ = writeln!(
                report,
                "| {kind} | {mode} | {:.0} | {} | {} | {} | {} |",
                r.rps,
                fmt_us(r.p50_us),
                fmt_us(r.p99_us),
                r.cpu_us_per_request
                    .map_or("—".into(), |c| format!("{c:.0} µs")),
                r.non_2xx + r.socket_errors
            );
        }
    }
    let _ = writeln!(
        report,
        "\nMemory:\n{memory}- gatehouse-egress host at start: {} KiB with 1 sandbox, {} KiB with {n}: **{per:.0} bytes per sandbox**, its policy included (a policy of 52 rules)",
        rss_one, rss_all
    );
    let get = |m: &str| results.iter().find(|(x, _)| *x == m).map(|(_, r)| r);
    if let (Some(g), Some(s)) = (get("gatehouse-egress host"), get("squid intercept")) {
        let _ = writeln!(report, "\nTargets (host mode against squid, in each load):");
        for (i, (kind, _, _)) in KINDS.iter().enumerate() {
            let _ = writeln!(
                report,
                "- {kind}: requests/s at least squid's: {}; p99 at most squid's: {}",
                g[i].rps >= s[i].rps,
                g[i].p99_us <= s[i].p99_us
            );
        }
    }
    print!("{report}");
}
