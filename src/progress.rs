//! Progress reporting. The library calls a `Reporter`; only the CLI draws bars (indicatif, on
//! a terminal). Library code never prints.

use std::io::{self, Read};

/// Receives progress from long operations. Implementations must be cheap: `advance` is called
/// for every buffer that streams past.
pub trait Reporter {
    /// A phase begins; `total_bytes` is what it will stream.
    fn start(&self, phase: &str, total_bytes: u64);
    fn advance(&self, bytes: u64);
    fn finish(&self);
    /// One item of the phase (a blob in flight) starts, finishes; `advance` still counts its
    /// bytes toward the phase. Reporters that show only totals ignore these.
    fn item_start(&self, _key: &str, _total_bytes: u64) {}
    fn item_advance(&self, _key: &str, _bytes: u64) {}
    fn item_finish(&self, _key: &str) {}
}

/// A reporter that shows nothing.
pub struct Silent;

impl Reporter for Silent {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// A reporter that counts the bytes it is told of, in all and for items (tests).
#[cfg(test)]
#[derive(Default)]
pub struct Counted {
    pub bytes: std::cell::Cell<u64>,
    pub item: std::cell::Cell<u64>,
}

#[cfg(test)]
impl Reporter for Counted {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, bytes: u64) {
        self.bytes.set(self.bytes.get() + bytes);
    }
    fn finish(&self) {}
    fn item_advance(&self, _: &str, bytes: u64) {
        self.item.set(self.item.get() + bytes);
    }
}

/// A reader that tells a `Reporter` about every read and remembers a read error, so that the
/// code copying from it can tell a failing source from a failing destination.
pub struct Tracked<'r, R> {
    inner: R,
    reporter: &'r dyn Reporter,
    failed: Option<io::Error>,
}

impl<'r, R: Read> Tracked<'r, R> {
    pub fn new(inner: R, reporter: &'r dyn Reporter) -> Self {
        Self { inner, reporter, failed: None }
    }

    /// The read error seen, if any (taken: a second call returns `None`).
    pub fn take_read_error(&mut self) -> Option<io::Error> {
        self.failed.take()
    }

    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Read for Tracked<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.reporter.advance(n as u64);
                Ok(n)
            }
            Err(e) => {
                // The copy goes up the stack; the original stays here for `take_read_error`.
                let copy = io::Error::new(e.kind(), e.to_string());
                self.failed = Some(e);
                Err(copy)
            }
        }
    }
}
