//! An artifact's payload decoded as it is inflated: a postcard flavor that
//! reads from a DEFLATE stream through a 64 KiB window, so that a load
//! never holds the whole payload beside the set it becomes (issue 62: the
//! payload is about the set's size, and a reload's peak is to stay under
//! twice it).

use miniz_oxide::inflate::stream::{InflateState, inflate};
use miniz_oxide::{DataFormat, MZFlush, MZStatus};
use postcard::Error;
use postcard::de_flavors::Flavor;

/// What went wrong in the stream, for the load's message (postcard's own
/// errors only say that input ended).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The DEFLATE stream is corrupt, or ends before its end block.
    Corrupt,
    /// The stream gives more or fewer bytes than the header states.
    Length,
    /// A string or list longer than what is left of the payload.
    Oversized,
    /// The decoder asked to borrow bytes (no type of the set does).
    Borrow,
    /// Bytes follow the DEFLATE stream's end.
    Trailing,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fault::Corrupt => "its compressed payload does not inflate",
            Fault::Length => "its payload is not the length its header states",
            Fault::Oversized => "a string or list in its payload runs past its end",
            Fault::Borrow => "its payload asks for a borrowed value (internal error)",
            Fault::Trailing => "bytes follow its compressed payload",
        })
    }
}

/// Why a compressed payload gave no set.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Undecodable {
    /// The stream around the encoding.
    #[error("{0}")]
    Stream(Fault),
    /// The encoding itself.
    #[error("{0}")]
    Content(postcard::Error),
}

pub(crate) struct Inflating<'a> {
    state: Box<InflateState>,
    /// Compressed bytes not yet given to the inflater.
    input: &'a [u8],
    window: Box<[u8]>,
    /// `window[at..end]` is inflated and not yet read.
    at: usize,
    end: usize,
    /// Payload bytes the stream has yet to give, by the header.
    left: usize,
    /// The stream's end block was seen.
    done: bool,
    /// A string that runs over the window's end, put together.
    scratch: Vec<u8>,
    pub(crate) fault: Option<Fault>,
}

const WINDOW: usize = 64 << 10;

impl<'a> Inflating<'a> {
    pub(crate) fn new(deflated: &'a [u8], len: usize) -> Self {
        Inflating {
            state: InflateState::new_boxed(DataFormat::Raw),
            input: deflated,
            window: vec![0u8; WINDOW].into_boxed_slice(),
            at: 0,
            end: 0,
            left: len,
            done: false,
            scratch: Vec::new(),
            fault: None,
        }
    }

    fn fail(&mut self, f: Fault) -> Error {
        self.fault.get_or_insert(f);
        Error::DeserializeUnexpectedEnd
    }

    /// One call of the inflater into the window (whose bytes are all read).
    fn step(&mut self) -> Result<(), Error> {
        let r = inflate(&mut self.state, self.input, &mut self.window, MZFlush::None);
        self.input = self.input.get(r.bytes_consumed..).unwrap_or_default();
        if r.bytes_written > self.left {
            return Err(self.fail(Fault::Length));
        }
        self.left -= r.bytes_written;
        self.at = 0;
        self.end = r.bytes_written;
        match r.status {
            Ok(MZStatus::StreamEnd) => self.done = true,
            Ok(MZStatus::Ok) if r.bytes_written > 0 || r.bytes_consumed > 0 => {}
            _ => return Err(self.fail(Fault::Corrupt)),
        }
        Ok(())
    }

    /// Inflates the next bytes into the window (whose bytes are all read).
    fn refill(&mut self) -> Result<(), Error> {
        while self.end == self.at {
            if self.done {
                return Err(self.fail(Fault::Length));
            }
            self.step()?;
        }
        Ok(())
    }

    /// Bytes inflated but not read, plus those still to come.
    fn remaining(&self) -> usize {
        self.left + (self.end - self.at)
    }

    /// After the set is decoded: the stream must end exactly there, its
    /// stated length given, every compressed byte used.
    pub(crate) fn finish(mut self) -> Result<(), Fault> {
        if let Some(f) = self.fault {
            return Err(f);
        }
        if self.at != self.end || self.left != 0 {
            return Err(Fault::Length);
        }
        // The end block may still be ahead; it must give no bytes.
        while !self.done {
            if self.step().is_err() || self.end > 0 {
                return Err(self.fault.unwrap_or(Fault::Length));
            }
        }
        if !self.input.is_empty() {
            return Err(Fault::Trailing);
        }
        Ok(())
    }
}

impl<'de, 'a: 'de> Flavor<'de> for Inflating<'a> {
    type Remainder = Self;
    type Source = ();

    fn pop(&mut self) -> Result<u8, Error> {
        if self.at == self.end {
            self.refill()?;
        }
        let b = *self
            .window
            .get(self.at)
            .ok_or(Error::DeserializeUnexpectedEnd)?;
        self.at += 1;
        Ok(b)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.remaining())
    }

    fn try_take_n(&mut self, _: usize) -> Result<&'de [u8], Error> {
        Err(self.fail(Fault::Borrow))
    }

    fn try_take_n_temp<'b>(&'b mut self, ct: usize) -> Result<&'b [u8], Error>
    where
        'de: 'b,
    {
        if ct > self.remaining() {
            return Err(self.fail(Fault::Oversized));
        }
        if self.end - self.at >= ct {
            let from = self.at;
            self.at += ct;
            return self
                .window
                .get(from..self.at)
                .ok_or(Error::DeserializeUnexpectedEnd);
        }
        self.scratch.clear();
        self.scratch.reserve_exact(ct);
        while self.scratch.len() < ct {
            if self.at == self.end {
                self.refill()?;
            }
            let take = (ct - self.scratch.len()).min(self.end - self.at);
            let part = self
                .window
                .get(self.at..self.at + take)
                .ok_or(Error::DeserializeUnexpectedEnd)?;
            self.scratch.extend_from_slice(part);
            self.at += take;
        }
        Ok(&self.scratch)
    }

    fn finalize(self) -> Result<Self, Error> {
        Ok(self)
    }
}
