//! `gatehouse-egress`: the proxy and resolver, and the adapters for other
//! proxies (`srt-decider`, `squid-helper`, `ext-authz`). One command line,
//! declared once with clap: the flag groups every mode shares (the policy,
//! the fleet) are flattened into each, and values are checked as they are
//! parsed (addresses, URLs, durations, ranges). `--help` on the command and
//! on each subcommand shows the flags and examples (docs/egress.md and
//! docs/integrations/); `--version` says which build this is.

#![deny(missing_docs)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use gatehouse_egress::{Config, start, system_dns};

const EXAMPLES: &str = "Examples:
  gatehouse-egress --policy policies/coding-agent.policy
  gatehouse-egress --policy set.policy --policy-name ci --socks 127.0.0.1:1080 --dns 127.0.0.1:5353
  gatehouse-egress --policy bundle.ghc --trusted-key fleet.pub --bundle-url https://policies.example/ci.ghc
  gatehouse-egress srt-decider --policy agent.policy
  gatehouse-egress squid-helper --policy agent.policy
  gatehouse-egress ext-authz --listen 127.0.0.1:9191 --policy agent.policy";

/// The egress proxy and filtering resolver of gatehouse, and its adapters
/// for other proxies.
///
/// Without a subcommand it serves an HTTP proxy (absolute-form and
/// CONNECT, with the TLS server name checked), optionally SOCKS5 and a
/// filtering DNS resolver, deciding every request with one policy that is
/// swapped live when its file changes (docs/egress.md).
#[derive(Parser, Debug)]
#[command(
    name = "gatehouse-egress",
    version,
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    proxy: ProxyArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decide for sandbox-runtime's `srt proxy`: its decider protocol on
    /// stdin and stdout (docs/integrations/srt.md).
    #[command(
        after_help = "Examples:\n  srt proxy --decider-in 3 --decider-out 4 ... 3< <(gatehouse-egress srt-decider --policy agent.policy)"
    )]
    SrtDecider(AdapterArgs),
    /// Decide for squid as an external ACL helper: lines `[ID] HOST PORT
    /// [METHOD]` in, `[ID] OK` or `[ID] ERR message="REASON"` out
    /// (docs/integrations/squid.md).
    #[command(
        after_help = "Examples (squid.conf):\n  external_acl_type gatehouse children-max=4 concurrency=100 %DST %PORT %METHOD /usr/bin/gatehouse-egress squid-helper --policy /etc/gatehouse/agent.policy"
    )]
    SquidHelper(AdapterArgs),
    /// Envoy's external authorization service (gRPC), with gRPC health
    /// checking (docs/integrations/envoy.md).
    #[command(
        after_help = "Examples:\n  gatehouse-egress ext-authz --listen 127.0.0.1:9191 --policy agent.policy --check-destination"
    )]
    ExtAuthz(ExtAuthzArgs),
    /// One daemon for every sandbox on the host (Linux, root): installs
    /// its nftables table, intercepts each sandbox's TCP and DNS
    /// transparently and decides them with that sandbox's own policy
    /// (docs/host.md).
    #[command(
        after_help = "Examples:\n  gatehouse-egress host --sandboxes /etc/gatehouse/sandboxes.toml --control /run/gatehouse.sock\n  curl --unix-socket /run/gatehouse.sock -d '{\"kind\":\"domain\",\"value\":\"github.com\"}' http://host/v1/sandboxes/ci-1/rules\n  gatehouse-egress host --sandboxes sandboxes.toml --upstream-dns 1.1.1.1:53 --log decisions.jsonl --metrics 127.0.0.1:9090"
    )]
    Host(HostArgs),
    /// Switches a host-mode sandbox to another policy through the control
    /// API, atomically: in force for its next connection when this
    /// returns, its open connections, DNS-fed passes and kernel-passed
    /// flows that the new policy denies cut (a two-phase sandbox's switch
    /// from its setup policy to its agent policy; docs/host.md).
    #[command(
        after_help = "Examples:\n  gatehouse-egress switch --control /run/gatehouse.sock ci-1 agent.policy\n  gatehouse-egress switch --control /run/gatehouse.sock --policy-name agent ci-1 phases.policy"
    )]
    Switch(SwitchArgs),
}

