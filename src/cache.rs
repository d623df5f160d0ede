//! The content-addressed blob store on the build host, keyed by sha256.
//!
//! ```text
//! CACHE/blobs/sha256/HEX      verified content, immutable
//! CACHE/tmp/HEX.partial       an unfinished download (resumable), never read as content
//! ```
//!
//! A blob becomes visible under `blobs/` only after its bytes hashed to the expected digest
//! (temp + rename); a mismatch deletes the partial file, so nothing unverified stays.
//!
//! A blob's bytes are synced before its rename; the renames into `blobs/sha256` are made
//! durable together, by one sync of that directory (`Cache::sync`) before a command writes
//! what depends on them, rather than one sync per blob: an image with 5,000 attached SBOMs
//! stores 5,000 small blobs, and a sync each cost about 0.2 ms here.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::{Mutex, PoisonError};

use sha2::Digest as _;

use crate::digest::{HashingWriter, Sha256};
use crate::failure::{Class, Classify};

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache I/O failed at `{}`: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{what}: expected sha256 {expected}, got {actual}")]
    DigestMismatch { what: String, expected: Sha256, actual: Sha256 },
    #[error("{what}: expected {expected} bytes, got {actual}")]
    SizeMismatch { what: String, expected: u64, actual: u64 },
    #[error(transparent)]
    Overrun(#[from] Overrun),
}

/// A source that sent more than the size it declared (a descriptor's, a lock's): a
/// verification failure, like a wrong digest. The bytes past the size are never kept. Here,
/// below both the cache and `fetch`, so that a partial file and a stream refuse the same way.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what}: the source sent more than the declared {limit} bytes; stopped there")]
pub struct Overrun {
    pub what: String,
    pub limit: u64,
}

impl Classify for Overrun {
    fn class(&self) -> Class {
        // More bytes than were declared: the source is not what was pinned.
        Class::Verification
    }
}

impl Classify for CacheError {
    fn class(&self) -> Class {
        match self {
            CacheError::Io { .. } => Class::Runtime,
            CacheError::DigestMismatch { .. } | CacheError::SizeMismatch { .. } | CacheError::Overrun(_) => {
                Class::Verification
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
    renamed: Arc<Renamed>,
}

/// Whether `blobs/sha256` holds renames its directory has not been synced since. Shared by
/// every handle on one cache; when the last goes, renames still pending are synced then (an
/// error path that stored blobs before failing), with a warning if that fails.
#[derive(Debug)]
struct Renamed {
    dir: PathBuf,
    /// Held while the directory is synced: a second caller returns once the sync it waited
    /// for is done, not while it is still running.
    pending: Mutex<bool>,
}

impl Renamed {
    /// Rename a verified, synced blob into place; its directory is synced by `sync`.
    fn place(&self, from: &Path, dest: &Path) -> io::Result<()> {
        std::fs::rename(from, dest)?;
        *self.pending.lock().unwrap_or_else(PoisonError::into_inner) = true;
        Ok(())
    }

    fn sync(&self) -> Result<(), CacheError> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if *pending {
            crate::atomic::sync_dir(&self.dir).map_err(|source| CacheError::Io { path: self.dir.clone(), source })?;
            *pending = false;
        }
        Ok(())
    }

    #[cfg(test)]
    fn is_pending(&self) -> bool {
        *self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Renamed {
    fn drop(&mut self) {
        if let Err(err) = self.sync() {
            tracing::warn!("{err}: blobs stored by this command may be lost on a power loss");
        }
    }
}

impl Cache {
    /// Open (creating) a cache at `root`.
    pub fn open(root: &Path) -> Result<Self, CacheError> {
        for dir in [root.join("blobs/sha256"), root.join("tmp")] {
            std::fs::create_dir_all(&dir).map_err(|source| CacheError::Io { path: dir.clone(), source })?;
        }
        let renamed = Renamed { dir: root.join("blobs/sha256"), pending: Mutex::new(false) };
        Ok(Self { root: root.to_owned(), renamed: Arc::new(renamed) })
    }

    /// Make every blob stored through this cache since the last call durable: one sync of
    /// `blobs/sha256` for all their renames. Called before a lock or a bundle that names them
    /// is written; nothing to do when nothing was stored.
    pub fn sync(&self) -> Result<(), CacheError> {
        self.renamed.sync()
    }

    /// `$AIRLOCK_CACHE`, else `$XDG_CACHE_HOME/airlock`, else `~/.cache/airlock`.
    pub fn default_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("AIRLOCK_CACHE") {
            return dir.into();
        }
        if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
            return Path::new(&dir).join("airlock");
        }
        std::env::var_os("HOME")
            .map_or_else(|| PathBuf::from(".airlock-cache"), |h| Path::new(&h).join(".cache/airlock"))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, digest: &Sha256) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.to_string())
    }

