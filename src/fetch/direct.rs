//! A new file written past the page cache (`O_DIRECT`), for what a node fetches ahead: a
//! release's packages, gigabytes that would otherwise be copied into the page cache, dirtied,
//! written back and reclaimed (and push out what the node's jobs keep there), to be read once,
//! at the apply hours later. 32 nodes staging 1 GiB each on two cores: 0.82 -> 0.97 of curl's
//! rate in the same session (`docs/performance.md`).
//!
//! Direct writes need an aligned buffer, length and offset: the bytes are copied into
//! `Block`s that start at a 4 KiB boundary and are written whole. What cannot be written
//! that way (the file's tail, a filesystem that refuses direct writes) is written through the
//! page cache, and the file stays there from then on: correct everywhere, fast where it can be.
//! Hand-written: no crate does aligned direct writes with that fallback on a `std::fs::File`.

use std::io::Write as _;
use std::path::Path;

/// Alignment of a direct write's buffer, length and offset: the largest logical block size
/// of the disks nodes have (512 and 4096).
const ALIGN: usize = 4096;

/// Bytes in a block: enough that a write is worth its trip to the blocking pool.
pub(super) const BLOCK: usize = 1 << 20;

/// A buffer of `BLOCK` bytes starting at an `ALIGN` boundary, filled from the front.
pub(super) struct Block {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

/// Blocks given back, for the next file's: a new one is a fresh mapping of 1 MiB, faulted in
/// page by page (two a member made 160,000 page faults for 8 nodes staging 40 members each).
static SPARE: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Blocks kept in `SPARE` at most: the two of one download in flight.
const KEPT: usize = 2;

impl Block {
    pub(super) fn new() -> Self {
        let spare = SPARE.lock().ok().and_then(|mut spare| spare.pop());
        let bytes = spare.unwrap_or_else(|| vec![0u8; BLOCK + ALIGN]);
        // Where no boundary is found (never, for bytes), the writes go through the page cache.
        let start = bytes.as_ptr().align_offset(ALIGN).min(ALIGN);
        Self { bytes, start, len: 0 }
    }

    /// Copies what fits of `src`; returns how much that was.
    pub(super) fn fill(&mut self, src: &[u8]) -> usize {
        let n = (BLOCK - self.len).min(src.len());
        self.bytes[self.start + self.len..][..n].copy_from_slice(&src[..n]);
        self.len += n;
        n
    }