/// `switch`'s flags.
#[derive(Args, Debug)]
struct SwitchArgs {
    /// The daemon's control socket (`host --control`).
    #[arg(long, value_name = "SOCKET", required = true)]
    control: Option<PathBuf>,
    /// Which policy of the file's set.
    #[arg(long, value_name = "NAME")]
    policy_name: Option<String>,
    /// Seconds to wait for the daemon's answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    timeout: u64,
    /// The sandbox's id.
    #[arg(value_name = "SANDBOX", required = true)]
    sandbox: Option<String>,
    /// The policy to put in force (text; the daemon checks it as it
    /// checks any policy it is given).
    #[arg(value_name = "POLICY", required = true)]
    policy: Option<PathBuf>,
}

/// Host mode's flags.
#[derive(Args, Debug)]
struct HostArgs {
    /// The sandbox table (TOML): each sandbox's id, source addresses and
    /// policy; reloaded when it changes.
    #[arg(long, value_name = "FILE", required = true)]
    sandboxes: Option<PathBuf>,
    /// The transparent listener's port (every address of the host).
    #[arg(long, value_name = "PORT", default_value_t = 15001)]
    transparent_port: u16,
    /// The resolver's port, UDP and TCP (every address of the host).
    #[arg(long, value_name = "PORT", default_value_t = 15053)]
    dns_port: u16,
    /// Where allowed questions and the daemon's own lookups go [default:
    /// the first nameserver of /etc/resolv.conf].
    #[arg(long, value_name = "IP:PORT")]
    upstream_dns: Option<SocketAddr>,
    /// Write every decision and access record to FILE (JSON lines, each
    /// with its sandbox).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Serve `GET /metrics` (Prometheus text) on ADDR.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Install no nftables table: the caller redirects the sandboxes'
    /// traffic to the two ports itself.
    #[arg(long)]
    no_nftables: bool,
    /// Client connections open at once on the transparent listener (1 to
    /// 1000000); one sandbox holds at most a quarter of them [default:
    /// 4096, or what the descriptor limit holds].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: Option<u32>,
    /// Serve the control API (HTTP/JSON) on this Unix socket, mode 0600:
    /// add and remove sandboxes, put policies, the Zoo calls, decide tool
    /// calls (docs/host.md).
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// Where the control API keeps the policies it puts [default:
    /// gatehouse-state beside the sandbox table].
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Accept only policies that are bundles signed by this public key
    /// (repeatable), for every sandbox and through the control API.
    #[arg(long = "trusted-key", value_name = "FILE")]
    trusted_keys: Vec<PathBuf>,
    /// Ship decision records to this URL too (HTTP POST of JSON lines).
    #[arg(long, value_name = "URL", value_parser = http_url)]
    log_url: Option<String>,
    #[command(flatten)]
    otel: OtelArgs,
}

/// The policy, its decision log, and the fleet: every mode's.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Policy")]
struct PolicyArgs {
    /// The policy file: policy text, a compiled artifact or a signed bundle.
    #[arg(long, value_name = "FILE", required = true)]
    policy: Option<PathBuf>,
    /// Which policy of the file (may be left out when it holds one).
    #[arg(long, value_name = "NAME")]
    policy_name: Option<String>,
    /// Write every decision and access record to FILE (JSON lines).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    #[command(flatten)]
    fleet: FleetArgs,
}

/// Fleet flags (docs/bundles.md).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Fleet")]
struct FleetArgs {
    /// Accept only bundles signed by this public key (repeatable).
    #[arg(long = "trusted-key", value_name = "FILE")]
    trusted_keys: Vec<PathBuf>,
    /// Poll this URL for signed bundles (needs --trusted-key).
    #[arg(long, value_name = "URL", value_parser = http_url)]
    bundle_url: Option<String>,
    /// Seconds between polls (0.1 to 86400; default 30).
    #[arg(long, value_name = "SECS", value_parser = poll_interval)]
    poll_interval: Option<Duration>,
    /// Ship decision records to this URL (HTTP POST of JSON lines).
    #[arg(long, value_name = "URL", value_parser = http_url)]
    log_url: Option<String>,
}

