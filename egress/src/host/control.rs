//! Host mode's control API: HTTP/JSON on a Unix socket that only its owner
//! (root) may use. Sandboxes are added and removed, policies put, the Zoo
//! calls applied as the seed spells them, and tool calls decided for a
//! sandbox, so that a harness in any language asks the daemon before every
//! tool call as Zoo's API does (docs/host.md, "Control API").
//!
//! | method and path | body | answer |
//! |---|---|---|
//! | `GET /v1/sandboxes` | | every sandbox: id, addresses, revision |
//! | `POST /v1/sandboxes` | `{"id", "addresses", "policy", "policy_name"?}` | 201 |
//! | `DELETE /v1/sandboxes/ID` | | 204; its open connections close |
//! | `PUT /v1/sandboxes/ID/policy` | policy text | 200 `{"revision"}` |
//! | `POST /v1/sandboxes/ID/network` | `{"default", "allow_dns"}` (`set_network`) | 200 |
//! | `POST /v1/sandboxes/ID/rules` | `{"kind", "value", "effect"}` (`add_rule`) | 200 |
//! | `POST /v1/sandboxes/ID/permissions` | `{"permission", "action", "effect"}` (`set_permission`) | 200 |
//! | `POST /v1/sandboxes/ID/apps` | `{"deny": [...]}` (`set_apps`) | 200 |
//! | `POST /v1/sandboxes/ID/decide` | a JSON query, as `policyc eval` reads it | the decision; 403 when refused |
//!
//! A change is in force for the next connection when its answer is sent;
//! an error is `{"error": MESSAGE}` with 404, 409, 422 or 500.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::UnixListener;

use super::state::{ChangeError, Host};

/// The largest request body read (a policy at the engine's source limit).
const MAX_BODY: usize = 8 * 1024 * 1024 + 4096;

/// Binds the control socket at `path`, readable and writable by its owner
/// only: bound under a temporary name, given mode 0600, then renamed into
/// place (a stale socket there is replaced).
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    // A path is reused only when it is a socket nobody answers on (a
    // daemon that stopped left it): anything else there — a file a typo
    // named, or a running daemon's socket — stops this one at start.
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_socket() => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; refusing to replace it (give --control a path of its own)",
                    path.display()
                ),
            ));
        }
        Ok(_) => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!(
                        "{}: another daemon answers on this control socket; refusing to take it",
                        path.display()
                    ),
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{}: cannot tell whether it is in use ({e})", path.display()),
                ));
            }
        },
        Err(_) => {}
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let l = UnixListener::bind(&tmp)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&tmp, path)?;
    Ok(l)
}

/// Serves the control API on `listener` until the runtime ends.
pub(crate) fn serve(host: Arc<Mutex<Host>>, listener: UnixListener) {
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let host = host.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let host = host.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(host, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), service)
                    .await;
            });
        }
    });
}

type Answer = Response<Full<Bytes>>;

fn json(status: u16, v: &serde_json::Value) -> Answer {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn error(status: u16, message: &str) -> Answer {
    json(status, &serde_json::json!({ "error": message }))
}

fn changed(r: Result<serde_json::Value, ChangeError>, ok: u16) -> Answer {
    match r {
        Ok(v) => json(ok, &v),
        Err(e) => error(e.status(), &e.to_string()),
    }
}

/// The request's body, at most [`MAX_BODY`] bytes.
async fn body(req: Request<Incoming>) -> Result<Bytes, Answer> {
    match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(_) => Err(error(413, "the body is too large or broken")),
    }
}