    /// Whether a verified blob is present (with the expected size, when known).
    pub fn contains(&self, digest: &Sha256, size: Option<u64>) -> bool {
        std::fs::metadata(self.path(digest)).is_ok_and(|m| m.is_file() && size.is_none_or(|s| m.len() == s))
    }

    /// A small document kept here (a manifest), read whole if it is no larger than `limit` and
    /// its bytes still have its digest; none otherwise (the caller fetches it again).
    pub fn get_small(&self, digest: &Sha256, limit: u64) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        File::open(self.path(digest)).ok()?.take(limit + 1).read_to_end(&mut bytes).ok()?;
        (bytes.len() as u64 <= limit && Sha256::of_bytes(&bytes) == *digest).then_some(bytes)
    }

    /// Start (or resume) receiving a blob. Bytes already in its partial file are re-hashed,
    /// so a resumed download is verified as a whole. With a declared `size`, the first byte
    /// past it is refused: a source that never stops sending fills nothing.
    pub fn incoming(&self, digest: Sha256, size: Option<u64>, what: &str) -> Result<Incoming, CacheError> {
        let partial = self.root.join("tmp").join(format!("{digest}.partial"));
        let io_err = |source| CacheError::Io { path: partial.clone(), source };
        let file = OpenOptions::new().read(true).append(true).create(true).open(&partial).map_err(io_err)?;
        let mut incoming = self.receive(file, partial.clone(), digest, size, what);
        incoming.written = io::copy(&mut BufReader::new(&mut incoming.file), &mut incoming.hasher).map_err(io_err)?;
        if size.is_some_and(|s| incoming.written > s) {
            return Err(Overrun { what: what.to_owned(), limit: size.unwrap_or_default() }.into());
        }
        Ok(incoming)
    }

    /// A new file under `tmp/` that no other writer shares, kept until its caller renames or
    /// removes it.
    fn private_file(&self, prefix: &str) -> Result<(File, PathBuf), CacheError> {
        let tmp = self.root.join("tmp");
        tempfile::Builder::new()
            .prefix(prefix)
            .suffix(".put")
            .tempfile_in(&tmp)
            .and_then(|t| t.keep().map_err(|e| e.error))
            .map_err(|source| CacheError::Io { path: tmp, source })
    }

    /// Write a blob made here, whose digest is known only once it is written (the SBOM):
    /// into a private file, hashed as it goes; `Created::commit` puts it in place.
    pub fn create(&self) -> Result<Created, CacheError> {
        let (file, partial) = self.private_file("new.")?;
        let out = HashingWriter::new(io::BufWriter::with_capacity(1 << 20, file));
        Ok(Created { out: Some(out), partial, root: self.clone() })
    }

    /// Receive the blob `digest` into `file` (at `partial`), nothing written yet.
    fn receive(&self, file: File, partial: PathBuf, digest: Sha256, size: Option<u64>, what: &str) -> Incoming {
        Incoming {
            file,
            hasher: sha2::Sha256::new(),
            written: 0,
            limit: size,
            expected: digest,
            partial,
            dest: self.path(&digest),
            what: what.to_owned(),
            keep: false,
            renamed: Arc::clone(&self.renamed),
        }
    }

    /// Copy a whole reader into the cache, verified.
    pub fn put(
        &self,
        digest: Sha256,
        size: Option<u64>,
        what: &str,
        mut reader: impl Read,
    ) -> Result<PathBuf, CacheError> {
        if self.contains(&digest, size) {
            return Ok(self.path(&digest));
        }
        // A file of its own, not the shared `DIGEST.partial` a resumable download uses: two
        // builds sharing a cache put the same SBOM at once, and their writes interleaved in
        // one file. Each writes its own and renames it into place; the bytes are the same.
        let (file, partial) = self.private_file(&format!("{digest}."))?;
        let mut incoming = self.receive(file, partial, digest, size, what);
        // Sized to the blob: a registry's small documents come by the thousand.
        let cap = size.map_or(1 << 20, |s| usize::try_from(s).unwrap_or(usize::MAX).clamp(1, 1 << 20));
        let mut buf = vec![0u8; cap];
        loop {
            let n =
                reader.read(&mut buf).map_err(|source| CacheError::Io { path: incoming.partial.clone(), source })?;
            if n == 0 {
                break;
            }
            incoming.write(&buf[..n])?;
        }
        incoming.commit(size)
    }
}

