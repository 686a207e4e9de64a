//! gatehouse-egress: the reference embedding of gatehouse on the hot path.
//!
//! An egress proxy (HTTP absolute-form and `CONNECT`, with the TLS server
//! name checked against the target; SOCKS5 with TCP CONNECT and UDP
//! ASSOCIATE) and a filtering DNS resolver, both deciding every request with
//! one compiled policy that is swapped live when its file changes. See
//! `docs/egress.md`.
//!
//! The pattern to copy into your own embedding:
//! 1. compile once into a [`gatehouse::store::PolicyStore`];
//! 2. per request, `load()` the set once and make every decision of that
//!    request with it ([`policy::Policies::request`]);
//! 3. decide on what the socket will use: resolve once, check the answers
//!    with `resolved`, dial exactly those addresses.

#![deny(missing_docs)]

pub mod adapter;
pub mod conn;
pub mod dns;
pub mod exchange;
pub mod ext_authz;
pub mod fleet;
pub mod gate;
pub mod host;
pub mod http;
pub mod listener;
pub mod metrics;
pub mod metrics_server;
mod notify;
pub mod outcome;
pub mod policy;
pub mod pool;
pub mod relay;
pub mod reply;
pub mod resolve;
pub mod socks;
pub mod squid;
pub mod srt_decider;
#[doc(hidden)]
pub mod testing;
pub mod tunnel;
mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::{TcpListener, UdpSocket};

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The policy file (text, artifact or signed bundle).
    pub policy: PathBuf,
    /// The policy of the set to enforce (`None`: the only one).
    pub policy_name: Option<String>,
    /// The HTTP proxy's address.
    pub http: SocketAddr,
    /// The SOCKS5 listener, if any.
    pub socks: Option<SocketAddr>,
    /// The DNS listener (UDP and TCP), if any.
    pub dns: Option<SocketAddr>,
    /// Where allowed DNS questions go (and the proxy's own lookups).
    pub upstream_dns: SocketAddr,
    /// The decision log (JSON lines); none: not written.
    pub log: Option<PathBuf>,
    /// Load tests only: decide nothing, log nothing.
    pub no_policy: bool,
    /// An upstream HTTP proxy (`HOST:PORT`), used when the policy says
    /// `upstream on`; the binary takes it from `HTTPS_PROXY`/`HTTP_PROXY`.
    pub upstream_proxy: Option<String>,
    /// Keep every request's access record in memory (tests).
    pub keep_access_records: bool,
    /// Deadlines for first bytes, kept-alive connections and tunnels.
    pub timeouts: relay::Timeouts,
    /// Client connections open at once, per listener (HTTP, SOCKS5). None:
    /// 4 096, or fewer if the descriptor limit holds fewer; a number the
    /// limit cannot hold is refused at start.
    pub max_connections: Option<usize>,
    /// Where to serve `GET /metrics` (Prometheus text); none: not served.
    pub metrics: Option<SocketAddr>,
    /// Read the policy file again when it changes or at SIGHUP (the
    /// default). Off: read once, at start (`--no-reload`; gatehouse-run,
    /// whose command may be able to write the file it was given).
    pub reload: bool,
    /// Trusted keys, bundle polling, shipped decision records.
    pub fleet: fleet::Options,
    /// OpenTelemetry export of decisions and metrics (docs/telemetry.md);
    /// started by the caller, outside any runtime.
    pub telemetry: gatehouse_otel::Telemetry,
}

impl Config {
    /// A configuration with every default: the HTTP proxy on
    /// 127.0.0.1:3128, no SOCKS5, no resolver, no metrics.
    pub fn new(policy: PathBuf, upstream_dns: SocketAddr) -> Config {
        Config {
            policy,
            policy_name: None,
            http: SocketAddr::from(([127, 0, 0, 1], 3128)),
            socks: None,
            dns: None,
            upstream_dns,
            log: None,
            no_policy: false,
            upstream_proxy: None,
            keep_access_records: false,
            timeouts: relay::Timeouts::default(),
            max_connections: None,
            metrics: None,
            reload: true,
            fleet: fleet::Options::default(),
            telemetry: gatehouse_otel::Telemetry::off(),
        }
    }
}

/// A started daemon: the bound addresses.
pub struct Running {
    /// Where the HTTP proxy listens.
    pub http: SocketAddr,
    /// The connection cap in force per listener.
    pub max_connections: usize,
    /// Where SOCKS5 listens, if it does.
    pub socks: Option<SocketAddr>,
    /// Where the resolver listens, if it does.
    pub dns: Option<SocketAddr>,
    /// Where `/metrics` is served, if it is.
    pub metrics: Option<SocketAddr>,
    /// The policy in force, for embedders that decide beside the daemon.
    pub policies: Arc<policy::Policies>,
}

/// The first `nameserver` of /etc/resolv.conf, port 53.
pub fn system_dns() -> Option<SocketAddr> {
    let text = std::fs::read_to_string("/etc/resolv.conf").ok()?;
    text.lines().find_map(|l| {
        let ip = l.trim().strip_prefix("nameserver")?.trim().parse().ok()?;
        Some(SocketAddr::new(ip, 53))
    })
}

