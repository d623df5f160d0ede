//! One writer at a time: an OS file lock (`flock`) on `ROOT/.lock`. The kernel releases it
//! when the holder exits or is killed, so a lock is never stale. The file is never unlinked:
//! a process could still hold a lock on the old inode while a third one creates a new file
//! and locks that, and two writers would run at once.
//!
//! While it holds the lock, the writer notes `pid PID ACTION since TIME` in the file, so that a
//! second writer can say who it waited for; the note is cleared on release.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::SiteError;

/// `ROOT/.lock`, held: exclusively by a writer, shared by readers (`check`, a dry run), or
/// not at all by a reader who may not open it (an auditor without write access: nothing of the
/// root is changed by a reader, and a writer's renames leave every file whole).
pub struct RootLock {
    file: Option<File>,
    exclusive: bool,
}

impl RootLock {
    /// Take the lock for `action`, waiting up to `wait` for another writer to finish.
    pub fn acquire(root: &Path, action: &str, wait: Duration) -> Result<Self, SiteError> {
        let path = root.join(".lock");
        let io_err = |source| SiteError::Io { path: path.clone(), source };
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io_err)?;
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(SiteError::Busy { root: root.to_owned(), holder: holder(&path), waited: wait });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io_err(e)),
            }
        }
        let note = format!("pid {} {action} since {}\n", std::process::id(), crate::clock::Timestamp::now());
        file.set_len(0).and_then(|()| file.rewind()).and_then(|()| file.write_all(note.as_bytes())).map_err(io_err)?;
        Ok(Self { file: Some(file), exclusive: true })
    }

    /// A reader's lock: shared with other readers, waiting up to `wait` for a writer to finish.
    /// Opened read-only, never created: a reader who cannot open it (no `.lock` yet, or no
    /// permission) reads without it, and says so.
    pub fn acquire_shared(root: &Path, action: &str, wait: Duration) -> Result<Self, SiteError> {
        let path = root.join(".lock");
        let file = match OpenOptions::new().read(true).open(&path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(
                    "{action}: reading `{}` without its lock ({e}): a writer may be at work",
                    root.display()
                );
                return Ok(Self { file: None, exclusive: false });
            }
        };
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock_shared() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(SiteError::Busy { root: root.to_owned(), holder: holder(&path), waited: wait });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(SiteError::Io { path, source: e }),
            }
        }
        Ok(Self { file: Some(file), exclusive: false })
    }
}

impl Drop for RootLock {
    fn drop(&mut self) {
        // The note goes with the lock; the kernel drops the lock itself when the file closes.
        if let (Some(file), true) = (&self.file, self.exclusive) {
            let _ = file.set_len(0);
        }
    }
}

/// What the holder noted, for the message of a writer that gave up waiting.
fn holder(path: &PathBuf) -> String {
    let mut note = String::new();
    let read = File::open(path).and_then(|f| f.take(256).read_to_string(&mut note));
    match read {
        Ok(_) if !note.trim().is_empty() => crate::escape::value(note.trim()).into_owned(),
        _ => "another airlock process".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_waits_then_names_the_holder_and_the_note_goes_with_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let first = RootLock::acquire(dir.path(), "install", Duration::ZERO).unwrap();
        let started = Instant::now();
        let err = RootLock::acquire(dir.path(), "rollback", Duration::from_millis(300)).err().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(300), "it waited");
        let text = err.to_string();
        assert!(text.contains(&format!("pid {} install since", std::process::id())), "{text}");
        drop(first);
        assert_eq!(std::fs::read(dir.path().join(".lock")).unwrap(), b"", "the note is cleared");
        let _again = RootLock::acquire(dir.path(), "rollback", Duration::ZERO).unwrap();
    }
}
