//! A small client of the control API (docs/host.md, "Control API"), for
//! `gatehouse-egress switch`: one HTTP/1.1 request on the Unix socket,
//! `Connection: close`, the answer read to its end. Blocking, with a
//! deadline on every read and write, so a daemon that hangs is an error
//! and not a hung caller.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest answer read (the sandbox list of a large fleet).
const MAX_ANSWER: u64 = 64 * 1024 * 1024;

/// Why a control-API call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be reached: no daemon, or not ours to use.
    #[error("{}: cannot reach the control API ({source})", path.display())]
    Connect {
        /// The control socket.
        path: PathBuf,
        /// What connecting said.
        source: std::io::Error,
    },
    /// The request or its answer broke off, or took too long.
    #[error("the control API did not answer: {0}")]
    Io(#[from] std::io::Error),
    /// The answer is not HTTP with a JSON body.
    #[error("the control API's answer is malformed: {0}")]
    Malformed(String),
    /// An id or policy name the daemon could never accept.
    #[error("`{0}` is not a sandbox id or policy name (letters, digits and -_.@:+)")]
    BadName(String),
    /// The daemon refused: its status and its message (every diagnostic
    /// of a policy that does not build).
    #[error("{status}: {message}")]
    Refused {
        /// 404 no such sandbox, 409 a conflict, 422 a policy or body
        /// refused, 500 a file or `nft` failed (the policy in force stays).
        status: u16,
        /// The daemon's `error`.
        message: String,
    },
}

/// A control socket to call.
#[derive(Debug, Clone)]
pub struct Client {
    path: PathBuf,
    timeout: Duration,
}

impl Client {
    /// A client of the daemon answering on `path`; each call must be
    /// answered within `timeout` (a policy is compiled and `nft` runs
    /// before the answer: give it seconds, not milliseconds).
    pub fn new(path: &Path, timeout: Duration) -> Self {
        Client {
            path: path.to_path_buf(),
            timeout,
        }
    }

    /// `PUT /v1/sandboxes/ID/policy`: `text` in force for the sandbox's
    /// next connection when this returns, its open connections that `text`
    /// denies closing, its DNS-fed passes and kernel-passed flows that
    /// `text` denies revoked. The revision now in force.
    pub fn put_policy(
        &self,
        id: &str,
        text: &str,
        name: Option<&str>,
    ) -> Result<String, ClientError> {
        let mut target = format!("/v1/sandboxes/{}/policy", segment(id)?);
        if let Some(n) = name {
            target.push_str("?policy_name=");
            target.push_str(segment(n)?);
        }
        let answer = self.call("PUT", &target, text.as_bytes())?;
        answer
            .get("revision")
            .and_then(|r| r.as_str())
            .map(str::to_string)
            .ok_or_else(|| ClientError::Malformed("no revision in the answer".into()))
    }

    /// `GET /v1/sandboxes`: the revision in force for sandbox `id`.
    pub fn revision(&self, id: &str) -> Result<String, ClientError> {
        let answer = self.call("GET", "/v1/sandboxes", b"")?;
        let list = answer
            .get("sandboxes")
            .and_then(|l| l.as_array())
            .ok_or_else(|| ClientError::Malformed("the sandbox list is not a list".into()))?;
        list.iter()
            .find(|s| s.get("id").and_then(|i| i.as_str()) == Some(id))
            .and_then(|s| s.get("revision").and_then(|r| r.as_str()))
            .map(str::to_string)
            .ok_or_else(|| ClientError::Refused {
                status: 404,
                message: format!("no sandbox {id}"),
            })
    }

    fn call(
        &self,
        method: &str,
        target: &str,
        body: &[u8],
    ) -> Result<serde_json::Value, ClientError> {
        let mut s = UnixStream::connect(&self.path).map_err(|source| ClientError::Connect {
            path: self.path.clone(),
            source,
        })?;
        s.set_read_timeout(Some(self.timeout))?;
        s.set_write_timeout(Some(self.timeout))?;
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: gatehouse\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes())?;
        s.write_all(body)?;
        let mut raw = Vec::new();
        s.take(MAX_ANSWER).read_to_end(&mut raw)?;
        let (status, body) = split(&raw)?;
        let value: serde_json::Value = if body.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(body).map_err(|e| ClientError::Malformed(e.to_string()))?
        };
        if (200..300).contains(&status) {
            return Ok(value);
        }
        let message = value
            .get("error")
            .and_then(|m| m.as_str())
            .unwrap_or("no message")
            .to_string();
        Err(ClientError::Refused { status, message })
    }
}

/// The status and body of an HTTP/1.1 answer read to its end (the server
/// sends `Content-Length`; chunked bodies are not expected and refused).
fn split(raw: &[u8]) -> Result<(u16, &[u8]), ClientError> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| ClientError::Malformed("no end of headers".into()))?;
    let head = std::str::from_utf8(raw.get(..end).unwrap_or_default())
        .map_err(|_| ClientError::Malformed("headers are not text".into()))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| ClientError::Malformed("no status line".into()))?;
    let mut length = None;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        if k.eq_ignore_ascii_case("transfer-encoding") {
            return Err(ClientError::Malformed("a chunked answer".into()));
        }
        if k.eq_ignore_ascii_case("content-length") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let rest = raw.get(end + 4..).unwrap_or_default();
    let body = match length {
        Some(n) => rest
            .get(..n)
            .ok_or_else(|| ClientError::Malformed("the answer is cut short".into()))?,
        None => rest,
    };
    Ok((status, body))
}

/// An id or policy name as it goes into the request line: only the bytes
/// the daemon accepts in either (letters, digits, `-_.@:+`), so nothing a
/// caller passes can add a path segment, a query or a header.
fn segment(s: &str) -> Result<&str, ClientError> {
    if !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.@:+".contains(&c))
    {
        Ok(s)
    } else {
        Err(ClientError::BadName(s.to_string()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_split_by_their_length() {
        let raw = b"HTTP/1.1 422 Unprocessable Entity\r\ncontent-length: 17\r\n\r\n{\"error\":\"nope\"}\nextra";
        let (status, body) = split(raw).unwrap();
        assert_eq!(status, 422);
        assert_eq!(body, b"{\"error\":\"nope\"}\n");
        assert!(split(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n{}").is_err());
        assert!(split(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}").is_err());
        assert!(split(b"garbage").is_err());
    }

    #[test]
    fn ids_cannot_leave_their_segment() {
        assert_eq!(segment("ci-1").unwrap(), "ci-1");
        for bad in ["../x", "a?b", "a b", "a\r\nX: y", ""] {
            assert!(segment(bad).is_err(), "{bad:?}");
        }
    }
}
