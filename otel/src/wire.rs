//! The OTLP protobuf wire format, written by hand: a decision's
//! `LogRecord` and a request's `Span` are encoded once, on the deciding
//! thread, straight into the bytes the collector gets ([`crate::record`]);
//! the export only frames them (`ExportLogsServiceRequest` /
//! `ExportTraceServiceRequest` around the records) and sends. Field numbers
//! are the official definitions' (`opentelemetry-proto`); `tests` decodes
//! the bytes with `opentelemetry-proto`'s own types, and CI's receiver
//! decodes them with the official Python package.

use std::time::{SystemTime, UNIX_EPOCH};

/// Protobuf wire types.
const LEN: u32 = 2;
pub(crate) const VARINT: u32 = 0;
const I64: u32 = 1;

/// Where encoded bytes go: a `Vec` (growing), or a [`Cursor`] over a
/// buffer sized beforehand.
pub(crate) trait Out {
    fn byte(&mut self, b: u8);
    fn put(&mut self, b: &[u8]);
}

impl Out for Vec<u8> {
    fn byte(&mut self, b: u8) {
        self.push(b);
    }
    fn put(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// Writes into a slice, its position held apart from the bytes: a `Vec`
/// pushed a byte at a time stores and reloads its length around every
/// byte (the byte, written through a `u8` pointer, may alias it), which
/// was most of a record's encoding time. Past the end it writes nothing
/// and says so ([`Cursor::overflowed`]); the caller grows the buffer and
/// encodes again.
pub(crate) struct Cursor<'a> {
    buf: &'a mut [u8],
    /// The bytes written, or that would have been had they fitted.
    n: usize,
    overflowed: bool,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Cursor {
            buf,
            n: 0,
            overflowed: false,
        }
    }

    /// The bytes written; `Err` with the size the buffer needs when they
    /// did not fit.
    pub(crate) fn written(&self) -> Result<usize, usize> {
        if self.overflowed {
            Err(self.n)
        } else {
            Ok(self.n)
        }
    }
}

impl Out for Cursor<'_> {
    #[inline]
    fn byte(&mut self, b: u8) {
        match self.buf.get_mut(self.n) {
            Some(slot) => *slot = b,
            None => self.overflowed = true,
        }
        self.n += 1;
    }
    #[inline]
    fn put(&mut self, b: &[u8]) {
        match self.buf.get_mut(self.n..self.n + b.len()) {
            Some(dst) => dst.copy_from_slice(b),
            None => self.overflowed = true,
        }
        self.n += b.len();
    }
}

/// Encodes with `f` into `buf` (grown as needed, never shrunk); the
/// encoding's length. `f` must write the same bytes each time it is
/// called: a first pass that did not fit says the size, the second fits.
pub(crate) fn encode(buf: &mut Vec<u8>, mut f: impl FnMut(&mut Cursor<'_>)) -> Option<usize> {
    if buf.len() < 1024 {
        buf.resize(1024, 0);
    }
    for _ in 0..3 {
        let mut c = Cursor::new(buf);
        f(&mut c);
        match c.written() {
            Ok(n) => return Some(n),
            Err(needed) => buf.resize(needed, 0),
        }
    }
    None
}

#[inline(always)]
pub(crate) fn varint<O: Out + ?Sized>(out: &mut O, mut v: u64) {
    while v >= 0x80 {
        out.byte((v as u8) | 0x80);
        v >>= 7;
    }
    out.byte(v as u8);
}

#[inline(always)]
pub(crate) fn tag<O: Out + ?Sized>(out: &mut O, field: u32, wire: u32) {
    varint(out, u64::from((field << 3) | wire));
}

/// A length-delimited field: a string, bytes, or a message's encoding.
#[inline(always)]
pub(crate) fn bytes_field<O: Out + ?Sized>(out: &mut O, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.put(b);
}

/// The content of a length-delimited field 2 (how the queue holds each
/// record); `None` if `field` is not one.
pub(crate) fn field_2_content(field: &[u8]) -> Option<&[u8]> {
    let mut rd = Reader(field);
    if u32::from(rd.byte()?) != (2 << 3 | LEN) {
        return None;
    }
    let content = rd.bytes()?;
    rd.0.is_empty().then_some(content)
}

/// Reads what this crate wrote: varints, fixed 64-bit values, and
/// length-prefixed bytes; `None` at a cut or malformed input.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = b;
        Some(a)
    }

    pub(crate) fn byte(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }

    pub(crate) fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.take(n)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[inline(always)]
pub(crate) fn fixed64<O: Out + ?Sized>(out: &mut O, field: u32, v: u64) {
    tag(out, field, I64);
    out.put(&v.to_le_bytes());
}

pub(crate) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// A length-delimited field's size: tag (field numbers here are < 16),
/// length, content.
fn field_len(content: usize) -> usize {
    1 + varint_len(content as u64) + content
}

/// An attribute's value.
#[derive(Clone, Copy)]
pub(crate) enum Value<'a> {
    S(&'a str),
    /// A string's bytes, written as a string (they came from a `&str`).
    U(&'a [u8]),
    I(i64),
    B(bool),
    D(f64),
}

impl Value<'_> {
    /// The `AnyValue` message's size.
    #[inline(always)]
    fn any_len(&self) -> usize {
        match self {
            Value::S(s) => field_len(s.len()),
            Value::U(b) => field_len(b.len()),
            Value::B(_) => 2,
            Value::I(i) => 1 + varint_len(*i as u64),
            Value::D(_) => 9,
        }
    }

    /// The `AnyValue` message, without a tag of its own.
    #[inline(always)]
    fn write_any<O: Out + ?Sized>(&self, out: &mut O) {
        match self {
            Value::S(s) => bytes_field(out, 1, s.as_bytes()),
            Value::U(b) => bytes_field(out, 1, b),
            Value::B(b) => {
                tag(out, 2, VARINT);
                varint(out, u64::from(*b));
            }
            Value::I(i) => {
                tag(out, 3, VARINT);
                varint(out, *i as u64);
            }
            Value::D(d) => {
                tag(out, 4, I64);
                out.put(&d.to_le_bytes());
            }
        }
    }
}

