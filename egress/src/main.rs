//! `gatehouse-egress --policy FILE [--policy-name NAME] [--http ADDR]
//! [--socks ADDR] [--dns ADDR] [--upstream-dns ADDR] [--log FILE]
//! [--first-bytes-timeout SECS] [--tunnel-idle-timeout SECS]
//! [--tunnel-total-timeout SECS] [--keepalive-timeout SECS]
//! [--max-connections N] [--metrics ADDR] [--threads N]`; and the adapters
//! for other proxies: `gatehouse-egress srt-decider ...` (sandbox-runtime's
//! `srt proxy`), `gatehouse-egress squid-helper ...` (squid's external ACL
//! helper) and `gatehouse-egress ext-authz ...` (Envoy's ext_authz);
//! docs/integrations/.

use std::net::SocketAddr;
use std::path::PathBuf;

use gatehouse_egress::{Config, start, system_dns};

const USAGE: &str = "usage: gatehouse-egress --policy FILE [--policy-name NAME] [--http 127.0.0.1:3128] \
[--socks 127.0.0.1:1080] [--dns 127.0.0.1:5353] [--upstream-dns IP:PORT] [--log FILE] [--no-policy] \
[--first-bytes-timeout 10] [--tunnel-idle-timeout 900] [--tunnel-total-timeout 86400] \
[--keepalive-timeout 60] [--max-connections 4096] [--metrics 127.0.0.1:9090] [--threads N]
       [--trusted-key FILE]... [--bundle-url URL [--poll-interval SECS]] [--log-url URL]
       gatehouse-egress srt-decider --policy FILE [--policy-name NAME] [--log FILE]
       gatehouse-egress squid-helper --policy FILE [--policy-name NAME] [--log FILE]
       gatehouse-egress ext-authz --listen ADDR --policy FILE [--policy-name NAME] [--log FILE]";

fn parse(args: &[String]) -> Result<(Config, Option<usize>), String> {
    let mut threads = None;
    let mut it = args.iter();
    let mut policy = None;
    let mut c = Config::new(
        PathBuf::new(),
        system_dns().unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 53], 53))),
    );
    c.upstream_proxy = gatehouse_egress::gate::UpstreamProxy::from_env().map(|u| u.addr);
    let secs = |v: Option<&String>, flag: &str| -> Result<std::time::Duration, String> {
        let s: f64 = v
            .ok_or(format!("{flag} needs a number of seconds"))?
            .parse()
            .map_err(|_| format!("{flag}: expected a number of seconds"))?;
        // At most a year: a larger value is a typo, and must not overflow.
        if !(s > 0.0 && s <= 365.0 * 24.0 * 3600.0) {
            return Err(format!(
                "{flag}: expected a number of seconds above 0 and at most a year"
            ));
        }
        Ok(std::time::Duration::from_secs_f64(s))
    };
    let addr = |v: Option<&String>, flag: &str| -> Result<SocketAddr, String> {
        v.ok_or(format!("{flag} needs an address"))?
            .parse()
            .map_err(|_| format!("{flag}: expected IP:PORT"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--policy" => policy = it.next().map(PathBuf::from),
            "--policy-name" => c.policy_name = it.next().cloned(),
            "--http" => c.http = addr(it.next(), a)?,
            "--socks" => c.socks = Some(addr(it.next(), a)?),
            "--dns" => c.dns = Some(addr(it.next(), a)?),
            "--upstream-dns" => c.upstream_dns = addr(it.next(), a)?,
            "--log" => c.log = it.next().map(PathBuf::from),
            "--no-policy" => c.no_policy = true,
            "--first-bytes-timeout" => c.timeouts.first_bytes = secs(it.next(), a)?,
            "--tunnel-idle-timeout" => c.timeouts.tunnel_idle = secs(it.next(), a)?,
            "--tunnel-total-timeout" => c.timeouts.tunnel_total = secs(it.next(), a)?,
            "--keepalive-timeout" => c.timeouts.keepalive_idle = secs(it.next(), a)?,
            "--max-connections" => {
                c.max_connections = Some(
                    it.next()
                        .and_then(|v| v.parse().ok())
                        .filter(|n| (1..=1_000_000).contains(n))
                        .ok_or(format!("{a}: expected a number from 1 to 1000000"))?,
                );
            }
            "--metrics" => c.metrics = Some(addr(it.next(), a)?),
            "--threads" => {
                threads = Some(
                    it.next()
                        .and_then(|v| v.parse().ok())
                        .filter(|n| (1..=1024).contains(n))
                        .ok_or(format!("{a}: expected a number from 1 to 1024"))?,
                );
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => {
                let mut next = || it.next().cloned();
                if !c.fleet.take(other, &mut next).map_err(|e| e.to_string())? {
                    return Err(format!("unknown argument `{other}`\n{USAGE}"));
                }
            }
        }
    }
    c.policy = policy.ok_or(USAGE)?;
    Ok((c, threads))
}

/// Worker threads by default: half the cores, at least one. The proxy
/// shares its machine with what it serves (an agent, a load generator): on
/// 2 cores, 2 workers beside `wrk` and nginx gave a keep-alive p99 of
/// 4–50 ms against 1.5 ms with one, at the same throughput (BENCHMARKS.md).
fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("srt-decider") => std::process::exit(gatehouse_egress::srt_decider::main(rest)),
        Some("squid-helper") => std::process::exit(gatehouse_egress::squid::main(rest)),
        Some("ext-authz") => std::process::exit(gatehouse_egress::ext_authz::main(rest)),
        _ => {}
    }
    let (config, threads) = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.unwrap_or_else(default_threads))
        .enable_all()
        .build();
    match runtime {
        Ok(rt) => rt.block_on(serve(config)),
        Err(e) => {
            eprintln!("gatehouse-egress: {e}");
            std::process::exit(1);
        }
    }
}

async fn serve(config: Config) {
    match start(config).await {
        Ok(r) => {
            eprintln!(
                "gatehouse-egress: http proxy on {} (at most {} connections)",
                r.http, r.max_connections
            );
            if let Some(a) = r.socks {
                eprintln!("gatehouse-egress: socks5 on {a}");
            }
            if let Some(a) = r.dns {
                eprintln!("gatehouse-egress: dns on {a} (udp and tcp)");
            }
            if let Some(a) = r.metrics {
                eprintln!("gatehouse-egress: metrics on http://{a}/metrics");
            }
            let _ = tokio::signal::ctrl_c().await;
        }
        Err(e) => {
            eprintln!("gatehouse-egress: {e}");
            std::process::exit(1);
        }
    }
}
