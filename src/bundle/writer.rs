//! The deterministic, streaming bundle writer.
//!
//! Content streams from its origin through a hasher into the tar and zstd streams: it is never
//! whole in memory, and its digest and size are checked against the signed manifest as it
//! passes. The output goes to a temporary file beside the destination and is put in place
//! (`atomic::replace`) only when complete; on any failure nothing is left at the destination.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use super::feed::Arrivals;
use super::feed::Feed;
pub use super::format::{Compression, MAX_WINDOW_LOG};
use super::frames::{self, Frames, Store};
use super::header;
use super::manifest::{MANIFEST, Manifest, PROVENANCE, SIGNATURE};
pub use super::members::{Buffers, Member, Origin, Origins, PackError, Packing};
use super::parts::{PartsFile, SplitWriter};
use crate::digest::Sha256;
use crate::member_path::MemberPath;
use crate::overlap::WriteBehind;
use crate::progress::Reporter;
use crate::sign::SigningKey;

/// The level for large members of compressed formats that still go through zstd (their first
/// block shrinks: a zip with stored entries, a package whose payload is not compressed; the
/// others are stored, `frames`): at level 3 zstd spends its time looking for matches that are
/// rarely there (measured on 384 MiB of gzip layers: 0.53 s of CPU at level 3, 0.31 s at
/// level 1, the output the same size).
const COMPRESSED_LEVEL: i32 = 1;
/// Members smaller than this keep whatever level is current, and are compressed whatever their
/// bytes: a change of level ends a zstd job early (a flush), and a member stored as it is ends
/// a frame, which cost more than they save on a small member.
const LARGE_MEMBER_BYTES: u64 = 1 << 20;

/// Whether these leading bytes are those of a compressed format: gzip, zstd, xz, bzip2, lz4,
/// zip (wheels), a Debian package or an rpm (their payloads are compressed).
fn compressed_already(head: &[u8]) -> bool {
    const MAGIC: [&[u8]; 8] = [
        b"\x1f\x8b",
        b"\x28\xb5\x2f\xfd",
        b"\xfd7zXZ\x00",
        b"BZh",
        b"\x04\x22\x4d\x18",
        b"PK\x03\x04",
        b"!<arch>\ndebian-binary",
        b"\xed\xab\xee\xdb",
    ];
    MAGIC.iter().any(|m| head.starts_with(m))
}

/// Multithreaded zstd's output does not depend on the number of workers (checked with libzstd
/// 1.5: 1, 2, 4 and 8 workers give identical frames), only on multithreading being on, so every
/// host uses all its cores and still writes the same bytes. Never 0: that is single-thread
/// mode, whose frames differ.
fn zstd_workers() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1)).clamp(1, 16)
}

/// What was written.
#[derive(Debug)]
pub struct Packed {
    /// The bundle file, or the parts file of a split bundle.
    pub path: PathBuf,
    pub manifest_sha256: Sha256,
    pub bytes: u64,
    pub members: usize,
    /// The parts of a split bundle (`--split-size`).
    pub parts: Option<PartsFile>,
}

/// How the bundle's bytes are laid out on disk.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout {
    pub compression: Compression,
    /// Write parts of this many bytes (`parts`) instead of one file.
    pub split_size: Option<u64>,
}

/// Where the bytes go while packing: a temporary file, or parts being cut.
enum Target {
    Whole(tempfile::NamedTempFile),
    Split(Box<SplitWriter>),
}

/// The write half of a [`Target`], for the writing thread.
enum TargetWriter<'a> {
    Whole(&'a std::fs::File),
    Split(&'a mut SplitWriter),
}

impl Write for TargetWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Whole(f) => f.write(buf),
            Self::Split(s) => s.write(buf),
        }
    }

    /// One call for a raw frame's headers and blocks (`frames::RawFrame::write`).
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Self::Whole(f) => f.write_vectored(bufs),
            Self::Split(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Whole(f) => f.flush(),
            Self::Split(s) => s.flush(),
        }
    }
}

