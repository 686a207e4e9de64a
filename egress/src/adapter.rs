//! What the adapters for other proxies share (`srt-decider`,
//! `squid-helper`): the policy in force, swapped live on a change of its
//! file or on SIGHUP by a background thread, while the adapter answers its
//! peer on the main thread.

use std::path::PathBuf;
use std::sync::Arc;

use crate::policy::Policies;

/// Where an adapter's policy comes from and where its decisions go.
#[derive(Clone, Debug, Default)]
pub struct Source {
    /// The policy file (text).
    pub policy: PathBuf,
    /// Which policy of the file (none: its only one).
    pub name: Option<String>,
    /// The decision log (JSON lines); none: not written.
    pub log: Option<PathBuf>,
    /// Trusted keys, bundle polling, shipped decision records.
    pub fleet: crate::fleet::Options,
    /// OpenTelemetry export of the decisions (docs/telemetry.md); off by
    /// default.
    pub telemetry: gatehouse_otel::Telemetry,
}

/// Loads the policy (an error is every diagnostic, rendered) and starts the
/// thread that reloads it live. Unless the adapter `serves` (and stops on
/// a signal itself, then flushes), a signal flushes the telemetry and ends
/// the process: an adapter on stdin is blocked reading it.
pub fn start(source: &Source, serves: bool) -> Result<Arc<Policies>, crate::StartError> {
    let metrics = Arc::new(crate::metrics::Metrics::default());
    let keys = source
        .fleet
        .prepare(&source.policy, source.name.as_deref())?;
    let sink = crate::metrics::with_decisions(
        source.fleet.sink(source.log.as_deref(), &metrics)?,
        &source.telemetry,
    );
    let policies = Arc::new(Policies::open(
        crate::policy::PolicyOptions {
            name: source.name.clone(),
            log: sink,
            trusted: keys.clone(),
            ..crate::policy::PolicyOptions::new(source.policy.clone())
        },
        metrics,
    )?);
    let watched = policies.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| crate::StartError::Runtime {
            what: "runtime",
            source,
        })?;
    // With telemetry on, a signal flushes it before the adapter ends (on
    // a thread of its own: the flush blocks), within 5 s.
    let telemetry = if serves {
        gatehouse_otel::Telemetry::off()
    } else {
        source.telemetry.clone()
    };
    std::thread::Builder::new()
        .name("gatehouse-reload".into())
        .spawn(move || {
            runtime.block_on(async move {
                crate::watch::watch(watched);
                if telemetry.is_on() {
                    stopped().await;
                    let flushed = std::thread::spawn(move || {
                        telemetry.shutdown(std::time::Duration::from_secs(5));
                        telemetry.dropped()
                    });
                    if let Ok(Ok(dropped)) = tokio::task::spawn_blocking(|| flushed.join()).await
                        && dropped > 0
                    {
                        eprintln!(
                            "gatehouse-egress: telemetry: {dropped} records (decision events and spans) were not delivered"
                        );
                    }
                    std::process::exit(STOPPED);
                }
                std::future::pending::<()>().await;
            });
        })
        .map_err(|source| crate::StartError::Runtime {
            what: "reload thread",
            source,
        })?;
    source
        .fleet
        .start_polling(&source.policy, source.name.clone(), keys);
    Ok(policies)
}

/// The exit code of an adapter stopped by a signal (128 + SIGTERM).
const STOPPED: i32 = 143;

/// Waits for SIGINT or SIGTERM.
pub async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Loads an adapter's policy (the reloads started): or, said on stderr,
/// exit code 1. The command line is parsed by the binary (clap).
pub fn boot(source: &Source, mode: &str) -> Result<Arc<Policies>, i32> {
    start(source, mode == "ext-authz").map_err(|e| {
        eprintln!("gatehouse-egress {mode}: {e}");
        1
    })
}

/// Whether two hosts name the same destination as a socket would see it:
/// brackets around an IPv6 literal, ASCII case and one trailing dot aside.
pub fn same_destination(a: &str, b: &str) -> bool {
    let bare = |h: &str| {
        h.strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .unwrap_or(h)
            .to_string()
    };
    gatehouse_wire::authority::same_host(&bare(a), &bare(b))
}
