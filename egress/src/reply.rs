//! How a refusal is written to a client: the one place a front door's
//! answer is made. An HTTP refusal (the forward proxy, plain HTTP inside a
//! tunnel) is a status with `X-Gatehouse-Reason` and `Connection: close`.
//! Only the front doors use this module; the layers below the gate return
//! a [`Refusal`] and never write to a client (egress/tests/layers.rs).

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::gate::{self, Ctx};
use crate::outcome::Refusal;
use crate::policy::Request;

/// Writes a refusal (or a 400) with the reason, and `Connection: close`.
pub(crate) async fn respond<S: AsyncWrite + Unpin>(
    s: &mut S,
    status: &str,
    reason: &str,
    revision: &str,
) {
    let body = format!("gatehouse: {reason}\n");
    let msg = format!(
        "HTTP/1.1 {status}\r\nX-Gatehouse-Reason: {reason}\r\nX-Gatehouse-Revision: {revision}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(msg.as_bytes()).await;
    let _ = s.shutdown().await;
}

/// Records a refusal and answers it with its status (403, 400 or 502) and
/// `X-Gatehouse-Reason`; the connection is closed after.
pub(crate) async fn refuse<S: AsyncWrite + Unpin>(
    ctx: &Ctx,
    req: &Request<'_>,
    client: &mut S,
    what: &(dyn std::fmt::Display + Sync),
    refusal: Refusal,
) {
    gate::record(ctx, req, what, refusal);
    let rev = req.revision().to_string();
    respond(client, refusal.status_line(), refusal.as_str(), &rev).await;
}
