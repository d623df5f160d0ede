//! The member sink that writes into the staging directory.

use std::fs::File;
use std::io::{self, BufWriter, Read};
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
