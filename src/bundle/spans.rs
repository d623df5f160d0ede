//! `verify` of a bundle file: its stored members hashed beside the stream, not in it.
//!
//! A bundle stores a member zstd cannot shrink as a frame of raw blocks (`frames`). Read in
//! order, `verify` hashes such a member on the thread that parses the tar stream while the
//! decompressing thread idles, and then decompresses the text after it while the hashing
//! thread idles: one thread's sha256 and one thread's zstd, one after the other
//! (`docs/performance.md`, "Stored members hashed ahead of the stream"). From a file, the stored bytes need
//! not pass through the stream at all:
//!
//! - the reading thread ([`spawn`]) reads the frames with [`FrameReader::read_piece`]: a raw
//!   block's header is read and checked, its content is handed over as a [`Span`] of the file,
//!   not read; decompressed bytes are handed over in chunks, as `overlap::ReadAhead` does;
//! - the tar side ([`SpanStream`]) reads spans from the file when the `tar` crate asks for
//!   their bytes (a header, a member whose data is not all spans), and when a member's data
//!   is spans only, [`Deferral::take`] takes them and the `tar` crate skips the data
//!   (`Seek`), unread;
//! - a scanning thread ([`Scanner`]) walks the file's frames by their headers from the start,
//!   ahead of the stream, and hashes every raw frame it finds: a member whose spans are one
//!   such frame takes its digest (the weights at a bundle's end are hashed while the text
//!   before them is decompressed). Digests are checked against the manifest when the stream
//!   has ended. Progress counts such a member once its digest is known, not when it is taken,
//!   so a bar does not stand full while the weights are still being hashed.
//!
//! Every stored byte is read and hashed once, by the scanner (or, for a member that is not
//! one whole frame, on the tar side); memory holds the spans of the members and frames not
//! yet matched (16 bytes per 128 KiB block; at most 1,024 frames ahead) and the chunks in
//! flight.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt as _;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::Scope;

use sha2::Digest as _;

use super::frames::{BLOCK, FrameReader, Piece, RAW_FRAME_HEADER, Skip};
use crate::digest::Sha256;
use crate::overlap::{CHUNK, DEPTH, Pool};
use crate::progress::Reporter;

/// Spans handed over at once, at most.
const SPANS_AT_ONCE: usize = 4096;
/// Bytes per span, on average, below which a member is not taken, nor a frame hashed ahead
/// (read as it comes instead): a stream of small blocks is not held as spans. `Frames`
/// writes blocks of 128 KiB.
const BYTES_PER_SPAN: u64 = 32 << 10;

/// The most spans `bytes` may come in to be held as spans.
fn most_spans(bytes: u64) -> usize {
    usize::try_from(bytes / BYTES_PER_SPAN).unwrap_or(usize::MAX).saturating_add(2)
}

/// The content of a raw block: `len` bytes of the file from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub offset: u64,
    pub len: u64,
}

/// A file read by position, up to `len` bytes, that can pass bytes unread.
pub struct Positional {
    file: Arc<File>,
    pos: u64,
    len: u64,
}

impl Positional {
    pub fn new(file: Arc<File>, len: u64) -> Self {
        Self { file, pos: 0, len }
    }
}