/// A blob being made in `tmp/` (`Cache::create`). Dropped before `commit`, its file is removed.
pub struct Created {
    out: Option<HashingWriter<io::BufWriter<File>>>,
    partial: PathBuf,
    root: Cache,
}

impl Created {
    /// Make it durable and put it under its digest; its digest, size and path.
    pub fn commit(mut self) -> Result<(Sha256, u64, PathBuf), CacheError> {
        let io_err = |source| CacheError::Io { path: self.partial.clone(), source };
        let (digest, size, out) = self.out.take().expect("committed once").finish();
        let file = out.into_inner().map_err(|e| io_err(e.into_error()))?;
        file.sync_all().map_err(io_err)?;
        let dest = self.root.path(&digest);
        self.root
            .renamed
            .place(&self.partial, &dest)
            .map_err(|source| CacheError::Io { path: dest.clone(), source })?;
        Ok((digest, size, dest))
    }
}

impl Write for Created {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.as_mut().map_or(Ok(0), |o| o.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.as_mut().map_or(Ok(()), Write::flush)
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        // After `commit` the file has been renamed away and this finds nothing.
        let _ = std::fs::remove_file(&self.partial);
    }
}

/// A blob being received into `tmp/`, hashed as it is written. Dropping it (a failure, or a
/// cancelled download) removes the partial file unless `keep_for_resume` was called.
pub struct Incoming {
    file: File,
    hasher: sha2::Sha256,
    written: u64,
    /// The declared size, if any: nothing past it is written.
    limit: Option<u64>,
    expected: Sha256,
    partial: PathBuf,
    dest: PathBuf,
    what: String,
    keep: bool,
    renamed: Arc<Renamed>,
}

impl Incoming {
    /// Bytes already received: the offset to resume from.
    pub fn offset(&self) -> u64 {
        self.written
    }

