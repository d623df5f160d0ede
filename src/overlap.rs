//! Reading and writing on other threads, so that I/O and decompression overlap with the
//! caller's own work (hashing, tar, zstd):
//!
//! - [`ReadAhead`] runs an inner reader's `read` calls (disk, zstd decompression) on a thread
//!   of its own, a few fixed-size chunks ahead of the consumer;
//! - [`WriteBehind`] gathers what is written into fixed-size chunks and writes them on a
//!   thread of its own while the caller goes on (a vectored write of a chunk or more, the
//!   caller writes itself, in order, without the copy);
//! - [`flow`] is a pipe from async code (a download) to a blocking reader (the thread that
//!   packs a bundle): batches of the chunks received, a few at most, the sender waiting while
//!   they are not read.
//!
//! Memory is bounded and does not grow with the stream: at most `DEPTH + 2` chunks exist at
//! once per pipe, and they are recycled. The threads are scoped (`std::thread::scope`), so the
//! inner reader or writer may borrow. A reading thread stops at the end of the stream, on the
//! first error, or as soon as the consumer is dropped (its next hand-over fails);
//! [`ReadAhead::finish`] hands the inner reader back, e.g. a hasher that hashed every byte on
//! the reading thread. A writing thread stops at its first error, which the next write
//! returns.

use std::io::{self, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread::{Scope, ScopedJoinHandle};

/// Bytes per chunk handed over.
pub const CHUNK: usize = 1 << 20;
/// Chunks read ahead of the consumer, or waiting to be written, at most.
pub(crate) const DEPTH: usize = 4;
/// Bytes per chunk handed to a writing thread: write calls of this size cost little more than
/// larger ones, and the pipe then holds 1.5 MiB.
const WRITE_CHUNK: usize = 256 << 10;

/// One hand-over: a buffer and how many of its bytes are filled (0: the end of the stream).
type Filled = io::Result<(Vec<u8>, usize)>;

/// A reader whose inner reads happen on another thread, ahead of time.
pub struct ReadAhead<'scope, R> {
    thread: ScopedJoinHandle<'scope, R>,
    filled: Receiver<Filled>,
    spent: SyncSender<Vec<u8>>,
    current: Vec<u8>,
    pos: usize,
    len: usize,
    state: State,
}

enum State {
    Reading,
    Ended,
    /// The first error, returned again on every later read, so that an error is never
    /// mistaken for the end.
    Failed(io::ErrorKind, String),
}

impl State {
    /// What a read returns once the held bytes are used up: `None` while still reading.
    fn replay(&self) -> Option<io::Result<usize>> {
        match self {
            Self::Reading => None,
            Self::Ended => Some(Ok(0)),
            Self::Failed(kind, message) => Some(Err(io::Error::new(*kind, message.clone()))),
        }
    }
}

