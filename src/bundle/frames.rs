//! The zstd stream of a bundle, as a sequence of frames (RFC 8878 §3.1: any decoder reads
//! concatenated frames as one stream, `zstd -d` included).
//!
//! [`Frames`] is libzstd's multithreaded streaming compressor over the output, whose frame can
//! be ended between members. A member whose bytes zstd cannot shrink (image layers, wheels,
//! packages, random weights; [`Store`] tries them) is then written as a frame of raw blocks
//! ([`RawFrame`]), each block from the reader's buffer to the output: through libzstd it would
//! be copied into a job's input, searched for matches that are not there, and copied again
//! into a raw block of the output (`docs/performance.md`, "Members stored as they are").
//! libzstd has no call that writes a raw block from the caller's buffer, so the raw frame is
//! written here, by hand: a 6-byte frame header and a 3-byte header per block (RFC 8878
//! §3.1.1).

use std::io::{self, IoSlice, Write};

use zstd::zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer};

use super::writer::Compression;
use crate::overlap::write_all_vectored;

/// The input of one zstd job: each job in flight holds its input and output, so this is what
/// keeps a build within its memory budget (measured: 40 MiB peak against 58 MiB with 2 MiB
/// jobs, the bundle no larger).
const ZSTD_JOB_BYTES: u32 = 1 << 20;

fn zstd_err(code: usize) -> io::Error {
    io::Error::other(format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))
}

/// libzstd's streaming compressor over `out`, whose frame can be ended and followed by a frame
/// of raw blocks ([`Frames::raw_frame`]).
pub struct Frames<W: Write> {
    out: W,
    cctx: CCtx<'static>,
    /// Where zstd writes its output before it goes to `out`.
    buf: Box<[u8]>,
    /// A frame is started and not ended.
    open: bool,
}

impl<W: Write> Frames<W> {
    /// Multithreaded with `workers` threads (never 0: single-thread frames differ), in jobs of
    /// `ZSTD_JOB_BYTES`, each frame with a content checksum.
    pub fn new(out: W, compression: Compression, workers: u32) -> io::Result<Self> {
        let mut cctx = CCtx::try_create().ok_or_else(|| io::Error::other("zstd: cannot create a context"))?;
        let mut set = |p| cctx.set_parameter(p).map(drop).map_err(zstd_err);
        set(CParameter::CompressionLevel(compression.level))?;
        set(CParameter::ChecksumFlag(true))?;
        if let Some(log) = compression.long_window_log {
            set(CParameter::EnableLongDistanceMatching(true))?;
            set(CParameter::WindowLog(log))?;
        }
        set(CParameter::NbWorkers(workers))?;
        set(CParameter::JobSize(ZSTD_JOB_BYTES))?;
        Ok(Self { out, cctx, buf: vec![0u8; CCtx::out_size()].into_boxed_slice(), open: false })
    }

    /// Set the compression level. Multithreaded zstd takes it at its next job: the stream is
    /// flushed first, so where the level changes depends on the members alone.
    pub fn set_level(&mut self, level: i32) -> io::Result<()> {
        if self.open {
            self.flush()?;
        }
        self.cctx.set_parameter(CParameter::CompressionLevel(level)).map(drop).map_err(zstd_err)
    }

    /// End the frame in progress, if any, and write all of it.
    pub fn end_frame(&mut self) -> io::Result<()> {
        while self.open {
            let left = self.pump(CCtx::end_stream)?;
            self.open = left > 0;
        }
        Ok(())
    }

    /// End the frame in progress and start a frame of raw blocks after it.
    pub fn raw_frame(&mut self) -> io::Result<RawFrame<'_, W>> {
        self.end_frame()?;
        RawFrame::start(&mut self.out)
    }

    /// End the last frame and hand back the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.end_frame()?;
        Ok(self.out)
    }

    /// One call into zstd with the output buffer, and what it wrote there written out: what
    /// zstd says is left.
    fn pump(
        &mut self,
        call: impl FnOnce(&mut CCtx<'static>, &mut OutBuffer<'_, [u8]>) -> zstd::zstd_safe::SafeResult,
    ) -> io::Result<usize> {
        let mut output = OutBuffer::around(&mut self.buf[..]);
        let left = call(&mut self.cctx, &mut output).map_err(zstd_err)?;
        let n = output.pos();
        self.out.write_all(&self.buf[..n])?;
        Ok(left)
    }
}

impl<W: Write> Write for Frames<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let mut input = InBuffer::around(data);
        // Until zstd takes something: it may first have output to hand over.
        while input.pos() == 0 {
            self.pump(|cctx, output| cctx.compress_stream(output, &mut input))?;
            self.open = true;
        }
        Ok(input.pos())
    }

    /// Compress and write everything given so far, keeping the frame open.
    fn flush(&mut self) -> io::Result<()> {
        while self.pump(CCtx::flush_stream)? > 0 {}
        Ok(())
    }
}

/// A zstd block's largest size (RFC 8878 §3.1.1.2.3), and the window of a raw frame.
pub const BLOCK: usize = 128 << 10;

