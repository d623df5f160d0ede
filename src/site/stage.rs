//! Staging helpers: the member sink that writes into the staging directory, the tee that keeps
//! a copy of the bundle file, and the record of what an install created so a failure can
//! remove exactly that.

use std::fs::{File, OpenOptions};
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
    pub fn finish(mut self) -> io::Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        io::copy(&mut self.inner, &mut self.copy)?;
        self.copy.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all()
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

/// Paths an install created, newest last, so that a failed install can remove exactly them.
#[derive(Default)]
pub struct Created(Vec<PathBuf>);

impl Created {
    pub fn create_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        let missing: Vec<&Path> = dir.ancestors().take_while(|p| !p.as_os_str().is_empty() && !p.exists()).collect();
        for p in missing.into_iter().rev() {
            std::fs::create_dir(p)?;
            self.0.push(p.to_owned());
        }
        Ok(())
    }

    pub fn open_or_create(&mut self, path: &Path) -> io::Result<File> {
        match OpenOptions::new().read(true).write(true).create_new(true).open(path) {
            Ok(f) => {
                self.0.push(path.to_owned());
                Ok(f)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => OpenOptions::new().read(true).write(true).open(path),
            Err(e) => Err(e),
        }
    }

    /// The install succeeded: keep everything.
    pub fn forget(&mut self) {
        self.0.clear();
    }

    /// Remove what was created, newest first. Directories are removed only if empty, so
    /// nothing that someone else put there meanwhile is lost.
    pub fn undo(&mut self) {
        for p in self.0.drain(..).rev() {
            let removed = if p.is_dir() { std::fs::remove_dir(&p) } else { std::fs::remove_file(&p) };
            if let Err(e) = removed {
                tracing::warn!("could not remove `{}` after a failed install: {e}", p.display());
            }
        }
    }
}
