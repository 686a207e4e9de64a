//! Relaying an established tunnel under deadlines: a tunnel that carries no
//! byte in either direction for `idle`, or that has lived for `total`, is
//! closed, so that no client (or server) holds a connection and its
//! upstream socket forever (issue 13, item 4).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// The proxy's time limits. Every field is configurable
/// ([`crate::Config::timeouts`]); the defaults are in [`Timeouts::default`].
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Timeouts {
    /// From accepting a connection to a complete request head (HTTP), and
    /// from `200 Connection established` to the tunnel's first bytes being
    /// judged (a ClientHello or a request head), in all: dripping a byte at
    /// a time does not extend it. Default 10 s.
    pub first_bytes: Duration,
    /// An established tunnel with no byte either way for this long is
    /// closed. Default 15 min (squid's `read_timeout`).
    pub tunnel_idle: Duration,
    /// An established tunnel is closed after this long, busy or not.
    /// Default 24 h (squid's `client_lifetime`).
    pub tunnel_total: Duration,
    /// A kept-alive client connection with no request for this long is
    /// closed. Default 60 s.
    pub keepalive_idle: Duration,
}

/// The longest any timeout runs (a century is "never" here): no configured
/// value can overflow an `Instant`.
pub const CAP: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            first_bytes: Duration::from_secs(10),
            tunnel_idle: Duration::from_secs(15 * 60),
            tunnel_total: Duration::from_secs(24 * 60 * 60),
            keepalive_idle: Duration::from_secs(60),
        }
    }
}

/// A stream that records when it last moved a byte (milliseconds since
/// `start`, shared by both ends of a tunnel).
struct Watched<'a, S> {
    inner: &'a mut S,
    start: Instant,
    last: Arc<AtomicU64>,
    /// Bytes read from this end.
    read: u64,
}

impl<S> Watched<'_, S> {
    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut *self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.read += (buf.filled().len() - before) as u64;
            self.touch();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<'_, S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut *self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}

/// Copies both ways until both sides close, an error, `idle` without a
/// byte, or `total` in all; returns why it ended, and the bytes read from
/// `a` and from `b`.
pub async fn relay<A, B>(a: &mut A, b: &mut B, t: Timeouts) -> (&'static str, u64, u64)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (idle, total) = (t.tunnel_idle.min(CAP), t.tunnel_total.min(CAP));
    let start = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let mut a = Watched {
        inner: a,
        start,
        last: last.clone(),
        read: 0,
    };
    let mut b = Watched {
        inner: b,
        start,
        last: last.clone(),
        read: 0,
    };
    let deadline = start + total;
    let watchdog = async {
        loop {
            let idle_end = start + Duration::from_millis(last.load(Ordering::Relaxed)) + idle;
            let wake = idle_end.min(deadline);
            tokio::time::sleep_until(wake).await;
            let now = Instant::now();
            if now >= deadline {
                return "tunnel_total_timeout";
            }
            let idle_end = start + Duration::from_millis(last.load(Ordering::Relaxed)) + idle;
            if now >= idle_end {
                return "tunnel_idle_timeout";
            }
        }
    };
    let why = tokio::select! {
        r = tokio::io::copy_bidirectional(&mut a, &mut b) => {
            if r.is_ok() { "closed" } else { "error" }
        }
        why = watchdog => why,
    };
    (why, a.read, b.read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Any configured value works, `Duration::MAX` included (no `Instant`
    /// overflow), and a tunnel whose ends close ends as closed.
    #[tokio::test]
    async fn huge_timeouts_do_not_overflow() {
        let (mut a, mut a_far) = tokio::io::duplex(64);
        let (mut b, mut b_far) = tokio::io::duplex(64);
        let t = Timeouts {
            first_bytes: Duration::MAX,
            tunnel_idle: Duration::MAX,
            tunnel_total: Duration::MAX,
            keepalive_idle: Duration::MAX,
        };
        let ends = async {
            let _ = a_far.shutdown().await;
            let _ = b_far.shutdown().await;
            drop((a_far, b_far));
        };
        let (why, ()) = tokio::join!(relay(&mut a, &mut b, t), ends);
        assert_eq!(why.0, "closed");
    }

    #[tokio::test]
    async fn an_idle_tunnel_is_closed() {
        let (mut a, _a_far) = tokio::io::duplex(64);
        let (mut b, _b_far) = tokio::io::duplex(64);
        let t = Timeouts {
            tunnel_idle: Duration::from_millis(50),
            ..Timeouts::default()
        };
        assert_eq!(relay(&mut a, &mut b, t).await.0, "tunnel_idle_timeout");
    }
}
