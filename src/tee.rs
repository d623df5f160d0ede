//! A reader that keeps a copy of everything read through it: a bundle is verified and written
//! (to the site's retained copy, to `pull --out`) in one pass.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};

use crate::atomic::WriteBack;

/// Which side of a [`Tee`] failed.
#[derive(Debug)]
pub enum TeeError {
    Read(io::Error),
    Write(io::Error),
}

/// Copies every byte read from `inner` into `copy`, remembering a write failure so it is not
/// mistaken for a damaged bundle. The copy's pages go to the disk as it grows
/// ([`WriteBack`]); making it durable is the caller's (a site syncs the whole staged tree at
/// once, `pull` the file before it is renamed into place).
pub struct Tee<R> {
    inner: R,
    copy: BufWriter<WriteBack>,
    failed: Option<io::Error>,
}

impl<R: Read> Tee<R> {
    pub fn new(inner: R, copy: File) -> Self {
        Self { inner, copy: BufWriter::with_capacity(1 << 20, WriteBack::new(copy)), failed: None }
    }

    /// Copy whatever the reader did not consume, then flush the copy (not synced).
    pub fn finish(mut self) -> Result<(), TeeError> {
        if let Some(e) = self.failed.take() {
            return Err(TeeError::Write(e));
        }
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match self.inner.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(TeeError::Read(e)),
            };
            self.copy.write_all(&buf[..n]).map_err(TeeError::Write)?;
        }
        self.copy.flush().map_err(TeeError::Write)
    }
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Err(e) = self.copy.write_all(&buf[..n]) {
            let copy = io::Error::new(e.kind(), e.to_string());
            self.failed = Some(e);
            return Err(copy);
        }
        Ok(n)
    }
}
