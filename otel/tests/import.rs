//! `policyc import zerocode --telemetry` writes settings these programs
//! accept, for the seed's three `[otel]` examples, with no token in them.
#![allow(clippy::expect_used)]

use gatehouse_otel::{Exporter, Settings};

fn imported(name: &str) -> (String, Settings) {
    let path = format!("{}/../tests/data/import/{name}", env!("CARGO_MANIFEST_DIR"));
    let config = std::fs::read_to_string(&path).expect("the seed example");
    let t = gatehouse::import::zerocode::telemetry(&config).expect("an [otel] block");
    let s = Settings::from_toml(&t.text).expect("the settings parse");
    (t.text, s)
}

#[test]
fn the_seed_examples_import_to_settings_the_programs_accept() {
    let (_, s) = imported("zc-otel.toml");
    assert_eq!(s.exporter, Exporter::None);
    assert_eq!(s.environment.as_deref(), Some("staging"));
    assert!(!s.log_commands);

    let (text, s) = imported("zc-otel-exporter.toml");
    assert_eq!(s.exporter, Exporter::OtlpHttp);
    assert_eq!(
        s.signal_endpoint("logs").as_deref(),
        Some("https://otel.example.com/v1/logs")
    );
    assert_eq!(
        s.headers.get("x-otlp-api-key").map(String::as_str),
        Some("${OTLP_TOKEN}")
    );
    assert!(text.contains("${OTLP_TOKEN}"));
    let h = s
        .resolved_headers(|k| (k == "OTLP_TOKEN").then(|| "t0ken".to_string()))
        .expect("resolves");
    assert_eq!(h, vec![("x-otlp-api-key".to_string(), "t0ken".to_string())]);

    let (text, s) = imported("zc-otel-grpc.toml");
    assert_eq!(s.exporter, Exporter::OtlpGrpc);
    assert!(
        !text.contains("abc123"),
        "a literal header value is never copied: {text}"
    );
    assert_eq!(
        s.headers.get("x-otlp-meta").map(String::as_str),
        Some("${GATEHOUSE_OTEL_HEADER_X_OTLP_META}")
    );
}