/// The proxy's own flags (no subcommand).
#[derive(Args, Debug)]
struct ProxyArgs {
    /// Say nothing at start (where it listens); refusals and errors are
    /// still written (`gatehouse-run` starts its proxy so).
    #[arg(long)]
    quiet: bool,
    /// The HTTP proxy's address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:3128")]
    http: SocketAddr,
    /// Serve SOCKS5 (TCP CONNECT and UDP ASSOCIATE) on ADDR.
    #[arg(long, value_name = "ADDR")]
    socks: Option<SocketAddr>,
    /// Serve the filtering DNS resolver (UDP and TCP) on ADDR.
    #[arg(long, value_name = "ADDR")]
    dns: Option<SocketAddr>,
    /// Where allowed questions and the proxy's own lookups go [default:
    /// the first nameserver of /etc/resolv.conf].
    #[arg(long, value_name = "IP:PORT")]
    upstream_dns: Option<SocketAddr>,
    /// Serve `GET /metrics` (Prometheus text) on ADDR.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Client connections open at once, per listener (1 to 1000000)
    /// [default: 4096, or what the descriptor limit holds].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: Option<u32>,
    /// Worker threads (1 to 1024) [default: half the cores].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Seconds a request head or a tunnel's first bytes may take.
    #[arg(long, value_name = "SECS", value_parser = seconds, help_heading = "Timeouts")]
    first_bytes_timeout: Option<Duration>,
    /// Seconds a tunnel may stay idle.
    #[arg(long, value_name = "SECS", value_parser = seconds, help_heading = "Timeouts")]
    tunnel_idle_timeout: Option<Duration>,
    /// Seconds a tunnel may last in all.
    #[arg(long, value_name = "SECS", value_parser = seconds, help_heading = "Timeouts")]
    tunnel_total_timeout: Option<Duration>,
    /// Seconds a kept-alive client connection may wait for its next request.
    #[arg(long, value_name = "SECS", value_parser = seconds, help_heading = "Timeouts")]
    keepalive_timeout: Option<Duration>,
    /// Load tests only: decide nothing (every request allowed), log nothing.
    #[arg(long)]
    no_policy: bool,
    /// Read the policy file once, at start: never again, at a change or a
    /// SIGHUP (gatehouse-run: its command may be able to write the file).
    #[arg(long)]
    no_reload: bool,
    #[command(flatten)]
    policy: PolicyArgs,
    #[command(flatten)]
    otel: OtelArgs,
}

/// OpenTelemetry export (docs/telemetry.md).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "OpenTelemetry")]
struct OtelArgs {
    /// Export decisions and metrics with these settings (TOML; the
    /// OTEL_EXPORTER_OTLP_* variables work too).
    #[arg(long = "otel", value_name = "FILE")]
    otel: Option<PathBuf>,
    /// Exporter: none, otlp-http or otlp-grpc.
    #[arg(long = "otel-exporter", value_name = "KIND")]
    otel_exporter: Option<String>,
    /// Collector URL (http://127.0.0.1:4318 for otlp-http).
    #[arg(long = "otel-endpoint", value_name = "URL", value_parser = http_url)]
    otel_endpoint: Option<String>,
    /// Also export command lines and paths (as the policy's masks leave
    /// them).
    #[arg(long = "otel-log-commands")]
    otel_log_commands: bool,
}

impl OtelArgs {
    /// Starts the export (outside any runtime: it has its own).
    fn start(&self, program: &str) -> Result<gatehouse_otel::Telemetry, String> {
        let settings = gatehouse_otel::Settings::from_flags(&gatehouse_otel::Flags {
            file: self.otel.clone(),
            exporter: self.otel_exporter.clone(),
            endpoint: self.otel_endpoint.clone(),
            log_commands: self.otel_log_commands,
        })
        .map_err(|e| e.to_string())?;
        gatehouse_otel::Telemetry::start(&settings, program).map_err(|e| e.to_string())
    }
}

