//! Telemetry settings: a TOML file (what `policyc import zerocode` writes
//! from an `[otel]` block), the standard `OTEL_*` environment variables, and
//! flags, in rising precedence.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where telemetry goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exporter {
    /// Nothing is sent (instrumentation stays, nothing leaves the process).
    #[default]
    None,
    /// OTLP over HTTP (`/v1/logs`, `/v1/metrics`, `/v1/traces`).
    OtlpHttp,
    /// OTLP over gRPC.
    OtlpGrpc,
}

impl Exporter {
    /// Parses `none`, `otlp-http` or `otlp-grpc`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Exporter::None),
            "otlp-http" => Some(Exporter::OtlpHttp),
            "otlp-grpc" => Some(Exporter::OtlpGrpc),
            _ => None,
        }
    }
}

/// How OTLP/HTTP bodies are encoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// Protobuf (`http/protobuf`).
    #[default]
    Binary,
    /// JSON (`http/json`).
    Json,
}

/// The telemetry settings of one program.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Where telemetry goes.
    #[serde(default)]
    pub exporter: Exporter,
    /// The collector: for OTLP/HTTP its base (`http://host:4318`; a
    /// `/v1/logs` or other signal path given here is taken off and each
    /// signal's put on), for gRPC `http://host:4317`. None: the
    /// `OTEL_EXPORTER_OTLP_*ENDPOINT` variables, else the OTLP defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The OTLP/HTTP encoding.
    #[serde(default)]
    pub protocol: Encoding,
    /// Headers (gRPC metadata) sent with every export. A value may hold
    /// `${VAR}`: it is read from the environment when the program starts,
    /// never written anywhere.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `deployment.environment.name` on everything sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// `service.name`; none: `OTEL_SERVICE_NAME`, else the program's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Send command lines, paths and review actions (as the policy's `log
    /// { mask }` leaves them). Off by default: hosts, ports, names and
    /// the decision only (ZeroCode's `log_user_prompt = false` stance).
    #[serde(default)]
    pub log_commands: bool,
    /// Events held for export at most; past it they are dropped and
    /// counted. Default 8192.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<usize>,
    /// How long one export may take, in milliseconds. Default 5000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_timeout_ms: Option<u64>,
    /// How often metrics are exported, in milliseconds. Default: the
    /// `OTEL_METRIC_EXPORT_INTERVAL` variable, else 10000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_interval_ms: Option<u64>,
    /// Which requests' spans are recorded, by the OpenTelemetry names:
    /// `parentbased_always_on` (the default), `parentbased_always_off`,
    /// `parentbased_traceidratio`, `always_on`, `always_off`,
    /// `traceidratio`. Default: the `OTEL_TRACES_SAMPLER` variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traces_sampler: Option<String>,
    /// The ratio of the `traceidratio` samplers, 0 to 1 (default 1).
    /// Default: the `OTEL_TRACES_SAMPLER_ARG` variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traces_sampler_arg: Option<String>,
}

/// A settings file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The TOML does not parse or holds an unknown key.
    #[error("telemetry settings: {0}")]
    Toml(String),
    /// A value is out of range or unknown.
    #[error("telemetry settings: {0}")]
    Invalid(String),
    /// A header names an environment variable that is not set.
    #[error(
        "telemetry settings: header `{header}` needs the environment variable `{var}`, which is not set"
    )]
    MissingVariable {
        /// The header.
        header: String,
        /// The variable.
        var: String,
    },
}

/// A program's `--otel*` flags, as given. Each overrides only what it
/// names, over the `OTEL_*` variables and the settings file:
///
/// - `file` (`--otel FILE`): the settings file, over the variables;
/// - `exporter` (`--otel-exporter KIND`): the exporter (`none` turns
///   export off, whatever the variables or the file say);
/// - `endpoint` (`--otel-endpoint URL`): the collector's URL; it turns
///   export on (OTLP/HTTP) only when nothing else names an exporter, and
///   never changes the exporter or protocol the variables or file name;
/// - `log_commands` (`--otel-log-commands`): command lines and paths sent
///   too (it can only turn them on).
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// `--otel FILE`.
    pub file: Option<std::path::PathBuf>,
    /// `--otel-exporter KIND`.
    pub exporter: Option<String>,
    /// `--otel-endpoint URL`.
    pub endpoint: Option<String>,
    /// `--otel-log-commands`.
    pub log_commands: bool,
}