    pub(super) fn is_full(&self) -> bool {
        self.len == BLOCK
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn clear(&mut self) {
        self.len = 0;
    }

    /// Reads into the rest of the block until it is full or `src` ends.
    fn fill_from(&mut self, src: &mut impl std::io::Read) -> std::io::Result<()> {
        while self.len < BLOCK {
            match src.read(&mut self.bytes[self.start + self.len..self.start + BLOCK]) {
                Ok(0) => break,
                Ok(n) => self.len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn filled(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len]
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Ok(mut spare) = SPARE.lock()
            && spare.len() < KEPT
        {
            spare.push(std::mem::take(&mut self.bytes));
        }
    }
}

/// `src` copied into the new file `dest` the same way (a member of a mounted mirror), hashed
/// as it is read: its sha256 and length.
pub(crate) fn copy_hashed(src: impl std::io::Read, dest: &Path) -> std::io::Result<(crate::digest::Sha256, u64)> {
    let mut out = DirectFile::create(dest)?;
    let mut src = crate::digest::HashingReader::new(src);
    let mut block = Block::new();
    loop {
        block.fill_from(&mut src)?;
        out.write(&block)?;
        if !block.is_full() {
            return Ok(src.finish());
        }
        block.clear();
    }
}

/// A file being written, directly while every write so far was whole aligned blocks.
#[derive(Debug)]
pub(super) struct DirectFile {
    file: std::fs::File,
    direct: bool,
}

impl DirectFile {
    /// `path` created (or emptied), opened for direct writes where its filesystem takes them.
    pub(super) fn create(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        // tmpfs before Linux 6.6, and some FUSE filesystems, refuse the flag (EINVAL).
        if let Ok(file) = options.clone().custom_flags(libc::O_DIRECT).open(path) {
            return Ok(Self { file, direct: true });
        }
        Ok(Self { file: options.open(path)?, direct: false })
    }

    /// Whether writes still go past the page cache.
    #[cfg(test)]
    fn is_direct(&self) -> bool {
        self.direct
    }

    /// `block`'s bytes appended: its whole aligned part directly, the rest (and everything
    /// after it) through the page cache, as is everything once the filesystem refused a
    /// direct write.
    pub(super) fn write(&mut self, block: &Block) -> std::io::Result<()> {
        self.write_bytes(block.filled())
    }

    fn write_bytes(&mut self, data: &[u8]) -> std::io::Result<()> {
        let mut done = 0;
        while done < data.len() {
            let rest = &data[done..];
            // The tail, or what follows a short direct write that left the offset unaligned.
            if self.direct && !(rest.len() >= ALIGN && rest.as_ptr().align_offset(ALIGN) == 0) {
                self.buffered()?;
            }
            let piece = if self.direct { rest.len() / ALIGN * ALIGN } else { rest.len() };
            match self.file.write(&rest[..piece]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // A filesystem or a disk with other rules (a refused write wrote nothing):
                // written the ordinary way.
                Err(e) if self.direct && e.raw_os_error() == Some(libc::EINVAL) => self.buffered()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Empties the file, to be written again from its first byte.
    pub(super) fn truncate(&mut self) -> std::io::Result<()> {
        use std::io::Seek as _;
        self.file.set_len(0)?;
        self.file.rewind()
    }

    /// Writes through the page cache from now on.
    fn buffered(&mut self) -> std::io::Result<()> {
        if self.direct {
            let flags = rustix::fs::fcntl_getfl(&self.file)?;
            rustix::fs::fcntl_setfl(&self.file, flags - rustix::fs::OFlags::DIRECT)?;
            self.direct = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_lands_whole_and_is_hashed_as_it_is_read() {
        let dir = tempfile::tempdir().expect("a directory");
        for len in [0, 1000, BLOCK, 2 * BLOCK + 1234] {
            let bytes = pattern(len, 7);
            // A short read first (3000 bytes), as a network filesystem may give, then the rest.
            let src = std::io::Read::chain(&bytes[..len.min(3000)], &bytes[len.min(3000)..]);
            let dest = dir.path().join(format!("member-{len}.deb"));
            let (sha, size) = copy_hashed(src, &dest).expect("copied");
            assert_eq!((sha, size), (crate::digest::Sha256::of_bytes(&bytes), len as u64), "{len} bytes");
            assert!(std::fs::read(&dest).expect("the copy") == bytes, "{len} bytes in order");
        }
    }

    /// `len` bytes that differ at every offset, so a byte out of place shows.
    fn pattern(len: usize, seed: u32) -> Vec<u8> {
        (0..len).map(|i| (u32::try_from(i).unwrap_or(0) ^ seed).wrapping_mul(2_654_435_761).to_le_bytes()[2]).collect()
    }

    fn block_of(bytes: &[u8]) -> Block {
        let mut block = Block::new();
        assert_eq!(block.fill(bytes), bytes.len());
        block
    }

    fn flags(file: &DirectFile) -> rustix::fs::OFlags {
        rustix::fs::fcntl_getfl(&file.file).expect("the file's flags")
    }

    #[test]
    fn whole_blocks_go_past_the_page_cache_and_the_tail_through_it() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("member.deb");
        let (first, second, tail) = (pattern(BLOCK, 1), pattern(BLOCK, 2), pattern(1234, 3));
        let mut file = DirectFile::create(&path).expect("created");
        // Where the filesystem takes direct writes (ext4, XFS, tmpfs since 6.6), the file
        // is opened for them; elsewhere everything goes through the page cache.
        let direct = file.is_direct();
        assert_eq!(flags(&file).contains(rustix::fs::OFlags::DIRECT), direct);
        for bytes in [&first, &second] {
            file.write(&block_of(bytes)).expect("a whole block written");
            assert_eq!(file.is_direct(), direct, "whole blocks keep the file as it was opened");
        }
        file.write(&block_of(&tail)).expect("the tail written");
        assert!(
            !file.is_direct() && !flags(&file).contains(rustix::fs::OFlags::DIRECT),
            "the tail leaves direct writes"
        );
        drop(file);
        let written = std::fs::read(&path).expect("the file");
        assert!(written == [first, second, tail].concat(), "the bytes in order");
    }

    /// Whether the filesystem under `dir` refuses a direct write at an offset that is no
    /// multiple of the block size (ext4 and XFS do, EINVAL; tmpfs takes it).
    fn refuses_unaligned(dir: &Path) -> bool {
        use std::io::Seek as _;
        let Ok(mut probe) = DirectFile::create(&dir.join("probe")) else { return false };
        if !probe.direct || probe.file.seek(std::io::SeekFrom::Start(100)).is_err() {
            return false;
        }
        let block = block_of(&[0; ALIGN]);
        probe.file.write(block.filled()).is_err_and(|e| e.raw_os_error() == Some(libc::EINVAL))
    }

    #[test]
    fn a_direct_write_the_kernel_refuses_is_written_through_the_page_cache() {
        use std::io::Seek as _;
        let dir = tempfile::tempdir().expect("a directory");
        let refused = refuses_unaligned(dir.path());
        let path = dir.path().join("member.deb");
        let mut file = DirectFile::create(&path).expect("created");
        // An offset that is no multiple of the block size: a direct write there is EINVAL.
        file.file.seek(std::io::SeekFrom::Start(100)).expect("seeked");
        let bytes = pattern(BLOCK, 4);
        file.write(&block_of(&bytes)).expect("written, the ordinary way");
        assert_eq!(file.is_direct(), !refused, "a refused write leaves direct writes");
        drop(file);
        let written = std::fs::read(&path).expect("the file");
        assert_eq!(written.len(), 100 + BLOCK);
        assert!(written[..100].iter().all(|&b| b == 0) && written[100..] == bytes[..], "the bytes at the offset");
    }

    #[test]
    fn a_truncated_file_is_written_again_from_its_first_byte() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("member.deb");
        let mut file = DirectFile::create(&path).expect("created");
        file.write(&block_of(&pattern(BLOCK, 5))).expect("written");
        file.truncate().expect("emptied");
        let again = pattern(BLOCK, 6);
        file.write(&block_of(&again)).expect("written again");
        drop(file);
        assert!(std::fs::read(&path).expect("the file") == again);
    }
}