impl Read for Positional {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = usize::try_from(self.len - self.pos).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Skip for Positional {
    fn skip(&mut self, n: u64) -> io::Result<()> {
        if n > self.len - self.pos {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.pos += n;
        Ok(())
    }
}

/// One hand-over from the reading thread: a chunk and how many of its bytes are filled (0: the
/// end of the stream), or spans.
enum Handed {
    Bytes(Vec<u8>, usize),
    Spans(Vec<Span>),
}

/// Start reading `frames` on a thread of `scope`; the tar side's stream, and the handle that
/// takes a member's spans from it.
pub fn spawn<'scope>(
    scope: &'scope Scope<'scope, '_>,
    frames: FrameReader<Positional>,
    file: Arc<File>,
) -> (SpanStream, Deferral) {
    let (filled_tx, filled) = sync_channel(DEPTH);
    let (spent, spent_rx) = sync_channel(DEPTH + 2);
    scope.spawn(move || produce(frames, &filled_tx, spent_rx));
    let shared = Rc::new(RefCell::new(Lookahead {
        filled,
        spent,
        file,
        queue: VecDeque::new(),
        state: State::Reading,
        owed: 0,
    }));
    (SpanStream(shared.clone()), Deferral(shared))
}

/// The reading thread: chunks of decompressed bytes and batches of spans, in stream order.
fn produce(mut frames: FrameReader<Positional>, filled: &SyncSender<io::Result<Handed>>, spent: Receiver<Vec<u8>>) {
    let mut pool = Pool::new(spent, || vec![0u8; CHUNK]);
    let mut spans: Vec<Span> = Vec::new();
    let (mut buf, mut n) = (Vec::new(), 0);
    let send = |handed| filled.send(handed).is_ok();
    loop {
        if buf.is_empty() {
            let Some(fresh) = pool.take() else { return };
            (buf, n) = (fresh, 0);
        }
        if n == buf.len() {
            if !send(Ok(Handed::Bytes(std::mem::take(&mut buf), n))) {
                return;
            }
            continue;
        }
        match frames.read_piece(&mut buf[n..]) {
            Ok(Piece::Bytes(0)) => {
                let ended = (n == 0 || send(Ok(Handed::Bytes(std::mem::take(&mut buf), n))))
                    && (spans.is_empty() || send(Ok(Handed::Spans(std::mem::take(&mut spans)))));
                if ended {
                    send(Ok(Handed::Bytes(Vec::new(), 0)));
                }
                return;
            }
            Ok(Piece::Bytes(k)) => {
                // Spans before these bytes go first.
                if !spans.is_empty() && !send(Ok(Handed::Spans(std::mem::take(&mut spans)))) {
                    return;
                }
                n += k;
            }
            Ok(Piece::Stored { offset, len }) => {
                // Bytes before this span go first.
                if n > 0 && !send(Ok(Handed::Bytes(std::mem::take(&mut buf), n))) {
                    return;
                }
                n = if buf.is_empty() { 0 } else { n };
                spans.push(Span { offset, len: len as u64 });
                if spans.len() == SPANS_AT_ONCE && !send(Ok(Handed::Spans(std::mem::take(&mut spans)))) {
                    return;
                }
            }
            Err(e) => {
                let before = (n == 0 || send(Ok(Handed::Bytes(std::mem::take(&mut buf), n))))
                    && (spans.is_empty() || send(Ok(Handed::Spans(std::mem::take(&mut spans)))));
                if before {
                    send(Err(e));
                }
                return;
            }
        }
    }
}

/// What the tar side holds: the pieces received and not yet consumed.
struct Lookahead {
    filled: Receiver<io::Result<Handed>>,
    spent: SyncSender<Vec<u8>>,
    file: Arc<File>,
    queue: VecDeque<Item>,
    state: State,
    /// Bytes [`Deferral::take`] took that the `tar` crate's next skip covers.
    owed: u64,
}

enum Item {
    Bytes { buf: Vec<u8>, pos: usize, len: usize },
    Span(Span),
}

impl Item {
    /// Up to `out.len()` of the item's next bytes (a span's read from `file`): how many, and
    /// whether the item is spent.
    fn read(&mut self, file: &File, out: &mut [u8]) -> io::Result<(usize, bool)> {
        match self {
            Item::Bytes { buf, pos, len } => {
                let n = out.len().min(*len - *pos);
                out[..n].copy_from_slice(&buf[*pos..*pos + n]);
                *pos += n;
                Ok((n, pos == len))
            }
            Item::Span(span) => {
                let want = usize::try_from(span.len).unwrap_or(usize::MAX).min(out.len());
                let n = file.read_at(&mut out[..want], span.offset)?;
                if n == 0 && want > 0 {
                    let at = span.offset;
                    let e = format!("the bundle file ends inside a stored block, at byte {at}");
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, e));
                }
                span.offset += n as u64;
                span.len -= n as u64;
                Ok((n, span.len == 0))
            }
        }
    }

    /// Pass up to `left` of the item's bytes: how many, and whether the item is spent.
    fn skip(&mut self, left: u64) -> (u64, bool) {
        match self {
            Item::Bytes { pos, len, .. } => {
                let k = (*len - *pos).min(usize::try_from(left).unwrap_or(usize::MAX));
                *pos += k;
                (k as u64, pos == len)
            }
            Item::Span(span) => {
                let k = left.min(span.len);
                span.offset += k;
                span.len -= k;
                (k, span.len == 0)
            }
        }
    }
}

