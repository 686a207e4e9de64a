//! A buffered connection and message bodies copied by their framing.
//!
//! A body is copied exactly as far as its framing says — a length, chunks
//! up to the last one, or (responses only) the sender's close — so that
//! whatever follows it is read as the next message and decided, never
//! passed on as part of this one. Chunked bodies are checked as strictly as
//! heads and written out again in a plain form: chunk extensions and
//! trailer fields are dropped.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use gatehouse_wire::http::{Framing, head_end};

/// Why reading a message failed.
#[derive(Debug)]
pub enum ReadError {
    /// The socket failed.
    Io,
    /// The peer closed inside a message.
    Eof,
    /// A head or a chunk line above its limit.
    TooLarge,
    /// Bytes that break the framing (a bad chunk line, no CRLF after a
    /// chunk).
    Malformed,
    /// No byte for the idle timeout.
    Timeout,
}

impl From<std::io::Error> for ReadError {
    fn from(_: std::io::Error) -> Self {
        ReadError::Io
    }
}

/// A stream with the bytes read from it but not yet used.
pub struct Conn<S> {
    /// The connection itself.
    pub io: S,
    buf: Vec<u8>,
    pos: usize,
    /// Every read waits at most this long.
    pub idle: Duration,
}

impl<S> Conn<S> {
    /// A reader over `io` that gives up after `idle` without a byte.
    pub fn new(io: S, idle: Duration) -> Self {
        Conn {
            io,
            buf: Vec::new(),
            pos: 0,
            idle,
        }
    }

    /// The bytes read and not yet consumed.
    pub fn buffered(&self) -> &[u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// Drops the first `n` buffered bytes.
    pub fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.buf.len());
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
    }

    /// Takes every buffered byte.
    pub fn take_buffered(&mut self) -> Vec<u8> {
        let out = self.buffered().to_vec();
        self.buf.clear();
        self.pos = 0;
        out
    }

    /// Puts bytes back in front of the buffer (bytes read ahead elsewhere).
    pub fn unread(&mut self, bytes: &[u8]) {
        let mut b = bytes.to_vec();
        b.extend_from_slice(self.buffered());
        self.buf = b;
        self.pos = 0;
    }
}

impl<S: AsyncRead + Unpin> Conn<S> {
    /// Reads more (waiting at most `idle`); the number of new bytes, 0 at
    /// the end of the stream.
    pub async fn fill(&mut self) -> Result<usize, ReadError> {
        if self.pos > 0 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let mut chunk = [0u8; 16 * 1024];
        let n = tokio::time::timeout(self.idle, self.io.read(&mut chunk))
            .await
            .map_err(|_| ReadError::Timeout)??;
        self.buf
            .extend_from_slice(chunk.get(..n).unwrap_or_default());
        Ok(n)
    }

    /// Reads a head up to and with its blank line
    /// ([`gatehouse_wire::http::head_end`] finds its end); `Ok(None)` when
    /// the peer closed before sending a byte of it.
    pub async fn read_head(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        let mut searched: usize = 0;
        loop {
            let buf = self.buffered();
            match head_end(buf, searched) {
                Err(_) => return Err(ReadError::TooLarge),
                Ok(Some(end)) => {
                    let head = buf.get(..end).unwrap_or_default().to_vec();
                    self.consume(end);
                    return Ok(Some(head));
                }
                Ok(None) => searched = buf.len(),
            }
            if self.fill().await? == 0 {
                return if self.buffered().is_empty() {
                    Ok(None)
                } else {
                    Err(ReadError::Eof)
                };
            }
        }
    }

    /// One line ending in CRLF (without it), at most `max` bytes; a bare CR
    /// or LF, or another control character but HTAB, is malformed.
    async fn line(&mut self, max: usize) -> Result<Vec<u8>, ReadError> {
        loop {
            let buf = self.buffered();
            if let Some(i) = buf.iter().position(|&c| c == b'\n') {
                let line = buf.get(..i).unwrap_or_default();
                let Some(content) = line.strip_suffix(b"\r") else {
                    return Err(ReadError::Malformed);
                };
                if content.iter().any(|&c| c.is_ascii_control() && c != b'\t') {
                    return Err(ReadError::Malformed);
                }
                let out = content.to_vec();
                self.consume(i + 1);
                return Ok(out);
            }
            if buf.len() > max {
                return Err(ReadError::TooLarge);
            }
            if self.fill().await? == 0 {
                return Err(ReadError::Eof);
            }
        }
    }