impl<'scope, R: Read + Send + 'scope> ReadAhead<'scope, R> {
    /// Start reading `inner` on a thread of `scope`.
    pub fn spawn(scope: &'scope Scope<'scope, '_>, inner: R) -> Self {
        let (filled_tx, filled) = sync_channel(DEPTH);
        let (spent, spent_rx) = sync_channel(DEPTH + 2);
        let thread = scope.spawn(move || produce(inner, &filled_tx, spent_rx));
        Self { thread, filled, spent, current: Vec::new(), pos: 0, len: 0, state: State::Reading }
    }

    /// Stop reading and hand back the inner reader. It may have read ahead of what was
    /// consumed, up to the end of its stream.
    pub fn finish(self) -> R {
        let Self { thread, filled, spent, .. } = self;
        // Dropping both ends first unblocks a thread waiting to hand over or for a buffer.
        drop((filled, spent));
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

fn produce<R: Read>(mut inner: R, filled: &SyncSender<Filled>, spent: Receiver<Vec<u8>>) -> R {
    let mut pool = Pool::new(spent, || vec![0u8; CHUNK]);
    loop {
        let Some(mut buf) = pool.take() else { return inner };
        let outcome = fill(&mut inner, &mut buf);
        let last = !matches!(outcome, Ok(n) if n > 0);
        if filled.send(outcome.map(|n| (buf, n))).is_err() || last {
            return inner;
        }
    }
}

/// The buffers of one pipe, on the side that fills them: those the other side handed back,
/// and new ones while fewer than `DEPTH + 2` exist.
pub(crate) struct Pool {
    spent: Receiver<Vec<u8>>,
    fresh: fn() -> Vec<u8>,
    allocated: usize,
}

impl Pool {
    pub(crate) fn new(spent: Receiver<Vec<u8>>, fresh: fn() -> Vec<u8>) -> Self {
        Self { spent, fresh, allocated: 0 }
    }

    /// A buffer, waiting for one to come back when all are in flight; `None` when the other
    /// side is gone.
    pub(crate) fn take(&mut self) -> Option<Vec<u8>> {
        match self.spent.try_recv() {
            Ok(buf) => Some(buf),
            Err(TryRecvError::Empty) if self.allocated < DEPTH + 2 => {
                self.allocated += 1;
                Some((self.fresh)())
            }
            Err(TryRecvError::Empty) => self.spent.recv().ok(),
            Err(TryRecvError::Disconnected) => None,
        }
    }
}

/// Read until `buf` is full or the stream ends; the count of bytes read. Bytes read before an
/// error are counted (the error comes again on the next read).
pub(crate) fn fill(inner: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match inner.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Bytes read before the error are handed over first; the error comes again.
            Err(e) if n > 0 => {
                tracing::trace!("read-ahead: {e} after {n} bytes");
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R> Read for ReadAhead<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.len {
                let n = out.len().min(self.len - self.pos);
                out[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if let Some(replayed) = self.state.replay() {
                return replayed;
            }
            let spent = std::mem::take(&mut self.current);
            if !spent.is_empty() {
                // Full only when the producer has stopped: then the buffer is not needed.
                let _ = self.spent.try_send(spent);
            }
            match self.filled.recv() {
                Ok(Ok((buf, n))) => {
                    (self.current, self.pos, self.len) = (buf, 0, n);
                    if n == 0 {
                        self.state = State::Ended;
                    }
                }
                Ok(Err(e)) => {
                    self.state = State::Failed(e.kind(), e.to_string());
                    return Err(e);
                }
                Err(_) => {
                    let e = io::Error::other("the reading thread stopped early");
                    self.state = State::Failed(e.kind(), e.to_string());
                    return Err(e);
                }
            }
        }
    }
}

/// A writer whose inner writes happen on another thread, a chunk at a time.
///
/// A vectored write of a chunk or more is not copied: the caller writes it itself, straight
/// from its buffers, once the thread has written everything before it (the thread lends the
/// inner writer and waits for it back). Bytes stored as they are (`bundle::frames`) pass the
/// pipe that way: a copy, and a hand-over per chunk, less.
pub struct WriteBehind<'scope, W> {
    thread: Option<ScopedJoinHandle<'scope, (Option<W>, io::Result<()>)>>,
    full: Option<SyncSender<Job>>,
    /// The inner writer, lent by the thread; and where it goes back.
    lent: Receiver<W>,
    back: SyncSender<W>,
    pool: Pool,
    current: Vec<u8>,
    /// The writing thread's error, once it has been collected.
    failed: Option<(io::ErrorKind, String)>,
}

/// What the writing thread is handed.
enum Job {
    Write(Vec<u8>),
    /// Lend the inner writer, once everything before is written, and wait for it back.
    Lend,
}

impl<'scope, W: Write + Send + 'scope> WriteBehind<'scope, W> {
    /// Start a writing thread for `inner` on `scope`.
    pub fn spawn(scope: &'scope Scope<'scope, '_>, inner: W) -> Self {
        let (full, full_rx) = sync_channel::<Job>(DEPTH);
        let (spent_tx, spent) = sync_channel(DEPTH + 2);
        let (lender, lent) = sync_channel(1);
        let (back, back_rx) = sync_channel(1);
        let thread = scope.spawn(move || {
            let mut inner = inner;
            for job in full_rx {
                match job {
                    Job::Write(mut buf) => {
                        if let Err(e) = inner.write_all(&buf) {
                            // Returning drops the receiver: the caller's next hand-over fails.
                            return (Some(inner), Err(e));
                        }
                        buf.clear();
                        let _ = spent_tx.try_send(buf);
                    }
                    Job::Lend => {
                        let back = lender.send(inner).ok().and_then(|()| back_rx.recv().ok());
                        let Some(returned) = back else {
                            return (None, Err(io::Error::other("the lent writer was not given back")));
                        };
                        inner = returned;
                    }
                }
            }
            let flushed = inner.flush();
            (Some(inner), flushed)
        });
        let pool = Pool::new(spent, || Vec::with_capacity(WRITE_CHUNK));
        Self { thread: Some(thread), full: Some(full), lent, back, pool, current: Vec::new(), failed: None }
    }

    /// Write what is left, wait for the thread, and hand back the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.failed()?;
        self.hand_over()?;
        drop(self.full.take());
        let thread = self.thread.take().ok_or_else(|| self.failure())?;
        let (inner, outcome) = thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        outcome.and_then(|()| inner.ok_or_else(|| io::Error::other("the writing thread lost its writer")))
    }

    /// Write all of `bufs` on this thread, straight from them, after everything before.
    fn write_through(&mut self, bufs: &mut [io::IoSlice<'_>]) -> io::Result<()> {
        self.hand_over()?;
        match self.full.as_ref().map(|full| full.send(Job::Lend)) {
            Some(Ok(())) => {}
            _ => return Err(self.failure()),
        }
        let Ok(mut inner) = self.lent.recv() else { return Err(self.failure()) };
        let written = write_all_vectored(&mut inner, bufs);
        // The thread waits for it; it is gone only if it stopped, which `failure` reports.
        if self.back.send(inner).is_err() {
            return Err(self.failure());
        }
        written.inspect_err(|e| self.failed = Some((e.kind(), e.to_string())))
    }

    fn hand_over(&mut self) -> io::Result<()> {
        if self.current.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.current);
        match self.full.as_ref().map(|full| full.send(Job::Write(buf))) {
            Some(Ok(())) => Ok(()),
            _ => Err(self.failure()),
        }
    }

    fn buffer(&mut self) -> io::Result<Vec<u8>> {
        match self.pool.take() {
            Some(buf) => Ok(buf),
            None => Err(self.failure()),
        }
    }

    /// The first error, again.
    fn failed(&self) -> io::Result<()> {
        match &self.failed {
            Some((kind, message)) => Err(io::Error::new(*kind, message.clone())),
            None => Ok(()),
        }
    }

    /// The writing thread's error (it has stopped): collected once, then repeated.
    fn failure(&mut self) -> io::Error {
        if self.failed.is_none() {
            drop(self.full.take());
            let outcome =
                self.thread.take().map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)).1);
            let e = match outcome {
                Some(Err(e)) => e,
                _ => io::Error::other("the writing thread stopped early"),
            };
            self.failed = Some((e.kind(), e.to_string()));
            return e;
        }
        let (kind, message) = self.failed.clone().expect("set above");
        io::Error::new(kind, message)
    }
}