/// A tar over zstd that only takes deterministic regular-file members.
pub struct BundleWriter<W: Write> {
    tar: tar::Builder<Frames<W>>,
    mtime: u64,
    /// The level asked for, and the one in effect (`COMPRESSED_LEVEL` during a run of large
    /// compressed members); `None` with `--long`, which keeps one level throughout.
    levels: Option<(i32, i32)>,
    /// What stores large members zstd cannot shrink as they are (`frames`); `None` with
    /// `--long`, whose window may find a member's bytes in another's.
    store: Option<Store>,
}

impl<W: Write> BundleWriter<W> {
    pub fn new(out: W, mtime: u64, compression: Compression) -> io::Result<Self> {
        Self::with_workers(out, mtime, compression, zstd_workers())
    }

    fn with_workers(out: W, mtime: u64, compression: Compression, workers: u32) -> io::Result<Self> {
        let mut tar = tar::Builder::new(Frames::new(out, compression, workers)?);
        tar.follow_symlinks(false);
        tar.sparse(false);
        tar.mode(tar::HeaderMode::Deterministic);
        let fixed = compression.long_window_log.is_some();
        let levels = (!fixed).then_some((compression.level, compression.level));
        let store = if fixed { None } else { Some(Store::new()?) };
        Ok(Self { tar, mtime, levels, store })
    }

    /// Before the bytes of a large member (`compressed`: whether it starts like a compressed
    /// format): the level for it, if it must change.
    fn choose_level(&mut self, compressed: bool) -> io::Result<()> {
        let Some((asked, current)) = self.levels else { return Ok(()) };
        let wanted = if compressed { asked.min(COMPRESSED_LEVEL) } else { asked };
        if wanted != current {
            self.tar.get_mut().set_level(wanted)?;
            self.levels = Some((asked, wanted));
        }
        Ok(())
    }

