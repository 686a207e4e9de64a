//! Starting host mode: the sandbox table, the listeners, the nftables
//! table, and the one thread that watches the table and every sandbox's
//! policy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::net::{TcpListener, TcpSocket, UdpSocket};

use super::kernel::Kernel;
use super::nft::{NftError, Ports};
use super::resolver::HostRoute;
use super::state::{Host, install};
use super::table::{HostError, SandboxTable, Shared};
use crate::dns;
use crate::metrics::Metrics;
use crate::policy::{PolicyOptions, stderr_line};
use crate::resolve::Upstream;
use crate::watch::POLL;
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
    /// The control API's Unix socket (mode 0600); none: not served.
    pub control: Option<PathBuf>,
    /// Where the control API keeps the policies it puts; none:
    /// `gatehouse-state` beside the sandbox table.
    pub state_dir: Option<PathBuf>,
    /// Public keys: when any is given, every sandbox's policy must be a
    /// bundle signed by one of them (at start, at every reload, and through
    /// the control API).
    pub trusted_keys: Vec<PathBuf>,
    /// Ship decision records to this URL too (HTTP POST of JSON lines).
    pub log_url: Option<String>,
    /// OpenTelemetry export (docs/telemetry.md): each decision with its
    /// `gatehouse.sandbox`; started by the caller, outside any runtime.
    pub telemetry: gatehouse_otel::Telemetry,
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
            control: None,
            state_dir: None,
            trusted_keys: Vec::new(),
            log_url: None,
            telemetry: gatehouse_otel::Telemetry::off(),
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
    /// The table names no sandbox interfaces, and nftables is on: host mode
    /// could not hold what arrives on them ([`super::table::NO_INTERFACES`]).
    #[error("{}", super::table::NO_INTERFACES)]
    NoInterfaces,
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

/// A UDP socket on `addr`; an IPv6 one takes only IPv6, as
/// [`tcp_listener`]'s do.
fn udp_socket(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use rustix::net::{AddressFamily, SocketType, sockopt};
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket(family, SocketType::DGRAM, None)?;
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    rustix::net::bind(&fd, &addr)?;
    let s = std::net::UdpSocket::from(fd);
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
    let fleet = crate::fleet::Options {
        trusted_keys: config.trusted_keys.clone(),
        log_url: config.log_url.clone(),
        ..crate::fleet::Options::default()
    };
    let trusted = fleet.keys().map_err(StartError::from)?;
    let sink = fleet
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
            trusted,
            // Sandboxes naming one policy file hold one compiled set.
            sets: Some(Arc::default()),
            ..PolicyOptions::default()
        },
        metrics: metrics.clone(),
        resolver: resolver.clone(),
        timeouts: config.timeouts,
        max_connections,
        telemetry: config.telemetry.clone(),
    };
    // The daemon's counters join the export, and its dropped events show
    // on /metrics; each sandbox's decisions get a sink of their own.
    let _ = crate::metrics::with_telemetry(None, &config.telemetry, &metrics);
    // The file's stat is taken before it is read: the first change
    // through the control API then starts from the table in force, and a
    // file that moved in between is read again then.
    let key = crate::policy::stat_key(&config.sandboxes);
    // (The parsed file is dropped at once: freed before the listeners and
    // sets are made, its pages go back instead of staying between theirs,
    // 2 MB at 10 000 sandboxes.)
    let table = Arc::new(ArcSwap::from_pointee(SandboxTable::load(
        &config.sandboxes,
        &shared,
        None,
    )?));
    let (tcp, resolvers, ports) = bind(&config).await?;
    let shown = table.clone();
    metrics.render_also(Box::new(move |o| {
        let t = shown.load();
        let tallies: Vec<(&str, &crate::metrics::Tally)> =
            t.sandboxes().map(|s| (s.id.as_str(), &*s.tally)).collect();
        crate::metrics::render_tallies(o, &tallies);
    }));
    // Kernel-passed flows are kept while established only where conntrack
    // can cut them when a policy stops allowing them.
    let conntrack = config.nftables && super::passes::conntrack_available();
    if config.nftables && !conntrack {
        stderr_line(
            "gatehouse-egress: `conntrack` is not installed (apt-get install conntrack): a kernel-passed flow lasts only as long as its DNS answer".into(),
        );
    }
    let state_dir = config
        .state_dir
        .clone()
        .unwrap_or_else(|| super::control::default_state_dir(&config.sandboxes));
    // Absolute: the table names the policies the API keeps there, and reads
    // its entries relative to its own folder, not to where we started.
    let state_dir = std::path::absolute(&state_dir).unwrap_or(state_dir);
    let kernel = Arc::new(Kernel::start(
        config.nftables,
        table.clone(),
        conntrack,
        Some(state_dir.join("passes.json")),
    ));
    let mut installed = super::layout::Installed::default();
    if config.nftables {
        if table.load().interfaces().is_empty() {
            return Err(HostStartError::NoInterfaces);
        }
        installed = install(&table.load(), ports, conntrack)?;
        // Flows a previous daemon passed: those its record shows the
        // restored policies still allow go on; the rest are cut.
        kernel.revise(&[], None);
    }
    let control = match &config.control {
        Some(path) => Some(
            super::control::bind(path).map_err(|source| StartError::Runtime {
                what: "the control socket",
                source,
            })?,
        ),
        None => None,
    };
    // One sandbox's share holds across the IPv4 and IPv6 listeners.
    let clients = Arc::new(crate::listener::Clients::default());
    for l in tcp {
        super::transparent::serve(
            table.clone(),
            l,
            max_connections,
            metrics.clone(),
            clients.clone(),
        );
    }
    let route = Arc::new(HostRoute {
        table: table.clone(),
        kernel: kernel.clone(),
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
            crate::metrics_server::serve(metrics.clone(), l);
            Some(bound)
        }
        None => None,
    };
    let host = Arc::new(Mutex::new(
        Host::new(
            config.sandboxes.clone(),
            state_dir,
            shared,
            table.clone(),
            config.nftables,
            ports,
            kernel,
        )
        .with_installed(installed)
        .with_key(key),
    ));
    if let Some(l) = control {
        super::control::serve(host.clone(), l);
    }
    // SIGHUP (logrotate, a reload command) reloads the table and every
    // policy, as the single-policy daemon reloads its policy; it never
    // stops the daemon. The handler is in place before start returns.
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hup = signal(SignalKind::hangup()).map_err(|source| StartError::Runtime {
            what: "the SIGHUP handler",
            source,
        })?;
        let host = host.clone();
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                let host = host.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    if let Ok(mut h) = host.lock() {
                        h.reload_all();
                    }
                })
                .await;
            }
        });
    }
    std::thread::Builder::new()
        .name("gatehouse-reload".into())
        .spawn(move || reload_thread(&host))
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

