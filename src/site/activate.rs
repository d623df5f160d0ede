//! Activation: `current` and `previous` are symlinks swapped by renaming a new link over the
//! old one, which is atomic on POSIX file systems: a reader sees the old or the new target,
//! never a missing link.

use std::io;
use std::path::Path;

/// Point `ROOT/current` at `target` (relative to ROOT); the old target, if different, becomes
/// `ROOT/previous`. Returns the old target.
pub fn switch(root: &Path, target: &str) -> io::Result<Option<String>> {
    let old = match std::fs::read_link(root.join("current")) {
        Ok(t) => Some(t.to_string_lossy().into_owned()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if let Some(old) = old.as_deref().filter(|o| *o != target) {
        replace_link(root, "previous", old)?;
    }
    replace_link(root, "current", target)?;
    Ok(old)
}

fn replace_link(root: &Path, name: &str, target: &str) -> io::Result<()> {
    let tmp = root.join(format!(".{name}.new"));
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::os::unix::fs::symlink(target, &tmp)?;
    std::fs::rename(&tmp, root.join(name))?;
    std::fs::File::open(root)?.sync_all()
}
