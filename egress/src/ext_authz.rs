//! `gatehouse-egress ext-authz --listen ADDR --policy FILE`: Envoy's
//! external authorization service (`envoy.service.auth.v3.Authorization`,
//! gRPC), for service meshes whose egress goes through Envoy or Istio
//! (docs/integrations/envoy.md). The Envoy API types are `envoy-types`
//! (generated from Envoy's own protos); gRPC health checking
//! (`grpc.health.v1.Health`) answers for the service and for `""`.
//!
//! Each `Check` is decided as the gatehouse proxy decides a request:
//!
//! 1. the request's authority (`attributes.request.http.host`, with its
//!    port, or else the scheme's: 443 for `https`, 80 otherwise) is the
//!    destination; a request without one is refused (`bad_request`);
//! 2. a TLS server name (`attributes.tls_session.sni`, sent when Envoy's
//!    `include_tls_session` is on) must name the same host
//!    (`sni_mismatch`);
//! 3. `connect HOST:PORT via https` (a server name, or scheme `https`) or
//!    `via http` decides;
//! 4. with `--check-destination`, for a sidecar that intercepts egress
//!    transparently, the original destination address
//!    (`attributes.destination`) must be one the name may resolve to
//!    (`resolved HOST -> ADDR port PORT`), so that a request naming an
//!    allowed host cannot be sent to another address.
//!
//! An allow is `OkHttpResponse` with `x-gatehouse-revision`; a refusal is
//! `DeniedHttpResponse` with status 403, the reason code in
//! `x-gatehouse-reason`, and gRPC status `PERMISSION_DENIED`. Anything the
//! service cannot read is a refusal, never an allow.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use envoy_types::ext_authz::v3::pb::{
    Authorization, AuthorizationServer, CheckRequest, CheckResponse, DeniedHttpResponse,
    HeaderValue, HeaderValueOption, HttpResponse, HttpStatus, OkHttpResponse,
};
use envoy_types::pb::envoy::config::core::v3::address::Address;
use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::google::rpc;
use gatehouse::query::Via;

use crate::adapter::same_destination;
use crate::outcome::{Outcome as Record, Refusal};
use crate::policy::Policies;

/// The gRPC service name Envoy calls.
pub const SERVICE: &str = "envoy.service.auth.v3.Authorization";

/// What one `Check` comes to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed: Envoy lets the request through.
    Allow,
    /// Denied, with the reason code.
    Deny(&'static str),
}

/// The service.
pub struct Service {
    /// The policy in force and its decision log.
    pub policies: Arc<Policies>,
    /// Also decide the original destination address (`--check-destination`).
    pub check_destination: bool,
}