impl<'scope, W: Write + Send + 'scope> Write for WriteBehind<'scope, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.failed()?;
        if self.current.capacity() == 0 {
            self.current = self.buffer()?;
        }
        let n = (WRITE_CHUNK - self.current.len()).min(buf.len());
        self.current.extend_from_slice(&buf[..n]);
        if self.current.len() == WRITE_CHUNK {
            self.hand_over()?;
        }
        Ok(n)
    }

    /// A chunk or more is written through (see [`WriteBehind`]), the rest gathered.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let total = bufs.iter().map(|b| b.len()).sum::<usize>();
        if total < WRITE_CHUNK {
            for buf in bufs {
                self.write_all(buf)?;
            }
            return Ok(total);
        }
        self.failed()?;
        self.write_through(&mut bufs.to_vec())?;
        Ok(total)
    }

    /// Hands over what is gathered; `finish` is what waits for it to be written.
    fn flush(&mut self) -> io::Result<()> {
        self.hand_over()
    }
}

/// `Write::write_all_vectored`, which is not stable yet.
pub(crate) fn write_all_vectored(out: &mut impl Write, mut bufs: &mut [io::IoSlice<'_>]) -> io::Result<()> {
    while !bufs.is_empty() {
        match out.write_vectored(bufs) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "failed to write whole buffer")),
            Ok(n) => io::IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Bytes the sending side of a [`flow`] gathers before it hands them over.
pub(crate) const FLOW_BATCH: usize = 128 << 10;
/// Batches handed over and not yet read, at most: memory per flow is about
/// `(FLOW_DEPTH + 2) * FLOW_BATCH`, whatever the size of what passes. With 1, sender and
/// reader woke each other for nearly every batch; 4 took a cold mirror from about 14,000
/// context switches to 9,000 for 5 MiB more at its peak (16: 7,000 for 21 MiB more).
const FLOW_DEPTH: usize = 4;

/// One hand-over of a flow.
enum Batch {
    Data(Vec<u8>),
    /// Everything was sent; the reader sees the end of the stream.
    End,
    /// The sender failed; the reader's next read fails with this.
    Failed(String),
}

/// A pipe from async code to a blocking reader: [`Outflow`] copies the chunks it is given
/// into batches of 128 KiB and waits while one is not read yet; [`Inflow`] reads them on a
/// thread of its own, and hands each batch it has read back to be filled again, so a flow
/// allocates its few batches once (3,072 of 128 KiB for the mirror row's 384 MiB before).
/// The sender copies, not passes on, the network's chunks: a chunk can hold its connection's
/// whole read buffer alive (measured: about 2 MiB a download). A sender dropped without
/// [`Outflow::end`] is an error to the reader, never a short end. A reader that passes the
/// bytes on takes each batch whole instead of reading it ([`Inflow::next_batch`]), and
/// whoever reads it last hands it back ([`Returns`]).
pub fn flow() -> (Outflow, Inflow) {
    let (tx, rx) = tokio::sync::mpsc::channel(FLOW_DEPTH);
    let (back, spent) = std::sync::mpsc::channel();
    (
        Outflow { tx, batch: Vec::new(), spent },
        Inflow { rx, back: Returns(back), current: Vec::new(), pos: 0, state: State::Reading },
    )
}

/// The reader of a flow is gone: nobody wants what is sent any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderGone;

/// The async end of a [`flow`].
pub struct Outflow {
    tx: tokio::sync::mpsc::Sender<Batch>,
    batch: Vec<u8>,
    /// Batches the reader has read, empty, to be filled again.
    spent: std::sync::mpsc::Receiver<Vec<u8>>,
}

impl Outflow {
    /// Hand `chunk` over (once a batch is full, waiting while the reader is behind).
    pub async fn send(&mut self, chunk: bytes::Bytes) -> Result<(), ReaderGone> {
        let mut rest = &chunk[..];
        while !rest.is_empty() {
            if self.batch.capacity() == 0 {
                self.batch = self.spent.try_recv().unwrap_or_else(|_| Vec::with_capacity(FLOW_BATCH));
            }
            let n = rest.len().min(FLOW_BATCH - self.batch.len());
            self.batch.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if self.batch.len() == FLOW_BATCH {
                self.flush().await?;
            }
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), ReaderGone> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        self.tx.send(Batch::Data(batch)).await.map_err(|_| ReaderGone)
    }

    /// End the flow as the sending ended: `Ok(true)`, everything was sent and the reader sees
    /// the end after it; `Ok(false)`, the reader is gone and needs nothing; `Err`, the reader's
    /// next read after what was sent fails with the same words.
    pub async fn end<E: std::fmt::Display>(mut self, sent: &Result<bool, E>) {
        let last = match sent {
            Ok(false) => return,
            Ok(true) => Batch::End,
            Err(e) => Batch::Failed(e.to_string()),
        };
        // A reader gone meanwhile needs neither.
        if self.flush().await.is_ok() {
            let _ = self.tx.send(last).await;
        }
    }
}

/// The blocking end of a [`flow`]: a reader of what the sender sent, in order. Not for use on
/// an async runtime's threads (it blocks).
pub struct Inflow {
    rx: tokio::sync::mpsc::Receiver<Batch>,
    back: Returns,
    current: Vec<u8>,
    pos: usize,
    state: State,
}

impl Inflow {
    /// The next batch the sender handed over, whole and in place of a copy; `Ok(None)` at the
    /// end. Every batch but the last holds exactly [`FLOW_BATCH`] bytes, so where a batch
    /// starts depends on the stream alone. The caller sends the batch on to whoever reads it,
    /// who hands it back through [`Inflow::returns`].
    pub fn next_batch(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if self.pos < self.current.len() {
                // What `read` left of a batch.
                let mut rest = std::mem::take(&mut self.current);
                rest.drain(..self.pos);
                self.pos = 0;
                return Ok(Some(rest));
            }
            if let Some(replayed) = self.state.replay() {
                return replayed.map(|_| None);
            }
            self.state = match self.rx.blocking_recv() {
                Some(Batch::Data(batch)) => return Ok(Some(batch)),
                Some(Batch::End) => State::Ended,
                Some(Batch::Failed(why)) => State::Failed(io::ErrorKind::Other, why),
                None => State::Failed(io::ErrorKind::UnexpectedEof, "the sender stopped before the end".into()),
            };
        }
    }

    /// Where a batch from [`Inflow::next_batch`] goes once it is read: back to the sender, to
    /// be filled again (cleared by [`Returns::give`]).
    pub fn returns(&self) -> Returns {
        Returns(self.back.0.clone())
    }
}