    /// Append `size` bytes from `data` as `path`. The caller guarantees `data` yields exactly
    /// `size` bytes (see `append_checked`); a short reader would corrupt the archive.
    ///
    /// A member of 1 MiB or more whose first block zstd cannot shrink is stored as it is
    /// (`frames`): its header ends the frame, raw frames follow, and the first block zstd can
    /// shrink sends the rest back through the compressor. The other large members set the
    /// level (`COMPRESSED_LEVEL` for compressed formats).
    pub fn append(&mut self, path: &MemberPath, size: u64, mut data: impl Buffers) -> io::Result<()> {
        let head = data.fill_buf()?;
        let large = size >= LARGE_MEMBER_BYTES;
        let compressed = large && compressed_already(head);
        let probe = head.len().min(frames::BLOCK);
        let stored = large && self.store.as_mut().is_some_and(|s| !s.compresses(&head[..probe]));
        if large && !stored {
            self.choose_level(compressed)?;
        }
        let h = header::regular_file(path, size, self.mtime);
        if !h.pax.is_empty() {
            self.tar.append_pax_extensions(h.pax.iter().map(|(k, v)| (*k, v.as_slice())))?;
        }
        // What `tar::Builder::append` writes (header, data, zeros to a 512-byte boundary), but
        // straight from the reader's buffer: tar copies through 8 KiB, one zstd call each.
        self.tar.get_mut().write_all(h.header.as_bytes())?;
        let mut copied = 0u64;
        if stored {
            let (n, whole) = self.store(&mut data, probe)?;
            copied = n;
            if !whole {
                self.choose_level(compressed)?;
            }
        }
        let out = self.tar.get_mut();
        loop {
            let chunk = match data.fill_buf() {
                Ok([]) => break,
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            out.write_all(chunk)?;
            let n = chunk.len();
            data.consume(n);
            copied += n as u64;
        }
        let padding = (512 - copied % 512) % 512;
        out.write_all(&[0u8; 512][..usize::try_from(padding).expect("less than 512")])
    }

    /// Write `data` as it is, in raw frames, until its end or a block zstd can shrink (the
    /// first `checked` bytes are known not to; of each later block, its first `SAMPLE` bytes
    /// are tried): the bytes written, and whether that was all. Blocks start where `data`'s
    /// chunks do; the feed's are `overlap::CHUNK` bytes of a member read from a file, or a
    /// flow's batches of `overlap::FLOW_BATCH` of one streamed from its registry, each a
    /// multiple of a block, so where they start depends on the member alone. All the buffers
    /// at hand go out in one write: a write of 256 KiB or more is not copied (`WriteBehind`).
    fn store(&mut self, data: &mut impl Buffers, mut checked: usize) -> io::Result<(u64, bool)> {
        let Self { tar, store, .. } = self;
        let Some(store) = store.as_mut() else { return Ok((0, false)) };
        let mut raw = tar.get_mut().raw_frame()?;
        let mut written = 0u64;
        let whole = loop {
            let bufs = match data.fill_bufs() {
                Ok(bufs) if bufs.is_empty() => break true,
                Ok(bufs) => bufs,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            // Each buffer's blocks up to the first zstd can shrink, in one write.
            let (mut take, mut full) = (0, true);
            let mut parts = Vec::with_capacity(bufs.len());
            for buf in bufs {
                let mut n = 0;
                for block in buf.chunks(frames::BLOCK) {
                    if take + n >= checked && store.compresses(&block[..block.len().min(frames::SAMPLE)]) {
                        full = false;
                        break;
                    }
                    n += block.len();
                }
                parts.push(&buf[..n]);
                take += n;
                if !full {
                    break;
                }
            }
            checked = 0;
            raw.write(&parts)?;
            data.consume_bufs(take);
            written += take as u64;
            if !full {
                break false;
            }
        };
        raw.end()?;
        Ok((written, whole))
    }

    /// Finish the tar and the last zstd frame (without `finish` the frame is truncated).
    pub fn finish(self) -> io::Result<W> {
        self.tar.into_inner()?.finish()
    }
}

/// Write a whole bundle: manifest, signature, then every content member in manifest order
/// (the entries `origins` was split into), each once it has arrived (`arrivals`: the members
/// still being downloaded).
#[allow(clippy::too_many_arguments, reason = "one call, from `build::build`, with every part named")]
pub fn pack(
    out: &Path,
    manifest: &Manifest,
    key: &SigningKey,
    origins: &Origins,
    provenance: Option<&[u8]>,
    layout: Layout,
    arrivals: &Arrivals,
    reporter: &dyn Reporter,
) -> Result<Packed, PackError> {
    let write_err = |source| PackError::Write { path: out.to_owned(), source };
    // Hashed and signed as it is written, then written again into the bundle as it is made:
    // a manifest of 100,000 entries is 26 MB, never held.
    let (manifest_sha256, manifest_size) = manifest.canonical_digest();
    let signature = key.sign_blob_digest(&manifest_sha256);
    // Dropped (and deleted) on every early return: nothing half-written is left behind.
    let mut target = match layout.split_size {
        None => Target::Whole(crate::atomic::temp_beside(out).map_err(write_err)?),
        Some(size) => Target::Split(Box::new(SplitWriter::new(out, size))),
    };
    let output = match &mut target {
        Target::Whole(tmp) => TargetWriter::Whole(tmp.as_file()),
        Target::Split(split) => TargetWriter::Split(split),
    };

    let packed = std::thread::scope(|scope| {
        // Written on a thread of its own: the write calls cost as much as the copy into zstd.
        let output = WriteBehind::spawn(scope, output);
        let mut writer = BundleWriter::new(output, manifest.created.unix(), layout.compression).map_err(write_err)?;
        let fixed = |p: &str| MemberPath::new(p).expect("reserved member names are valid paths");
        append_manifest(scope, &mut writer, manifest, (manifest_sha256, manifest_size)).map_err(write_err)?;
        writer.append(&fixed(SIGNATURE), signature.len() as u64, signature.as_bytes()).map_err(write_err)?;

        // Packing waits for each download in turn: its progress is theirs too.
        let phase = if arrivals.awaiting() { "fetching and packing" } else { "packing" };
        reporter.start(phase, manifest.content_bytes());
        // The feed reads every member in the order they are appended.
        let mut feed = Feed::spawn(scope, origins.members(&manifest.entries), arrivals, reporter);
        // Order: the listed `airlock/` members (the SBOM), the provenance, then the content.
        let mut provenance = provenance;
        let mut append_provenance = |writer: &mut BundleWriter<_>| match provenance.take() {
            Some(bytes) => writer.append(&fixed(PROVENANCE), bytes.len() as u64, bytes).map_err(write_err),
            None => Ok(()),
        };
        let mut packed = 0usize;
        for member in origins.members(&manifest.entries) {
            if member.entry.path.area() != "airlock" {
                append_provenance(&mut writer)?;
            }
            append_checked(&mut writer, member, &mut feed).map_err(|e| match e {
                AppendError::Member(e) => e,
                AppendError::Write(source) => write_err(source),
            })?;
            packed += 1;
        }
        append_provenance(&mut writer)?;
        reporter.finish();
        // Not synced to disk: zstd, tar and skopeo do not either, and it would cost a second
        // pass at disk speed (measured: 0.3 s of 2.4 s for 755 MiB). A bundle cut short by a
        // power loss fails `verify` and `install` (every member is hashed, the last zstd frame
        // must be complete); the site side, whose state must survive, syncs everything.
        writer.finish().and_then(WriteBehind::finish).map_err(write_err)?;
        Ok::<_, PackError>(packed)
    })?;
    let members = packed + 2 + usize::from(provenance.is_some());
    match target {
        Target::Whole(tmp) => {
            let bytes = tmp.as_file().metadata().map_err(write_err)?.len();
            crate::atomic::replace(tmp, out).map_err(write_err)?;
            Ok(Packed { path: out.to_owned(), manifest_sha256, bytes, members, parts: None })
        }
        Target::Split(split) => {
            let (path, parts) =
                split.commit(&manifest.name, &manifest.version, manifest_sha256, key).map_err(write_err)?;
            Ok(Packed { path, manifest_sha256, bytes: parts.bytes, members, parts: Some(parts) })
        }
    }
}

enum AppendError {
    /// The member's origin could not be read, or is not what the manifest promises.
    Member(PackError),
    Write(io::Error),
}

/// Member 1, from `Manifest::write_canonical` on a thread of its own through a pipe: the bytes
/// are made twice (hashed for the signature, then here) and never held. They are checked
/// against that digest; a difference aborts the bundle.
fn append_manifest<'scope, W: Write>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    writer: &mut BundleWriter<W>,
    manifest: &'scope Manifest,
    (sha256, size): (Sha256, u64),
) -> io::Result<()> {
    let (from, to) = io::pipe()?;
    let producer = scope.spawn(move || {
        let mut out = io::BufWriter::with_capacity(256 << 10, to);
        manifest.write_canonical(&mut out).and_then(|()| out.flush())
    });
    let mut tap = crate::digest::HashingReader::new(from);
    let path = MemberPath::new(MANIFEST).expect("reserved member names are valid paths");
    let appended = writer.append(&path, size, io::BufReader::with_capacity(256 << 10, &mut tap));
    // The pipe's reading end goes here: a producer still writing sees it closed.
    let (actual, count) = tap.finish();
    let written = producer.join().unwrap_or_else(|_| Err(io::Error::other("the manifest writer stopped")));
    appended?;
    written?;
    if (actual, count) != (sha256, size) {
        return Err(io::Error::other(format!(
            "the manifest was written as {count} bytes, sha256 {actual}, after it was signed as {size} bytes, sha256 {sha256}"
        )));
    }
    Ok(())
}

/// Append the next member from the feed, checking size and digest against what the manifest
/// promises. A mismatch aborts the bundle (the temporary output is discarded).
fn append_checked<W: Write>(
    writer: &mut BundleWriter<W>,
    member: Packing<'_>,
    feed: &mut Feed,
) -> Result<(), AppendError> {
    let (size, sha256) = (member.entry.size, member.entry.sha256);
    if let Err(e) = writer.append(&member.entry.path, size, &mut *feed) {
        return Err(feed.take_failure().map_or(AppendError::Write(e), AppendError::Member));
    }
    let streamed = feed.end_member().map_err(AppendError::Member)?;
    if streamed.within_size != size || streamed.more {
        // The file's real size: what was read if it ended early, else what the file holds now.
        let actual = if streamed.more { streamed.file_size.max(size.saturating_add(1)) } else { streamed.within_size };
        return Err(AppendError::Member(PackError::SizeMismatch {
            what: member.what.to_owned(),
            origin: member.origin().into_owned(),
            expected: size,
            actual,
        }));
    }
    if streamed.sha256 != sha256 {
        return Err(AppendError::Member(PackError::DigestMismatch {
            what: member.what.to_owned(),
            origin: member.origin().into_owned(),
            expected: sha256,
            actual: streamed.sha256,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    /// `len` bytes that zstd can shrink, after `magic`.
    fn text(magic: &[u8], len: usize) -> Vec<u8> {
        let words = b"rocm hip runtime firmware layer kernel driver ";
        magic.iter().copied().chain(words.iter().copied().cycle()).take(len).collect()
    }

    /// `len` bytes that zstd cannot shrink, after `magic`.
    fn noise(magic: &[u8], seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        };
        magic.iter().copied().chain(std::iter::repeat_with(&mut next)).take(len).collect()
    }

    /// The bundle-to-be for these members (by `workers` threads, at level 3, adaptive or not:
    /// one level, every member compressed).
    fn write(members: &[(&str, Vec<u8>)], workers: u32, adaptive: bool) -> Vec<u8> {
        let mut writer = BundleWriter::with_workers(Vec::new(), 0, Compression::default(), workers).unwrap();
        if !adaptive {
            writer.levels = None;
            writer.store = None;
        }
        for (path, bytes) in members {
            writer.append(&MemberPath::new(*path).unwrap(), bytes.len() as u64, bytes.as_slice()).unwrap();
        }
        writer.finish().unwrap()
    }

    #[test]
    fn compressed_members_change_the_level_and_the_bytes_do_not_depend_on_the_workers() {
        // Large members that claim to be gzip, zstd, a wheel; large plain ones; small ones
        // between them (which never change the level).
        let members = vec![
            ("files/a.gz", text(b"\x1f\x8b", 3 << 20)),
            ("files/b.txt", text(b"", 3 << 20)),
            ("files/c.zst", text(b"\x28\xb5\x2f\xfd", 2 << 20)),
            ("files/d.small.gz", text(b"\x1f\x8b", 1000)),
            ("files/e.whl", text(b"PK\x03\x04", 2 << 20)),
            ("files/f.txt", text(b"", 2 << 20)),
        ];
        let one = write(&members, 1, true);
        assert_eq!(write(&members, 2, true), one, "2 workers");
        assert_eq!(write(&members, 4, true), one, "4 workers");
        // The magic members went through level 1: larger than level 3 makes them.
        assert!(one.len() > write(&members, 2, false).len());
        // And it is the same tar.
        assert_unpacks_to(&one, &members);
    }

    /// `bundle` decompresses (all its frames) to a tar of `members`.
    fn assert_unpacks_to(bundle: &[u8], members: &[(&str, Vec<u8>)]) {
        let mut tar = tar::Archive::new(zstd::stream::read::Decoder::new(bundle).unwrap());
        let got: Vec<(String, Vec<u8>)> = tar
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let path = e.path().unwrap().to_string_lossy().into_owned();
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut e, &mut bytes).unwrap();
                (path, bytes)
            })
            .collect();
        let want: Vec<(String, Vec<u8>)> = members.iter().map(|(p, b)| ((*p).to_owned(), b.clone())).collect();
        assert!(got == want, "the tar differs");
    }

    #[test]
    fn large_members_zstd_cannot_shrink_are_stored_as_they_are() {
        // Noise with and without a compressed format's magic, text, noise that turns into text
        // after 2 MiB, and small noise (never stored: below 1 MiB).
        let mut turns = noise(b"", 3, 2 << 20);
        turns.extend(text(b"", 2 << 20));
        let members = vec![
            ("files/a.bin", noise(b"", 1, 3 << 20)),
            ("files/b.txt", text(b"", 3 << 20)),
            ("files/c.gz", noise(b"\x1f\x8b", 2, 2 << 20)),
            ("files/d.turns", turns),
            ("files/e.small", noise(b"", 4, 1000)),
        ];
        let one = write(&members, 1, true);
        assert_eq!(write(&members, 2, true), one, "2 workers");
        assert_eq!(write(&members, 4, true), one, "4 workers");
        assert_unpacks_to(&one, &members);
        // The noise is in the bundle as it is, block by block (a raw block's 128 KiB, between
        // 3-byte headers), and the text compressed: 7 MiB of noise and a few KiB more.
        let a = &members[0].1;
        let at = one.windows(4096).position(|w| w == &a[..4096]).expect("the first block as it is");
        assert_eq!(&one[at - 3..at], &[0x00, 0x00, 0x10], "a raw block of 128 KiB, not the last");
        assert_eq!(&one[at..at + frames::BLOCK], &a[..frames::BLOCK]);
        let last = &members[3].1[(2 << 20) - 4096..2 << 20];
        assert!(one.windows(4096).any(|w| w == last), "the noise before the text, as it is");
        assert!((7 << 20..(7 << 20) + (64 << 10)).contains(&one.len()), "{} bytes", one.len());
        // Compressed instead, the same tar is no smaller.
        let compressed = write(&members, 2, false);
        assert_unpacks_to(&compressed, &members);
        assert!(compressed.len() >= one.len() - 1024, "{} against {}", compressed.len(), one.len());
    }

    /// A member's bytes in pieces of `per_piece` buffers of `buf` bytes each (the last ones
    /// shorter), every piece's buffers at hand at once, as the feed hands over a flow's batches.
    struct Pieces {
        bufs: std::collections::VecDeque<Vec<u8>>,
        per_piece: usize,
        /// Bytes read of the first buffer.
        pos: usize,
    }

    impl Pieces {
        fn new(bytes: &[u8], buf: usize, per_piece: usize) -> Self {
            Self { bufs: bytes.chunks(buf).map(<[u8]>::to_vec).collect(), per_piece, pos: 0 }
        }
    }

    impl io::Read for Pieces {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.fill_buf()?.len().min(out.len());
            out[..n].copy_from_slice(&self.fill_buf()?[..n]);
            self.consume(n);
            Ok(n)
        }
    }

