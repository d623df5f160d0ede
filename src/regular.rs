//! Opening a file airlock did not write: without blocking (a FIFO planted where a signature,
//! a manifest or a layer is expected would otherwise hang the read until someone writes to it),
//! and checking what was opened, not what the name pointed at a moment before.

use std::io;
use std::path::Path;

/// `path` opened for reading: `None` when it is not a regular file (a FIFO, a device, a
/// directory).
pub fn open(path: &Path) -> io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits().cast_signed())
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    // Regular files ignore O_NONBLOCK; clear it anyway so reads behave as plain reads.
    rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::empty())?;
    Ok(Some(file))
}

/// Why [`read`] read nothing.
#[derive(Debug)]
pub enum Refused {
    /// Not a regular file (a FIFO, a device, a directory): refused, not read.
    NotRegular,
    /// Larger than the limit (checked on what was opened, and read no further than it).
    TooLarge,
    Io(io::Error),
}

/// A small file's bytes, at most `limit`, from a regular file only ([`open`]); `None` when it
/// does not exist. The one bounded read every trust, state and signature file and an OCI
/// layout's small documents go through; each caller names the refusal in its own error.
pub fn read(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, Refused> {
    use std::io::Read as _;
    let file = match open(path) {
        Ok(Some(f)) => f,
        Ok(None) => return Err(Refused::NotRegular),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Refused::Io(e)),
    };
    if file.metadata().map_err(Refused::Io)?.len() > limit {
        return Err(Refused::TooLarge);
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(Refused::Io)?;
    if bytes.len() as u64 > limit {
        return Err(Refused::TooLarge);
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fifo_is_refused_without_waiting() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("f");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(super::open(&fifo).unwrap().is_none());
        std::fs::write(t.path().join("r"), b"x").unwrap();
        assert!(super::open(&t.path().join("r")).unwrap().is_some());
    }
}