/// The way back to a flow's sender for the batches read in place (see [`Inflow::next_batch`]).
pub struct Returns(std::sync::mpsc::Sender<Vec<u8>>);

impl Returns {
    pub fn give(&self, mut batch: Vec<u8>) {
        if batch.capacity() > 0 {
            batch.clear();
            // A sender gone needs no batch back.
            let _ = self.0.send(batch);
        }
    }
}

impl Read for Inflow {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.current.len() {
                let n = (self.current.len() - self.pos).min(out.len());
                out[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            let Some(batch) = self.next_batch()? else { return Ok(0) };
            let read = std::mem::replace(&mut self.current, batch);
            self.pos = 0;
            self.back.give(read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(i: usize) -> u8 {
        u8::try_from(i % 251).expect("below 251")
    }

    /// A reader of `len` bytes (a pattern) that fails after `fail_at` bytes, in odd-sized reads.
    struct Source {
        pos: usize,
        len: usize,
        fail_at: Option<usize>,
    }

    impl Read for Source {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.fail_at.is_some_and(|f| self.pos >= f) {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "bad frame"));
            }
            let end = self.len.min(self.fail_at.unwrap_or(usize::MAX));
            let n = buf.len().min(end - self.pos).min(77_777);
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = pattern(self.pos + i);
            }
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn hands_over_every_byte_in_order() {
        let len = 3 * CHUNK + 12_345;
        let got = std::thread::scope(|s| {
            let mut out = Vec::new();
            ReadAhead::spawn(s, Source { pos: 0, len, fail_at: None }).read_to_end(&mut out).unwrap();
            out
        });
        assert_eq!(got.len(), len);
        assert!(got.iter().enumerate().all(|(i, b)| *b == pattern(i)));
    }

