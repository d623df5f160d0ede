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

use zstd::zstd_safe::{CCtx, CParameter, DCtx, DParameter, InBuffer, OutBuffer};

use super::format::Compression;
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
pub const RAW_FRAME_HEADER: [u8; 6] = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];

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

    /// Write `parts` as they are, one after another, each in blocks of at most [`BLOCK`]: one
    /// vectored write of the headers and the caller's bytes (`WriteBehind` writes it without a
    /// copy), per 32 MiB (the system takes 1,024 buffers in one call). Blocks start where parts
    /// do: every part but the last a multiple of a block keeps them where one part's would be.
    pub fn write(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        let blocks: Vec<&[u8]> = parts.iter().flat_map(|part| part.chunks(BLOCK)).collect();
        for group in blocks.chunks(256) {
            let headers: Vec<[u8; 3]> = group.iter().map(|block| raw_block_header(block.len(), false)).collect();
            let mut slices: Vec<IoSlice<'_>> = headers
                .iter()
                .zip(group)
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

/// A bundle's zstd stream, read: frames of raw blocks with [`RawFrame`]'s header by hand, each
/// block copied once from the input to the caller; every other frame through libzstd's
/// streaming decoder, which copies a raw block twice (into its window, then out: 21 of
/// verify's 28% `memmove`, `docs/performance.md`).
///
/// Any zstd stream reads as it would through libzstd, with one refusal: a frame whose header
/// is exactly raw frames' (no checksum, no content size, a 128 KiB window) must hold raw
/// blocks only. `Frames` writes no other; a block of another type there is an error, as is a
/// block over 128 KiB or a stream that ends inside a frame.
pub struct FrameReader<R> {
    input: R,
    dctx: DCtx<'static>,
    buf: Box<[u8]>,
    /// The bytes of `buf` not read yet.
    pos: usize,
    end: usize,
    /// Bytes read from `input` so far: where `buf[pos]` is in the stream, for the errors.
    taken: u64,
    state: Reading,
    /// The first error, returned again.
    failed: Option<(io::ErrorKind, String)>,
    /// Raw blocks are given as spans of the input, not read ([`FrameReader::read_piece`]);
    /// frame and block headers are then read alone, not with the bytes after them.
    spans: bool,
}

#[derive(Clone, Copy)]
enum Reading {
    /// Between frames: the next bytes decide who reads the frame.
    FrameStart,
    /// In a raw frame, before a block header.
    BlockStart,
    /// In a raw block: `left` bytes of it, and whether it ends the frame.
    Raw { left: usize, last: bool },
    /// In a frame libzstd reads.
    Zstd,
}

/// Bytes of input read at once.
const INPUT_BYTES: usize = 256 << 10;
/// With spans, what is read after a block header with it: a raw block this small comes as
/// bytes, not as a span.
const SMALL_BLOCK: usize = 512;

impl<R: io::Read> FrameReader<R> {
    /// Frames over `input`, libzstd's windows up to `2^window_log_max` bytes.
    pub fn new(input: R, window_log_max: u32) -> io::Result<Self> {
        let mut dctx = DCtx::try_create().ok_or_else(|| io::Error::other("zstd: cannot create a context"))?;
        dctx.set_parameter(DParameter::WindowLogMax(window_log_max)).map_err(zstd_err)?;
        let buf = vec![0u8; INPUT_BYTES].into_boxed_slice();
        Ok(Self { input, dctx, buf, pos: 0, end: 0, taken: 0, state: Reading::FrameStart, failed: None, spans: false })
    }

    /// At least `want` bytes in the buffer, unless the input ends first: the bytes there. A
    /// `header` is read alone when raw blocks are given as spans: the block after it is not.
    fn fill(&mut self, want: usize, header: bool) -> io::Result<&[u8]> {
        if self.end - self.pos < want {
            self.buf.copy_within(self.pos..self.end, 0);
            (self.end, self.pos) = (self.end - self.pos, 0);
            let most = if header && self.spans { want + SMALL_BLOCK } else { self.buf.len() };
            while self.end < want {
                match self.input.read(&mut self.buf[self.end..most]) {
                    Ok(0) => break,
                    Ok(n) => {
                        self.end += n;
                        self.taken += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(&self.buf[self.pos..self.end])
    }

    /// Where the next unread byte is in the stream.
    fn offset(&self) -> u64 {
        self.taken - (self.end - self.pos) as u64
    }

    /// The stream ends (at `offset`) inside `what`.
    fn cut(&self, what: &str) -> io::Error {
        let at = self.offset();
        io::Error::new(io::ErrorKind::UnexpectedEof, format!("the zstd stream ends inside {what}, at byte {at}"))
    }
}

impl<R: io::Read> io::Read for FrameReader<R> {
    /// The first error comes again on every later read (`overlap::ReadAhead` asks again after
    /// one), never a read from where the stream stopped making sense.
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        match self.next(out)? {
            Piece::Bytes(n) => Ok(n),
            // Only with `spans`, which `FrameReader::spans` sets and `read_piece` reads.
            Piece::Stored { .. } => Err(io::Error::other("a raw block given as a span to a plain read")),
        }
    }
}

/// What [`FrameReader::read_piece`] gives: bytes into the caller's buffer (0: the end of the
/// stream), or where the content of a raw block lies in the input, not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    Bytes(usize),
    /// `len` bytes of the stream from byte `offset` of the input, as they are there.
    Stored {
        offset: u64,
        len: usize,
    },
}

/// An input that can pass bytes without reading them (a file, by position).
pub trait Skip: io::Read {
    /// Pass the next `n` bytes; an error if the input ends before.
    fn skip(&mut self, n: u64) -> io::Result<()>;
}

impl<R: Skip> FrameReader<R> {
    /// Frames over `input` whose raw blocks [`FrameReader::read_piece`] gives as spans.
    pub fn spans(input: R, window_log_max: u32) -> io::Result<Self> {
        Ok(Self { spans: true, ..Self::new(input, window_log_max)? })
    }

    /// The next piece of the stream: decompressed bytes into `out`, or the content of a raw
    /// block as a [`Piece::Stored`] span of the input, which is passed, not read (its
    /// header was: the block type and size are checked as for `read`). The first error comes
    /// again on every later call.
    pub fn read_piece(&mut self, out: &mut [u8]) -> io::Result<Piece> {
        let piece = self.next(out)?;
        let (Piece::Stored { len, .. }, Reading::Raw { last, .. }) = (piece, self.state) else {
            return Ok(piece);
        };
        let held = self.end - self.pos;
        let passed = if held >= len {
            self.pos += len;
            Ok(())
        } else {
            self.pos = self.end;
            self.taken += (len - held) as u64;
            self.input.skip((len - held) as u64).map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => self.cut("a raw block"),
                _ => e,
            })
        };
        passed.inspect_err(|e| self.failed = Some((e.kind(), e.to_string())))?;
        self.state = Reading::Raw { left: 0, last };
        Ok(piece)
    }
}

impl<R: io::Read> FrameReader<R> {
    fn next(&mut self, out: &mut [u8]) -> io::Result<Piece> {
        if let Some((kind, message)) = &self.failed {
            return Err(io::Error::new(*kind, message.clone()));
        }
        self.read_frames(out).inspect_err(|e| self.failed = Some((e.kind(), e.to_string())))
    }

    /// With `spans`, a raw block's content is not read: its offset and length are given, the
    /// state left at its start (`read_piece` passes it).
    fn read_frames(&mut self, out: &mut [u8]) -> io::Result<Piece> {
        if out.is_empty() {
            return Ok(Piece::Bytes(0));
        }
        loop {
            match self.state {
                Reading::FrameStart => {
                    let head = self.fill(RAW_FRAME_HEADER.len(), true)?;
                    if head.is_empty() {
                        return Ok(Piece::Bytes(0));
                    }
                    if head.starts_with(&RAW_FRAME_HEADER) {
                        self.pos += RAW_FRAME_HEADER.len();
                        self.state = Reading::BlockStart;
                    } else {
                        self.state = Reading::Zstd;
                    }
                }
                Reading::BlockStart => {
                    let &[a, b, c, ..] = self.fill(3, true)? else { return Err(self.cut("a raw frame")) };
                    let at = self.offset();
                    self.pos += 3;
                    let word = u32::from_le_bytes([a, b, c, 0]);
                    let (last, kind, left) = (word & 1 == 1, (word >> 1) & 3, (word >> 3) as usize);
                    let refuse =
                        |what: String| Err(io::Error::new(io::ErrorKind::InvalidData, format!("{what}, at byte {at}")));
                    if kind != 0 {
                        return refuse(format!("a zstd frame of raw blocks holds a block of type {kind}, not raw (0)"));
                    }
                    if left > BLOCK {
                        return refuse(format!("a zstd raw block of {left} bytes, over the {BLOCK} a block may hold"));
                    }
                    self.state = Reading::Raw { left, last };
                }
                Reading::Raw { left: 0, last } => {
                    self.state = if last { Reading::FrameStart } else { Reading::BlockStart };
                }
                // A small block already read is handed over as bytes: a stream of tiny blocks
                // costs no call per block, and no span each.
                Reading::Raw { left, .. } if self.spans && (left >= SMALL_BLOCK || self.end - self.pos < left) => {
                    return Ok(Piece::Stored { offset: self.offset(), len: left });
                }
                Reading::Raw { left, last } => {
                    if self.fill(1, false)?.is_empty() {
                        return Err(self.cut("a raw block"));
                    }
                    let held = &self.buf[self.pos..self.end];
                    let n = held.len().min(left).min(out.len());
                    out[..n].copy_from_slice(&held[..n]);
                    self.pos += n;
                    self.state = Reading::Raw { left: left - n, last };
                    return Ok(Piece::Bytes(n));
                }
                Reading::Zstd => {
                    // `fill` may move the held bytes to the front: `pos` after it.
                    let held = self.fill(1, false)?.len();
                    let pos = self.pos;
                    let mut input = InBuffer::around(&self.buf[pos..pos + held]);
                    let mut output = OutBuffer::around(&mut *out);
                    let hint = self.dctx.decompress_stream(&mut output, &mut input).map_err(zstd_err)?;
                    let input_used = input.pos();
                    self.pos = pos + input_used;
                    if hint == 0 {
                        self.state = Reading::FrameStart;
                    }
                    let produced = output.pos();
                    if produced > 0 {
                        return Ok(Piece::Bytes(produced));
                    }
                    if held == 0 && hint != 0 {
                        return Err(self.cut("a frame"));
                    }
                    if input_used == 0 && held > 0 && hint != 0 {
                        return Err(io::Error::other("zstd took no input and gave no output"));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
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
        raw.write(&[&stored[..1000]]).unwrap();
        // Two parts, cut where one part's blocks would be.
        raw.write(&[&stored[1000..1000 + BLOCK], &stored[1000 + BLOCK..]]).unwrap();
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

    /// A compressed frame, a raw one of three blocks, a compressed one: the stream and its
    /// content.
    pub(crate) fn mixed() -> (Vec<u8>, Vec<u8>) {
        let mut frames = Frames::new(Vec::new(), Compression::default(), 2).unwrap();
        let text: Vec<u8> = b"rocm hip runtime firmware ".iter().copied().cycle().take(5000).collect();
        frames.write_all(&text).unwrap();
        let stored: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13).to_le_bytes()[0]).collect();
        let mut raw = frames.raw_frame().unwrap();
        raw.write(&[&stored]).unwrap();
        raw.end().unwrap();
        frames.write_all(&text).unwrap();
        let want = [&text[..], &stored, &text].concat();
        (frames.finish().unwrap(), want)
    }

    /// A reader that gives at most `most` bytes a call, as a pipe or a socket may.
    struct Trickle<'a> {
        bytes: &'a [u8],
        most: usize,
    }

    impl io::Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.bytes.len().min(self.most).min(out.len());
            out[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    /// All of `stream` through a `FrameReader`, `step` bytes asked for at a time.
    fn read_all(stream: &[u8], step: usize) -> io::Result<Vec<u8>> {
        read_from(stream, step)
    }

    fn read_from(stream: impl io::Read, step: usize) -> io::Result<Vec<u8>> {
        let mut reader = FrameReader::new(stream, 27)?;
        let (mut out, mut buf) = (Vec::new(), vec![0u8; step]);
        loop {
            match io::Read::read(&mut reader, &mut buf)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    #[test]
    fn the_frame_reader_reads_what_frames_wrote_and_any_other_zstd_stream() {
        let (stream, want) = mixed();
        for step in [1, 7, 4096, 1 << 20] {
            assert!(read_all(&stream, step).unwrap() == want, "asked {step} bytes at a time");
        }
        // Input in pieces that end anywhere: inside headers, blocks and zstd's frames.
        for most in [1, 5, 1000, 65_537] {
            let got = read_from(Trickle { bytes: &stream, most }, 70_000).unwrap();
            assert!(got == want, "input {most} bytes at a time");
        }
        // zstd's own: frames with checksums and content sizes, two of them back to back.
        let other = [zstd::encode_all(&want[..], 3).unwrap(), zstd::encode_all(&b"second"[..], 19).unwrap()].concat();
        assert!(read_all(&other, 1000).unwrap() == [&want[..], b"second"].concat());
        assert!(read_all(&[], 10).unwrap().is_empty(), "no frames, no bytes");
    }

    #[test]
    fn the_frame_reader_refuses_a_raw_frame_with_other_blocks_and_every_cut() {
        let refused = |bytes: &[u8], words: &str| {
            let e = read_all(bytes, 4096).unwrap_err();
            assert!(e.to_string().contains(words), "{e}");
        };
        // Block type 2 (compressed) and 1 (RLE) under a raw frame's header.
        refused(&[&RAW_FRAME_HEADER[..], &[0b101, 0, 0, 1]].concat(), "type 2, not raw (0), at byte 6");
        refused(&[&RAW_FRAME_HEADER[..], &[0b011, 0, 0]].concat(), "type 1");
        // Asked again, the same error, not a header read from the bytes after it.
        let typed = [&RAW_FRAME_HEADER[..], &[0b101, 0, 0], &[0x88, 0xe4, 0x43, 0, 0]].concat();
        let mut reader = FrameReader::new(&typed[..], 27).unwrap();
        let mut buf = [0u8; 64];
        for _ in 0..2 {
            let e = io::Read::read(&mut reader, &mut buf).unwrap_err();
            assert!(e.to_string().contains("type 2"), "{e}");
        }
        // A raw block over 128 KiB.
        let over = raw_block_header(BLOCK, true);
        let word = (u32::from_le_bytes([over[0], over[1], over[2], 0]) + 8).to_le_bytes();
        refused(&[&RAW_FRAME_HEADER[..], &word[..3]].concat(), "over the");
        // Cut anywhere: an error, or (at a frame's end) fewer bytes, never more or others.
        let (stream, want) = mixed();
        let ends = [0, stream.len()];
        for at in (0..stream.len()).step_by(997).chain(ends).chain([stream.len() - 1]) {
            match read_all(&stream[..at], 8192) {
                Ok(got) => assert!(want.starts_with(&got) && (got.len() < want.len() || at == stream.len())),
                Err(e) => assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "cut at {at}: {e}"),
            }
        }
        let raw_start = stream.windows(6).position(|w| w == RAW_FRAME_HEADER).unwrap();
        let e = read_all(&stream[..raw_start + 6 + 3 + 1000], 8192).unwrap_err();
        assert!(e.to_string().contains("inside a raw block"), "{e}");
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
