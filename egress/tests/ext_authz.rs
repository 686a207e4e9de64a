//! `gatehouse-egress ext-authz` answering Envoy's `Authorization/Check`
//! from a gRPC client generated from the same Envoy protos (envoy-types),
//! and gRPC health checking from tonic-health's client. Envoy itself is not
//! installable here; docs/integrations/envoy.md has its configuration.
//!
//! The server listens on 127.0.0.1 and is killed at the end; every call has
//! a deadline.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::address::Address;
use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::envoy::config::core::v3::{Address as EnvoyAddress, SocketAddress};
use envoy_types::pb::envoy::service::auth::v3::attribute_context::{
    HttpRequest, Peer, Request, TlsSession,
};
use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;
use envoy_types::pb::envoy::service::auth::v3::check_response::HttpResponse;
use envoy_types::pb::envoy::service::auth::v3::{AttributeContext, CheckRequest, CheckResponse};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const EGRESS: &str = env!("CARGO_BIN_EXE_gatehouse-egress");

struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(policy: &str, extra: &[&str]) -> Server {
    let dir = std::env::temp_dir().join(format!(
        "gatehouse-extauthz-{}-{}",
        std::process::id(),
        extra.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mesh.policy");
    std::fs::write(&path, policy).unwrap();
    let mut child = Command::new(EGRESS)
        .args(["ext-authz", "--listen", "127.0.0.1:0", "--policy"])
        .arg(&path)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The bound address, from the first line it writes.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("gatehouse-egress ext-authz: listening on ")
        .unwrap_or_else(|| panic!("unexpected: {line}"))
        .to_string();
    std::thread::spawn(move || for _ in err.lines() {});
    Server(child, format!("http://{addr}"))
}

const POLICY: &str = "policy mesh {
  network {
    allow domain api.github.com port 443
    allow domain *.internal.example port 8080
    allow ip 2001:db8::7 port 443
    deny domain admin.internal.example
  }
}
";

fn request(host: &str, scheme: &str, sni: Option<&str>, dst: Option<(&str, u32)>) -> CheckRequest {
    CheckRequest {
        attributes: Some(AttributeContext {
            request: Some(Request {
                http: Some(HttpRequest {
                    host: host.into(),
                    scheme: scheme.into(),
                    method: "GET".into(),
                    path: "/".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            tls_session: sni.map(|s| TlsSession { sni: s.into() }),
            destination: dst.map(|(ip, port)| Peer {
                address: Some(EnvoyAddress {
                    address: Some(Address::SocketAddress(SocketAddress {
                        address: ip.into(),
                        port_specifier: Some(PortSpecifier::PortValue(port)),
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }
}

/// (gRPC code, HTTP status of a denial or 200, x-gatehouse-reason).
fn summary(r: &CheckResponse) -> (i32, u32, String) {
    let code = r.status.as_ref().map_or(-1, |s| s.code);
    match &r.http_response {
        Some(HttpResponse::OkResponse(ok)) => {
            assert!(
                ok.headers
                    .iter()
                    .any(|h| h.header.as_ref().unwrap().key == "x-gatehouse-revision")
            );
            (code, 200, String::new())
        }
        Some(HttpResponse::DeniedResponse(d)) => {
            let reason = d
                .headers
                .iter()
                .filter_map(|h| h.header.as_ref())
                .find(|h| h.key == "x-gatehouse-reason")
                .map(|h| h.value.clone())
                .unwrap_or_default();
            (code, d.status.as_ref().map_or(0, |s| s.code as u32), reason)
        }
        _ => (code, 0, String::new()),
    }
}

#[tokio::test]
async fn check_answers_as_the_policy_says() {
    let server = start(POLICY, &[]);
    let channel = tonic::transport::Endpoint::from_shared(server.1.clone())
        .unwrap()
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
    let mut client = AuthorizationClient::new(channel.clone());
    let allow = (0, 200, String::new());
    let deny = |reason: &str| (7, 403, reason.to_string());
    let cases: Vec<(CheckRequest, (i32, u32, String))> = vec![
        (
            request("api.github.com", "https", None, None),
            allow.clone(),
        ),
        (
            request("API.GitHub.com.:443", "http", None, None),
            allow.clone(),
        ),
        (
            request("api.github.com", "https", Some("api.github.com"), None),
            allow.clone(),
        ),
        (
            request("svc.internal.example:8080", "http", None, None),
            allow.clone(),
        ),
        (request("[2001:db8::7]", "https", None, None), allow.clone()),
        (
            request("api.github.com", "http", None, None),
            deny("not_allowed"),
        ),
        (
            request("admin.internal.example:8080", "http", None, None),
            deny("denied_by_rule"),
        ),
        (
            request("api.github.com", "https", Some("evil.example"), None),
            deny("sni_mismatch"),
        ),
        (request("", "https", None, None), deny("bad_request")),
        (
            request("api.github.com:99999", "https", None, None),
            deny("invalid_host"),
        ),
        (
            request("2130706433", "https", None, None),
            deny("ambiguous_ip_literal"),
        ),
        (CheckRequest::default(), deny("bad_request")),
    ];
    for (req, want) in cases {
        let host = req
            .attributes
            .as_ref()
            .and_then(|a| a.request.as_ref())
            .and_then(|r| r.http.as_ref())
            .map(|h| h.host.clone());
        let got = client.check(req).await.unwrap().into_inner();
        assert_eq!(summary(&got), want, "{host:?}");
    }

    // Health: the service and the server as a whole are SERVING.
    let mut health = HealthClient::new(channel);
    for service in ["", "envoy.service.auth.v3.Authorization"] {
        let r = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status, ServingStatus::Serving as i32, "{service:?}");
    }
    let unknown = health
        .check(HealthCheckRequest {
            service: "no.such.Service".into(),
        })
        .await;
    assert!(unknown.is_err());
}

#[tokio::test]
async fn with_check_destination_the_address_must_be_one_the_name_may_use() {
    let server = start(POLICY, &["--check-destination"]);
    let mut client = AuthorizationClient::connect(server.1.clone())
        .await
        .unwrap();
    let cases = [
        (
            request("api.github.com", "https", None, Some(("140.82.112.3", 443))),
            (0, 200, String::new()),
        ),
        // An allowed name sent to a private address, or to another port.
        (
            request("api.github.com", "https", None, Some(("10.0.0.8", 443))),
            (7, 403, "non_public_resolution".to_string()),
        ),
        // Another port: the name is not allowed there.
        (
            request(
                "api.github.com",
                "https",
                None,
                Some(("140.82.112.3", 8443)),
            ),
            (7, 403, "not_allowed".to_string()),
        ),
        (
            request("[2001:db8::7]", "https", None, Some(("2001:db8::8", 443))),
            (7, 403, "destination_mismatch".to_string()),
        ),
        (
            request("api.github.com", "https", None, None),
            (7, 403, "no_destination".to_string()),
        ),
    ];
    for (req, want) in cases {
        let got = client.check(req).await.unwrap().into_inner();
        assert_eq!(summary(&got), want);
    }
}
