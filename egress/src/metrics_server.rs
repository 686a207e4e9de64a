//! The `/metrics` endpoint: Prometheus text over HTTP, served by hyper on
//! its own listener, apart from the proxy's connections and parser.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Connections the metrics endpoint serves at once.
pub const METRICS_CONNECTIONS: usize = 64;

/// One connection of the metrics endpoint: its task, whether its request
/// head has arrived, and its client.
struct Slot {
    task: tokio::task::JoinHandle<()>,
    head: Arc<std::sync::atomic::AtomicBool>,
    ip: std::net::IpAddr,
}

/// Counts an open connection until dropped (an aborted task drops it too).
struct Open(Arc<Metrics>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open_connections.dec();
    }
}

/// Serves `GET /metrics` on `listener` until the runtime ends (anything
/// else: 404), with hyper (HTTP/1.1, one request per connection, 10 s in
/// all), not the proxy's own parser (issue 35, finding 10). At most
/// [`METRICS_CONNECTIONS`] at once and a quarter of them one client's; when
/// they are all taken, the oldest connection that has not sent its request
/// head gives its place to the new one, so idle sockets cannot hold the
/// endpoint down.
pub fn serve(metrics: Arc<Metrics>, listener: TcpListener) {
    use std::sync::atomic::AtomicBool;
    let share = crate::listener::share(METRICS_CONNECTIONS);
    tokio::spawn(async move {
        let mut open: std::collections::VecDeque<Slot> = Default::default();
        loop {
            let (s, peer) = match listener.accept().await {
                Ok(x) => x,
                Err(_) => {
                    // Out of descriptors or a reset: the proxy's listeners
                    // matter more; try again shortly.
                    metrics.accept_backoffs.inc();
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            open.retain(|c| !c.task.is_finished());
            let ip = gatehouse::normalize::canonical_ip(peer.ip());
            if open.iter().filter(|c| c.ip == ip).count() >= share {
                metrics.client_share_refusals.inc();
                continue;
            }
            if open.len() >= METRICS_CONNECTIONS {
                match open.iter().position(|c| !c.head.load(Ordering::Relaxed)) {
                    Some(i) => {
                        if let Some(c) = open.remove(i) {
                            c.task.abort();
                        }
                    }
                    // Every place is answering a request: this one waits
                    // for none.
                    None => continue,
                }
            }
            let head = Arc::new(AtomicBool::new(false));
            let (seen, m) = (head.clone(), metrics.clone());
            metrics.open_connections.inc();
            let guard = Open(metrics.clone());
            let task = tokio::spawn(async move {
                let _guard = guard;
                let service = hyper::service::service_fn(move |req| {
                    seen.store(true, Ordering::Relaxed);
                    let answer = respond(&m, &req);
                    async move { Ok::<_, std::convert::Infallible>(answer) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .keep_alive(false)
                    .serve_connection(hyper_util::rt::TokioIo::new(s), service);
                let _ = tokio::time::timeout(std::time::Duration::from_secs(10), conn).await;
            });
            open.push_back(Slot { task, head, ip });
        }
    });
}

/// The answer to one request: the metrics for `GET /metrics`, else 404.
fn respond<B>(
    metrics: &Metrics,
    req: &hyper::Request<B>,
) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
    let ok = req.method() == hyper::Method::GET && req.uri().path() == "/metrics";
    let (status, body) = if ok {
        (hyper::StatusCode::OK, metrics.render())
    } else {
        (hyper::StatusCode::NOT_FOUND, String::from("not found\n"))
    };
    let mut r = hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}