impl Settings {
    /// Reads a settings file's text.
    pub fn from_toml(text: &str) -> Result<Self, SettingsError> {
        let s: Settings = toml::from_str(text).map_err(|e| SettingsError::Toml(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// The settings the standard variables give: an exporter when
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (or a signal's own) is set, by
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` (`grpc`, `http/protobuf` — the
    /// default — or `http/json`); none when `OTEL_SDK_DISABLED=true`.
    pub fn from_env() -> Self {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// [`Settings::from_env`] over any lookup (tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let mut s = Settings::default();
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return s;
        }
        let endpoint = [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        ]
        .iter()
        .find_map(|k| var(k).filter(|v| !v.trim().is_empty()));
        if endpoint.is_some() {
            let protocol = var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default();
            (s.exporter, s.protocol) = match protocol.trim() {
                "grpc" => (Exporter::OtlpGrpc, Encoding::Binary),
                "http/json" => (Exporter::OtlpHttp, Encoding::Json),
                _ => (Exporter::OtlpHttp, Encoding::Binary),
            };
        }
        s.metric_interval_ms = var("OTEL_METRIC_EXPORT_INTERVAL").and_then(|v| v.parse().ok());
        s.traces_sampler = var("OTEL_TRACES_SAMPLER").filter(|v| !v.trim().is_empty());
        s.traces_sampler_arg = var("OTEL_TRACES_SAMPLER_ARG").filter(|v| !v.trim().is_empty());
        s
    }

    /// `other`'s settings over these: every field `other` sets wins.
    pub fn overlay(mut self, other: Settings) -> Self {
        let d = Settings::default();
        if other.exporter != d.exporter {
            self.exporter = other.exporter;
        }
        if other.endpoint.is_some() {
            self.endpoint = other.endpoint;
        }
        if other.protocol != d.protocol {
            self.protocol = other.protocol;
        }
        self.headers.extend(other.headers);
        for (field, value) in [
            (&mut self.environment, other.environment),
            (&mut self.service_name, other.service_name),
        ] {
            if value.is_some() {
                *field = value;
            }
        }
        self.log_commands |= other.log_commands;
        self.queue = other.queue.or(self.queue);
        self.export_timeout_ms = other.export_timeout_ms.or(self.export_timeout_ms);
        self.metric_interval_ms = other.metric_interval_ms.or(self.metric_interval_ms);
        self.traces_sampler = other.traces_sampler.or(self.traces_sampler);
        self.traces_sampler_arg = other.traces_sampler_arg.or(self.traces_sampler_arg);
        self
    }

    /// The settings of a program: the variables, then a settings file,
    /// then `flags`, each over the one before.
    pub fn assemble(
        file: Option<&std::path::Path>,
        flags: Settings,
    ) -> Result<Self, SettingsError> {
        Settings::assemble_over(Settings::from_env(), file, flags)
    }

    /// [`Settings::assemble`] over the settings of the variables, `env`.
    fn assemble_over(
        env: Settings,
        file: Option<&std::path::Path>,
        flags: Settings,
    ) -> Result<Self, SettingsError> {
        let mut s = env;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                SettingsError::Toml(format!("cannot read `{}`: {e}", path.display()))
            })?;
            s = s.overlay(Settings::from_toml(&text)?);
        }
        let s = s.overlay(flags);
        s.validate()?;
        Ok(s)
    }

    /// The settings of a program's `--otel*` flags over the variables and
    /// the settings file ([`Flags`] says what each flag overrides).
    pub fn from_flags(f: &Flags) -> Result<Self, SettingsError> {
        Settings::from_flags_over(Settings::from_env(), f)
    }

    /// [`Settings::from_flags`] over the settings of the variables, `env`.
    fn from_flags_over(env: Settings, f: &Flags) -> Result<Self, SettingsError> {
        let mut flags = Settings {
            endpoint: f.endpoint.clone(),
            log_commands: f.log_commands,
            ..Settings::default()
        };
        let exporter = match &f.exporter {
            Some(e) => Some(Exporter::parse(e).ok_or_else(|| {
                SettingsError::Invalid(format!(
                    "`--otel-exporter {e}`: expected none, otlp-http or otlp-grpc"
                ))
            })?),
            None => None,
        };
        if let Some(e) = exporter {
            flags.exporter = e;
        }
        let mut s = Settings::assemble_over(env, f.file.as_deref(), flags)?;
        match exporter {
            // `--otel-exporter none` turns export off whatever else says.
            Some(e) => s.exporter = e,
            // An endpoint alone turns export on, over OTLP/HTTP, only when
            // neither the variables nor the file name an exporter.
            None if s.exporter == Exporter::None && f.endpoint.is_some() => {
                s.exporter = Exporter::OtlpHttp;
            }
            None => {}
        }
        Ok(s)
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), SettingsError> {
        if self.queue == Some(0) {
            return Err(SettingsError::Invalid("`queue` must be at least 1".into()));
        }
        if self.export_timeout_ms == Some(0) || self.metric_interval_ms == Some(0) {
            return Err(SettingsError::Invalid(
                "`export_timeout_ms` and `metric_interval_ms` must be at least 1".into(),
            ));
        }
        if let Some(e) = &self.endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(SettingsError::Invalid(format!(
                "`endpoint` = \"{e}\": an http:// or https:// URL is needed"
            )));
        }
        // Checked when something is exported: a sampler left in the
        // environment for another program does not stop one that exports
        // nothing.
        if self.exporter != Exporter::None {
            self.sampler()?;
        }
        Ok(())
    }

    /// The span sampler (`traces_sampler`, `OTEL_TRACES_SAMPLER`). An
    /// unknown name or a ratio outside 0–1 is an error at start, not a
    /// silent default: a setting that quietly does nothing is how traces
    /// go missing.
    pub fn sampler(&self) -> Result<crate::Sampler, SettingsError> {
        crate::Sampler::parse(
            self.traces_sampler.as_deref(),
            self.traces_sampler_arg.as_deref(),
        )
    }

    /// The headers with every `${VAR}` replaced from `var`.
    pub fn resolved_headers(
        &self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, SettingsError> {
        let mut out = Vec::new();
        for (k, v) in &self.headers {
            let mut value = String::new();
            let mut rest = v.as_str();
            while let Some((before, after)) = rest.split_once("${") {
                value.push_str(before);
                let Some((name, tail)) = after.split_once('}') else {
                    return Err(SettingsError::Invalid(format!(
                        "header `{k}`: `${{` without a closing `}}`"
                    )));
                };
                let got = var(name).ok_or_else(|| SettingsError::MissingVariable {
                    header: k.clone(),
                    var: name.to_string(),
                })?;
                value.push_str(&got);
                rest = tail;
            }
            value.push_str(rest);
            out.push((k.clone(), value));
        }
        Ok(out)
    }

    /// The queue's capacity.
    pub fn queue_capacity(&self) -> usize {
        self.queue.unwrap_or(8192)
    }

    /// How long one export may take.
    pub fn export_timeout(&self) -> Duration {
        Duration::from_millis(self.export_timeout_ms.unwrap_or(5000))
    }

    /// How often metrics are exported.
    pub fn metric_interval(&self) -> Duration {
        Duration::from_millis(self.metric_interval_ms.unwrap_or(10_000))
    }

    /// The endpoint of one signal (`logs`, `metrics`, `traces`), or none
    /// to leave it to the variables.
    pub fn signal_endpoint(&self, signal: &str) -> Option<String> {
        let e = self.endpoint.as_ref()?.trim_end_matches('/');
        match self.exporter {
            Exporter::OtlpHttp => {
                let base = ["/v1/logs", "/v1/metrics", "/v1/traces"]
                    .iter()
                    .find_map(|p| e.strip_suffix(p))
                    .unwrap_or(e);
                Some(format!("{base}/v1/{signal}"))
            }
            _ => Some(e.to_string()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_file_with_a_token_reference() {
        let s = Settings::from_toml(
            "exporter = \"otlp-http\"\nendpoint = \"https://otel.example.com/v1/logs\"\n[headers]\n\"x-otlp-api-key\" = \"Bearer ${OTLP_TOKEN}\"\n",
        )
        .expect("reads");
        assert_eq!(s.exporter, Exporter::OtlpHttp);
        assert_eq!(
            s.signal_endpoint("metrics").as_deref(),
            Some("https://otel.example.com/v1/metrics")
        );
        let h = s
            .resolved_headers(|k| (k == "OTLP_TOKEN").then(|| "t0k".to_string()))
            .expect("resolves");
        assert_eq!(h, vec![("x-otlp-api-key".into(), "Bearer t0k".into())]);
        let missing = s.resolved_headers(|_| None);
        assert!(matches!(
            missing,
            Err(SettingsError::MissingVariable { .. })
        ));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        assert!(Settings::from_toml("exporter = \"otlp-http\"\nendpont = \"x\"\n").is_err());
        assert!(Settings::from_toml("exporter = \"kafka\"\n").is_err());
        assert!(Settings::from_toml("queue = 0\n").is_err());
        assert!(Settings::from_toml("endpoint = \"otel:4317\"\n").is_err());
    }

    /// The variables `pairs` set, as `Settings::from_vars` reads them.
    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        }
    }

    #[test]
    fn each_flag_overrides_only_what_it_names() {
        let grpc = || {
            Settings::from_vars(vars(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ]))
        };
        let flags = |exporter: Option<&str>, endpoint: Option<&str>| Flags {
            exporter: exporter.map(str::to_string),
            endpoint: endpoint.map(str::to_string),
            ..Flags::default()
        };
        // An endpoint alone keeps the protocol the variables name.
        let s = Settings::from_flags_over(grpc(), &flags(None, Some("http://10.0.0.1:4317")))
            .expect("assembles");
        assert_eq!(s.exporter, Exporter::OtlpGrpc);
        assert_eq!(s.endpoint.as_deref(), Some("http://10.0.0.1:4317"));
        // With nothing else naming an exporter, an endpoint alone is OTLP/HTTP.
        let s = Settings::from_flags_over(Settings::default(), &flags(None, Some("http://h:4318")))
            .expect("assembles");
        assert_eq!(s.exporter, Exporter::OtlpHttp);
        // `none` turns export off over the variables.
        let s = Settings::from_flags_over(grpc(), &flags(Some("none"), None)).expect("assembles");
        assert_eq!(s.exporter, Exporter::None);
        // An exporter flag wins over the variables' protocol.
        let s =
            Settings::from_flags_over(grpc(), &flags(Some("otlp-http"), None)).expect("assembles");
        assert_eq!(s.exporter, Exporter::OtlpHttp);
        let e =
            Settings::from_flags_over(grpc(), &flags(Some("kafka"), None)).expect_err("refused");
        assert!(e.to_string().contains("--otel-exporter kafka"), "{e}");
        // No flag: the variables as they are.
        let s = Settings::from_flags_over(grpc(), &Flags::default()).expect("assembles");
        assert_eq!(s.exporter, Exporter::OtlpGrpc);
        assert_eq!(s.endpoint, None);
    }

    #[test]
    fn the_standard_variables() {
        let s = Settings::from_vars(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]));
        assert_eq!(s.exporter, Exporter::OtlpGrpc);
        let s = Settings::from_vars(vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]));
        assert_eq!(s.exporter, Exporter::OtlpHttp);
        let s = Settings::from_vars(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ]));
        assert_eq!(s.exporter, Exporter::None);
        assert_eq!(Settings::from_vars(vars(&[])).exporter, Exporter::None);
    }

    #[test]
    fn the_sampler_comes_from_the_variables_the_file_and_is_checked() {
        let s = Settings::from_vars(vars(&[
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.1"),
        ]));
        assert_eq!(
            s.sampler().expect("valid"),
            crate::Sampler::parse(Some("parentbased_traceidratio"), Some("0.1")).expect("valid")
        );
        assert_eq!(
            Settings::default().sampler().expect("default"),
            crate::Sampler::default()
        );
        let file = Settings::from_toml("traces_sampler = \"always_off\"\n").expect("reads");
        let s = s.overlay(file);
        assert_eq!(
            s.sampler().expect("valid"),
            crate::Sampler::parse(Some("always_off"), None).expect("valid")
        );
        let bad = Settings::from_toml("exporter = \"otlp-grpc\"\ntraces_sampler = \"sometimes\"\n");
        assert!(matches!(bad, Err(SettingsError::Invalid(m)) if m.contains("sometimes")));
        let bad = Settings::from_vars(vars(&[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        ]));
        assert!(bad.validate().is_err());
        // Nothing exported: the variable is not this program's business.
        let off = Settings::from_vars(vars(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]));
        assert_eq!(off.exporter, Exporter::None);
        assert!(off.validate().is_ok());
    }
}
