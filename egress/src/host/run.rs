//! Starting host mode: the sandbox table, the listeners, the nftables
//! table, and the one thread that watches the table and every sandbox's
//! policy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::net::{TcpListener, TcpSocket, UdpSocket};

use super::kernel::Kernel;
use super::nft::{self, NftError, Ports};
use super::resolver::HostRoute;
use super::{HostError, SandboxTable, Shared};
use crate::dns::{self, Upstream};
use crate::metrics::Metrics;
use crate::policy::{PolicyOptions, stderr_line};
use crate::watch::{FileWatch, POLL, give_back_free_memory, stat_key};
use crate::{StartError, gate, listener};

/// What host mode runs with.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// The sandbox table (TOML, [`super`]).
    pub sandboxes: PathBuf,
    /// The transparent listener's port, on every address of the host
    /// (0: any free port).
    pub transparent_port: u16,
    /// The resolver's port (UDP and TCP), on every address of the host.
    pub dns_port: u16,
    /// Where allowed DNS questions go (and the daemon's own lookups).
    pub upstream_dns: SocketAddr,
    /// The decision log (JSON lines, each record with its sandbox).
    pub log: Option<PathBuf>,
    /// Where to serve `GET /metrics`; none: not served.
    pub metrics: Option<SocketAddr>,
    /// Deadlines for first bytes, kept-alive connections and tunnels.
    pub timeouts: crate::relay::Timeouts,
    /// Connections open at once on the transparent listener.
    pub max_connections: Option<usize>,
    /// Install and own the nftables table (false: the caller redirects).
    pub nftables: bool,
}

impl HostConfig {
    /// Every default: ports 15001 (transparent) and 15053 (DNS), nftables
    /// installed.
    pub fn new(sandboxes: PathBuf, upstream_dns: SocketAddr) -> HostConfig {
        HostConfig {
            sandboxes,
            transparent_port: 15001,
            dns_port: 15053,
            upstream_dns,
            log: None,
            metrics: None,
            timeouts: crate::relay::Timeouts::default(),
            max_connections: None,
            nftables: true,
        }
    }
}

/// Why host mode did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostStartError {
    /// The sandbox table, or a sandbox's policy.
    #[error(transparent)]
    Table(#[from] HostError),
    /// The nftables table could not be installed.
    #[error(transparent)]
    Nft(#[from] NftError),
    /// A listener, the resolver, the log.
    #[error(transparent)]
    Start(#[from] StartError),
}

/// A started host mode.
pub struct HostRunning {
    /// The transparent listener's port.
    pub transparent_port: u16,
    /// The resolver's port.
    pub dns_port: u16,
    /// Where `/metrics` is served, if it is.
    pub metrics: Option<SocketAddr>,
    /// The sandbox table in force.
    pub table: Arc<ArcSwap<SandboxTable>>,
}

/// A TCP listener on `ip:port`; an IPv6 one takes only IPv6 (the IPv4
/// listener has the port's IPv4 side).
fn tcp_listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => {
            let s = TcpSocket::new_v6()?;
            rustix::net::sockopt::set_ipv6_v6only(&s, true)?;
            s
        }
    };
    s.set_reuseaddr(true)?;
    s.bind(addr)?;
    s.listen(1024)
}

fn udp_socket(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let s = std::net::UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    UdpSocket::from_std(s)
}

/// Binds the transparent listener and the resolver on IPv4 and IPv6 (an
/// IPv6 listener that cannot be bound, on a host without IPv6, is
/// reported; its sandboxes' IPv6 traffic then finds no listener and fails
/// closed).
async fn bind(
    config: &HostConfig,
) -> Result<(Vec<TcpListener>, Vec<(UdpSocket, TcpListener)>, Ports), StartError> {
    let err = |what: &'static str, addr: SocketAddr| {
        move |source| StartError::Bind { what, addr, source }
    };
    let v4 = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
    let v6 = |port| SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
    let t4 = tcp_listener(v4(config.transparent_port))
        .map_err(err("transparent", v4(config.transparent_port)))?;
    let transparent = t4
        .local_addr()
        .map_err(err("transparent", v4(config.transparent_port)))?
        .port();
    let u4 = udp_socket(v4(config.dns_port)).map_err(err("dns", v4(config.dns_port)))?;
    let dns = u4
        .local_addr()
        .map_err(err("dns", v4(config.dns_port)))?
        .port();
    let d4 = tcp_listener(v4(dns)).map_err(err("dns (tcp)", v4(dns)))?;
    let mut tcp = vec![t4];
    let mut resolvers = vec![(u4, d4)];
    match tcp_listener(v6(transparent)) {
        Ok(t6) => tcp.push(t6),
        Err(e) => stderr_line(format!(
            "gatehouse-egress: no IPv6 transparent listener ({e}); sandboxes' IPv6 connections fail closed"
        )),
    }
    let u6 = udp_socket(v6(dns)).and_then(|u| Ok((u, tcp_listener(v6(dns))?)));
    match u6 {
        Ok(pair) => resolvers.push(pair),
        Err(e) => stderr_line(format!(
            "gatehouse-egress: no IPv6 resolver ({e}); sandboxes' IPv6 questions fail closed"
        )),
    }
    Ok((tcp, resolvers, Ports { transparent, dns }))
}

