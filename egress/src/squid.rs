//! `gatehouse-egress squid-helper --policy FILE`: a squid external ACL
//! helper (docs/integrations/squid.md).
//!
//! squid starts it from `external_acl_type` and writes one request a line,
//! the fields its format names, URL-encoded and separated by spaces, then
//! the ACL's arguments (`-` when none); with `concurrency=N` each line
//! starts with a channel id, echoed in the answer:
//!
//! ```text
//! external_acl_type gatehouse ttl=0 negative_ttl=0 concurrency=16 %DST %PORT %METHOD \
//!     /usr/local/bin/gatehouse-egress squid-helper --policy /etc/gatehouse/agent.policy
//! ```
//!
//! ```text
//! 0 api.github.com 443 CONNECT -  →  0 OK
//! 1 evil.example 80 GET -         →  1 ERR message="not_allowed"
//! ```
//!
//! Each line is decided as `connect HOST:PORT via https` for `CONNECT`
//! (or no method field) and `via http` otherwise. A line that cannot be
//! read (too few or too many fields, bad encoding, a port that is not a
//! number) is an `ERR` too: the helper never allows what it did not
//! understand, and keeps serving. The policy is reloaded when its file
//! changes or on SIGHUP; `ttl=0 negative_ttl=0` keep squid from caching
//! an old answer past a reload.

use std::io::{BufRead, Write};

use gatehouse::query::Via;

use crate::outcome::Outcome;
use crate::policy::Policies;

/// The longest line read; squid's own limit is far below it.
const MAX_LINE: usize = 64 * 1024;

/// `%XX` decoding of one field; `None` for a bad escape or a result that is
/// not UTF-8.
fn decode(field: &str) -> Option<String> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let s = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(s, 16).ok()?);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The answer to one line, without its line break.
pub fn answer(policies: &Policies, line: &str) -> String {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    // With concurrency, a channel id comes first: a leading number with
    // two fields or more after it (a host is never all digits: the engine
    // refuses such a name).
    let (channel, rest) = match fields.as_slice() {
        [id, _, _, ..] if is_number(id) => (Some(*id), fields.get(1..)),
        _ => (None, Some(fields.as_slice())),
    };
    let prefix = channel.map(|c| format!("{c} ")).unwrap_or_default();
    let err = |why: &str| format!("{prefix}ERR message=\"{why}\"");
    // squid appends the ACL's own arguments (`%DATA`, `-` when there are
    // none) after the format's fields: they decide nothing here.
    let (host, port, method) = match rest.unwrap_or_default() {
        [h, p] => (*h, *p, None),
        [h, p, m, ..] => (*h, *p, Some(*m).filter(|m| *m != "-")),
        _ => return err("bad_request"),
    };
    let (Some(host), Some(port)) = (
        decode(host),
        decode(port).and_then(|p| p.parse::<u16>().ok()),
    ) else {
        return err("bad_request");
    };
    let method = method.and_then(decode);
    let via = match method.as_deref() {
        None | Some("CONNECT") => Via::Https,
        Some(_) => Via::Http,
    };
    let mut req = policies.request();
    // squid writes a missing value as `-`.
    if host == "-" {
        return err("bad_request");
    }
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(&host);
    let admitted = crate::gate::admit(&mut req, host, port, via);
    let what = format!(
        "squid {} {host}:{port}",
        method.as_deref().unwrap_or("CONNECT")
    );
    match admitted {
        Ok(()) => {
            req.finish(&what, Outcome::Allowed);
            format!("{prefix}OK")
        }
        Err(refusal) => {
            let reason = refusal.as_str();
            req.finish(&what, Outcome::Deny(refusal));
            err(reason)
        }
    }
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Answers every line of `input` until it ends.
pub fn serve(
    policies: &Policies,
    input: &mut impl BufRead,
    output: &mut impl Write,
) -> std::io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let n =
            std::io::Read::take(&mut *input, MAX_LINE as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&line);
        let answer = if line.len() > MAX_LINE {
            // The rest of an over-long line is dropped as it is read, never
            // buffered; the answer keeps the line's channel id, so that
            // with concurrency it reaches the request it answers.
            if !line.ends_with(b"\n") {
                skip_line(input)?;
            }
            let id = text
                .split_once(' ')
                .map(|(id, _)| id)
                .filter(|id| is_number(id));
            match id {
                Some(id) => format!("{id} ERR message=\"bad_request\""),
                None => String::from("ERR message=\"bad_request\""),
            }
        } else {
            answer(policies, text.trim_end_matches(['\n', '\r']))
        };
        output.write_all(answer.as_bytes())?;
        output.write_all(b"\n")?;
        // squid waits for each answer.
        output.flush()?;
    }
}

/// Reads and drops the input up to and with the next line break, a
/// buffer at a time: memory stays bounded whatever the line's length.
fn skip_line(input: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    }
}

/// `gatehouse-egress squid-helper ...`: the process's exit code.
pub fn run(source: &crate::adapter::Source) -> i32 {
    let policies = match crate::adapter::boot(source, "squid-helper") {
        Ok(p) => p,
        Err(code) => return code,
    };
    let mut input = std::io::stdin().lock();
    let mut output = std::io::BufWriter::new(std::io::stdout().lock());
    match serve(&policies, &mut input, &mut output).and_then(|()| output.flush()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gatehouse-egress squid-helper: {e}");
            1
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn policies() -> Policies {
        crate::testing::policies(
            "squid",
            "policy p {\n  network {\n    allow domain **.github.com port 443\n    allow domain plain.example port 80\n    deny domain gist.github.com\n  }\n}\n",
        )
        .unwrap()
    }

    #[test]
    fn lines() {
        let p = policies();
        let input = "0 api.github.com 443 CONNECT\n\
                     1 gist.github.com 443 CONNECT\n\
                     12 plain.example 80 GET\n\
                     3 plain.example 443 CONNECT\n\
                     api.github.com 443\n\
                     4 API.GitHub.COM. 443\n\
                     5 api%2Egithub.com 443 CONNECT\n\
                     6 github.com%00.evil 443 CONNECT\n\
                     7 - 443 CONNECT\n\
                     8 api.github.com https CONNECT\n\
                     9 api.github.com 443 CONNECT extra\n\
                     10 api.github.com%zz 443\n\
                     11 2130706433 443\n\
                     13 api.github.com 443 - -\n\
                     \n";
        let mut out = Vec::new();
        serve(&p, &mut input.as_bytes(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let want = [
            "0 OK",
            "1 ERR message=\"denied_by_rule\"",
            "12 OK",
            "3 ERR message=\"not_allowed\"",
            "OK",
            "4 OK",
            "5 OK",
            "6 ERR message=\"invalid_host\"",
            "7 ERR message=\"bad_request\"",
            "8 ERR message=\"bad_request\"",
            "9 OK",
            "10 ERR message=\"bad_request\"",
            "11 ERR message=\"ambiguous_ip_literal\"",
            "13 OK",
            "ERR message=\"bad_request\"",
        ];
        assert_eq!(out.lines().collect::<Vec<_>>(), want);
    }

    /// An over-long line is answered with its own channel id (issue 35,
    /// finding 11), and the next line is answered as usual.
    #[test]
    fn an_over_long_line_keeps_its_channel_id() {
        let p = policies();
        let long = format!(
            "7 {} 443 CONNECT\n8 api.github.com 443 CONNECT\n",
            "a".repeat(MAX_LINE + 10)
        );
        let mut out = Vec::new();
        serve(&p, &mut long.as_bytes(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            ["7 ERR message=\"bad_request\"", "8 OK"]
        );
    }
}
