//! `gatehouse-run POLICY [--policy NAME] -- COMMAND...`: runs a command
//! under a gatehouse policy, enforced by the kernel whether or not the
//! command cooperates (docs/run.md). Linux only.
//!
//! Files: the policy's file rules become Landlock rules (`plan`), on the
//! ABI the kernel has; what Landlock cannot hold refuses the run unless
//! `--allow-weaker`. Network: the command runs in a network namespace of
//! its own whose only way out is `gatehouse-egress`, started here with the
//! same policy, reached through `HTTP(S)_PROXY` / `ALL_PROXY`.

mod apps;
#[cfg(target_os = "linux")]
mod guard;
#[cfg(target_os = "linux")]
mod init;
mod placeholder;
mod plan;
#[cfg(target_os = "linux")]
mod relay;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
mod sys;
mod walk;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// The exit status of a run the launcher itself could not start (as
/// `env`, `timeout` and container runners use it).
pub(crate) const LAUNCH_FAILED: u8 = 125;

#[derive(Parser, Debug)]
#[command(
    name = "gatehouse-run",
    version,
    about = "Run a command under a gatehouse policy: its file rules enforced by Landlock, its network only through gatehouse-egress",
    after_help = "Exit status: the command's own (128+N when a signal N ended it); 125 when the run could not start (a policy error, a rule Landlock cannot hold without --allow-weaker, no Landlock).\n\nExample:\n  gatehouse-run policies/files.policy -- cargo test"
)]
pub struct Args {
    /// The policy file (policy text)
    pub policy_file: PathBuf,
    /// Which policy of the file (may be left out when it holds one)
    #[arg(long = "policy", value_name = "NAME")]
    pub policy: Option<String>,
    /// The workspace [default: the current directory]
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Run even where the kernel cannot hold a rule (a glob, a right an
    /// older Landlock ABI lacks), each named on stderr
    #[arg(long)]
    pub allow_weaker: bool,
    /// Open unix sockets to the paths the policy allows (`allow socket
    /// "/path"`): socket(AF_UNIX) stays open and every other socket bound
    /// when the run starts is hidden; one bound later is reachable. Without
    /// it such a policy's unix sockets are all refused, as sandbox-runtime
    /// refuses them on Linux (the kernel cannot tell one path from another)
    #[arg(long)]
    pub socket_paths: bool,
    /// Print the Landlock rules and split directories before running
    #[arg(long)]
    pub explain: bool,
    /// Write every network decision to FILE (JSON lines, gatehouse-egress's log)
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Export the network decisions over OpenTelemetry with these settings
    /// (TOML, docs/telemetry.md; the OTEL_EXPORTER_OTLP_* variables work too)
    #[arg(long, value_name = "FILE")]
    pub otel: Option<PathBuf>,
    /// The gatehouse-egress binary [default: beside gatehouse-run, else on PATH]
    #[arg(long, value_name = "PATH")]
    pub egress: Option<PathBuf>,
    #[arg(long, hide = true, value_name = "FD")]
    pub inner: Option<i32>,
    /// The command and its arguments
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    #[cfg(target_os = "linux")]
    {
        match sys::run(&args) {
            Ok(code) => ExitCode::from(code),
            Err(e) => {
                eprintln!("gatehouse-run: {e}");
                ExitCode::from(LAUNCH_FAILED)
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        eprintln!("gatehouse-run: Linux only (Landlock and network namespaces)");
        ExitCode::from(LAUNCH_FAILED)
    }
}
