//! What the load comparisons share (`compare.rs`, `host_compare.rs`,
//! `host_scale.rs`):
//! the processes they start, and running `wrk` and reading its report.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// A loopback TCP port free now.
#[allow(dead_code)] // host_compare binds inside namespaces instead
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Proc {
    pub name: &'static str,
    pub child: Child,
}

impl Proc {
    /// Waits until `ready` says so, at most 20 s; panics, naming the
    /// process, when it exits first or the time runs out.
    pub fn wait_until(&mut self, mut ready: impl FnMut() -> bool) {
        let start = std::time::Instant::now();
        while !ready() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited at start: {status}", self.name);
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "{} did not start",
                self.name
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    /// SIGTERM, then SIGKILL after 2 s: a killed nginx master would leave
    /// its worker behind, still holding a core's worth of state and its port.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(2) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Resident memory of a process, in KiB.
#[allow(dead_code)] // the host comparisons' alone
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// utime + stime of a process (all its threads), in seconds.
pub fn cpu_seconds(pid: u32, ticks_per_second: f64) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / ticks_per_second
}

pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// One request through `proxy` (or straight, when `None`), `Connection:

#[derive(Default, Clone)]
pub struct Run {
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub requests: f64,
    pub non_2xx: u64,
    pub socket_errors: u64,
    pub cpu_us_per_request: Option<f64>,
}

pub fn micros(v: &str) -> f64 {
    let v = v.trim();
    let (num, scale) = if let Some(n) = v.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1_000.0)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1_000_000.0)
    } else {
        (v, 1.0)
    };
    num.parse::<f64>().unwrap_or(f64::NAN) * scale
}

/// Runs `cmd` (wrk with `--latency` and its target) and reads its report;
/// the CPU of `pid` over the run, per request, when it is given.
pub fn wrk(mut cmd: Command, pid: Option<u32>) -> Run {
    let tck = clock_ticks();
    let before = pid.map(|p| cpu_seconds(p, tck));
    let out = cmd.output().expect("wrk (apt-get install wrk)");
    let after = pid.map(|p| cpu_seconds(p, tck));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix).map(str::to_string))
    };
    let mut r = Run {
        rps: field("Requests/sec:")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0),
        p50_us: field("50%").map_or(f64::NAN, |v| micros(&v)),
        p99_us: field("99%").map_or(f64::NAN, |v| micros(&v)),
        ..Run::default()
    };
    r.requests = text
        .lines()
        .find_map(|l| {
            let (n, rest) = l.trim().split_once(' ')?;
            if rest.starts_with("requests in") {
                n.parse().ok()
            } else {
                None
            }
        })
        .unwrap_or(0.0);
    r.non_2xx = field("Non-2xx or 3xx responses:")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    if let Some(socket) = field("Socket errors:") {
        r.socket_errors = socket
            .split(',')
            .filter_map(|p| p.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    if let (Some(b), Some(a)) = (before, after)
        && r.requests > 0.0
    {
        r.cpu_us_per_request = Some((a - b) * 1e6 / r.requests);
    }
    r
}

pub fn fmt_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// Writes an nginx configuration under `dir` (one worker, in the
/// foreground, every path of its own under `dir`, no access log, long
/// keep-alive) with `servers` as its `server` blocks; its path.
pub fn nginx_conf(dir: &Path, servers: &str) -> PathBuf {
    let d = dir.display();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log crit;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 75s;
  client_body_temp_path {d}/nginx-body;
  proxy_temp_path {d}/nginx-proxy;
  fastcgi_temp_path {d}/nginx-fastcgi;
  uwsgi_temp_path {d}/nginx-uwsgi;
  scgi_temp_path {d}/nginx-scgi;
{servers}}}
"
        ),
    )
    .unwrap();
    conf
}

/// The `i`th argument as a number, `default` when it is missing or not one,
/// held within `lo..=hi`.
pub fn arg<T: std::str::FromStr + Ord>(args: &[String], i: usize, default: T, lo: T, hi: T) -> T {
    args.get(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
        .clamp(lo, hi)
}
