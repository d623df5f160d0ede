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
/// unless persisted. It holds an advisory lock (`flock`) while it lives: a `.NAME.*.partial`
/// that nobody holds was left by a run that was interrupted (Ctrl-C, `kill`, power loss) and
/// is removed here, so a build stopped half-way does not leave gigabytes behind a dot.
pub fn temp_beside(path: &Path) -> io::Result<NamedTempFile> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    remove_abandoned(dir, &name);
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    rustix::fs::flock(tmp.as_file(), rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
    crate::interrupt::remove_on_interrupt(tmp.path());
    Ok(tmp)
}

/// `.NAME.*.partial` files in `dir` that no live writer holds locked: removed (best effort).
fn remove_abandoned(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let prefix = format!(".{name}.");
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(n) = file_name.to_str() else { continue };
        let partial = n.starts_with(&prefix) && n.ends_with(".partial");
        if !(partial && entry.file_type().is_ok_and(|t| t.is_file())) {
            continue;
        }
        let Ok(file) = std::fs::File::open(entry.path()) else { continue };
        if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok() {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!("removed `{}`, left by an interrupted run", entry.path().display()),
                Err(e) => tracing::debug!("`{}` left by an interrupted run stays: {e}", entry.path().display()),
            }
        }
    }
}

/// Write `bytes` to `path` atomically.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = temp_beside(path)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Put the complete file `tmp` at `path` in one step, replacing what is there. A regular file
/// there is exchanged with `tmp` (`renameat2` with `RENAME_EXCHANGE`) and then deleted under
/// the temporary name; anything else, or a file system that cannot exchange, gets a rename.
/// Why not always a rename: ext4 (unless mounted `noauto_da_alloc`) starts the write-back of
/// every page of a file renamed over another inside the `rename` call, so a build over its
/// last bundle waited for the disk there (a 611 MB bundle: 0.21 – 0.52 s in `rename`, more on
/// a busy disk); an exchange does not (0.06 ms). Not synced: callers that need the file
/// durable sync it first, and `sync_dir` after.
pub fn replace(tmp: NamedTempFile, path: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    let regular = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
    if regular && renameat_with(CWD, tmp.path(), CWD, path, RenameFlags::EXCHANGE).is_ok() {
        // `tmp`'s name now holds what `path` held.
        if let Err(e) = tmp.close() {
            tracing::warn!("`{}` is replaced, but its old content could not be deleted: {e}", path.display());
        }
        return Ok(());
    }
    tmp.persist(path).map(drop).map_err(|e| e.error)
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
    fn replace_puts_the_file_there_whatever_was_there_and_leaves_nothing_beside_it() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let names = || {
            let mut n: Vec<String> =
                std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            n.sort();
            n
        };
        let put = |path: &std::path::Path, bytes: &[u8]| {
            let mut tmp = super::temp_beside(path).unwrap();
            tmp.write_all(bytes).unwrap();
            super::replace(tmp, path)
        };
        let out = dir.path().join("b.airlock");
        // Nothing there, then a file there (exchanged, the old one deleted).
        put(&out, b"first").unwrap();
        let first = std::fs::metadata(&out).unwrap();
        put(&out, b"second").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"second");
        assert_ne!(std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&out).unwrap()), {
            std::os::unix::fs::MetadataExt::ino(&first)
        });
        assert_eq!(names(), ["b.airlock"]);
        // A link aside keeps the old content: it is replaced at this name, not written into.
        std::fs::hard_link(&out, dir.path().join("aside")).unwrap();
        put(&out, b"third").unwrap();
        assert_eq!(std::fs::read(dir.path().join("aside")).unwrap(), b"second");
        std::fs::remove_file(dir.path().join("aside")).unwrap();
        // A symbolic link is replaced itself, as a rename does; its target is left alone.
        let target = dir.path().join("target");
        std::fs::write(&target, b"kept").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        put(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_file());
        assert_eq!(
            (std::fs::read(&link).unwrap(), std::fs::read(&target).unwrap()),
            (b"new".to_vec(), b"kept".to_vec())
        );
        // A directory is refused, untouched, and the temporary file goes.
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("inside"), b"x").unwrap();
        assert!(put(&sub, b"no").is_err());
        assert_eq!(std::fs::read(sub.join("inside")).unwrap(), b"x");
        assert_eq!(names(), ["b.airlock", "link", "sub", "target"]);
    }

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