    #[test]
    fn an_error_comes_after_the_bytes_before_it_and_stays() {
        let fail_at = CHUNK + 100;
        std::thread::scope(|s| {
            let mut ahead = ReadAhead::spawn(s, Source { pos: 0, len: 4 * CHUNK, fail_at: Some(fail_at) });
            let mut out = Vec::new();
            let e = ahead.read_to_end(&mut out).unwrap_err();
            assert_eq!((e.kind(), out.len()), (io::ErrorKind::InvalidData, fail_at));
            let again = ahead.read(&mut [0u8; 8]).unwrap_err();
            assert_eq!((again.kind(), again.to_string()), (io::ErrorKind::InvalidData, "bad frame".to_owned()));
        });
    }

    #[test]
    fn finish_hands_back_the_reader_after_the_end() {
        let len = 2 * CHUNK + 5;
        let hashing = std::thread::scope(|s| {
            let mut ahead =
                ReadAhead::spawn(s, crate::digest::HashingReader::new(Source { pos: 0, len, fail_at: None }));
            let mut first = vec![0u8; 10];
            ahead.read_exact(&mut first).unwrap();
            let mut rest = Vec::new();
            ahead.read_to_end(&mut rest).unwrap();
            ahead.finish()
        });
        assert_eq!(hashing.count(), len as u64);
    }

