//! Sends an encoded `ExportLogsServiceRequest` or
//! `ExportTraceServiceRequest` ([`crate::wire`]): OTLP/HTTP with the
//! exporters' HTTP client — protobuf as it is, or JSON (the bytes read with
//! `opentelemetry-proto`'s types and written as OTLP/JSON, as the SDK's
//! own JSON exporter writes them) — or OTLP/gRPC with tonic (a
//! pass-through codec: the bytes are the message).

use std::time::Duration;

use bytes::{Buf as _, BufMut as _, Bytes};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::{MetadataKey, MetadataValue};

use crate::settings::{Exporter, Settings};
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
        client: reqwest::Client,
        url: String,
        traces_url: String,
        headers: Vec<(String, String)>,
        /// OTLP/JSON rather than protobuf.
        json: bool,
    },
    Grpc {
        channel: tonic::transport::Channel,
        metadata: Vec<(
            MetadataKey<tonic::metadata::Ascii>,
            MetadataValue<tonic::metadata::Ascii>,
        )>,
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
                    let key = MetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes())
                        .map_err(|_| bad(format!("header `{k}`: not a valid name")))?;
                    let value = MetadataValue::try_from(v.as_str())
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
                    client: client.client.clone(),
                    url: url_of("logs", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"),
                    traces_url: url_of("traces", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
                    headers,
                    json: settings.protocol == crate::settings::Encoding::Json,
                })
            }
        }
    }

    /// Sends one request; `Err` says why it did not arrive.
    pub(crate) async fn send(
        &self,
        signal: Signal,
        body: Vec<u8>,
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
                    (to_json(signal, &body)?, "application/json")
                } else {
                    (body, "application/x-protobuf")
                };
                let mut req = client
                    .post(url)
                    .timeout(timeout)
                    .header("content-type", content_type)
                    .body(body);
                for (k, v) in headers {
                    req = req.header(k, v);
                }
                let resp = req.send().await.map_err(|e| e.to_string())?;
                if resp.status().is_success() {
                    Ok(())
                } else {
                    Err(format!("HTTP {}", resp.status()))
                }
            }
            Sender::Grpc { channel, metadata } => {
                let mut grpc = tonic::client::Grpc::new(channel.clone());
                grpc.ready().await.map_err(|e| e.to_string())?;
                let mut req = tonic::Request::new(Bytes::from(body));
                req.set_timeout(timeout);
                for (k, v) in metadata {
                    req.metadata_mut().insert(k.clone(), v.clone());
                }
                let path = http::uri::PathAndQuery::from_static(match signal {
                    Signal::Logs => "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
                    Signal::Traces => "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                });
                grpc.unary::<Bytes, (), Raw>(req, path, Raw)
                    .await
                    .map(|_| ())
                    .map_err(|s| s.to_string())
            }
        }
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

/// The pass-through codec: the request is already encoded; the response's
/// content (an `ExportLogsServiceResponse`) is not read.
#[derive(Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = ();
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = ();
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<()>, tonic::Status> {
        let n = src.remaining();
        src.advance(n);
        Ok(Some(()))
    }
}
