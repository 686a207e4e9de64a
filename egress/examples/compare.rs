//! The load comparison: `wrk` through gatehouse-egress, squid and tinyproxy
//! (all from their usual packages, all configured with the same 1 001
//! allowed domains and one denied one) to an nginx serving an allowed and a
//! denied virtual host, and straight to nginx for scale — each with
//! keep-alive and with one connection per request. Loopback only; every run
//! is bounded (SECONDS each, default 10).
//!
//!     egress/load/compare.sh [SECONDS] [CONNECTIONS]
//!
//! which builds the release binaries and runs
//! `target/release/examples/compare target/release/gatehouse-egress ...`.
//! Needs `nginx`, `squid`, `tinyproxy` and `wrk` (Debian: nginx-light squid
//! tinyproxy wrk). tinyproxy resolves names only through the system, so it
//! runs in a private mount namespace with its own /etc/hosts (`unshare -m`,
//! root) unless the names already resolve; without either it is skipped,
//! and the report says so.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use gatehouse_egress::testing;

#[path = "support/load.rs"]
mod load;

use load::{Proc, Run, fmt_us, free_port};

/// Domains in every proxy's allow list besides `allowed.test`.
const DOMAINS: usize = 1000;

fn wait_port(p: &mut Proc, port: u16) {
    p.wait_until(|| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
}

/// close`: the status code and the body.
fn fetch(proxy: Option<u16>, server: u16, host: &str) -> (u16, String) {
    let (port, target) = match proxy {
        Some(p) => (p, format!("http://{host}:{server}/")),
        None => (server, "/".to_string()),
    };
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {host}:{server}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let code = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (code, body)
}

/// Runs wrk against `port` with `script`; the proxy's CPU measured when
/// `pid` is given.
fn wrk(port: u16, script: &Path, seconds: u32, connections: u32, pid: Option<u32>) -> Run {
    let mut cmd = Command::new("wrk");
    cmd.args([
        "-t",
        "1",
        "-c",
        &connections.to_string(),
        "-d",
        &format!("{seconds}s"),
        "--timeout",
        "5s",
        "--latency",
        "-s",
    ])
    .arg(script)
    .arg(format!("http://127.0.0.1:{port}/"));
    load::wrk(cmd, pid)
}

fn script(dir: &Path, name: &str, target: &str, host: &str, close: bool) -> PathBuf {
    let p = dir.join(name);
    let mut s = format!("wrk.path = \"{target}\"\nwrk.headers[\"Host\"] = \"{host}\"\n");
    if close {
        s.push_str("wrk.headers[\"Connection\"] = \"close\"\n");
    }
    std::fs::write(&p, s).unwrap();
    p
}

fn domains() -> Vec<String> {
    (0..DOMAINS).map(|i| format!("d{i}.example.com")).collect()
}

fn allow_list() -> String {
    std::iter::once("allowed.test".to_string())
        .chain(domains())
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn spawn(name: &'static str, cmd: &mut Command, port: u16, hint: &str) -> Proc {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{name}: {e} ({hint})"));
    let mut p = Proc { name, child };
    wait_port(&mut p, port);
    p
}

fn nginx(dir: &Path, port: u16) -> Proc {
    let conf = load::nginx_conf(
        dir,
        &format!(
            "  server {{ listen 127.0.0.1:{port}; server_name allowed.test; location / {{ return 200 \"allowed\\n\"; }} }}
  server {{ listen 127.0.0.1:{port}; server_name denied.test; location / {{ return 200 \"denied\\n\"; }} }}
"
        ),
    );
    spawn(
        "nginx",
        Command::new("nginx")
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.join("nginx-error.log")),
        port,
        "apt-get install nginx-light",
    )
}

fn gatehouse(bin: &Path, dir: &Path, port: u16, dns: std::net::SocketAddr) -> Proc {
    let mut policy = String::from(
        "policy load {\n  network {\n    default deny\n    local deny\n    allow domain allowed.test\n",
    );
    for d in domains() {
        let _ = writeln!(policy, "    allow domain {d}");
    }
    policy.push_str("    deny domain denied.test\n    allow ip 127.0.0.1\n  }\n}\n");
    let path = dir.join("load.policy");
    std::fs::write(&path, policy).unwrap();
    spawn(
        "gatehouse-egress",
        Command::new(bin).arg("--policy").arg(&path).args([
            "--http",
            &format!("127.0.0.1:{port}"),
            "--upstream-dns",
            &dns.to_string(),
        ]),
        port,
        "egress/load/compare.sh builds it",
    )
}

fn squid(dir: &Path, port: u16) -> Proc {
    let d = dir.display();
    std::fs::write(dir.join("squid-domains.txt"), allow_list()).unwrap();
    std::fs::write(
        dir.join("squid.conf"),
        format!(
            "http_port 127.0.0.1:{port}
pid_filename {d}/squid.pid
cache_log {d}/squid-cache.log
access_log none
cache_store_log none
cache deny all
cache_mem 8 MB
coredump_dir {d}
hosts_file {d}/hosts
dns_nameservers 127.0.0.1
netdb_filename none
pinger_enable off
shutdown_lifetime 0 seconds
via off
forwarded_for delete
acl allowed dstdomain \"{d}/squid-domains.txt\"
http_access allow allowed
http_access deny all
"
        ),
    )
    .unwrap();
    spawn(
        "squid",
        Command::new("squid")
            .args(["-N", "-f"])
            .arg(dir.join("squid.conf")),
        port,
        "apt-get install squid",
    )
}

/// tinyproxy, or why it cannot run here.
fn tinyproxy(dir: &Path, port: u16) -> Result<Proc, String> {
    let d = dir.display();
    std::fs::write(dir.join("tinyproxy-filter.txt"), allow_list()).unwrap();
    let conf = dir.join("tinyproxy.conf");
    std::fs::write(
        &conf,
        format!(
            "Port {port}
Listen 127.0.0.1
Timeout 600
MaxClients 1024
LogLevel Critical
DisableViaHeader Yes
Allow 127.0.0.1
Filter \"{d}/tinyproxy-filter.txt\"
FilterType fnmatch
FilterDefaultDeny Yes
"
        ),
    )
    .unwrap();
    if Command::new("tinyproxy").arg("-v").output().is_err() {
        return Err("skipped: tinyproxy is not installed (apt-get install tinyproxy)".into());
    }
    let resolves = Command::new("getent")
        .args(["hosts", "allowed.test"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).starts_with("127.0.0.1"));
    if resolves {
        return Ok(spawn(
            "tinyproxy",
            Command::new("tinyproxy").arg("-d").arg("-c").arg(&conf),
            port,
            "",
        ));
    }
    let probe = Command::new("unshare")
        .args(["-m", "true"])
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        return Err("skipped: the test names do not resolve through the system, and `unshare -m` (root) is not available to give tinyproxy its own /etc/hosts".into());
    }
    // `exec` all the way down: the child's pid ends up tinyproxy's own, so
    // its CPU is what is measured.
    Ok(spawn(
        "tinyproxy",
        Command::new("unshare")
            .args(["-m", "sh", "-c"])
            .arg(format!(
                "mount --bind {d}/hosts /etc/hosts && exec tinyproxy -d -c {}",
                conf.display()
            )),
        port,
        "",
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bin = PathBuf::from(
        args.first()
            .expect("usage: compare PATH/TO/gatehouse-egress [SECONDS] [CONNECTIONS]"),
    );
    let seconds: u32 = load::arg(&args, 1, 10, 1, 60);
    let connections: u32 = load::arg(&args, 2, 16, 1, 256);
    let dir = std::env::temp_dir().join(format!("gatehouse-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // squid and tinyproxy drop privileges when run as root: they must be
    // able to read and write here (sticky, as /tmp: gatehouse-egress takes no
    // policy from a directory others could swap files in).
    let _ = Command::new("chmod").arg("1777").arg(&dir).status();
    let mut hosts = String::from("127.0.0.1 localhost allowed.test denied.test\n");
    for d in domains() {
        let _ = writeln!(hosts, "127.0.0.1 {d}");
    }
    std::fs::write(dir.join("hosts"), hosts).unwrap();

    // The fake upstream DNS that gatehouse-egress asks (squid reads its
    // hosts file, tinyproxy the namespace's /etc/hosts), on a thread of its
    // own.
    let mut table = vec![
        ("allowed.test".to_string(), "127.0.0.1"),
        ("denied.test".to_string(), "127.0.0.1"),
    ];
    table.extend(domains().into_iter().map(|d| (d, "127.0.0.1")));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let t: Vec<(&str, &str)> = table.iter().map(|(n, a)| (n.as_str(), *a)).collect();
            let dns = testing::fake_dns(&t).await.unwrap();
            tx.send(dns.addr).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let dns = rx.recv().unwrap();

    let server = free_port();
    let _nginx = nginx(&dir, server);
    type Started = Result<(Proc, u16), String>;
    let mut proxies: Vec<(&str, Started)> = Vec::new();
    let p = free_port();
    proxies.push(("gatehouse-egress", Ok((gatehouse(&bin, &dir, p, dns), p))));
    let p = free_port();
    proxies.push(("squid", Ok((squid(&dir, p), p))));
    let p = free_port();
    proxies.push(("tinyproxy", tinyproxy(&dir, p).map(|t| (t, p))));

    // Every proxy does the same job: the allowed host passes, the denied
    // one is refused.
    for (name, r) in &proxies {
        if let Ok((_, port)) = r {
            let (code, body) = fetch(Some(*port), server, "allowed.test");
            assert_eq!((code, body.as_str()), (200, "allowed\n"), "{name}");
            let (code, _) = fetch(Some(*port), server, "denied.test");
            assert_eq!(code, 403, "{name} lets denied.test through");
        }
    }
    assert_eq!(fetch(None, server, "allowed.test").0, 200);

    let host = format!("allowed.test:{server}");
    let absolute = format!("http://allowed.test:{server}/");
    let mut report = String::new();
    let _ = writeln!(
        report,
        "wrk 1 thread, {connections} connections, {seconds} s a run after a 1 s warm-up; nginx (1 worker) as the target; \
         {} allowed domains and one denied in every proxy; CPU is the proxy process's user + system time over the run, per request.\n",
        DOMAINS + 1
    );
    let _ = writeln!(
        report,
        "| mode | path | requests/s | p50 | p99 | proxy CPU per request | non-2xx | socket errors |"
    );
    let _ = writeln!(report, "|---|---|---|---|---|---|---|---|");
    let mut results: Vec<(&str, &str, Run)> = Vec::new();
    let mut skipped = Vec::new();
    for (mode, close) in [("keep-alive", false), ("one connection per request", true)] {
        let direct = script(&dir, "direct.lua", "/", &host, close);
        let proxied = script(&dir, "proxied.lua", &absolute, &host, close);
        let _ = wrk(server, &direct, 1, connections, None);
        let r = wrk(server, &direct, seconds, connections, None);
        results.push((mode, "direct to nginx", r));
        for (name, p) in &proxies {
            match p {
                Ok((proc_, port)) => {
                    let _ = wrk(*port, &proxied, 1, connections, None);
                    let r = wrk(
                        *port,
                        &proxied,
                        seconds,
                        connections,
                        Some(proc_.child.id()),
                    );
                    results.push((mode, name, r));
                }
                Err(why) => skipped.push(format!("| {mode} | {name} | {why} | | | | | |")),
            }
        }
    }
    for (mode, name, r) in &results {
        let _ = writeln!(
            report,
            "| {mode} | {name} | {:.0} | {} | {} | {} | {} | {} |",
            r.rps,
            fmt_us(r.p50_us),
            fmt_us(r.p99_us),
            r.cpu_us_per_request.map_or("—".to_string(), fmt_us),
            r.non_2xx,
            r.socket_errors
        );
    }
    for s in skipped {
        let _ = writeln!(report, "{s}");
    }
    let _ = writeln!(
        report,
        "\nSocket errors are wrk's count of connections the proxy closed under it: a proxy that \
         closes the client connection after each response without `Connection: close` (tinyproxy does) \
         shows one per request, and its keep-alive row is one connection per request in fact.\n\n\
         Targets (gatehouse-egress against squid, in each mode):\n"
    );
    for mode in ["keep-alive", "one connection per request"] {
        let get = |n: &str| {
            results
                .iter()
                .find(|(m, name, _)| *m == mode && *name == n)
                .map(|(_, _, r)| r.clone())
        };
        let (Some(g), Some(s)) = (get("gatehouse-egress"), get("squid")) else {
            continue;
        };
        let verdict = |ok: bool, ratio: f64| {
            if ok {
                format!("met ({ratio:.2}×)")
            } else {
                format!("**missed** ({ratio:.2}×)")
            }
        };
        let _ = writeln!(
            report,
            "- {mode}: requests/s at least squid's: {}; p99 at most squid's: {}; CPU per request at most squid's: {}",
            verdict(g.rps >= s.rps, g.rps / s.rps),
            verdict(g.p99_us <= s.p99_us, g.p99_us / s.p99_us),
            match (g.cpu_us_per_request, s.cpu_us_per_request) {
                (Some(a), Some(b)) => verdict(a <= b, a / b),
                _ => "not measured".into(),
            }
        );
    }
    print!("{report}");
    let out = PathBuf::from("target/egress-compare.md");
    if std::fs::write(&out, &report).is_ok() {
        eprintln!("(also written to {})", out.display());
    }
    drop(proxies);
    let _ = std::fs::remove_dir_all(&dir);
}