/// What is tried of each block of a member being stored, after its first: enough to find where
/// its bytes turn compressible. Measured on 384 MiB of noise, 128 KiB blocks: 8 KiB tried of
/// each cost 21 ms, 32 KiB 45 ms, whole blocks 55 ms (from 40 KiB of literals up, zstd
/// itself looks at 8 KiB of them before it builds a table, so a small trial costs nearly what
/// a whole block does).
pub const SAMPLE: usize = 8 << 10;

/// Magic number, then a frame header descriptor of 0 (no content size, no checksum, no
/// dictionary, not single-segment), then a window descriptor of 0x38: 2^(10 + 7) = 128 KiB, so
/// a reader holds one block.
const RAW_FRAME_HEADER: [u8; 6] = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];

/// A block header: `Last_Block`, `Block_Type` 0 (raw), `Block_Size`, little-endian in 3 bytes.
fn raw_block_header(len: usize, last: bool) -> [u8; 3] {
    let len = u32::try_from(len.min(BLOCK)).expect("a block is at most 128 KiB");
    let word = len << 3 | u32::from(last);
    let [a, b, c, _] = word.to_le_bytes();
    [a, b, c]
}

/// What stores a member's bytes as they are: a trial of each block at zstd level 1 decides
/// whether zstd would shrink it, and raw frames hold the ones it would not.
pub struct Store {
    trial: CCtx<'static>,
    /// The trial's output, thrown away.
    scratch: Box<[u8]>,
}

impl Store {
    pub fn new() -> io::Result<Self> {
        let mut trial = CCtx::try_create().ok_or_else(|| io::Error::other("zstd: cannot create a context"))?;
        trial.set_parameter(CParameter::CompressionLevel(1)).map_err(zstd_err)?;
        Ok(Self { trial, scratch: vec![0u8; BLOCK].into_boxed_slice() })
    }

    /// Whether zstd shrinks `block` (at most [`BLOCK`] bytes) by what it asks of a block before
    /// it stores one compressed rather than raw: 1/64 of it (`ZSTD_minGain` at levels 1 – 15),
    /// plus what a frame of its own costs. Level 1, so what a gzip layer costs is one quick
    /// look; zstd gives up on a block once its output is past the space given.
    pub fn compresses(&mut self, block: &[u8]) -> bool {
        let room = block.len().saturating_sub((block.len() >> 6) + 2 + 16);
        if room == 0 {
            return false;
        }
        self.trial.compress2(&mut self.scratch[..room.min(BLOCK)], block).is_ok()
    }
}

/// A frame of raw blocks being written to `out`.
pub struct RawFrame<'w, W: Write> {
    out: &'w mut W,
}

impl<'w, W: Write> RawFrame<'w, W> {
    /// Start one: `out` must be between frames.
    fn start(out: &'w mut W) -> io::Result<Self> {
        out.write_all(&RAW_FRAME_HEADER)?;
        Ok(Self { out })
    }

    /// Write `bytes` as they are, in blocks of at most [`BLOCK`]: one vectored write of the
    /// headers and the caller's bytes (`WriteBehind` writes it without a copy), per 32 MiB
    /// (the system takes 1,024 buffers in one call).
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        for group in bytes.chunks(BLOCK * 256) {
            let headers: Vec<[u8; 3]> = group.chunks(BLOCK).map(|block| raw_block_header(block.len(), false)).collect();
            let mut slices: Vec<IoSlice<'_>> = headers
                .iter()
                .zip(group.chunks(BLOCK))
                .flat_map(|(header, block)| [IoSlice::new(header), IoSlice::new(block)])
                .collect();
            write_all_vectored(self.out, &mut slices)?;
        }
        Ok(())
    }

    /// End the frame with an empty last block (as `ZSTD_writeLastEmptyBlock` does).
    pub fn end(self) -> io::Result<()> {
        self.out.write_all(&raw_block_header(0, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_frames_between_compressed_ones_are_one_stream_to_zstd() {
        let mut frames = Frames::new(Vec::new(), Compression::default(), 2).unwrap();
        frames.write_all(b"first, compressed ").unwrap();
        frames.end_frame().unwrap();
        let ended = frames.out.len();
        frames.end_frame().unwrap();
        assert_eq!(frames.out.len(), ended, "ending again writes nothing");
        let stored: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13).to_le_bytes()[0]).collect();
        let mut raw = frames.raw_frame().unwrap();
        raw.write(&stored[..1000]).unwrap();
        raw.write(&stored[1000..]).unwrap();
        raw.end().unwrap();
        frames.write_all(b" and last").unwrap();
        let out = frames.finish().unwrap();
        let mut want = b"first, compressed ".to_vec();
        want.extend_from_slice(&stored);
        want.extend_from_slice(b" and last");
        assert!(zstd::decode_all(out.as_slice()).unwrap() == want);
        // Three frames, the raw one 6 + 3 × (1 + 3) bytes of headers over its content.
        assert!(out.len() < want.len() + 64, "{} bytes", out.len());
    }

    #[test]
    fn a_trial_tells_text_from_noise() {
        let mut store = Store::new().unwrap();
        let text: Vec<u8> = b"rocm hip runtime firmware ".iter().copied().cycle().take(BLOCK).collect();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..BLOCK)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state.to_le_bytes()[0]
            })
            .collect();
        assert!(store.compresses(&text));
        assert!(!store.compresses(&noise));
        assert!(!store.compresses(&noise[..10]));
        assert!(store.compresses(&text), "again, after a failed trial");
    }
}
