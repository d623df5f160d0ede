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
