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
}

/// Loads the policy (an error is every diagnostic, rendered) and starts the
/// thread that reloads it live.
pub fn start(source: &Source) -> Result<Arc<Policies>, crate::StartError> {
    let metrics = Arc::new(crate::metrics::Metrics::default());
    let keys = source
        .fleet
        .prepare(&source.policy, source.name.as_deref())?;
    let sink = source.fleet.sink(source.log.as_deref(), &metrics)?;
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
    std::thread::Builder::new()
        .name("gatehouse-reload".into())
        .spawn(move || {
            runtime.block_on(async move {
                crate::policy::watch(watched);
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

/// Loads an adapter's policy (the reloads started): or, said on stderr,
/// exit code 1. The command line is parsed by the binary (clap).
pub fn boot(source: &Source, mode: &str) -> Result<Arc<Policies>, i32> {
    start(source).map_err(|e| {
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
    crate::authority::same_host(&bare(a), &bare(b))
}