enum State {
    Reading,
    Ended,
    /// The first error, returned again on every later read.
    Failed(io::ErrorKind, String),
}

impl Lookahead {
    /// Receive one hand-over into the queue; `false` at the end of the stream.
    fn pull(&mut self) -> io::Result<bool> {
        match &self.state {
            State::Reading => {}
            State::Ended => return Ok(false),
            State::Failed(kind, message) => return Err(io::Error::new(*kind, message.clone())),
        }
        let failed = |state: &mut State, e: io::Error| {
            *state = State::Failed(e.kind(), e.to_string());
            Err(e)
        };
        match self.filled.recv() {
            Ok(Ok(Handed::Bytes(_, 0))) => {
                self.state = State::Ended;
                Ok(false)
            }
            Ok(Ok(Handed::Bytes(buf, len))) => {
                self.queue.push_back(Item::Bytes { buf, pos: 0, len });
                Ok(true)
            }
            Ok(Ok(Handed::Spans(spans))) => {
                self.queue.extend(spans.into_iter().map(Item::Span));
                Ok(true)
            }
            Ok(Err(e)) => failed(&mut self.state, e),
            Err(_) => failed(&mut self.state, io::Error::other("the reading thread stopped early")),
        }
    }

    /// The front item, receiving one when none is held, and the file its span is read from;
    /// `None` at the end of the stream.
    fn front(&mut self) -> io::Result<Option<(&File, &mut Item)>> {
        while self.queue.is_empty() {
            if !self.pull()? {
                return Ok(None);
            }
        }
        let Self { file, queue, .. } = self;
        Ok(queue.front_mut().map(|item| (&**file, item)))
    }

    /// Drop the front item, handing a chunk back to the reading thread.
    fn pop(&mut self) {
        if let Some(Item::Bytes { buf, .. }) = self.queue.pop_front() {
            // Full only when the reading thread has stopped: then the chunk is not needed.
            let _ = self.spent.try_send(buf);
        }
    }

    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.owed > 0 {
            return Err(io::Error::other("a taken member's bytes were read, not skipped"));
        }
        let Some((file, item)) = self.front()? else { return Ok(0) };
        let (n, spent) = item.read(file, out)?;
        if spent {
            self.pop();
        }
        Ok(n)
    }

    /// Pass `n` bytes unread, less those `take` already took.
    fn skip(&mut self, n: u64) -> io::Result<()> {
        let mut left =
            n.checked_sub(self.owed).ok_or_else(|| io::Error::other("a skip shorter than a taken member"))?;
        self.owed = 0;
        while left > 0 {
            let Some((_, item)) = self.front()? else {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ends inside a member"));
            };
            let (passed, spent) = item.skip(left);
            left -= passed;
            if spent {
                self.pop();
            }
        }
        Ok(())
    }

    /// The spans of the next `n` bytes when they are spans only (no decompressed byte among
    /// them), taken; `None` otherwise, nothing taken.
    fn take(&mut self, n: u64) -> io::Result<Option<Vec<Span>>> {
        if self.owed > 0 || n == 0 {
            return Ok(None);
        }
        // Receive until the queue covers `n` bytes or holds bytes among them, or more spans
        // than so many bytes should take.
        let (mut covered, mut seen) = (0u64, 0usize);
        while covered < n {
            if seen > most_spans(n) || (seen == self.queue.len() && !self.pull()?) {
                return Ok(None);
            }
            match &self.queue[seen] {
                Item::Span(span) => covered += span.len,
                Item::Bytes { pos, len, .. } if pos == len => {}
                Item::Bytes { .. } => return Ok(None),
            }
            seen += 1;
        }
        let mut taken = Vec::with_capacity(seen);
        let mut left = n;
        while left > 0 {
            let Some(item) = self.queue.front_mut() else { break };
            if let Item::Span(span) = item {
                let k = left.min(span.len);
                taken.push(Span { offset: span.offset, len: k });
                span.offset += k;
                span.len -= k;
                left -= k;
                if span.len > 0 {
                    break;
                }
            }
            self.pop();
        }
        self.owed = n;
        Ok(Some(taken))
    }
}

