//! ZeroCode's `[otel]` block as gatehouse's telemetry settings (the TOML
//! that `gatehouse-egress --otel FILE` and `policyc eval --otel FILE` read;
//! docs/telemetry.md). Header values that reference the environment
//! (`"${OTLP_TOKEN}"`) stay references; a literal value is never copied into
//! the output: it becomes a reference to a variable named after the header,
//! with a warning saying which to set.

use std::fmt::Write as _;

use crate::import::{Input, Note, Severity};

/// The telemetry settings of a ZeroCode config's `[otel]` block, or none
/// when it has none (or the TOML does not parse: the policy import reports
/// that).
pub struct Telemetry {
    /// The settings file's text.
    pub text: String,
    /// Warnings and errors, each with its config line.
    pub notes: Vec<Note>,
}

/// Reads `[otel]` from a ZeroCode config's text.
pub fn telemetry(config: &str) -> Option<Telemetry> {
    let table: toml::Table = config.parse().ok()?;
    let otel = table.get("otel")?.as_table()?;
    let line_of = |key: &str| {
        config
            .lines()
            .position(|l| {
                let t = l.trim_start();
                t.strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with(['=', '.', '{']))
            })
            .map_or(0, |i| i + 1)
    };
    let header_line = config
        .lines()
        .position(|l| l.trim() == "[otel]")
        .map_or(0, |i| i + 1);
    let mut notes = Vec::new();
    let mut warn = |line: usize, message: String| {
        notes.push(Note::new(Severity::Warning, Input::Config, line, message));
    };
    let mut out = String::from(
        "# gatehouse telemetry settings, imported from a ZeroCode [otel] block by\n# `policyc import zerocode --telemetry`. Read by `gatehouse-egress --otel FILE`\n# and `policyc eval --otel FILE` (docs/telemetry.md).\n",
    );
    let mut headers: Vec<(String, String)> = Vec::new();
    for (key, value) in otel {
        let line = line_of(key).max(header_line);
        match (key.as_str(), value) {
            ("environment", toml::Value::String(e)) => {
                let _ = writeln!(out, "environment = {}", quoted(e));
            }
            ("log_user_prompt", toml::Value::Boolean(b)) => {
                let _ = writeln!(
                    out,
                    "log_commands = {b}  # log_user_prompt: command lines and paths {}",
                    if *b { "are sent" } else { "are not sent" }
                );
            }
            ("exporter", toml::Value::String(kind)) => match kind.as_str() {
                "none" | "otlp-http" | "otlp-grpc" => {
                    let _ = writeln!(out, "exporter = {}", quoted(kind));
                }
                other => warn(
                    line,
                    format!(
                        "`otel.exporter` = \"{other}\" is not an exporter gatehouse knows (none, otlp-http, otlp-grpc): nothing is exported"
                    ),
                ),
            },
            ("exporter", toml::Value::Table(t)) => {
                let Some((kind, settings)) = t.iter().next() else {
                    warn(
                        line,
                        "`otel.exporter` is an empty table: nothing is exported".into(),
                    );
                    continue;
                };
                if !matches!(kind.as_str(), "otlp-http" | "otlp-grpc") {
                    warn(
                        line,
                        format!(
                            "`otel.exporter.{kind}` is not an exporter gatehouse knows (otlp-http, otlp-grpc): nothing is exported"
                        ),
                    );
                    continue;
                }
                let _ = writeln!(out, "exporter = {}", quoted(kind));
                for (k, v) in settings.as_table().into_iter().flatten() {
                    match (k.as_str(), v) {
                        ("endpoint", toml::Value::String(e)) => {
                            let _ = writeln!(out, "endpoint = {}", quoted(e));
                        }
                        ("protocol", toml::Value::String(p)) if p == "binary" || p == "json" => {
                            let _ = writeln!(out, "protocol = {}", quoted(p));
                        }
                        ("headers", toml::Value::Table(h)) => {
                            for (name, v) in h {
                                let Some(v) = v.as_str() else { continue };
                                headers
                                    .push((name.clone(), header_value(name, v, line, &mut warn)));
                            }
                        }
                        (other, _) => warn(
                            line,
                            format!(
                                "`otel.exporter.{kind}.{other}` is not imported (gatehouse's settings have no such key)"
                            ),
                        ),
                    }
                }
            }
            (other, _) => warn(
                line,
                format!(
                    "`otel.{other}` is not imported: gatehouse exports decision events and metrics with the settings above"
                ),
            ),
        }
    }
    if !headers.is_empty() {
        out.push_str("\n[headers]\n");
        for (k, v) in headers {
            let _ = writeln!(out, "{} = {}", quoted(&k), quoted(&v));
        }
    }
    Some(Telemetry { text: out, notes })
}

/// A header's value for the output: references kept, a literal replaced by
/// a reference to a variable named after the header.
fn header_value(name: &str, v: &str, line: usize, warn: &mut impl FnMut(usize, String)) -> String {
    let literal_left = v.split("${").enumerate().any(|(i, part)| {
        let text = if i == 0 {
            part
        } else {
            part.split_once('}').map_or(part, |(_, rest)| rest)
        };
        !text.trim().is_empty() && !text.trim().eq_ignore_ascii_case("bearer")
    });
    if !literal_left {
        return v.to_string();
    }
    let var: String = std::iter::once("GATEHOUSE_OTEL_HEADER_".to_string())
        .chain(name.chars().map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase().to_string()
            } else {
                "_".to_string()
            }
        }))
        .collect();
    warn(
        line,
        format!(
            "header `{name}` holds a literal value, which is not copied into the settings: it reads `${{{var}}}` instead; set {var} where gatehouse runs"
        ),
    );
    format!("${{{var}}}")
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}
