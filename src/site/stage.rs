//! Staging helpers: the member sink that writes into the staging directory, and the tee that
//! keeps a copy of the bundle file.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::bundle::reader::MemberSink;
use crate::member_path::MemberPath;

/// Writes members below a staging directory that this process created and nobody else
/// writes to. Member paths are plain relative names (see `MemberPath`) and only regular
/// files and directories are ever created here, so no write can leave the directory.
pub struct StageSink {
    dir: PathBuf,
}

impl StageSink {
    pub fn new(dir: &Path) -> Self {
        Self { dir: dir.to_owned() }
    }
}

impl MemberSink for StageSink {
    fn member(&mut self, path: &MemberPath, data: &mut dyn Read) -> io::Result<()> {
        let dest = path.under(&self.dir);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut out = BufWriter::with_capacity(1 << 20, File::create_new(&dest)?);
        io::copy(data, &mut out)?;
        out.into_inner().map_err(io::IntoInnerError::into_error)?.sync_data()
    }
}

/// Which side of a [`Tee`] failed.
#[derive(Debug)]
pub enum TeeError {
    Read(io::Error),
    Write(io::Error),
}

/// Copies every byte read from `inner` into `copy`, remembering a write failure so it is not
/// mistaken for a damaged bundle.
pub struct Tee<R> {
    inner: R,
    copy: BufWriter<File>,
    failed: Option<io::Error>,
}

impl<R: Read> Tee<R> {
    pub fn new(inner: R, copy: File) -> Self {
        Self { inner, copy: BufWriter::with_capacity(1 << 20, copy), failed: None }
    }

    /// Copy whatever the reader did not consume, then flush and sync the copy.
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
        let file = self.copy.into_inner().map_err(|e| TeeError::Write(e.into_error()))?;
        file.sync_all().map_err(TeeError::Write)
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
