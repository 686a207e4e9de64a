//! Host mode at fleet scale (issue 58), side by side with squid: for each
//! count of SANDBOXES, a table of that many sandboxes (4 of them real
//! network namespaces carrying traffic, the rest table entries on
//! addresses nothing uses), each naming one of four policy files of two
//! rules each (a fleet's sandbox classes), and
//!
//! - `gatehouse-egress host`: start (until the control API answers, the
//!   nftables table installed), resident memory, idle CPU, a policy change
//!   through the control API (the first, which points the sandbox's entry
//!   at a file of its own and so rewrites the table file; then changes
//!   that leave the kernel layer as it is and that change it, median of
//!   5 each), a whole reload (SIGHUP), a
//!   kernel-passed flow's echo round trip (p50/p99) and bulk upload (each
//!   the median of three runs), and
//!   the proxy's CPU per kept-alive HTTP request (`wrk`);
//! - squid (`squid-openssl`) in intercept mode with one `src` ACL and one
//!   `dstdomain` ACL a sandbox: start (until its port accepts), resident
//!   memory, idle CPU, CPU per kept-alive HTTP request.
//!
//! Every run is bounded (SECONDS of idle and of load a point). Root only;
//! every address lives in the namespaces it makes.
//!
//!     egress/load/scale.sh [SECONDS] [SANDBOXES...]

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[allow(dead_code)]
#[path = "support/load.rs"]
mod load;
#[path = "../tests/host/netns.rs"]
mod netns;

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_egress::testing::{addr_record, fake_dns_at};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use load::{Proc, clock_ticks, cpu_seconds};
use netns::Netns;

/// Sandboxes that are real namespaces.
const REAL: usize = 4;
/// The kernel-passed ports: an echo server and a sink.
const ECHO: u16 = 5432;
const SINK: u16 = 5433;

/// The policy of sandbox `k`: one of four, each of two rules.
fn policy(k: usize, extra: &str) -> String {
    format!(
        "policy p{} {{\n  network {{\n    default deny\n    allow domain origin.test\n    allow domain db.test port {ECHO}, {SINK}\n{extra}  }}\n}}\n",
        k % 4
    )
}

/// Sandbox `k`'s address: the real ones on their veth, the others in
/// 10.64.0.0/10.
fn address(k: usize) -> String {
    if k <= REAL {
        format!("10.200.{k}.2")
    } else {
        format!("10.{}.{}.{}", 64 + (k >> 16), (k >> 8) & 255, k & 255)
    }
}

struct World {
    dir: PathBuf,
    host: Netns,
    origins: Netns,
    sandboxes: Vec<Netns>,
}

