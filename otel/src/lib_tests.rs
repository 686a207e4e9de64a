//! Tests of the telemetry's start and shutdown (`lib.rs`).

use super::*;

fn refused() -> Settings {
    Settings {
        exporter: Exporter::OtlpHttp,
        endpoint: Some("http://127.0.0.1:9".into()),
        ..Settings::default()
    }
}

#[test]
fn dropped_inside_a_runtime_without_shutdown_does_not_panic() {
    let t = Telemetry::start(&refused(), "test").expect("starts");
    assert!(t.is_on());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rt.block_on(async move { drop(t) });
}

#[test]
fn starting_inside_a_runtime_is_an_error_not_a_panic() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        assert!(matches!(
            Telemetry::start(&refused(), "test"),
            Err(OtelError::Runtime(_))
        ));
    });
}

#[test]
fn shutdown_counts_what_a_dead_collector_never_got() {
    let t = Telemetry::start(&refused(), "test").expect("starts");
    let ids = SpanIds::new(None).expect("a root span");
    t.span("x", &ids, std::time::SystemTime::now(), false, &[]);
    t.shutdown(Duration::from_secs(2));
    assert_eq!(t.sent(), 0);
    assert_eq!(t.dropped(), 1);
}
