//! Output files that appear whole or not at all: written to a temporary file beside the target
//! and renamed over it when complete. The temporary file is created with the usual mode (0666
//! less the umask), as `File::create` would, not tempfile's private 0600: bundles, locks and
//! signatures are handed to other users and services. Also the durability helpers around
//! them: `sync_dir` after a rename, and `WriteBack`, a file whose pages go to the disk while it
//! grows (the site's staged files and its copy of the bundle), synced later by the caller.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tempfile::NamedTempFile;

/// A temporary file in `path`'s directory, named `.NAME.XXXXXX.partial`; deleted when dropped
/// unless persisted.
pub fn temp_beside(path: &Path) -> io::Result<NamedTempFile> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
}

/// Write `bytes` to `path` atomically.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = temp_beside(path)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Make the renames and creations inside `dir` durable: until its directory entry is synced,
/// a renamed file can vanish or come back under its old name after a power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// `write`, then the directory synced: the new file survives a power loss once this returns.
pub fn write_durable(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write(path, bytes)?;
    sync_dir(path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
}

/// Bytes a [`WriteBack`] file grows by between two hand-overs to the kernel's write-back.
const WRITE_BACK_EVERY: u64 = 16 << 20;

/// A file written front to back whose pages go to the disk while it grows, so that the sync
/// that makes it durable (an `fsync`, or the `syncfs` of a staged tree) waits for its last
/// few MiB rather than for all of it, and the disk works while the writer still computes.
/// Nothing is made durable here. An install of 1510 MiB that wrote its tree and its copy of
/// the bundle, then synced, waited about 1 s in `fsync` and `syncfs` (`strace -T`).
pub struct WriteBack {
    file: std::fs::File,
    written: u64,
    handed: u64,
}

impl WriteBack {
    pub fn new(file: std::fs::File) -> Self {
        Self { file, written: 0, handed: 0 }
    }
}

impl Write for WriteBack {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.handed >= WRITE_BACK_EVERY {
            // Written by hand: rustix has no `sync_file_range`. On Linux `POSIX_FADV_DONTNEED`
            // starts write-back of the range's dirty pages without waiting for it
            // (`WB_SYNC_NONE`) and drops only pages already clean. It is advice: a failure
            // changes nothing but when the bytes reach the disk.
            let len = std::num::NonZeroU64::new(self.written - self.handed);
            let _ = rustix::fs::fadvise(&self.file, self.handed, len, rustix::fs::Advice::DontNeed);
            self.handed = self.written;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn files_get_the_mode_file_create_gives_and_no_partial_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).unwrap();
        let out = dir.path().join("x.sig");
        super::write(&out, b"abc").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"abc");
        assert_eq!(mode(&out), mode(&plain));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    /// Handing ranges to write-back (here several, at uneven offsets) changes no byte.
    #[test]
    fn a_file_handed_to_write_back_as_it_grows_holds_what_was_written() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let mut out =
            std::io::BufWriter::with_capacity(1 << 20, super::WriteBack::new(std::fs::File::create(&path).unwrap()));
        let mut expected = Vec::new();
        for i in 0..500u32 {
            let chunk: Vec<u8> = (0..(i * 997 % 250_000)).map(|j| (i ^ j).to_le_bytes()[0]).collect();
            out.write_all(&chunk).unwrap();
            expected.extend_from_slice(&chunk);
        }
        out.flush().unwrap();
        drop(out);
        assert!(expected.len() as u64 > 3 * super::WRITE_BACK_EVERY);
        assert!(std::fs::read(&path).unwrap() == expected);
    }
}