impl World {
    fn new(dir: PathBuf) -> World {
        let host = Netns::new("sh");
        let origins = Netns::new("so");
        host.link("o0", "11.0.0.254/24", &origins, "eth0", "11.0.0.1/24");
        origins.ip(&["addr", "add", "11.0.0.53/24", "dev", "eth0"]);
        origins.ip(&["route", "add", "10.200.0.0/16", "via", "11.0.0.254"]);
        for setting in [
            "net.ipv4.ip_forward=1",
            "net.ipv4.ip_local_reserved_ports=3128-3130,15001,15053",
        ] {
            assert!(host.exec("sysctl", &["-qw", setting]).status.success());
        }
        let sandboxes = (1..=REAL)
            .map(|k| {
                host.sandbox(
                    &format!("c{k}"),
                    k,
                    "127.0.0.1 localhost\n11.0.0.1 origin.test\n",
                )
            })
            .collect();
        origins.serve(|| async {
            let answer: gatehouse_egress::testing::Answerer = Arc::new(|name, kind| {
                let known = matches!(name, "origin.test." | "db.test.");
                Some(match (known, kind) {
                    (true, RecordType::A) => (
                        ResponseCode::NoError,
                        addr_record(name, "11.0.0.1".parse().unwrap(), 3600)
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
}

/// This program run again inside namespace `ns` with `args`: its stdout.
fn again(ns: &str, args: &[&str]) -> String {
    let me = std::env::current_exe().unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(me)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// In the origin namespace: an echo server on `ECHO` and a sink on `SINK`.
fn serve() -> ! {
    let echo = std::net::TcpListener::bind(("11.0.0.1", ECHO)).unwrap();
    let sink = std::net::TcpListener::bind(("11.0.0.1", SINK)).unwrap();
    std::thread::spawn(move || {
        for c in sink.incoming().flatten() {
            std::thread::spawn(move || {
                let mut c = c;
                let mut buf = vec![0u8; 1 << 16];
                while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    for c in echo.incoming().flatten() {
        std::thread::spawn(move || {
            let mut c = c;
            let _ = c.set_nodelay(true);
            let mut buf = [0u8; 64];
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 || c.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
    }
    std::process::exit(0)
}

/// In a sandbox: `db.test` resolved (through host mode's resolver, which
/// puts the kernel pass in), then COUNT echo round trips (p50 and p99 in
/// µs) and SECONDS of bulk upload (MB/s).
fn flow(count: usize, seconds: u64) -> ! {
    use std::net::ToSocketAddrs as _;
    let addr = ("db.test", ECHO).to_socket_addrs().unwrap().next().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut times = Vec::with_capacity(count);
    let mut b = [0u8; 1];
    for _ in 0..count {
        let t = Instant::now();
        c.write_all(b"x").unwrap();
        c.read_exact(&mut b).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    let mut s = std::net::TcpStream::connect((addr.ip(), SINK)).unwrap();
    let chunk = vec![7u8; 1 << 16];
    let (start, mut sent) = (Instant::now(), 0usize);
    while start.elapsed() < Duration::from_secs(seconds) {
        s.write_all(&chunk).unwrap();
        sent += chunk.len();
    }
    let mbs = sent as f64 / start.elapsed().as_secs_f64() / 1e6;
    println!(
        "{:.0} {:.0} {mbs:.0}",
        times[times.len() / 2],
        times[times.len() * 99 / 100]
    );
    std::process::exit(0)
}

/// One request to the control API on `socket`: the status and the time.
fn control(socket: &Path, method: &str, path: &str, body: &str) -> (u16, Duration) {
    let t = Instant::now();
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, t.elapsed())
}

/// CPU a process spent over `seconds` doing nothing asked of it, in % of
/// a core.
fn idle(pid: u32, seconds: u64) -> f64 {
    let tck = clock_ticks();
    let a = cpu_seconds(pid, tck);
    std::thread::sleep(Duration::from_secs(seconds));
    (cpu_seconds(pid, tck) - a) / seconds as f64 * 100.0
}

/// `wrk -t1 -c4` from the first sandbox for `seconds`: the proxy's CPU per
/// request in µs, and requests a second.
fn http_cpu(w: &World, pid: u32, seconds: u64) -> (f64, f64) {
    let tck = clock_ticks();
    let before = cpu_seconds(pid, tck);
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        &w.sandboxes[0].0,
        "wrk",
        "-t",
        "1",
        "-c",
        "4",
    ])
    .args(["-d", &format!("{seconds}s"), "--latency"])
    .arg("http://origin.test/");
    let run = load::wrk(cmd, None);
    let cpu = (cpu_seconds(pid, tck) - before) * 1e6 / run.requests.max(1.0);
    (cpu, run.rps)
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// The figures of one count for one daemon.
#[derive(Default)]
struct Point {
    start_s: f64,
    rss_kib: u64,
    idle_pct: f64,
    put_first_ms: f64,
    put_same_ms: f64,
    put_layer_ms: f64,
    add_ms: f64,
    remove_ms: f64,
    reload_s: f64,
    rtt: (f64, f64),
    bulk_mbs: f64,
    http_cpu_us: f64,
    http_rps: f64,
}

fn gatehouse(w: &World, bin: &Path, n: usize, seconds: u64) -> Point {
    let d = w.dir.join(format!("g{n}"));
    std::fs::create_dir_all(d.join("p")).unwrap();
    let mut table =
        String::from("networks = [\"10.200.0.0/16\", \"10.64.0.0/10\"]\ninterfaces = [\"s*\"]\n");
    for c in 0..4 {
        std::fs::write(d.join(format!("p/p{c}.policy")), policy(c, "")).unwrap();
    }
    for k in 1..=n {
        let _ = write!(
            table,
            "\n[[sandbox]]\nid = \"s{k}\"\naddresses = [\"{}\"]\npolicy = \"p/p{}.policy\"\n",
            address(k),
            k % 4
        );
    }
    std::fs::write(d.join("sandboxes.toml"), &table).unwrap();
    let socket = d.join("control.sock");
    let _ = w
        .host
        .exec("nft", &["delete", "table", "inet", "gatehouse_host"]);
    let started = Instant::now();
    let child = Command::new("ip")
        .args(["netns", "exec", &w.host.0])
        .arg(bin)
        .args(["host", "--sandboxes"])
        .arg(d.join("sandboxes.toml"))
        .args(["--upstream-dns", "11.0.0.53:53", "--control"])
        .arg(&socket)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join("log")).map_or(Stdio::null(), Stdio::from))
        .spawn()
        .unwrap();
    let mut p = Proc {
        name: "gatehouse-egress host",
        child,
    };
    p.wait_until(|| {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
            && control(&socket, "GET", "/v1/ready", "").0 == 404
    });
    let mut pt = Point {
        start_s: started.elapsed().as_secs_f64(),
        ..Point::default()
    };
    let pid = p.child.id();
    std::thread::sleep(Duration::from_secs(1));
    pt.rss_kib = load::rss_kib(pid);
    pt.idle_pct = idle(pid, seconds);
    // A change through the control API, to a sandbox in the middle.
    let id = format!("s{}", n.div_ceil(2));
    let put = |extra: &str| {
        let (status, t) = control(
            &socket,
            "PUT",
            &format!("/v1/sandboxes/{id}/policy"),
            &policy(n.div_ceil(2), extra),
        );
        assert_eq!(status, 200, "PUT {id}: {}", d.display());
        t
    };
    pt.put_first_ms = put("").as_secs_f64() * 1e3;
    let same: Vec<Duration> = (0..5)
        .map(|i| put(&format!("    deny domain x{i}.test\n")))
        .collect();
    let layer: Vec<Duration> = (0..5)
        .map(|i| put(&format!("    deny cidr 11.9.{i}.0/24\n")))
        .collect();
    pt.put_same_ms = median(same);
    pt.put_layer_ms = median(layer);
    // A sandbox added and removed through the control API (each rewrites
    // the table file), median of 5 each.
    let added: Vec<Duration> = (0..5)
        .map(|i| {
            let body = serde_json::json!({
                "id": format!("added{i}"),
                "addresses": [format!("10.127.255.{}", i + 1)],
                "policy": policy(i, ""),
            });
            let (status, t) = control(&socket, "POST", "/v1/sandboxes", &body.to_string());
            assert_eq!(status, 201, "POST added{i}: {}", d.display());
            t
        })
        .collect();
    let removed: Vec<Duration> = (0..5)
        .map(|i| {
            let (status, t) = control(&socket, "DELETE", &format!("/v1/sandboxes/added{i}"), "");
            assert_eq!(status, 204, "DELETE added{i}: {}", d.display());
            t
        })
        .collect();
    pt.add_ms = median(added);
    pt.remove_ms = median(removed);
    // A whole reload: from SIGHUP until the daemon says it is done.
    let log = || std::fs::read_to_string(d.join("log")).unwrap_or_default();
    let before = log().matches("SIGHUP: sandbox table").count();
    let t = Instant::now();
    let _ = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status();
    while log().matches("SIGHUP: sandbox table").count() == before
        && t.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    pt.reload_s = t.elapsed().as_secs_f64();
    // Three runs (the machine is shared and noisy): each figure's median.
    let runs: Vec<Vec<f64>> = (0..3)
        .map(|_| {
            again(&w.sandboxes[0].0, &["--flow", "2000", "2"])
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect()
        })
        .collect();
    let mid = |i: usize| {
        let mut v: Vec<f64> = runs.iter().map(|r| r[i]).collect();
        v.sort_by(f64::total_cmp);
        v[1]
    };
    pt.rtt = (mid(0), mid(1));
    pt.bulk_mbs = mid(2);
    let passes = w
        .host
        .nft(&["list", "set", "inet", "gatehouse_host", "pass_v4"], "");
    assert!(
        passes.contains("11.0.0.1 . 5432"),
        "the flow was not kernel-passed: {passes}"
    );
    (pt.http_cpu_us, pt.http_rps) = http_cpu(w, pid, seconds);
    pt
}

fn squid(w: &World, n: usize, seconds: u64) -> Point {
    let d = w.dir.join(format!("q{n}"));
    std::fs::create_dir_all(&d).unwrap();
    let _ = Command::new("chmod").arg("1777").arg(&d).status();
    let mut acls = String::new();
    for k in 1..=n {
        let _ = writeln!(
            acls,
            "acl s{k} src {}\nacl d{k} dstdomain origin.test d{k}.example\nhttp_access allow s{k} d{k}",
            address(k)
        );
    }
    let dd = d.display();
    std::fs::write(
        d.join("squid.conf"),
        format!(
            "http_port 127.0.0.1:3128\nhttp_port 3129 intercept\npid_filename {dd}/squid.pid\ncache_log {dd}/cache.log\naccess_log none\ncache deny all\ncache_mem 8 MB\ncoredump_dir {dd}\ndns_nameservers 11.0.0.53\nnetdb_filename none\npinger_enable off\nshutdown_lifetime 0 seconds\nvia off\n{acls}http_access deny all\n"
        ),
    )
    .unwrap();
    let _ = w
        .host
        .exec("nft", &["delete", "table", "inet", "gatehouse_host"]);
    let _ = w
        .host
        .exec("nft", &["delete", "table", "inet", "squid_intercept"]);
    w.host.nft(
        &["-f", "-"],
        "table inet squid_intercept {\n chain prerouting {\n  type nat hook prerouting priority dstnat;\n  ip saddr 10.200.0.0/16 tcp dport 80 redirect to :3129\n }\n}\n",
    );
    let started = Instant::now();
    let child = Command::new("ip")
        .args(["netns", "exec", &w.host.0, "squid", "-N", "-f"])
        .arg(d.join("squid.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("squid (apt-get install squid-openssl)");
    let mut p = Proc {
        name: "squid",
        child,
    };
    let probe = "exec 3<>/dev/tcp/127.0.0.1/3128";
    p.wait_until(|| w.host.exec("bash", &["-c", probe]).status.success());
    let mut pt = Point {
        start_s: started.elapsed().as_secs_f64(),
        ..Point::default()
    };
    let pid = p.child.id();
    std::thread::sleep(Duration::from_secs(1));
    pt.rss_kib = load::rss_kib(pid);
    pt.idle_pct = idle(pid, seconds);
    (pt.http_cpu_us, pt.http_rps) = http_cpu(w, pid, seconds);
    let _ = w
        .host
        .exec("nft", &["delete", "table", "inet", "squid_intercept"]);
    pt
}

fn nginx(w: &World) -> Proc {
    let conf = load::nginx_conf(
        &w.dir,
        "  server {\n    listen 11.0.0.1:80;\n    location / { return 200 \"ok\\n\"; }\n  }\n",
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
    let probe = "exec 3<>/dev/tcp/11.0.0.1/80";
    p.wait_until(|| w.host.exec("bash", &["-c", probe]).status.success());
    p
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--serve") => serve(),
        Some("--flow") => flow(
            args[1].parse().unwrap(),
            args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2),
        ),
        _ => {}
    }
    let bin = PathBuf::from(
        args.first()
            .expect("usage: host_scale PATH/TO/gatehouse-egress [SECONDS] [SANDBOXES...]"),
    );
    let seconds: u64 = load::arg(&args, 1, 5, 1, 60);
    let mut counts: Vec<usize> = args
        .iter()
        .skip(2)
        .map(|a| a.parse::<usize>().unwrap().clamp(1, 20_000))
        .collect();
    if counts.is_empty() {
        counts = vec![1, 1000, 10_000];
    }
    let dir = std::env::temp_dir().join(format!("gatehouse-host-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _ = Command::new("chmod").arg("1777").arg(&dir).status();
    let w = World::new(dir);
    let _nginx = nginx(&w);
    let origins = w.origins.0.clone();
    let me = std::env::current_exe().unwrap();
    let _servers = Proc {
        name: "servers",
        child: Command::new("ip")
            .args(["netns", "exec", &origins])
            .arg(me)
            .arg("--serve")
            .spawn()
            .unwrap(),
    };
    let mut rows = Vec::new();
    for &n in &counts {
        let g = gatehouse(&w, &bin, n, seconds);
        let s = squid(&w, n, seconds);
        rows.push((n, g, s));
    }
    let one = rows.first().map(|(_, g, s)| (g.rss_kib, s.rss_kib));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{REAL} sandboxes are network namespaces, the rest table entries; each names one of 4 policy files of 2 rules; {seconds} s of idle and of load a point\n"
    );
    let _ = writeln!(
        out,
        "| sandboxes | daemon | start | RSS | RSS per extra sandbox | idle CPU | PUT policy: first (table rewritten) / same layer / new layer (median of 5) | sandbox added / removed (median of 5) | SIGHUP reload | kernel-passed RTT p50 / p99 | bulk upload | CPU per kept-alive HTTP request | requests/s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (n, g, s) in &rows {
        for (name, pt, base) in [
            ("gatehouse host", g, one.map(|o| o.0)),
            ("squid intercept", s, one.map(|o| o.1)),
        ] {
            let per = match (base, *n > 1) {
                (Some(b), true) => format!(
                    "{:.0} B",
                    (pt.rss_kib.saturating_sub(b)) as f64 * 1024.0 / (*n - 1) as f64
                ),
                _ => "—".into(),
            };
            let gh = name.starts_with("gatehouse");
            let _ = writeln!(
                out,
                "| {n} | {name} | {:.2} s | {:.1} MB | {per} | {:.2} % | {} | {} | {} | {} | {} | {:.1} µs | {:.0} |",
                pt.start_s,
                pt.rss_kib as f64 / 1024.0,
                pt.idle_pct,
                if gh {
                    format!(
                        "{:.0} / {:.1} / {:.1} ms",
                        pt.put_first_ms, pt.put_same_ms, pt.put_layer_ms
                    )
                } else {
                    "—".into()
                },
                if gh {
                    format!("{:.1} / {:.1} ms", pt.add_ms, pt.remove_ms)
                } else {
                    "—".into()
                },
                if gh {
                    format!("{:.2} s", pt.reload_s)
                } else {
                    "—".into()
                },
                if gh {
                    format!("{:.0} / {:.0} µs", pt.rtt.0, pt.rtt.1)
                } else {
                    "—".into()
                },
                if gh {
                    format!("{:.0} MB/s", pt.bulk_mbs)
                } else {
                    "—".into()
                },
                pt.http_cpu_us,
                pt.http_rps
            );
        }
    }
    print!("{out}");
    let dir = w.dir.clone();
    drop(_servers);
    drop(_nginx);
    drop(w);
    let _ = std::fs::remove_dir_all(dir);
}