    impl BufRead for Pieces {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            if self.bufs.front().is_some_and(|b| self.pos == b.len()) {
                self.bufs.pop_front();
                self.pos = 0;
            }
            Ok(self.bufs.front().map_or(&[], |b| &b[self.pos..]))
        }

        fn consume(&mut self, n: usize) {
            self.pos += n;
        }
    }

    impl Buffers for Pieces {
        fn fill_bufs(&mut self) -> io::Result<Vec<&[u8]>> {
            self.fill_buf()?;
            let pos = self.pos;
            Ok(self
                .bufs
                .iter()
                .take(self.per_piece)
                .enumerate()
                .map(|(i, b)| &b[if i == 0 { pos } else { 0 }..])
                .collect())
        }

        fn consume_bufs(&mut self, mut n: usize) {
            while n > 0 {
                let k = (self.bufs[0].len() - self.pos).min(n);
                (self.pos, n) = (self.pos + k, n - k);
                if n > 0 {
                    self.bufs.pop_front();
                    self.pos = 0;
                }
            }
        }
    }

    #[test]
    fn a_member_handed_over_in_pieces_of_several_buffers_is_stored_as_one_slice_is() {
        // Noise, and noise that turns into text within a piece: the piece's first buffers are
        // stored, the rest compressed.
        let mut turns = noise(b"", 3, 2 << 20);
        turns.extend(text(b"", 2 << 20));
        let members = vec![("files/a.bin", noise(b"", 1, (3 << 20) + 999)), ("files/d.turns", turns)];
        let want = write(&members, 1, true);
        for per_piece in [1, 3, 8] {
            let mut writer = BundleWriter::with_workers(Vec::new(), 0, Compression::default(), 1).unwrap();
            for (path, bytes) in &members {
                let pieces = Pieces::new(bytes, frames::BLOCK, per_piece);
                writer.append(&MemberPath::new(*path).unwrap(), bytes.len() as u64, pieces).unwrap();
            }
            assert!(writer.finish().unwrap() == want, "{per_piece} buffers a piece");
        }
    }

    #[test]
    fn the_formats_taken_as_compressed_are_recognised_by_their_leading_bytes() {
        for head in [&b"\x1f\x8b\x08"[..], b"\x28\xb5\x2f\xfd\x00", b"PK\x03\x04\x14", b"!<arch>\ndebian-binary   "] {
            assert!(compressed_already(head), "{head:?}");
        }
        for head in [&b""[..], b"\x1f", b"!<arch>\nlibfoo.o", b"{\"safetensors\"", b"\x7fELF"] {
            assert!(!compressed_already(head), "{head:?}");
        }
    }
}
