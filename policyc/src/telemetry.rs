//! `policyc eval`'s OpenTelemetry export (feature `otel`; docs/telemetry.md).

use std::sync::Arc;

use crate::Exit;
use crate::cli::EvalArgs;

/// The export of one run, or nothing.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    inner: gatehouse_otel::Telemetry,
}

impl Telemetry {
    /// The sink decisions go to, when anything is exported.
    pub fn sink(&self) -> Option<Arc<dyn gatehouse::log::DecisionSink>> {
        #[cfg(feature = "otel")]
        if self.inner.is_on() {
            let s: Arc<dyn gatehouse::log::DecisionSink> = self.inner.sink_waiting();
            return Some(s);
        }
        None
    }

    /// Sends what is queued (at most 10 s), and says what was lost.
    pub fn shutdown(&self) {
        #[cfg(feature = "otel")]
        if self.inner.is_on() {
            self.inner.shutdown(std::time::Duration::from_secs(10));
            let lost = self.inner.dropped();
            if lost > 0 {
                errln!(
                    "warning: telemetry: {lost} decision events were not delivered (the collector was slow, down or refused them)"
                );
            }
        }
    }
}

/// Starts the export the flags, the settings file and the `OTEL_*`
/// variables ask for.
#[cfg(feature = "otel")]
pub fn start(a: &EvalArgs) -> Result<Telemetry, Exit> {
    let settings = gatehouse_otel::Settings::from_flags(&gatehouse_otel::Flags {
        file: a.otel.as_deref().map(std::path::PathBuf::from),
        exporter: a.otel_exporter.clone(),
        endpoint: a.otel_endpoint.clone(),
        log_commands: a.otel_log_commands,
    })
    .map_err(|e| Exit::Usage(e.to_string()))?;
    let inner = gatehouse_otel::Telemetry::start(&settings, "policyc")
        .map_err(|e| Exit::Usage(e.to_string()))?;
    Ok(Telemetry { inner })
}

/// Without the `otel` feature, asking for export is a usage error.
#[cfg(not(feature = "otel"))]
pub fn start(a: &EvalArgs) -> Result<Telemetry, Exit> {
    if a.otel.is_some()
        || a.otel_exporter.is_some()
        || a.otel_endpoint.is_some()
        || a.otel_log_commands
    {
        return Err(Exit::Usage(
            "this policyc was built without OpenTelemetry export: build it with `cargo build --release -p policyc --features otel`".into(),
        ));
    }
    Ok(Telemetry {})
}