/// The nftables table for `table`'s sandboxes.
fn install(table: &SandboxTable, ports: Ports) -> Result<(), NftError> {
    let sources: Vec<IpAddr> = table
        .sandboxes()
        .flat_map(|s| s.addresses.iter().copied())
        .collect();
    nft::apply(&nft::ruleset(&sources, ports))
}

/// Starts host mode: reads the sandbox table and opens every sandbox's
/// policy, binds the transparent listener and the resolver, then installs
/// the nftables table in one transaction (until then, an earlier daemon's
/// table stays in force: nothing passes undecided), and serves.
pub async fn start(config: HostConfig) -> Result<HostRunning, HostStartError> {
    let max_connections = listener::connection_cap(
        config.max_connections,
        gate::MAX_CONNECTIONS,
        false,
        Some(dns::MAX_TCP_CONNECTIONS * 2),
        0,
    )
    .map_err(StartError::from)?;
    let metrics = Arc::new(Metrics::default());
    let sink = crate::fleet::Options::default()
        .sink(config.log.as_deref(), &metrics)
        .map_err(StartError::from)?;
    let resolver = Arc::new(
        Upstream::new(config.upstream_dns, metrics.clone())
            .await
            .map_err(|source| StartError::UpstreamDns {
                addr: config.upstream_dns,
                source,
            })?,
    );
    let shared = Shared {
        options: PolicyOptions {
            log: sink,
            ..PolicyOptions::default()
        },
        metrics: metrics.clone(),
        resolver: resolver.clone(),
        timeouts: config.timeouts,
        max_connections,
    };
    let table = Arc::new(ArcSwap::from_pointee(SandboxTable::load(
        &config.sandboxes,
        &shared,
    )?));
    let (tcp, resolvers, ports) = bind(&config).await?;
    if config.nftables {
        install(&table.load(), ports)?;
    }
    for l in tcp {
        super::transparent::serve(table.clone(), l, max_connections, metrics.clone());
    }
    let route = Arc::new(HostRoute {
        table: table.clone(),
        kernel: Arc::new(Kernel::start(config.nftables)),
    });
    for (udp, tcp) in resolvers {
        dns::serve(route.clone(), resolver.clone(), udp, tcp, metrics.clone());
    }
    let metrics_addr = match config.metrics {
        Some(a) => {
            let l = TcpListener::bind(a)
                .await
                .map_err(|source| StartError::Bind {
                    what: "metrics",
                    addr: a,
                    source,
                })?;
            let bound = l.local_addr().map_err(|source| StartError::Bind {
                what: "metrics",
                addr: a,
                source,
            })?;
            crate::metrics::serve(metrics.clone(), l);
            Some(bound)
        }
        None => None,
    };
    let watched = Watched {
        path: config.sandboxes.clone(),
        shared,
        table: table.clone(),
        ports,
        nftables: config.nftables,
    };
    std::thread::Builder::new()
        .name("gatehouse-reload".into())
        .spawn(move || watched.run())
        .map_err(|source| StartError::Runtime {
            what: "the reload thread",
            source,
        })?;
    Ok(HostRunning {
        transparent_port: ports.transparent,
        dns_port: ports.dns,
        metrics: metrics_addr,
        table,
    })
}

/// What the host's one reload thread watches.
struct Watched {
    path: PathBuf,
    shared: Shared,
    table: Arc<ArcSwap<SandboxTable>>,
    ports: Ports,
    nftables: bool,
}

impl Watched {
    /// Every [`POLL`]: the sandbox table (a changed table is loaded whole
    /// and swapped in, with its nftables sets, or refused and the old one
    /// kept), and every sandbox's policy file; every few seconds, expired
    /// answers are dropped.
    fn run(self) {
        let mut key = stat_key(&self.path);
        let mut files = self.files();
        let mut evicted = Instant::now();
        loop {
            std::thread::sleep(POLL);
            let now_key = stat_key(&self.path);
            if now_key != key {
                key = now_key;
                if self.reload() {
                    files = self.files();
                }
            }
            let table = self.table.load();
            let mut reloaded = false;
            for (sandbox, file) in table.sandboxes().zip(files.iter_mut()) {
                reloaded |= file.poll(sandbox.policies());
            }
            if evicted.elapsed() > Duration::from_secs(5) {
                evicted = Instant::now();
                for s in table.sandboxes() {
                    s.answered.evict_expired();
                }
            }
            if reloaded {
                give_back_free_memory();
            }
        }
    }

    fn files(&self) -> Vec<FileWatch> {
        self.table
            .load()
            .sandboxes()
            .map(|s| FileWatch::new(s.policies()))
            .collect()
    }

    /// Loads the table again; a table that does not load, or whose
    /// nftables sets cannot be installed, is refused and the old one stays.
    fn reload(&self) -> bool {
        let loaded = SandboxTable::load(&self.path, &self.shared);
        let table = match loaded {
            Ok(t) => t,
            Err(e) => {
                stderr_line(format!(
                    "gatehouse-egress: sandbox table refused, the old one stays in force:\n{e}"
                ));
                return false;
            }
        };
        if self.nftables
            && let Err(e) = install(&table, self.ports)
        {
            stderr_line(format!(
                "gatehouse-egress: sandbox table refused ({e}), the old one stays in force"
            ));
            return false;
        }
        let n = table.sandboxes().count();
        self.table.store(Arc::new(table));
        stderr_line(format!(
            "gatehouse-egress: sandbox table reloaded ({n} sandboxes) from {}",
            display(&self.path)
        ));
        true
    }
}

fn display(p: &Path) -> String {
    p.display().to_string()
}