fn destination(req: &CheckRequest) -> Option<SocketAddr> {
    let peer = req.attributes.as_ref()?.destination.as_ref()?;
    match peer.address.as_ref()?.address.as_ref()? {
        Address::SocketAddress(s) => {
            let ip: IpAddr = s.address.parse().ok()?;
            match s.port_specifier {
                Some(PortSpecifier::PortValue(p)) => {
                    Some(SocketAddr::new(ip, u16::try_from(p).ok()?))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

impl Service {
    /// Decides one request (see the module's documentation).
    pub fn decide(&self, req: &CheckRequest) -> (Outcome, String) {
        let mut r = self.policies.request();
        let revision = r.revision().to_string();
        let attrs = req.attributes.as_ref();
        let http = attrs
            .and_then(|a| a.request.as_ref())
            .and_then(|q| q.http.as_ref());
        let Some(http) = http.filter(|h| !h.host.is_empty()) else {
            r.finish(
                &"ext_authz (no authority)",
                Record::Deny(Refusal::BadRequest),
            );
            return (Outcome::Deny(Refusal::BadRequest.as_str()), revision);
        };
        let sni = attrs
            .and_then(|a| a.tls_session.as_ref())
            .map(|t| t.sni.as_str())
            .filter(|s| !s.is_empty());
        let https = sni.is_some() || http.scheme.eq_ignore_ascii_case("https");
        let default_port = if https { 443 } else { 80 };
        let what = format!("ext_authz {} {}", http.method, http.host);
        let Some((host, port)) =
            gatehouse_wire::authority::split_authority(&http.host, default_port)
        else {
            r.finish(&what, Record::Deny(Refusal::InvalidHost));
            return (Outcome::Deny("invalid_host"), revision);
        };
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&host)
            .to_string();
        if let Some(sni) = sni
            && !same_destination(sni, &host)
        {
            r.finish(&what, Record::Deny(Refusal::SniMismatch));
            return (Outcome::Deny("sni_mismatch"), revision);
        }
        let via = if https { Via::Https } else { Via::Http };
        if let Err(refusal) = crate::gate::admit(&mut r, &host, port, via) {
            let reason = refusal.as_str();
            r.finish(&what, Record::Deny(refusal));
            return (Outcome::Deny(reason), revision);
        }
        if self.check_destination {
            let Some(dst) = destination(req) else {
                r.finish(&what, Record::Deny(Refusal::NoDestination));
                return (Outcome::Deny("no_destination"), revision);
            };
            let ok = if let Ok(ip) = host.parse::<IpAddr>() {
                gatehouse::normalize::canonical_ip(ip)
                    == gatehouse::normalize::canonical_ip(dst.ip())
                    && dst.port() == port
            } else {
                if let Err(refusal) =
                    crate::gate::admit_resolved(&mut r, &host, &[dst.ip()], dst.port())
                {
                    let reason = refusal.as_str();
                    r.finish(&what, Record::Deny(refusal));
                    return (Outcome::Deny(reason), revision);
                }
                dst.port() == port
            };
            if !ok {
                r.finish(&what, Record::Deny(Refusal::DestinationMismatch));
                return (Outcome::Deny("destination_mismatch"), revision);
            }
        }
        r.finish(&what, Record::Allowed);
        (Outcome::Allow, revision)
    }
}

fn header(key: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: key.to_string(),
            value: value.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The `CheckResponse` for an outcome.
pub fn response(outcome: &Outcome, revision: &str) -> CheckResponse {
    match outcome {
        Outcome::Allow => CheckResponse {
            status: Some(rpc::Status {
                code: tonic::Code::Ok as i32,
                ..Default::default()
            }),
            http_response: Some(HttpResponse::OkResponse(OkHttpResponse {
                headers: vec![header("x-gatehouse-revision", revision)],
                ..Default::default()
            })),
            ..Default::default()
        },
        Outcome::Deny(reason) => CheckResponse {
            status: Some(rpc::Status {
                code: tonic::Code::PermissionDenied as i32,
                message: (*reason).to_string(),
                ..Default::default()
            }),
            http_response: Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
                // envoy.type.v3.StatusCode Forbidden = 403.
                status: Some(HttpStatus { code: 403 }),
                headers: vec![
                    header("x-gatehouse-reason", reason),
                    header("x-gatehouse-revision", revision),
                ],
                body: format!("refused by gatehouse: {reason}\n"),
            })),
            ..Default::default()
        },
    }
}

#[tonic::async_trait]
impl Authorization for Service {
    async fn check(
        &self,
        request: tonic::Request<CheckRequest>,
    ) -> Result<tonic::Response<CheckResponse>, tonic::Status> {
        let (outcome, revision) = self.decide(request.get_ref());
        Ok(tonic::Response::new(response(&outcome, &revision)))
    }
}

/// `gatehouse-egress ext-authz ...`: the process's exit code. `addr` is
/// where the gRPC service listens; `check_destination` also holds the
/// request's destination address to the decided target.
pub fn run(addr: SocketAddr, check_destination: bool, source: &crate::adapter::Source) -> i32 {
    let policies = match crate::adapter::boot(source, "ext-authz") {
        Ok(p) => p,
        Err(code) => return code,
    };
    let listen_ok = {
        let set = policies.store.load();
        set.select(source.name.as_deref())
            .is_ok_and(|p| p.listen_on(addr.ip(), addr.port()).is_allow())
    };
    if !listen_ok {
        eprintln!(
            "gatehouse-egress ext-authz: the policy does not allow listening on {addr} (proxy {{ listen any }} allows non-loopback addresses)"
        );
        return 1;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gatehouse-egress ext-authz: {e}");
            return 1;
        }
    };
    let service = Service {
        policies,
        check_destination,
    };
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        let (reporter, health) = tonic_health::server::health_reporter();
        reporter
            .set_service_status(SERVICE, tonic_health::ServingStatus::Serving)
            .await;
        reporter
            .set_service_status("", tonic_health::ServingStatus::Serving)
            .await;
        eprintln!("gatehouse-egress ext-authz: listening on {bound}");
        tonic::transport::Server::builder()
            .add_service(health)
            .add_service(AuthorizationServer::new(service))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async {
                    crate::adapter::stopped().await;
                },
            )
            .await
            .map_err(|e| e.to_string())
    });
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gatehouse-egress ext-authz: {e}");
            1
        }
    }
}