/// An adapter's flags: the policy, its log, the fleet, OpenTelemetry.
#[derive(Args, Debug)]
struct AdapterArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    #[command(flatten)]
    otel: OtelArgs,
}

#[derive(Args, Debug)]
struct ExtAuthzArgs {
    /// Where the gRPC service listens (allowed by the policy's `listen`).
    #[arg(long, value_name = "ADDR", required = true)]
    listen: Option<SocketAddr>,
    /// Also hold the request's original destination address to the decided
    /// target (for a sidecar that intercepts egress transparently).
    #[arg(long)]
    check_destination: bool,
    #[command(flatten)]
    policy: PolicyArgs,
    #[command(flatten)]
    otel: OtelArgs,
}

/// A number of seconds above 0 and at most a year (a larger value is a
/// typo, and must not overflow).
fn seconds(v: &str) -> Result<Duration, String> {
    let s: f64 = v
        .parse()
        .map_err(|_| String::from("expected a number of seconds"))?;
    if !(s > 0.0 && s <= 365.0 * 24.0 * 3600.0) {
        return Err(String::from(
            "expected a number of seconds above 0 and at most a year",
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

fn poll_interval(v: &str) -> Result<Duration, String> {
    let s: f64 = v
        .parse()
        .map_err(|_| String::from("expected a number of seconds"))?;
    if !(0.1..=86_400.0).contains(&s) {
        return Err(String::from("expected 0.1 to 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(s))
}

fn http_url(v: &str) -> Result<String, String> {
    if v.starts_with("http://") || v.starts_with("https://") {
        Ok(v.to_string())
    } else {
        Err(format!("expected an http:// or https:// URL, not `{v}`"))
    }
}

impl PolicyArgs {
    fn source(&self) -> gatehouse_egress::adapter::Source {
        gatehouse_egress::adapter::Source {
            policy: self.policy.clone().unwrap_or_default(),
            name: self.policy_name.clone(),
            log: self.log.clone(),
            fleet: gatehouse_egress::fleet::Options {
                trusted_keys: self.fleet.trusted_keys.clone(),
                bundle_url: self.fleet.bundle_url.clone(),
                poll_interval: self.fleet.poll_interval,
                log_url: self.fleet.log_url.clone(),
            },
            telemetry: gatehouse_otel::Telemetry::off(),
        }
    }
}

impl ProxyArgs {
    fn config(&self) -> Config {
        let source = self.policy.source();
        let upstream_dns = self
            .upstream_dns
            .or_else(system_dns)
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 53], 53)));
        let mut c = Config::new(source.policy, upstream_dns);
        c.policy_name = source.name;
        c.log = source.log;
        c.fleet = source.fleet;
        c.http = self.http;
        c.socks = self.socks;
        c.dns = self.dns;
        c.metrics = self.metrics;
        c.no_policy = self.no_policy;
        c.reload = !self.no_reload;
        c.max_connections = self.max_connections.map(|n| n as usize);
        c.upstream_proxy = gatehouse_egress::gate::UpstreamProxy::from_env().map(|u| u.addr);
        let t = &mut c.timeouts;
        for (slot, v) in [
            (&mut t.first_bytes, self.first_bytes_timeout),
            (&mut t.tunnel_idle, self.tunnel_idle_timeout),
            (&mut t.tunnel_total, self.tunnel_total_timeout),
            (&mut t.keepalive_idle, self.keepalive_timeout),
        ] {
            if let Some(v) = v {
                *slot = v;
            }
        }
        c
    }
}

/// Worker threads by default: half the cores, at least one. The proxy
/// shares its machine with what it serves (an agent, a load generator): on
/// 2 cores, 2 workers beside `wrk` and nginx gave a keep-alive p99 of
/// 4–50 ms against 1.5 ms with one, at the same throughput (BENCHMARKS.md).
fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

fn main() {
    fixed_mmap_threshold();
    let cli = Cli::parse();
    let code = match &cli.command {
        Some(Command::SrtDecider(a)) => adapter(&a.policy, &a.otel, "srt-decider", |s| {
            gatehouse_egress::srt_decider::run(s)
        }),
        Some(Command::SquidHelper(a)) => adapter(&a.policy, &a.otel, "squid-helper", |s| {
            gatehouse_egress::squid::run(s)
        }),
        Some(Command::ExtAuthz(a)) => match a.listen {
            Some(addr) => adapter(&a.policy, &a.otel, "ext-authz", |s| {
                gatehouse_egress::ext_authz::run(addr, a.check_destination, s)
            }),
            None => 2,
        },
        Some(Command::Host(a)) => host(a),
        Some(Command::Switch(a)) => switch(a),
        None => proxy(&cli.proxy),
    };
    std::process::exit(code);
}

/// Runs an adapter with its telemetry: started first (outside any
/// runtime), flushed within 5 s when the adapter ends (its peer closed the
/// link, or a signal).
fn adapter(
    policy: &PolicyArgs,
    otel: &OtelArgs,
    mode: &str,
    run: impl FnOnce(&gatehouse_egress::adapter::Source) -> i32,
) -> i32 {
    let mut source = policy.source();
    source.telemetry = match otel.start(&format!("gatehouse-egress {mode}")) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gatehouse-egress {mode}: {e}");
            return 2;
        }
    };
    let code = run(&source);
    source.telemetry.shutdown(Duration::from_secs(5));
    if source.telemetry.dropped() > 0 {
        eprintln!(
            "gatehouse-egress {mode}: telemetry: {} records (decision events and spans) were not delivered",
            source.telemetry.dropped()
        );
    }
    code
}

/// Allocations of 256 KiB and more get pages of their own, given back to
/// the system when freed. glibc otherwise raises that threshold to the
/// largest block ever freed (the policy file's bytes, the parser's token
/// queue), after which such blocks stay in the heap of the thread that
/// reloads: a daemon of 20 000 rules grew from 14 to 28 MiB over five
/// reloads (docs/egress.md, "Memory"; `egress/load/memory.sh`).
#[allow(unsafe_code)] // mallopt: the reason above; egress/tests/e2e/daemon.rs measures it.
fn fixed_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and only sets an allocator
    // parameter; called first thing in main, before any other thread
    // exists. A refusal (return 0) leaves glibc's default in place.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

fn proxy(args: &ProxyArgs) -> i32 {
    let threads = args.threads.map_or_else(default_threads, usize::from);
    let telemetry = match args.otel.start("gatehouse-egress") {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gatehouse-egress: {e}");
            return 2;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build();
    let mut config = args.config();
    config.telemetry = telemetry.clone();
    match runtime {
        Ok(rt) => {
            let code = rt.block_on(serve(config, args.quiet));
            // What is queued reaches the collector, within a bound.
            telemetry.shutdown(Duration::from_secs(5));
            if telemetry.dropped() > 0 {
                eprintln!(
                    "gatehouse-egress: telemetry: {} records (decision events and spans) were not delivered",
                    telemetry.dropped()
                );
            }
            code
        }
        Err(e) => {
            eprintln!("gatehouse-egress: {e}");
            1
        }
    }
}

/// `switch`: the policy file put in force for the sandbox; 0 when the
/// daemon has it in force, 1 when it refused (its message, every
/// diagnostic of a policy that does not build, on stderr), 2 for a file
/// that cannot be read.
fn switch(args: &SwitchArgs) -> i32 {
    let (Some(control), Some(id), Some(path)) = (&args.control, &args.sandbox, &args.policy) else {
        return 2;
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gatehouse-egress switch: {}: {e}", path.display());
            return 2;
        }
    };
    let client =
        gatehouse_egress::host::client::Client::new(control, Duration::from_secs(args.timeout));
    let result = client.revision(id).and_then(|before| {
        client
            .put_policy(id, &text, args.policy_name.as_deref())
            .map(|after| (before, after))
    });
    match result {
        Ok((before, after)) => {
            println!(
                "{id}: {} in force (revision {before} -> {after}); what it denies is cut",
                path.display()
            );
            0
        }
        Err(e) => {
            eprintln!("gatehouse-egress switch: {id}: {e}");
            1
        }
    }
}

fn host(args: &HostArgs) -> i32 {
    let Some(sandboxes) = args.sandboxes.clone() else {
        return 2;
    };
    let upstream_dns = args
        .upstream_dns
        .or_else(system_dns)
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 53], 53)));
    let mut config = gatehouse_egress::host::HostConfig::new(sandboxes, upstream_dns);
    config.transparent_port = args.transparent_port;
    config.dns_port = args.dns_port;
    config.log = args.log.clone();
    config.metrics = args.metrics;
    config.nftables = !args.no_nftables;
    config.max_connections = args.max_connections.map(|n| n as usize);
    config.control = args.control.clone();
    config.state_dir = args.state.clone();
    config.trusted_keys = args.trusted_keys.clone();
    config.log_url = args.log_url.clone();
    config.telemetry = match args.otel.start("gatehouse-egress") {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gatehouse-egress: {e}");
            return 2;
        }
    };
    let telemetry = config.telemetry.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(default_threads())
        .enable_all()
        .build();
    let rt = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gatehouse-egress: {e}");
            return 1;
        }
    };
    let code = rt.block_on(async move {
        match gatehouse_egress::host::start(config).await {
            Ok(r) => {
                let n = r.table.load().sandboxes().count();
                eprintln!(
                    "gatehouse-egress: host mode for {n} sandboxes: transparent on port {}, dns on port {} (udp and tcp)",
                    r.transparent_port, r.dns_port
                );
                if let Some(a) = r.metrics {
                    eprintln!("gatehouse-egress: metrics on http://{a}/metrics");
                }
                gatehouse_egress::adapter::stopped().await;
                0
            }
            Err(e) => {
                eprintln!("gatehouse-egress: {e}");
                1
            }
        }
    });
    drop(rt);
    telemetry.shutdown(Duration::from_secs(5));
    code
}

