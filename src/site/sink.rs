//! Where a verified bundle's members are written while it is staged: `stage` for a whole
//! bundle, `base` for the members a delta takes from its retained base.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::atomic::WriteBack;
use crate::bundle::reader::MemberSink;
use crate::member_path::MemberPath;
use crate::overlap::fill;

/// Writes members below a staging directory that this process created and nobody else
/// writes to. Member paths are plain relative names (see `MemberPath`) and only regular
/// files and directories are ever created here, so no write can leave the directory.
pub struct StageSink {
    dir: PathBuf,
    /// One write buffer for every member, made at the first. A buffer a file was a block of
    /// 1 MiB allocated and freed 200,000 times for 200,000 files, and with glibc's mmap
    /// threshold fixed each was a mapping of its own (docs/performance.md).
    buf: Vec<u8>,
    /// The directory the last member went into, made (or found) then. Members come sorted,
    /// so a directory's files follow one another: `create_dir_all` for each was a `mkdir`
    /// that failed and a `stat`, two of the five calls a small file cost.
    made: Option<PathBuf>,
}

/// Members are written to disk in pieces of up to this many bytes.
const WRITE_BYTES: usize = 1 << 20;

impl StageSink {
    pub fn new(dir: &Path) -> Self {
        Self { dir: dir.to_owned(), buf: Vec::new(), made: None }
    }
}

impl MemberSink for StageSink {
    fn member(&mut self, path: &MemberPath, mut data: &mut dyn Read) -> io::Result<()> {
        let dest = path.under(&self.dir);
        if let Some(parent) = dest.parent().filter(|p| self.made.as_deref() != Some(*p)) {
            std::fs::create_dir_all(parent)?;
            self.made = Some(parent.to_owned());
        }
        let mut out = WriteBack::new(File::create_new(&dest)?);
        self.buf.resize(WRITE_BYTES, 0);
        loop {
            let n = fill(&mut data, &mut self.buf)?;
            if n == 0 {
                break;
            }
            out.write_all(&self.buf[..n])?;
        }
        // Durable later, once for the whole tree (`sync_tree`): one sync per file made a
        // 25 000-file install spend its time in 25 000 `fdatasync` calls. A large member's
        // pages are on their way to the disk already (`WriteBack`).
        Ok(())
    }

    /// On the site's own file system, not in a `/tmp` that may be memory.
    fn spool(&mut self) -> io::Result<File> {
        tempfile::tempfile_in(&self.dir)
    }
}