/// Host mode's one reload thread: it sleeps until the kernel says
/// something changed in the directory of the sandbox table or of a
/// sandbox's policy ([`crate::notify`]), then checks the table and every
/// policy file (`stat`, and a read of what moved), and keeps checking
/// every [`POLL`] for a second after; every few seconds, expired answers
/// are dropped. Without notifications (none from the kernel, a watch that
/// could not be added, an overflow) it checks every [`POLL`], as it did
/// before. Ends when the state is poisoned.
fn reload_thread(host: &Mutex<Host>) {
    use crate::notify::{Notifier, Wake};
    use std::sync::mpsc::RecvTimeoutError;
    const EVICT: Duration = Duration::from_secs(5);
    let (wakes, wake) = std::sync::mpsc::channel::<Wake>();
    let mut notifier = Notifier::start(wakes);
    let mut polling = notifier.is_none();
    if polling {
        stderr_line(
            "gatehouse-egress: no file notifications; the table and policies are checked every 200 ms"
                .to_string(),
        );
    }
    let watch_all = |paths: Vec<PathBuf>, notifier: &mut Option<Notifier>, polling: &mut bool| {
        if *polling {
            return;
        }
        let Some(n) = notifier.as_mut() else { return };
        for path in paths {
            if !n.watch_file(&path) {
                *polling = true;
                stderr_line(format!(
                    "gatehouse-egress: no file notifications for {}; the table and policies are checked every 200 ms",
                    path.display()
                ));
                return;
            }
        }
    };
    match host.lock() {
        Ok(mut h) => watch_all(h.take_unwatched(), &mut notifier, &mut polling),
        Err(_) => return,
    }
    let mut settle = crate::watch::Settle::default();
    let mut evicted = Instant::now();
    // When the files were last looked at: a stream of events (anything
    // writing in a watched directory without pause) makes a look at most
    // every POLL, as polling did, never one per event.
    let mut looked = Instant::now();
    let mut rewatch = false;
    loop {
        let timeout = if polling || settle.active() {
            POLL
        } else {
            EVICT
        };
        let next = if notifier.is_some() {
            wake.recv_timeout(timeout)
        } else {
            // No notifier thread any more (none started, or it stopped
            // after a loss): the channel is closed, so sleep instead.
            std::thread::sleep(timeout);
            Err(RecvTimeoutError::Timeout)
        };
        // A notification since the paths were last resolved.
        rewatch |= matches!(next, Ok(Wake::Changed));
        let look = match next {
            Ok(Wake::Changed) => {
                // The settling second's looks come on the POLL timeouts.
                settle.start();
                looked.elapsed() >= POLL
            }
            Ok(Wake::Lost(why)) => {
                stderr_line(format!(
                    "gatehouse-egress: {why}; the table and policies are checked every 200 ms from now on"
                ));
                polling = true;
                notifier = None;
                true
            }
            Ok(Wake::Hup | Wake::Stop) => false,
            Err(RecvTimeoutError::Timeout) => polling || settle.active(),
            Err(RecvTimeoutError::Disconnected) => {
                polling = true;
                notifier = None;
                true
            }
        };
        if !look && evicted.elapsed() <= EVICT {
            continue;
        }
        let Ok(mut h) = host.lock() else { return };
        if look {
            let mut moved = h.poll();
            looked = Instant::now();
            if std::mem::take(&mut rewatch) {
                // New sandboxes' policies, and the files that moved (a
                // link pointing elsewhere moves: its target is another
                // file): each comes with an event, so only those paths are
                // resolved again, not every watched one (10 000
                // `canonicalize` calls at 10 000 sandboxes).
                moved.extend(h.take_unwatched());
                watch_all(moved, &mut notifier, &mut polling);
            } else if polling {
                // Polled, nothing is watched: the list would only grow.
                drop(h.take_unwatched());
            }
        }
        if evicted.elapsed() > EVICT {
            evicted = Instant::now();
            for s in h.table.load().sandboxes() {
                s.answered.evict_expired();
            }
        }
    }
}