async fn serve(config: Config, quiet: bool) -> i32 {
    match start(config).await {
        Ok(_running) if quiet => {
            gatehouse_egress::adapter::stopped().await;
            0
        }
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
            gatehouse_egress::adapter::stopped().await;
            0
        }
        Err(e) => {
            eprintln!("gatehouse-egress: {e}");
            1
        }
    }
}

#[cfg(test)]
#[path = "../../tests/support/bless.rs"]
mod bless;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// docs/egress-cli.md is `--help` of the command and of every
    /// subcommand, walked from the definitions (a new subcommand cannot be
    /// left out); `BLESS=1` rewrites it. Each shows an example.
    #[test]
    fn the_help_in_the_docs_is_the_help_the_binary_prints() {
        let mut cli = Cli::command();
        let mut doc = String::from(
            "# `gatehouse-egress` command line\n\nGenerated from the command's definitions by \
             `egress/src/main.rs` (`BLESS=1 cargo test -p gatehouse-egress --bin gatehouse-egress`); \
             docs/egress.md explains what each mode does.\n",
        );
        let mut section = |title: String, help: String| {
            assert!(
                help.contains("Example"),
                "{title} shows no example:\n{help}"
            );
            doc.push_str(&format!(
                "\n## `{title}`\n\n```text\n{}\n```\n",
                help.trim_end()
            ));
        };
        section(
            "gatehouse-egress".into(),
            cli.render_long_help().to_string(),
        );
        let names: Vec<String> = cli
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .filter(|n| n != "help")
            .collect();
        assert!(names.len() >= 3, "{names:?}");
        for name in names {
            let sub = cli.find_subcommand_mut(&name).expect("listed");
            let help = sub.render_long_help().to_string();
            section(format!("gatehouse-egress {name}"), help);
        }
        crate::bless::golden(
            "docs/egress-cli.md",
            &doc,
            "cargo test -p gatehouse-egress --bin gatehouse-egress",
        );
    }
}
