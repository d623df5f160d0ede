//! Output files that appear whole or not at all: written to a temporary file beside the target
//! and renamed over it when complete. The temporary file is created with the usual mode (0666
//! less the umask), as `File::create` would, not tempfile's private 0600: bundles, locks and
//! signatures are handed to other users and services.

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
}
