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

/// A command line an adapter cannot run: what is wrong, then the usage.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

impl From<String> for UsageError {
    fn from(s: String) -> Self {
        UsageError(s)
    }
}

/// Parses the flags every adapter takes (`--policy FILE`, `--policy-name
/// NAME`, `--log FILE`); anything else is an error naming it.
pub fn parse(args: &[String], usage: &str) -> Result<Source, UsageError> {
    let mut s = Source::default();
    let mut policy = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs a value\n{usage}"))
        };
        match a.as_str() {
            "--policy" => policy = Some(PathBuf::from(value()?)),
            "--policy-name" => s.name = Some(value()?),
            "--log" => s.log = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Err(UsageError(usage.to_string())),
            other => {
                let mut next = || it.next().cloned();
                if !s
                    .fleet
                    .take(other, &mut next)
                    .map_err(|e| format!("{e}\n{usage}"))?
                {
                    return Err(UsageError(format!("unknown argument `{other}`\n{usage}")));
                }
            }
        }
    }
    s.policy = policy.ok_or_else(|| UsageError(usage.to_string()))?;
    Ok(s)
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

/// Parses an adapter's flags and loads its policy (the reloads started):
/// or, said on stderr, the exit code — 2 for a usage error, 1 when the
/// policy does not load.
pub fn boot(args: &[String], usage: &str, mode: &str) -> Result<(Source, Arc<Policies>), i32> {
    let source = parse(args, usage).map_err(|e| {
        eprintln!("{e}");
        2
    })?;
    let policies = start(&source).map_err(|e| {
        eprintln!("gatehouse-egress {mode}: {e}");
        1
    })?;
    Ok((source, policies))
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