    /// Drop what was received and start from byte 0 (the server ignored a Range request).
    pub fn restart(&mut self) -> Result<(), CacheError> {
        self.file.set_len(0).map_err(|source| CacheError::Io { path: self.partial.clone(), source })?;
        self.hasher = sha2::Sha256::new();
        self.written = 0;
        Ok(())
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<(), CacheError> {
        if let Some(limit) = self.limit
            && self.written + bytes.len() as u64 > limit
        {
            return Err(Overrun { what: self.what.clone(), limit }.into());
        }
        self.file.write_all(bytes).map_err(|source| CacheError::Io { path: self.partial.clone(), source })?;
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Verify and make the blob visible; on a mismatch the partial file is deleted.
    pub fn commit(self, size: Option<u64>) -> Result<PathBuf, CacheError> {
        let actual = Sha256::from_raw(self.hasher.clone().finalize().into());
        let mismatch = if size.is_some_and(|s| s != self.written) {
            Some(CacheError::SizeMismatch {
                what: self.what.clone(),
                expected: size.unwrap_or_default(),
                actual: self.written,
            })
        } else if actual != self.expected {
            Some(CacheError::DigestMismatch { what: self.what.clone(), expected: self.expected, actual })
        } else {
            None
        };
        if let Some(err) = mismatch {
            return Err(err); // dropping `self` removes the partial file
        }
        let io_err = |source| CacheError::Io { path: self.dest.clone(), source };
        self.file.sync_all().map_err(io_err)?;
        self.renamed.place(&self.partial, &self.dest).map_err(io_err)?;
        Ok(self.dest.clone())
    }

    /// Keep the bytes received so far for the next attempt to resume from.
    pub fn keep_for_resume(mut self) {
        self.keep = true;
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        // After `commit` the partial file has been renamed away and this finds nothing.
        if !self.keep {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_verifies_before_a_blob_is_visible() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let good = Sha256::of_bytes(b"hello");
        let path = cache.put(good, Some(5), "blob", &b"hello"[..]).unwrap();
        assert_eq!(std::fs::read(path).unwrap(), b"hello");
        assert!(cache.contains(&good, Some(5)));

        let claimed = Sha256::of_bytes(b"other");
        let err = cache.put(claimed, None, "blob x", &b"tampered"[..]).unwrap_err();
        assert!(matches!(err, CacheError::DigestMismatch { .. }), "{err}");
        assert!(!cache.contains(&claimed, None));
        assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0, "nothing unverified stays");
    }

    #[test]
    fn renames_are_synced_once_for_all_the_blobs_stored() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let pending = |c: &Cache| c.renamed.is_pending();
        assert!(!pending(&cache));
        for i in 0..3u8 {
            let bytes = [i; 4];
            cache.put(Sha256::of_bytes(&bytes), Some(4), "blob", &bytes[..]).unwrap();
        }
        let made = {
            let mut created = cache.clone().create().unwrap();
            created.write_all(b"sbom").unwrap();
            created.commit().unwrap()
        };
        assert!(cache.contains(&made.0, Some(4)));
        assert!(pending(&cache), "four renames, no sync yet");
        cache.sync().unwrap();
        assert!(!pending(&cache));

        // A sync that fails names the directory and leaves the renames pending.
        let bytes = b"later";
        cache.put(Sha256::of_bytes(bytes), Some(5), "blob", &bytes[..]).unwrap();
        std::fs::rename(dir.path().join("blobs"), dir.path().join("moved")).unwrap();
        let err = cache.sync().unwrap_err().to_string();
        assert!(err.contains("blobs/sha256"), "{err}");
        assert!(pending(&cache));
    }

    #[test]
    fn two_writers_putting_one_blob_at_once_both_succeed() {
        // Two builds sharing a cache put the same SBOM at the same moment (the fleet tests
        // did): a read at a time, each waiting for the other, as two processes interleave.
        struct Slow<'a>(&'a [u8], std::sync::Arc<std::sync::Barrier>);
        impl Read for Slow<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.1.wait();
                let n = self.0.len().min(buf.len()).min(100);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let digest = Sha256::of_bytes(&bytes);
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..2)
                .map(|_| s.spawn(|| cache.put(digest, Some(1000), "sbom", Slow(&bytes, barrier.clone()))))
                .collect();
            for w in writers {
                w.join().unwrap().unwrap();
            }
        });
        assert_eq!(std::fs::read(cache.path(&digest)).unwrap(), bytes);
        assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn a_created_blob_is_named_by_what_was_written_and_an_abandoned_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let mut abandoned = cache.create().unwrap();
        abandoned.write_all(b"half an SBOM").unwrap();
        drop(abandoned);
        assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
        let mut created = cache.create().unwrap();
        created.write_all(b"an SBOM").unwrap();
        let (digest, size, path) = created.commit().unwrap();
        assert_eq!((digest, size), (Sha256::of_bytes(b"an SBOM"), 7));
        assert_eq!(path, cache.path(&digest));
        assert!(cache.contains(&digest, Some(7)));
        assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn a_resumed_blob_is_verified_as_a_whole() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let digest = Sha256::of_bytes(b"0123456789");
        let mut first = cache.incoming(digest, Some(10), "blob").unwrap();
        first.write(b"01234").unwrap();
        first.keep_for_resume(); // connection dropped
        let mut resumed = cache.incoming(digest, Some(10), "blob").unwrap();
        assert_eq!(resumed.offset(), 5);
        resumed.write(b"56789").unwrap();
        assert_eq!(std::fs::read(resumed.commit(Some(10)).unwrap()).unwrap(), b"0123456789");
    }

    #[test]
    fn a_source_that_sends_past_its_declared_size_is_stopped_at_the_first_byte_over() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let digest = Sha256::of_bytes(b"0123456789");
        let endless = std::io::repeat(0);
        let err = cache.put(digest, Some(10), "blob z", endless).unwrap_err();
        assert!(matches!(err, CacheError::Overrun(Overrun { limit: 10, .. })), "{err}");
        assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0, "nothing is kept");
    }
}