/// The decompressed stream on the tar side: spans read from the file when their bytes are
/// asked for.
pub struct SpanStream(Rc<RefCell<Lookahead>>);

impl Read for SpanStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.0.borrow_mut().read(out)
    }
}

impl Skip for SpanStream {
    fn skip(&mut self, n: u64) -> io::Result<()> {
        self.0.borrow_mut().skip(n)
    }
}

/// Takes a member's data from the stream as spans, for the [`Scanner`].
pub struct Deferral(Rc<RefCell<Lookahead>>);

impl Deferral {
    /// The spans of the next `n` bytes of the stream (a member's data, whose entry the `tar`
    /// crate then skips), when they are spans only.
    pub fn take(&self, n: u64) -> io::Result<Option<Vec<Span>>> {
        self.0.borrow_mut().take(n)
    }
}

/// A raw frame the scanner found and hashed whole: its blocks' spans and their digest.
struct Ahead {
    spans: Vec<Span>,
    sha256: Sha256,
}

/// Raw frames hashed ahead of the stream.
///
/// The scanner thread walks the file's zstd frames by their headers alone (RFC 8878 §3.1.1:
/// a compressed block's header gives its size, so a compressed frame is passed without
/// decompressing it) and hashes the content of every raw frame as it finds it: the weights at
/// the end of a bundle are hashed while the text before them is still being decompressed. A
/// member whose spans, as the stream's reader found them, are exactly a frame's spans takes
/// that frame's digest; any other (or any frame after the scanner stopped at something it
/// does not know) is hashed from its spans on the tar side. The scanner's walk decides only
/// what is hashed ahead, never what a member is.
pub struct Scanner {
    found: Receiver<Ahead>,
    /// Members taken and not matched yet, in stream order.
    waiting: VecDeque<Job>,
    /// The scanner's next frame, when it lies past the first member waiting.
    next: Option<Ahead>,
    /// Members whose digests are known, in the order they were resolved.
    done: Vec<Hashed>,
    /// Bytes of the members resolved since progress was last told.
    unreported: u64,
    file: Arc<File>,
    buf: Vec<u8>,
    /// Members the scanner hashed, and those hashed here.
    ahead: usize,
    here: usize,
}

/// A member taken as spans.
pub struct Job {
    /// The member's name, as problems name it.
    pub name: String,
    pub expected: Sha256,
    pub spans: Vec<Span>,
}

impl Job {
    fn bytes(&self) -> u64 {
        self.spans.iter().map(|s| s.len).sum()
    }
}

/// A member's outcome: the digest of its spans' bytes, or why they could not be read.
pub struct Hashed {
    pub name: String,
    pub expected: Sha256,
    pub actual: io::Result<Sha256>,
}

/// Raw frames found ahead and not yet matched, at most.
const FRAMES_AHEAD: usize = 1024;

