//! Sends an encoded `ExportLogsServiceRequest` or
//! `ExportTraceServiceRequest` ([`crate::wire`]): OTLP/HTTP through the
//! exporters' HTTP client ([`opentelemetry_http::HttpClient`], the one the
//! metric exporter is given) — protobuf as it is, or JSON (the bytes read
//! with `opentelemetry-proto`'s types and written as OTLP/JSON, as the
//! SDK's own JSON exporter writes them) — or OTLP/gRPC over tonic's channel
//! (the bytes, framed once, are the request body). Why not tonic's client
//! for gRPC, nor the exporters themselves for either: BENCHMARKS.md,
//! "OpenTelemetry export".

use std::time::Duration;

use bytes::Bytes;

use crate::settings::{Exporter, Settings};
use opentelemetry_http::HttpClient as _;

use crate::{OnRuntime, OtelError};

/// Which OTLP service.
#[derive(Clone, Copy)]
pub(crate) enum Signal {
    Logs,
    Traces,
}

/// Where and how the logs and spans go.
pub(crate) enum Sender {
    Http {
        client: OnRuntime,
        url: String,
        traces_url: String,
        headers: Vec<(String, String)>,
        /// OTLP/JSON rather than protobuf.
        json: bool,
    },
    Grpc {
        channel: tonic::transport::Channel,
        /// The headers, each a valid HTTP/2 header.
        metadata: Vec<(http::HeaderName, http::HeaderValue)>,
    },
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

/// `OTEL_EXPORTER_OTLP_HEADERS`: `k=v,k2=v2`.
fn env_headers() -> Vec<(String, String)> {
    env("OTEL_EXPORTER_OTLP_LOGS_HEADERS")
        .or_else(|| env("OTEL_EXPORTER_OTLP_HEADERS"))
        .map(|h| {
            h.split(',')
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.trim().to_string(), v.trim().to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Sender {
    /// The sender of `settings` (the endpoint from the settings, else the
    /// standard variables, else the OTLP defaults). Built inside the
    /// export runtime.
    pub(crate) fn new(
        settings: &Settings,
        headers: &[(String, String)],
        client: &OnRuntime,
    ) -> Result<Self, OtelError> {
        let headers = if headers.is_empty() {
            env_headers()
        } else {
            headers.to_vec()
        };
        let bad = |message: String| OtelError::Exporter {
            signal: "logs",
            message,
        };
        match settings.exporter {
            Exporter::OtlpGrpc => {
                let url = settings
                    .signal_endpoint("logs")
                    .or_else(|| env("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"))
                    .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
                    .unwrap_or_else(|| "http://localhost:4317".into());
                let mut ep = tonic::transport::Endpoint::from_shared(url.clone())
                    .map_err(|e| bad(format!("`{url}`: {e}")))?
                    .timeout(settings.export_timeout())
                    .connect_timeout(settings.export_timeout());
                if url.starts_with("https://") {
                    ep = ep
                        .tls_config(tonic::transport::ClientTlsConfig::new().with_webpki_roots())
                        .map_err(|e| bad(format!("`{url}`: {e}")))?;
                }
                let mut metadata = Vec::new();
                for (k, v) in &headers {
                    let key = http::HeaderName::from_bytes(k.to_ascii_lowercase().as_bytes())
                        .ok()
                        // gRPC reads a `-bin` header as base64 binary.
                        .filter(|n| !n.as_str().ends_with("-bin"))
                        .ok_or_else(|| bad(format!("header `{k}`: not a valid name")))?;
                    let value = http::HeaderValue::from_str(v)
                        .map_err(|_| bad(format!("header `{k}`: not a valid value")))?;
                    metadata.push((key, value));
                }
                Ok(Sender::Grpc {
                    channel: ep.connect_lazy(),
                    metadata,
                })
            }
            _ => {
                let url_of = |signal: &str, var: &str| {
                    settings
                        .signal_endpoint(signal)
                        .or_else(|| env(var))
                        .or_else(|| {
                            env("OTEL_EXPORTER_OTLP_ENDPOINT")
                                .map(|e| format!("{}/v1/{signal}", e.trim_end_matches('/')))
                        })
                        .unwrap_or_else(|| format!("http://localhost:4318/v1/{signal}"))
                };
                Ok(Sender::Http {
                    client: client.clone(),
                    url: url_of("logs", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"),
                    traces_url: url_of("traces", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
                    headers,
                    json: settings.protocol == crate::settings::Encoding::Json,
                })
            }
        }
    }

    /// Whether requests go over gRPC (and so are framed with its message
    /// prefix).
    pub(crate) fn is_grpc(&self) -> bool {
        matches!(self, Sender::Grpc { .. })
    }

    /// Sends one request (for gRPC, framed); `Err` says why it did not
    /// arrive.
    pub(crate) async fn send(
        &self,
        signal: Signal,
        body: Bytes,
        timeout: Duration,
    ) -> Result<(), String> {
        match self {
            Sender::Http {
                client,
                url,
                traces_url,
                headers,
                json,
            } => {
                let url = match signal {
                    Signal::Logs => url,
                    Signal::Traces => traces_url,
                };
                let (body, content_type) = if *json {
                    (Bytes::from(to_json(signal, &body)?), "application/json")
                } else {
                    (body, "application/x-protobuf")
                };
                let mut req = http::Request::post(url.as_str())
                    .header(http::header::CONTENT_TYPE, content_type);
                for (k, v) in headers {
                    req = req.header(k.as_str(), v.as_str());
                }
                let req = req.body(body).map_err(|e| e.to_string())?;
                let resp = tokio::time::timeout(timeout, client.send_bytes(req))
                    .await
                    .map_err(|_| format!("no answer within {timeout:?}"))?
                    .map_err(|e| e.to_string())?;
                if resp.status().is_success() {
                    Ok(())
                } else {
                    Err(format!("HTTP {}", resp.status()))
                }
            }
            Sender::Grpc { channel, metadata } => {
                grpc_unary(channel.clone(), signal, body, metadata, timeout).await
            }
        }
    }
}

/// One gRPC unary call with `body` as the request, already framed (the
/// message prefix and the encoded message): tonic's channel carries it as
/// it is, with no codec buffer between (that buffer was a fresh allocation
/// of the request's size, and a copy, on every export). What tonic's
/// client adds is added here: `te: trailers`, the gRPC content type, the
/// call's `grpc-timeout`, and the status read from the response's
/// headers or trailers. The response message (an empty `Export*ServiceResponse`,
/// or a partial success) is not read.
async fn grpc_unary(
    mut channel: tonic::transport::Channel,
    signal: Signal,
    body: Bytes,
    metadata: &[(http::HeaderName, http::HeaderValue)],
    timeout: Duration,
) -> Result<(), String> {
    use http_body_util::BodyExt as _;
    use tonic::codegen::Service as _;
    let path = match signal {
        Signal::Logs => "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
        Signal::Traces => "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    };
    let mut req = http::Request::builder()
        .method(http::Method::POST)
        .version(http::Version::HTTP_2)
        .uri(path)
        .header(http::header::TE, "trailers")
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header("grpc-timeout", grpc_timeout(timeout));
    for (k, v) in metadata {
        // The headers gRPC itself sets are not the user's to set (tonic
        // drops them from metadata too).
        if !reserved(k.as_str()) {
            req = req.header(k, v);
        }
    }
    let req = req
        .body(tonic::body::Body::new(http_body_util::Full::new(body)))
        .map_err(|e| e.to_string())?;
    let call = async {
        std::future::poll_fn(|cx| channel.poll_ready(cx))
            .await
            .map_err(|e| e.to_string())?;
        let resp = channel.call(req).await.map_err(|e| e.to_string())?;
        if resp.status() != http::StatusCode::OK {
            return Err(format!("HTTP {}", resp.status()));
        }
        // A trailers-only response carries the status in its headers.
        if let Some(status) = tonic::Status::from_header_map(resp.headers()) {
            return grpc_ok(&status);
        }
        let collected = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        match collected
            .trailers()
            .and_then(tonic::Status::from_header_map)
        {
            Some(status) => grpc_ok(&status),
            None => Err("the response has no grpc-status".into()),
        }
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

/// The headers a gRPC call's metadata may not set: HTTP/2's and gRPC's
/// own (every `grpc-` name is reserved to the protocol).
fn reserved(name: &str) -> bool {
    matches!(name, "te" | "user-agent" | "content-type") || name.starts_with("grpc-")
}

fn grpc_ok(status: &tonic::Status) -> Result<(), String> {
    if status.code() == tonic::Code::Ok {
        Ok(())
    } else {
        Err(status.to_string())
    }
}

/// gRPC's `grpc-timeout` value: at most eight digits, then the unit.
fn grpc_timeout(t: Duration) -> String {
    let ms = t.as_millis();
    if ms < 100_000_000 {
        format!("{}m", ms.max(1))
    } else {
        format!("{}S", t.as_secs().min(99_999_999))
    }
}

/// The request as OTLP/JSON: read back with the official types and
/// written with their serde mapping (hex ids, 64-bit integers as strings,
/// camelCase names), as `opentelemetry-otlp`'s JSON exporter writes it.
pub(crate) fn to_json(signal: Signal, body: &[u8]) -> Result<Vec<u8>, String> {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;
    let json = match signal {
        Signal::Logs => ExportLogsServiceRequest::decode(body)
            .map_err(|e| e.to_string())
            .and_then(|r| serde_json::to_vec(&r).map_err(|e| e.to_string())),
        Signal::Traces => ExportTraceServiceRequest::decode(body)
            .map_err(|e| e.to_string())
            .and_then(|r| serde_json::to_vec(&r).map_err(|e| e.to_string())),
    };
    json.map_err(|e| format!("OTLP/JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn the_protocols_own_headers_are_not_metadata() {
        for h in [
            "te",
            "content-type",
            "user-agent",
            "grpc-timeout",
            "grpc-status",
        ] {
            assert!(super::reserved(h), "{h}");
        }
        for h in ["authorization", "x-api-key", "x-grpc"] {
            assert!(!super::reserved(h), "{h}");
        }
    }

    #[test]
    fn grpc_timeouts_have_at_most_eight_digits() {
        assert_eq!(super::grpc_timeout(Duration::from_secs(5)), "5000m");
        assert_eq!(super::grpc_timeout(Duration::ZERO), "1m");
        assert_eq!(
            super::grpc_timeout(Duration::from_millis(99_999_999)),
            "99999999m"
        );
        assert_eq!(super::grpc_timeout(Duration::from_secs(100_000)), "100000S");
        assert_eq!(super::grpc_timeout(Duration::MAX), "99999999S");
    }
}