    #[test]
    fn a_consumer_that_stops_early_stops_the_thread() {
        // An endless source: the scope only ends if the thread notices the consumer is gone.
        std::thread::scope(|s| {
            let mut ahead = ReadAhead::spawn(s, io::repeat(7));
            let mut buf = [0u8; 1000];
            ahead.read_exact(&mut buf).unwrap();
            assert!(buf.iter().all(|b| *b == 7));
        });
    }

    #[test]
    fn write_behind_writes_everything_in_order() {
        let len = 3 * CHUNK + 777;
        let data: Vec<u8> = (0..len).map(pattern).collect();
        assert!(len > (DEPTH + 2) * WRITE_CHUNK, "more than the pipe holds");
        let written = std::thread::scope(|s| {
            let mut behind = WriteBehind::spawn(s, Vec::new());
            for piece in data.chunks(100_003) {
                behind.write_all(piece).unwrap();
            }
            behind.finish().unwrap()
        });
        assert_eq!(written, data);
    }

    #[test]
    fn large_vectored_writes_go_through_in_order_with_the_gathered_ones() {
        let data: Vec<u8> = (0..5 * CHUNK + 4_321).map(pattern).collect();
        let (written, through) = std::thread::scope(|s| {
            let mut behind = WriteBehind::spawn(s, Vec::new());
            let mut pos = 0;
            let mut through = 0;
            // Small writes, gathered, between vectored ones of a chunk or more in three pieces.
            for (i, size) in [100, WRITE_CHUNK + 7, 5_000, 3 * WRITE_CHUNK, 1, CHUNK].iter().cycle().enumerate() {
                let end = (pos + size).min(data.len());
                let piece = &data[pos..end];
                if i % 2 == 1 {
                    let (a, rest) = piece.split_at(piece.len() / 3);
                    let (b, c) = rest.split_at(rest.len() / 2);
                    let slices = [io::IoSlice::new(a), io::IoSlice::new(b), io::IoSlice::new(c)];
                    assert_eq!(behind.write_vectored(&slices).unwrap(), piece.len(), "all of it");
                    through += usize::from(piece.len() >= WRITE_CHUNK);
                } else {
                    behind.write_all(piece).unwrap();
                }
                pos = end;
                if pos == data.len() {
                    break;
                }
            }
            (behind.finish().unwrap(), through)
        });
        assert!(through >= 3, "written through {through} times");
        assert_eq!(written, data);
    }

    #[test]
    fn an_error_writing_through_is_reported_and_then_repeated() {
        std::thread::scope(|s| {
            let mut behind = WriteBehind::spawn(s, Full { taken: 0, limit: 2 * CHUNK });
            let chunk = vec![1u8; CHUNK];
            let write = |behind: &mut WriteBehind<'_, Full>| behind.write_vectored(&[io::IoSlice::new(&chunk)]);
            let e = (0..4).find_map(|_| write(&mut behind).err()).expect("the disk fills up");
            assert_eq!(e.kind(), io::ErrorKind::StorageFull);
            assert_eq!(behind.write_all(b"more").unwrap_err().to_string(), e.to_string());
            let Err(last) = behind.finish() else { panic!("finish after a failed write") };
            assert_eq!(last.to_string(), e.to_string());
        });
    }

    /// A writer that fails once it has taken `limit` bytes, like a full disk.
    struct Full {
        taken: usize,
        limit: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.taken + buf.len() > self.limit {
                return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device"));
            }
            self.taken += buf.len();
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_behind_reports_the_writers_error_and_keeps_reporting_it() {
        std::thread::scope(|s| {
            let mut behind = WriteBehind::spawn(s, Full { taken: 0, limit: 2 * CHUNK });
            let chunk = vec![1u8; CHUNK];
            let e = (0..64).find_map(|_| behind.write_all(&chunk).err()).expect("the disk fills up");
            assert_eq!(e.kind(), io::ErrorKind::StorageFull);
            let again = behind.write_all(&chunk).unwrap_err();
            assert_eq!((again.kind(), again.to_string()), (io::ErrorKind::StorageFull, e.to_string()));
            assert!(behind.finish().is_err());
        });
    }