/// An `AnyValue` as field `field` of the enclosing message.
#[inline(always)]
pub(crate) fn any_value<O: Out + ?Sized>(out: &mut O, field: u32, v: Value<'_>) {
    tag(out, field, LEN);
    varint(out, v.any_len() as u64);
    v.write_any(out);
}

/// A `KeyValue { key = 1, value = 2 }` as field `field` of the enclosing
/// message, its sizes counted rather than encoded twice.
#[inline(always)]
pub(crate) fn key_value<O: Out + ?Sized>(out: &mut O, field: u32, key: &[u8], v: Value<'_>) {
    let any = v.any_len();
    tag(out, field, LEN);
    varint(out, (field_len(key.len()) + field_len(any)) as u64);
    bytes_field(out, 1, key);
    tag(out, 2, LEN);
    varint(out, any as u64);
    v.write_any(out);
}

pub(crate) fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The resource's attributes, as the request carries them.
pub(crate) struct Resource(pub(crate) Vec<(String, ResourceValue)>);

/// A resource attribute's value.
pub(crate) enum ResourceValue {
    S(String),
    I(i64),
    B(bool),
    D(f64),
}

impl Resource {
    /// From the SDK's resource (strings, numbers and booleans; arrays are
    /// left out).
    pub(crate) fn from_sdk(r: &opentelemetry_sdk::Resource) -> Self {
        use opentelemetry::Value as V;
        Resource(
            r.iter()
                .filter_map(|(k, v)| {
                    let v = match v {
                        V::String(s) => ResourceValue::S(s.to_string()),
                        V::I64(i) => ResourceValue::I(*i),
                        V::Bool(b) => ResourceValue::B(*b),
                        V::F64(d) => ResourceValue::D(*d),
                        _ => return None,
                    };
                    Some((k.to_string(), v))
                })
                .collect(),
        )
    }
}

/// The part of every request that does not change: the resource and the
/// instrumentation scope, encoded once.
pub(crate) struct Frame {
    /// `Resource { attributes = 1 }`, as field 1 of `ResourceLogs` /
    /// `ResourceSpans`.
    resource: Vec<u8>,
    /// `InstrumentationScope { name, version }`, as field 1 of `ScopeLogs`
    /// / `ScopeSpans`.
    scope: Vec<u8>,
}

impl Frame {
    pub(crate) fn new(resource: &Resource) -> Self {
        let mut res = Vec::new();
        for (k, v) in &resource.0 {
            let v = match v {
                ResourceValue::S(x) => Value::S(x),
                ResourceValue::I(i) => Value::I(*i),
                ResourceValue::B(b) => Value::B(*b),
                ResourceValue::D(d) => Value::D(*d),
            };
            key_value(&mut res, 1, k.as_bytes(), v);
        }
        let mut resource = Vec::with_capacity(res.len() + 8);
        bytes_field(&mut resource, 1, &res);
        let mut sc = Vec::new();
        bytes_field(&mut sc, 1, b"gatehouse");
        bytes_field(&mut sc, 2, env!("CARGO_PKG_VERSION").as_bytes());
        let mut scope = Vec::with_capacity(sc.len() + 8);
        bytes_field(&mut scope, 1, &sc);
        Frame { resource, scope }
    }

    /// The request (`ExportLogsServiceRequest` or
    /// `ExportTraceServiceRequest`: the same shape, resource → scope →
    /// field 2) around `records`, each already a field 2 of the scope's
    /// message; into `out` (cleared first), one copy of the records. With
    /// `grpc`, behind gRPC's message prefix (not compressed, the length as
    /// four bytes, big-endian): the request body as it goes on the wire.
    pub(crate) fn request(&self, records: &[u8], out: &mut bytes::BytesMut, grpc: bool) {
        use bytes::BufMut as _;
        let scoped = self.scope.len() + records.len();
        let resourced = self.resource.len() + field_len(scoped);
        let len = field_len(resourced);
        let mut head = Vec::with_capacity(16);
        tag(&mut head, 1, LEN);
        varint(&mut head, resourced as u64);
        let mut mid = Vec::with_capacity(16);
        tag(&mut mid, 2, LEN);
        varint(&mut mid, scoped as u64);
        out.clear();
        out.reserve(len + 5);
        if grpc {
            out.put_u8(0);
            out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
        }
        out.extend_from_slice(&head);
        out.extend_from_slice(&self.resource);
        out.extend_from_slice(&mid);
        out.extend_from_slice(&self.scope);
        out.extend_from_slice(records);
    }
}

/// A trace id and a span id: random (a xorshift generator seeded once per
/// thread from the clock and the thread), never zero.
pub(crate) fn ids() -> ([u8; 16], [u8; 8]) {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let t = nanos(SystemTime::now());
            let here = &t as *const u64 as u64;
            (t ^ here.rotate_left(32)) | 1
        });
    }
    let next = || {
        STATE.with(|s| {
            let mut x = s.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.set(x);
            x
        })
    };
    let trace = (u128::from(next()) << 64 | u128::from(next())).to_le_bytes();
    (trace, next().to_le_bytes())
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::indexing_slicing)]
#[path = "wire_tests.rs"]
mod tests;