    /// Copies exactly `n` bytes to `out`.
    async fn copy_exact<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut W,
        mut n: u64,
    ) -> Result<u64, ReadError> {
        let mut moved = 0;
        while n > 0 {
            if self.buffered().is_empty() && self.fill().await? == 0 {
                return Err(ReadError::Eof);
            }
            let have = self.buffered();
            let take = usize::try_from(n).unwrap_or(usize::MAX).min(have.len());
            out.write_all(have.get(..take).unwrap_or_default())
                .await
                .map_err(|_| ReadError::Io)?;
            self.consume(take);
            n -= take as u64;
            moved += take as u64;
        }
        Ok(moved)
    }

    /// Copies one body of `framing` to `out`; the bytes of body moved.
    pub async fn copy_body<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut W,
        framing: Framing,
    ) -> Result<u64, ReadError> {
        let moved = match framing {
            Framing::None => 0,
            Framing::Length(n) => self.copy_exact(out, n).await?,
            Framing::Chunked => self.copy_chunked(out).await?,
            Framing::Close => {
                let mut moved = 0;
                loop {
                    let have = self.take_buffered();
                    if !have.is_empty() {
                        out.write_all(&have).await.map_err(|_| ReadError::Io)?;
                        moved += have.len() as u64;
                    }
                    if self.fill().await? == 0 {
                        break moved;
                    }
                }
            }
        };
        out.flush().await.map_err(|_| ReadError::Io)?;
        Ok(moved)
    }

    /// A chunked body: `SIZE[;ext] CRLF DATA CRLF` ... `0 CRLF` trailers
    /// CRLF, written out as `SIZE CRLF DATA CRLF` ... `0 CRLF CRLF`.
    async fn copy_chunked<W: AsyncWrite + Unpin>(&mut self, out: &mut W) -> Result<u64, ReadError> {
        const MAX_LINE: usize = 4096;
        const MAX_TRAILERS: usize = 64 * 1024;
        let mut moved = 0;
        loop {
            let line = self.line(MAX_LINE).await?;
            let mut with_end = line.clone();
            with_end.extend_from_slice(b"\r\n");
            let size = match httparse::parse_chunk_size(&with_end) {
                Ok(httparse::Status::Complete((n, size))) if n == with_end.len() => size,
                _ => return Err(ReadError::Malformed),
            };
            // The size is hex digits only, before any extension.
            let digits = line.iter().take_while(|c| c.is_ascii_hexdigit()).count();
            if digits == 0 || !matches!(line.get(digits), None | Some(b';')) {
                return Err(ReadError::Malformed);
            }
            out.write_all(format!("{size:x}\r\n").as_bytes())
                .await
                .map_err(|_| ReadError::Io)?;
            if size == 0 {
                // Trailer fields, dropped; each line checked all the same.
                let mut seen = 0;
                loop {
                    let t = self.line(MAX_TRAILERS).await?;
                    if t.is_empty() {
                        break;
                    }
                    seen += t.len();
                    let name = t
                        .iter()
                        .take_while(|&&c| gatehouse_wire::http::is_tchar(c))
                        .count();
                    if seen > MAX_TRAILERS || name == 0 || t.get(name) != Some(&b':') {
                        return Err(ReadError::Malformed);
                    }
                }
                out.write_all(b"\r\n").await.map_err(|_| ReadError::Io)?;
                return Ok(moved);
            }
            moved += self.copy_exact(out, size).await?;
            if !self.line(0).await?.is_empty() {
                return Err(ReadError::Malformed);
            }
            out.write_all(b"\r\n").await.map_err(|_| ReadError::Io)?;
        }
    }
}

impl<S: AsyncWrite + Unpin> Conn<S> {
    /// Writes every byte of `bytes`, within the idle limit.
    pub async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.io.write_all(bytes).await
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    async fn chunked(input: &[u8]) -> Result<(Vec<u8>, Vec<u8>), ReadError> {
        let mut c = Conn::new(input, Duration::from_secs(1));
        let mut out = Vec::new();
        c.copy_body(&mut out, Framing::Chunked).await?;
        Ok((out, c.take_buffered()))
    }

    #[tokio::test]
    async fn chunked_bodies_stop_at_their_end() {
        let (out, rest) = chunked(b"3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nT: v\r\n\r\nGET /next")
            .await
            .expect("valid");
        assert_eq!(out, b"3\r\nabc\r\na\r\n0123456789\r\n0\r\n\r\n");
        assert_eq!(rest, b"GET /next");
        for bad in [
            &b"3\nabc\r\n0\r\n\r\n"[..], // bare LF
            b"3\r\nabcd\r\n0\r\n\r\n",   // no CRLF after the data
            b"x\r\n",
            b"+3\r\nabc\r\n0\r\n\r\n",
            b" 3\r\nabc\r\n0\r\n\r\n",
            b"3 \r\nabc\r\n0\r\n\r\n",
            b"3\r\nabc\r\n0\r\nX : y\r\n\r\n",
            b"3\r\nab",
            b"ffffffffffffffffffff\r\n",
        ] {
            assert!(chunked(bad).await.is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn lengths_stop_at_their_end() {
        let mut c = Conn::new(&b"abcdefGET"[..], Duration::from_secs(1));
        let mut out = Vec::new();
        c.copy_body(&mut out, Framing::Length(6)).await.expect("ok");
        assert_eq!(out, b"abcdef");
        assert_eq!(c.take_buffered(), b"GET");
        let mut c = Conn::new(&b"abc"[..], Duration::from_secs(1));
        assert!(matches!(
            c.copy_body(&mut Vec::new(), Framing::Length(6)).await,
            Err(ReadError::Eof)
        ));
    }

    /// A head of exactly MAX_HEAD bytes (its blank line included) is read;
    /// one byte more is too large (the limit was 80 KiB in practice,
    /// checked only after a failed search).
    #[tokio::test]
    async fn the_head_limit_holds_at_the_byte() {
        use gatehouse_wire::http::MAX_HEAD;
        let head = |len: usize| {
            let start = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Pad: ";
            let pad = len - start.len() - 4;
            format!("{start}{}\r\n\r\n", "a".repeat(pad)).into_bytes()
        };
        for (len, ok) in [(MAX_HEAD, true), (MAX_HEAD + 1, false), (70 * 1024, false)] {
            let bytes = head(len);
            assert_eq!(bytes.len(), len);
            let mut c = Conn::new(&bytes[..], Duration::from_secs(1));
            let got = c.read_head().await;
            assert_eq!(
                got.is_ok(),
                ok,
                "{len}: {:?}",
                got.as_ref().map(|h| h.as_ref().map(Vec::len))
            );
        }
        let mut c = Conn::new(&b""[..], Duration::from_secs(1));
        assert!(matches!(c.read_head().await, Ok(None)));
        let mut c = Conn::new(&b"GET / HTTP/1.1\r\n"[..], Duration::from_secs(1));
        assert!(matches!(c.read_head().await, Err(ReadError::Eof)));
    }
}