/// Why the daemon did not start. Each variant says what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The connection cap does not fit the descriptor limit.
    #[error(transparent)]
    Cap(#[from] listener::CapError),
    /// The fleet flags, the first bundle, or the decision-record shipper.
    #[error(transparent)]
    Fleet(#[from] fleet::FleetError),
    /// The policy file could not be put in force.
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    /// The policy's `listen` rule does not allow this address.
    #[error(
        "the policy does not allow listening on {0} (proxy {{ listen any }} allows non-loopback addresses)"
    )]
    ListenNotAllowed(SocketAddr),
    /// The upstream DNS server's socket could not be opened.
    #[error("upstream dns {addr}: {source}")]
    UpstreamDns {
        /// The server it names.
        addr: SocketAddr,
        /// The error opening the socket.
        source: std::io::Error,
    },
    /// A thread or runtime of the daemon's own could not be started.
    #[error("{what}: {source}")]
    Runtime {
        /// What could not be started.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// A listener could not be bound.
    #[error("{what} on {addr}: {source}")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The error binding it.
        source: std::io::Error,
    },
}

/// Binds every listener (each one first allowed by the policy's `listen`
/// rule: loopback unless the policy says `listen any`) and starts serving.
pub async fn start(config: Config) -> Result<Running, StartError> {
    // The descriptors every cap together may need, checked against the
    // limit (raised to the hard limit first).
    let max_connections = listener::connection_cap(
        config.max_connections,
        gate::MAX_CONNECTIONS,
        config.socks.is_some(),
        config.dns.map(|_| dns::MAX_TCP_CONNECTIONS),
        pool::MAX_IDLE,
    )?;
    let metrics = Arc::new(metrics::Metrics::default());
    let keys = config
        .fleet
        .prepare(&config.policy, config.policy_name.as_deref())?;
    let sink = config.fleet.sink(config.log.as_deref(), &metrics)?;
    let sink = metrics::with_telemetry(sink, &config.telemetry, &metrics);
    let policies = Arc::new(policy::Policies::open(
        policy::PolicyOptions {
            path: config.policy.clone(),
            name: config.policy_name.clone(),
            log: sink,
            bypass: config.no_policy,
            keep_records: config.keep_access_records,
            trusted: keys.clone(),
            tally: None,
            telemetry: config.telemetry.clone(),
            sandbox: None,
            sets: None,
        },
        metrics.clone(),
    )?);
    for addr in [Some(config.http), config.socks, config.dns, config.metrics]
        .into_iter()
        .flatten()
    {
        let set = policies.store.load();
        let p = set.select(config.policy_name.as_deref()).ok();
        let d = p.map(|p| p.listen_on(addr.ip(), addr.port()));
        if !d.is_some_and(|d| d.is_allow()) {
            return Err(StartError::ListenNotAllowed(addr));
        }
    }
    let resolver = Arc::new(
        resolve::Upstream::new(config.upstream_dns, metrics.clone())
            .await
            .map_err(|source| StartError::UpstreamDns {
                addr: config.upstream_dns,
                source,
            })?,
    );
    let ctx = Arc::new(gate::Ctx {
        policies: policies.clone(),
        resolver: resolver.clone(),
        upstream_proxy: config
            .upstream_proxy
            .clone()
            .map(|addr| gate::UpstreamProxy { addr }),
        timeouts: config.timeouts,
        pool: pool::Pool::new(metrics.clone(), max_connections),
        metrics: metrics.clone(),
        max_connections,
    });
    let bind_err = |what: &'static str, addr: SocketAddr, source: std::io::Error| {
        StartError::Bind { what, addr, source }
    };
    let listener = TcpListener::bind(config.http)
        .await
        .map_err(|e| bind_err("http", config.http, e))?;
    let http = listener
        .local_addr()
        .map_err(|e| bind_err("http", config.http, e))?;
    http::serve(ctx.clone(), listener);
    let socks = match config.socks {
        Some(a) => {
            let l = TcpListener::bind(a)
                .await
                .map_err(|e| bind_err("socks5", a, e))?;
            let bound = l.local_addr().map_err(|e| bind_err("socks5", a, e))?;
            socks::serve(ctx.clone(), l);
            Some(bound)
        }
        None => None,
    };
    let dns = match config.dns {
        Some(a) => {
            // UDP and TCP on one port. With port 0 the kernel picks the UDP
            // port, and the same TCP port may be in use: pick again.
            let mut tries = 0;
            let (udp, tcp, bound) = loop {
                tries += 1;
                let udp = UdpSocket::bind(a)
                    .await
                    .map_err(|e| bind_err("dns", a, e))?;
                let bound = udp.local_addr().map_err(|e| bind_err("dns", a, e))?;
                match TcpListener::bind(bound).await {
                    Ok(tcp) => break (udp, tcp, bound),
                    Err(_) if a.port() == 0 && tries < 20 => continue,
                    Err(e) => return Err(bind_err("dns (tcp)", bound, e)),
                }
            };
            dns::serve(
                Arc::new(policies.clone()),
                resolver,
                udp,
                tcp,
                metrics.clone(),
            );
            Some(bound)
        }
        None => None,
    };
    let metrics_addr = match config.metrics {
        Some(a) => {
            let l = TcpListener::bind(a)
                .await
                .map_err(|e| bind_err("metrics", a, e))?;
            let bound = l.local_addr().map_err(|e| bind_err("metrics", a, e))?;
            metrics_server::serve(metrics.clone(), l);
            Some(bound)
        }
        None => None,
    };
    if config.reload {
        watch::watch(policies.clone());
    }
    config
        .fleet
        .start_polling(&config.policy, config.policy_name.clone(), keys);
    Ok(Running {
        http,
        max_connections,
        socks,
        dns,
        metrics: metrics_addr,
        policies,
    })
}