    /// Runs `send` on a runtime of its own on another thread while `read` reads the inflow.
    fn through_a_flow<T>(
        send: impl FnOnce(Outflow) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send,
        read: impl FnOnce(Inflow) -> T,
    ) -> T {
        let (out, inflow) = flow();
        std::thread::scope(|s| {
            s.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
                rt.block_on(send(out));
            });
            read(inflow)
        })
    }

    #[test]
    fn a_flow_hands_over_every_byte_in_order_then_the_end() {
        let len = 5 * FLOW_BATCH + 999;
        let got = through_a_flow(send_pattern(len), |mut inflow| {
            let mut got = Vec::new();
            inflow.read_to_end(&mut got).unwrap();
            got
        });
        assert_eq!(got.len(), 5 * FLOW_BATCH + 999);
        assert!(got.iter().enumerate().all(|(i, b)| *b == pattern(i)));
    }

    /// Sends `len` bytes of the pattern in chunks of odd sizes, as a network delivers them,
    /// some empty; then the end.
    fn send_pattern(
        len: usize,
    ) -> impl FnOnce(Outflow) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        move |mut out| {
            Box::pin(async move {
                let mut pos = 0;
                for size in (0..).map(|i| [0, 1, 16_384, 77_777, 300_000][i % 5]) {
                    let end = (pos + size).min(len);
                    let chunk: Vec<u8> = (pos..end).map(pattern).collect();
                    out.send(chunk.into()).await.unwrap();
                    pos = end;
                    if pos == len {
                        break;
                    }
                }
                out.end(&Ok::<_, String>(true)).await;
            })
        }
    }

    #[test]
    fn a_flow_read_in_place_hands_over_whole_batches_that_start_where_the_stream_says() {
        let len = 5 * FLOW_BATCH + 999;
        let (got, sizes) = through_a_flow(send_pattern(len), |mut inflow| {
            // What `read` leaves of a batch comes first, then whole batches.
            let mut got = vec![0u8; 1000];
            inflow.read_exact(&mut got).unwrap();
            let mut sizes = Vec::new();
            while let Some(batch) = inflow.next_batch().unwrap() {
                sizes.push(batch.len());
                got.extend_from_slice(&batch);
                inflow.returns().give(batch);
            }
            assert!(inflow.next_batch().unwrap().is_none(), "the end, again");
            (got, sizes)
        });
        assert_eq!(sizes, [FLOW_BATCH - 1000, FLOW_BATCH, FLOW_BATCH, FLOW_BATCH, FLOW_BATCH, 999]);
        assert_eq!(got.len(), len);
        assert!(got.iter().enumerate().all(|(i, b)| *b == pattern(i)));
    }

    #[test]
    fn a_flow_that_fails_or_is_dropped_is_an_error_after_its_bytes_never_an_end() {
        for fail in [true, false] {
            let (got, e) = through_a_flow(
                move |mut out| {
                    Box::pin(async move {
                        out.send(vec![7u8; 1000].into()).await.unwrap();
                        if fail {
                            out.end(&Err::<bool, _>("blob sha256:abc: connection reset (after 5 tries)")).await;
                        }
                    })
                },
                |mut inflow| {
                    let mut got = Vec::new();
                    let e = inflow.read_to_end(&mut got).unwrap_err();
                    (got, e)
                },
            );
            // A failure comes after what was sent; a dropped sender's last batch was never sent.
            assert_eq!(got, if fail { vec![7u8; 1000] } else { Vec::new() });
            let expected = if fail { "connection reset (after 5 tries)" } else { "stopped before the end" };
            assert!(e.to_string().contains(expected), "{e}");
        }
    }

    #[test]
    fn a_flow_whose_reader_is_gone_stops_its_sender() {
        let sent = through_a_flow(
            |mut out| {
                Box::pin(async move {
                    // Endless, as a hostile server would send: only the reader's going ends it.
                    while out.send(vec![1u8; 65_536].into()).await.is_ok() {}
                })
            },
            |mut inflow| {
                let mut first = vec![0u8; 1000];
                inflow.read_exact(&mut first).unwrap();
                first
            },
        );
        assert_eq!(sent, vec![1u8; 1000]);
    }
}