/// Runs `f` on the state, off the runtime (it compiles policies and runs
/// `nft`).
async fn with_host<T: Send + 'static>(
    host: Arc<Mutex<Host>>,
    f: impl FnOnce(&mut Host) -> Result<T, ChangeError> + Send + 'static,
) -> Result<T, ChangeError> {
    tokio::task::spawn_blocking(move || match host.lock() {
        Ok(mut h) => f(&mut h),
        Err(_) => Err(ChangeError::Invalid(
            "the daemon's state is poisoned".into(),
        )),
    })
    .await
    .unwrap_or_else(|_| Err(ChangeError::Invalid("the change failed".into())))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSandbox {
    id: String,
    addresses: Vec<String>,
    policy: String,
    #[serde(default)]
    policy_name: Option<String>,
}

async fn answer(host: Arc<Mutex<Host>>, req: Request<Incoming>) -> Answer {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().clone();
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    match (method, parts.as_slice()) {
        (Method::GET, ["v1", "sandboxes"]) => list(&host),
        (Method::POST, ["v1", "sandboxes"]) => {
            let b = match body(req).await {
                Ok(b) => b,
                Err(a) => return a,
            };
            let new: NewSandbox = match serde_json::from_slice(&b) {
                Ok(n) => n,
                Err(e) => return error(422, &format!("not a sandbox: {e}")),
            };
            let id = new.id.clone();
            let r = with_host(host, move |h| {
                h.add(&new.id, new.addresses, &new.policy, new.policy_name)
            })
            .await;
            changed(r.map(|()| serde_json::json!({ "id": id })), 201)
        }
        (Method::DELETE, ["v1", "sandboxes", id]) => {
            let id = id.to_string();
            match with_host(host, move |h| h.remove(&id)).await {
                Ok(()) => json(204, &serde_json::Value::Null),
                Err(e) => error(e.status(), &e.to_string()),
            }
        }
        (Method::PUT, ["v1", "sandboxes", id, "policy"]) => {
            let id = id.to_string();
            let name = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("policy_name="))
                .map(str::to_string);
            let b = match body(req).await {
                Ok(b) => b,
                Err(a) => return a,
            };
            let Ok(text) = String::from_utf8(b.to_vec()) else {
                return error(422, "a policy is UTF-8 text");
            };
            let r = with_host(host, move |h| h.put_policy(&id, &text, name)).await;
            changed(r.map(|rev| serde_json::json!({ "revision": rev })), 200)
        }
        (
            Method::POST,
            [
                "v1",
                "sandboxes",
                id,
                call @ ("network" | "rules" | "permissions" | "apps"),
            ],
        ) => {
            let (id, call) = (id.to_string(), zoo_call(call));
            let b = match body(req).await {
                Ok(b) => b,
                Err(a) => return a,
            };
            let args: serde_json::Value = match serde_json::from_slice(&b) {
                Ok(v) => v,
                Err(e) => return error(422, &format!("not JSON: {e}")),
            };
            let r = with_host(host, move |h| h.zoo(&id, serde_json::json!({ call: args }))).await;
            changed(r.map(|rev| serde_json::json!({ "revision": rev })), 200)
        }
        (Method::POST, ["v1", "sandboxes", id, "decide"]) => {
            let id = id.to_string();
            let b = match body(req).await {
                Ok(b) => b,
                Err(a) => return a,
            };
            decide(&host, &id, &b)
        }
        _ => error(404, "no such endpoint (docs/host.md, \"Control API\")"),
    }
}

/// The Zoo call an endpoint stands for.
fn zoo_call(endpoint: &str) -> &'static str {
    match endpoint {
        "network" => "set_network",
        "rules" => "add_rule",
        "permissions" => "set_permission",
        _ => "set_app_policy",
    }
}

fn table_of(host: &Arc<Mutex<Host>>) -> Option<Arc<arc_swap::ArcSwap<super::table::SandboxTable>>> {
    host.lock().ok().map(|h| h.table.clone())
}

fn list(host: &Arc<Mutex<Host>>) -> Answer {
    let Some(table) = table_of(host) else {
        return error(500, "the daemon's state is poisoned");
    };
    let t = table.load();
    let all: Vec<serde_json::Value> = t
        .sandboxes()
        .map(|s| {
            serde_json::json!({
                "id": s.id,
                "addresses": s.addresses,
                "policy": s.policies().path,
                "revision": s.policies().store.load().revision(),
            })
        })
        .collect();
    json(200, &serde_json::json!({ "sandboxes": all }))
}

/// Decides a query for a sandbox with its policy in force.
fn decide(host: &Arc<Mutex<Host>>, id: &str, body: &[u8]) -> Answer {
    let Some(table) = table_of(host) else {
        return error(500, "the daemon's state is poisoned");
    };
    let t = table.load();
    let Some(s) = t.get(id) else {
        return error(404, &format!("no sandbox `{id}`"));
    };
    let text = String::from_utf8_lossy(body);
    let query = match gatehouse::Query::from_json(&text) {
        Ok(q) => q,
        Err(e) => return error(422, &format!("invalid JSON query: {e}")),
    };
    let (status, report) = s.policies().decide_query(&query);
    json(status, &report)
}

/// The default place of the state directory beside a table at `table`.
pub fn default_state_dir(table: &Path) -> PathBuf {
    table
        .parent()
        .unwrap_or(Path::new("."))
        .join("gatehouse-state")
}