impl Scanner {
    pub fn spawn<'scope>(scope: &'scope Scope<'scope, '_>, file: Arc<File>, len: u64) -> Self {
        let (tx, found) = sync_channel(FRAMES_AHEAD);
        let scanned = file.clone();
        scope.spawn(move || {
            if let Err(e) = scan(&scanned, len, &tx) {
                tracing::debug!("the scan ahead of the stream stopped: {e}");
            }
        });
        let (waiting, done) = (VecDeque::new(), Vec::new());
        Self { found, waiting, next: None, done, unreported: 0, file, buf: Vec::new(), ahead: 0, here: 0 }
    }

    /// A member taken as spans: matched with what the scanner found so far, without waiting.
    /// `progress` advances by the members hashed, as they are.
    pub fn push(&mut self, job: Job, progress: &dyn Reporter) {
        self.waiting.push_back(job);
        self.match_found(false, progress);
    }

    /// Every member's outcome, waiting for the scanner to reach the last one's frame.
    pub fn finish(mut self, progress: &dyn Reporter) -> (Vec<Hashed>, usize, usize) {
        self.match_found(true, progress);
        while let Some(job) = self.waiting.pop_front() {
            self.hash_here(job);
            self.report(progress);
        }
        (self.done, self.ahead, self.here)
    }

    /// Match the frames the scanner found with the members waiting, while some wait: those
    /// found so far, or (`wait`) until the scanner has ended.
    fn match_found(&mut self, wait: bool, progress: &dyn Reporter) {
        while !self.waiting.is_empty() {
            let next = match self.next.take() {
                Some(next) => Some(next),
                None if wait => self.found.recv().ok(),
                None => self.found.try_recv().ok(),
            };
            let Some(next) = next else { return };
            self.meet(next);
            self.report(progress);
        }
    }

    /// The bytes of the members resolved since the last report, to `progress`.
    fn report(&mut self, progress: &dyn Reporter) {
        let bytes = std::mem::take(&mut self.unreported);
        if bytes > 0 {
            progress.advance(bytes);
        }
    }

    /// Match the scanner's next frame with the first members waiting (both in file order).
    fn meet(&mut self, frame: Ahead) {
        let at = |spans: &[Span]| spans.first().map_or(u64::MAX, |s| s.offset);
        while let Some(job) = self.waiting.front() {
            let (member_at, frame_at) = (at(&job.spans), at(&frame.spans));
            if frame_at < member_at {
                return; // a frame no member took whole: dropped
            }
            let Some(job) = self.waiting.pop_front() else { return };
            if frame_at == member_at && frame.spans == job.spans {
                self.ahead += 1;
                self.unreported += job.bytes();
                self.done.push(Hashed { name: job.name, expected: job.expected, actual: Ok(frame.sha256) });
                return;
            }
            // The scanner passed this member's start without a frame of the same extent.
            self.hash_here(job);
            if frame_at == member_at {
                return;
            }
        }
        self.next = Some(frame);
    }

    fn hash_here(&mut self, job: Job) {
        if self.buf.is_empty() {
            self.buf = vec![0u8; 256 << 10];
        }
        let actual = hash_spans(&self.file, &job.spans, &mut self.buf);
        self.here += 1;
        self.unreported += job.bytes();
        self.done.push(Hashed { name: job.name, expected: job.expected, actual });
    }
}

