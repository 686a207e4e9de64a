//! `CONNECT`: the target checked against `Host` and opened through the
//! gate, `200 Connection established`, then the shared [`crate::tunnel`].
//! This door answers the client: a refusal before the `200` with its
//! status, and inside the tunnel a `400` for what it cannot read.

use tokio::net::TcpStream;

use gatehouse::query::Via;

use crate::conn::Conn;
use crate::gate::{self, Ctx};
use crate::outcome::{Outcome, Refusal};
use crate::policy::Request;
use crate::reply::{refuse, respond};
use crate::tunnel::{Opening, first_bytes, http_tunnel, raw};
use gatehouse_wire::authority::{same_host, split_authority};
use gatehouse_wire::http::Head;

/// A `CONNECT` request, answered here: refused with its status before the
/// `200`, and after it (the tunnel's first bytes) recorded, with a `400`
/// inside the tunnel for what is not HTTP it can read.
pub(crate) async fn connect(
    ctx: &Ctx,
    req: &mut Request<'_>,
    mut client: Conn<TcpStream>,
    head: Head,
) {
    let what = crate::exchange::What("CONNECT", head.target());
    let (tunnel, host, port) = match establish(ctx, req, &head).await {
        Ok(t) => t,
        Err(r) => return refuse(ctx, req, &mut client.io, &what, r).await,
    };
    let dialled = tunnel.dialled;
    let mut up = Conn::new(tunnel.stream, ctx.timeouts.tunnel_idle);
    let rev = req.revision().to_string();
    let ok = format!("HTTP/1.1 200 Connection established\r\nX-Gatehouse-Revision: {rev}\r\n\r\n");
    if client.write_all(ok.as_bytes()).await.is_err() {
        return;
    }
    // The first bytes of the tunnel must name the same host, and must all
    // arrive within `first_bytes` of the `200` (a drip does not extend it).
    let verdict = tokio::time::timeout(
        ctx.timeouts.first_bytes,
        first_bytes(req, &mut client, None, (&host, port, Via::Https)),
    )
    .await
    .unwrap_or(Err(Refusal::FirstBytesTimeout));
    match verdict {
        Err(r) => {
            gate::record(ctx, req, &what, r);
            if r.status() == 400 {
                respond(&mut client.io, r.status_line(), r.as_str(), &rev).await;
            }
            // Dropping both streams closes the tunnel.
        }
        Ok(Opening::Raw(claimed)) => {
            req.finish(&what, Outcome::Tunnel);
            let first = client.take_buffered();
            if up.write_all(&first).await.is_err() {
                return;
            }
            ctx.metrics.tunnel_bytes_up.add(first.len() as u64);
            let allowed = gate::Allowed {
                host: &host,
                port,
                via: Via::Https,
                claimed: claimed.as_deref(),
                dialled,
            };
            // A tunnel a reload no longer allows is closed, and its refusal
            // recorded here (nothing more can be said inside raw bytes).
            if let Err(stop) = raw(ctx, &mut client.io, &mut up.io, &allowed).await {
                let by = stop.decided_by.as_ref().unwrap_or(&*req);
                gate::record(ctx, by, &what, stop.refusal);
            }
        }
        Ok(Opening::Http(first, named)) => {
            req.finish(&what, Outcome::Tunnel);
            let target = (named.as_str(), port, Via::Https);
            if let Err(stop) = http_tunnel(ctx, &mut client, up, first, target).await {
                let by = stop.decided_by.as_ref().unwrap_or(req);
                refuse(ctx, by, &mut client.io, &what, stop.refusal).await;
            }
        }
    }
}

/// The target of a `CONNECT`, checked against its `Host`, and the tunnel
/// to it through the gate.
async fn establish(
    ctx: &Ctx,
    req: &mut Request<'_>,
    head: &Head,
) -> Result<(gate::Tunnel, String, u16), Refusal> {
    let (host, port) = split_authority(head.target(), 443).ok_or(Refusal::InvalidHost)?;
    if let Some(h) = head.header("Host") {
        let agrees =
            split_authority(h, port).is_some_and(|(hh, hp)| same_host(&hh, &host) && hp == port);
        if !agrees {
            return Err(Refusal::HostMismatch);
        }
    }
    let s = gate::tunnel(ctx, req, &host, port, Via::Https).await?;
    Ok((s, host, port))
}