/// Walk the frames of `file` (its first `len` bytes) by their headers, hashing each raw frame
/// (`frames::RAW_FRAME_HEADER`) and sending it; stop at the end or at anything else than a
/// zstd or skippable frame.
fn scan(file: &File, len: u64, found: &SyncSender<Ahead>) -> io::Result<()> {
    let mut at = 0u64;
    let mut buf = vec![0u8; 256 << 10];
    let mut head = [0u8; 18];
    while at < len {
        let n = usize::try_from(len - at).unwrap_or(usize::MAX).min(head.len());
        file.read_exact_at(&mut head[..n], at)?;
        let head = &head[..n];
        let word = |i: usize| head.get(i..i + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        match word(0) {
            Some(0xFD2F_B528) if head.starts_with(&RAW_FRAME_HEADER) => {
                let (spans, sha256, end) = raw_frame(file, at + RAW_FRAME_HEADER.len() as u64, len, &mut buf)?;
                if !spans.is_empty() && found.send(Ahead { spans, sha256 }).is_err() {
                    return Ok(());
                }
                at = end;
            }
            Some(0xFD2F_B528) => at = frame_end(file, at, head, len)?,
            Some(magic) if magic & 0xFFFF_FFF0 == 0x184D_2A50 => {
                let size = word(4).ok_or_else(|| io::Error::other("a skippable frame cut short"))?;
                at += 8 + u64::from(size);
            }
            _ => return Err(io::Error::other(format!("no frame at byte {at}"))),
        }
    }
    Ok(())
}

/// A block header at `at`: whether it is the last, its type, its size.
fn block_header(file: &File, at: u64, len: u64) -> io::Result<(bool, u32, u64)> {
    if len.saturating_sub(at) < 3 {
        return Err(io::Error::other(format!("a block header cut short at byte {at}")));
    }
    let mut b = [0u8; 3];
    file.read_exact_at(&mut b, at)?;
    let word = u32::from_le_bytes([b[0], b[1], b[2], 0]);
    Ok((word & 1 == 1, (word >> 1) & 3, u64::from(word >> 3)))
}

/// The blocks of a raw frame from `at` (after its header), hashed: their spans, the digest, and
/// where the frame ends.
fn raw_frame(file: &File, mut at: u64, len: u64, buf: &mut [u8]) -> io::Result<(Vec<Span>, Sha256, u64)> {
    let (mut spans, mut hasher, start) = (Vec::new(), sha2::Sha256::new(), at);
    loop {
        let (last, kind, size) = block_header(file, at, len)?;
        if kind != 0 || size > BLOCK as u64 || size > len - at - 3 {
            return Err(io::Error::other(format!("not a raw block at byte {at}")));
        }
        at += 3;
        if spans.len() > most_spans(at - start) {
            return Err(io::Error::other(format!("a raw frame of small blocks at byte {start}")));
        }
        if size > 0 {
            let span = Span { offset: at, len: size };
            let n = usize::try_from(size).unwrap_or(usize::MAX);
            file.read_exact_at(&mut buf[..n], at)?;
            hasher.update(&buf[..n]);
            spans.push(span);
            at += size;
        }
        if last {
            return Ok((spans, Sha256::from_raw(hasher.finalize().into()), at));
        }
    }
}

/// Where the zstd frame at `at` (whose first bytes are `head`) ends, from its header and its
/// blocks' headers (RFC 8878 §3.1.1).
fn frame_end(file: &File, at: u64, head: &[u8], len: u64) -> io::Result<u64> {
    let descriptor = *head.get(4).ok_or_else(|| io::Error::other("a frame header cut short"))?;
    let single_segment = descriptor & 0x20 != 0;
    let content_size = match descriptor >> 6 {
        0 => u64::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let dictionary = [0, 1, 2, 4][usize::from(descriptor & 3)];
    let checksum = if descriptor & 4 != 0 { 4 } else { 0 };
    let mut at = at + 5 + u64::from(!single_segment) + dictionary + content_size;
    loop {
        let (last, kind, size) = block_header(file, at, len)?;
        at += 3 + match kind {
            0 | 2 => size,
            1 => 1,
            _ => return Err(io::Error::other(format!("a reserved block type at byte {at}"))),
        };
        if last {
            return Ok(at + checksum);
        }
    }
}

fn hash_spans(file: &File, spans: &[Span], buf: &mut [u8]) -> io::Result<Sha256> {
    let mut hasher = sha2::Sha256::new();
    for span in spans {
        let (mut offset, end) = (span.offset, span.offset + span.len);
        while offset < end {
            let want = usize::try_from(end - offset).unwrap_or(usize::MAX).min(buf.len());
            file.read_exact_at(&mut buf[..want], offset).map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the bundle file ends inside a stored block, at byte {offset}"),
                ),
                _ => e,
            })?;
            hasher.update(&buf[..want]);
            offset += want as u64;
        }
    }
    Ok(Sha256::from_raw(hasher.finalize().into()))
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;
    use crate::progress::{Counted, Silent};

    /// `frames`' stream of compressed text, a stored member of 2.3 blocks and compressed text
    /// again, in a file; its content, and where the stored bytes are in the content.
    fn mixed() -> (Arc<File>, u64, Vec<u8>, std::ops::Range<usize>) {
        let (bytes, content) = crate::bundle::frames::tests::mixed();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        (Arc::new(file), bytes.len() as u64, content, 5000..305_000)
    }

    fn opened<'scope>(scope: &'scope Scope<'scope, '_>, file: &Arc<File>, len: u64) -> (SpanStream, Deferral) {
        let frames = FrameReader::spans(Positional::new(file.clone(), len), 27).unwrap();
        spawn(scope, frames, file.clone())
    }

    fn bytes_of(file: &File, spans: &[Span]) -> Vec<u8> {
        let mut out = Vec::new();
        for s in spans {
            let mut buf = vec![0u8; usize::try_from(s.len).unwrap()];
            file.read_exact_at(&mut buf, s.offset).unwrap();
            out.extend_from_slice(&buf);
        }
        out
    }

    #[test]
    fn read_whole_the_stream_is_its_content_spans_read_from_the_file() {
        let (file, len, content, _) = mixed();
        for ask in [1, 7, 4096, 1 << 20] {
            std::thread::scope(|s| {
                let (mut stream, _) = opened(s, &file, len);
                let mut out = Vec::new();
                let mut buf = vec![0u8; ask];
                loop {
                    let n = stream.read(&mut buf).unwrap();
                    if n == 0 {
                        break;
                    }
                    out.extend_from_slice(&buf[..n]);
                }
                assert!(out == content, "asking {ask} bytes at a time");
            });
        }
    }

    #[test]
    fn a_member_of_spans_only_is_taken_and_skipped_and_the_stream_goes_on_after_it() {
        let (file, len, content, stored) = mixed();
        std::thread::scope(|s| {
            let (mut stream, deferral) = opened(s, &file, len);
            let mut head = vec![0u8; stored.start];
            stream.read_exact(&mut head).unwrap();
            assert!(head == content[..stored.start]);
            // Bytes and spans together are not taken; nothing is consumed.
            assert!(deferral.take(stored.len() as u64 + 1).unwrap().is_none());
            let spans = deferral.take(stored.len() as u64).unwrap().expect("spans only");
            assert_eq!(spans.len(), 3, "{spans:?}");
            assert_eq!(spans[0].len, BLOCK as u64);
            assert!(bytes_of(&file, &spans) == content[stored.clone()]);
            // A read before the skip that covers the taken bytes is refused; the skip then
            // passes them and 10 bytes more.
            assert!(stream.read(&mut [0u8; 4]).is_err());
            assert!(stream.skip(stored.len() as u64 - 1).is_err(), "shorter than what was taken");
        });
        std::thread::scope(|s| {
            let (mut stream, deferral) = opened(s, &file, len);
            let mut head = vec![0u8; stored.start + 100];
            stream.read_exact(&mut head).unwrap();
            // From inside the stored bytes: a part of the first span, then the other two.
            let n = stored.len() as u64 - 100;
            let spans = deferral.take(n).unwrap().expect("spans only");
            assert!(bytes_of(&file, &spans) == content[stored.start + 100..stored.end]);
            stream.skip(n + 10).unwrap();
            let mut rest = Vec::new();
            stream.read_to_end(&mut rest).unwrap();
            assert!(rest == content[stored.end + 10..]);
        });
    }

    #[test]
    fn a_file_cut_inside_a_stored_block_is_an_error_not_an_end() {
        let (file, len, _, stored) = mixed();
        let bytes = bytes_of(&file, &[Span { offset: 0, len }]);
        let mut cut = tempfile::tempfile().unwrap();
        cut.write_all(&bytes[..stored.start + 200_000]).unwrap();
        let cut = Arc::new(cut);
        let cut_len = cut.metadata().unwrap().len();
        std::thread::scope(|s| {
            let (mut stream, _) = opened(s, &cut, cut_len);
            let e = stream.read_to_end(&mut Vec::new()).unwrap_err();
            assert!(e.to_string().contains("ends inside a raw block"), "{e}");
            assert!(stream.read(&mut [0u8; 1]).is_err(), "the error comes again");
        });
    }

    #[test]
    fn the_scanner_hashes_raw_frames_ahead_and_members_take_their_digests_or_are_hashed_as_reached() {
        let (file, len, content, stored) = mixed();
        let want = Sha256::of_bytes(&content[stored.clone()]);
        // The member as the stream's reader takes it: the frame's spans.
        let spans = std::thread::scope(|s| {
            let (mut stream, deferral) = opened(s, &file, len);
            stream.read_exact(&mut vec![0u8; stored.start]).unwrap();
            deferral.take(stored.len() as u64).unwrap().unwrap()
        });
        let job = |name: &str, spans: Vec<Span>| Job { name: name.into(), expected: want, spans };
        let progress = Counted::default();
        let (done, ahead, here) = std::thread::scope(|s| {
            let mut scanner = Scanner::spawn(s, file.clone(), len);
            scanner.push(job("whole", spans.clone()), &progress);
            scanner.finish(&progress)
        });
        assert_eq!((ahead, here), (1, 0));
        // Counted once, when hashed.
        assert_eq!(progress.bytes.get(), stored.len() as u64);
        assert_eq!(*done[0].actual.as_ref().unwrap(), want);
        // A member that is part of a frame, and one past the end of the file: hashed here.
        let mut part = spans.clone();
        part.last_mut().unwrap().len -= 1;
        let beyond = vec![Span { offset: len - 10, len: 20 }];
        let progress = Counted::default();
        let (done, ahead, here) = std::thread::scope(|s| {
            let mut scanner = Scanner::spawn(s, file.clone(), len);
            scanner.push(job("part", part), &progress);
            scanner.push(job("past", beyond), &progress);
            scanner.finish(&progress)
        });
        assert_eq!((ahead, here), (0, 2));
        assert_eq!(progress.bytes.get(), stored.len() as u64 - 1 + 20);
        let names: Vec<_> = done.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["part", "past"]);
        assert_eq!(*done[0].actual.as_ref().unwrap(), Sha256::of_bytes(&content[stored.start..stored.end - 1]));
        let e = done[1].actual.as_ref().unwrap_err();
        assert!(e.to_string().contains("ends inside a stored block"), "{e}");
    }

    /// A raw frame of `content` in blocks of `block` bytes, written by hand, in a file.
    fn small_blocks(content: &[u8], block: usize) -> (Arc<File>, u64) {
        let mut bytes = RAW_FRAME_HEADER.to_vec();
        for (i, chunk) in content.chunks(block).enumerate() {
            let last = (i + 1) * block >= content.len();
            let word = u32::try_from(chunk.len()).unwrap() << 3 | u32::from(last);
            bytes.extend_from_slice(&word.to_le_bytes()[..3]);
            bytes.extend_from_slice(chunk);
        }
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        (Arc::new(file), bytes.len() as u64)
    }

    #[test]
    fn small_blocks_are_not_held_as_spans_a_member_of_them_is_read_as_it_comes() {
        let content: Vec<u8> =
            (0..1_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11).to_le_bytes()[0]).collect();
        for block in [100, 600] {
            let (file, len) = small_blocks(&content, block);
            std::thread::scope(|s| {
                let (mut stream, deferral) = opened(s, &file, len);
                assert!(deferral.take(content.len() as u64).unwrap().is_none(), "blocks of {block}");
                let mut out = Vec::new();
                stream.read_to_end(&mut out).unwrap();
                assert!(out == content, "blocks of {block}");
            });
            // The scanner stops there: the member is hashed as it is reached.
            let (done, ahead, here) = std::thread::scope(|s| {
                let mut scanner = Scanner::spawn(s, file.clone(), len);
                let spans = vec![Span { offset: 9, len: 100 }];
                scanner.push(Job { name: "m".into(), expected: Sha256::of_bytes(b""), spans }, &Silent);
                scanner.finish(&Silent)
            });
            assert_eq!((ahead, here, done.len()), (0, 1, 1), "blocks of {block}");
        }
    }
}
