//! The reading side of `writer::pack`: one thread opens, reads and hashes every content
//! member's origin in bundle order, a few chunks ahead of the tar and zstd streams, and hands
//! the bytes over member by member ([`Feed`]). Reading, hashing, and the copy into zstd (with
//! zstd's own workers behind it) overlap; each origin is read once; the chunks are recycled,
//! so memory is fixed whatever the bundle's size or member count.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::File;
use std::io::{self, BufRead, Read};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::Scope;

use sha2::Digest as _;

use super::frames::BLOCK;
use super::members::{Buffers, PackError, Packing};
use crate::digest::HashingReader;
use crate::digest::Sha256;
use crate::member_path::MemberPath;
use crate::overlap::{CHUNK, DEPTH, FLOW_BATCH, Inflow, Pool, Returns, fill};
use crate::progress::Reporter;

/// Members whose origins are still on their way: downloads running beside `pack`, in bundle
/// order, so that packing starts with the first blob instead of after the last. The reading
/// thread waits for each such member before it opens it, or, for a download that is not kept
/// (`build --no-blob-cache`), reads it as it flows in.
#[derive(Default)]
pub struct Arrivals {
    state: Mutex<Awaited>,
    changed: Condvar,
}

#[derive(Default)]
struct Awaited {
    /// The members (by path) still on their way.
    pending: BTreeSet<MemberPath>,
    /// Arrived: downloaded by this build, which hashed the bytes as they came and checked
    /// them against the digest.
    arrived: BTreeSet<MemberPath>,
    /// Flowing in, kept nowhere: the reading thread takes each when it gets there.
    flows: BTreeMap<MemberPath, Inflow>,
    /// Nothing more will arrive: a download failed, or packing stopped.
    abandoned: bool,
}

/// What waiting for a member ended in.
enum Arrival {
    /// In place before this build (never awaited): packing hashes it.
    Present,
    /// Downloaded and verified by this build moments ago: packing reads it, not hashes it again.
    Verified,
    /// Flowing in as it downloads, not verified yet: packing hashes it.
    Flowing(Inflow),
    /// It never will be.
    Abandoned,
}

impl Arrivals {
    /// These members are not there yet. By path, not digest: another member with the same
    /// bytes (a file) is read from its own origin and never waits for a download.
    pub fn expect(paths: impl IntoIterator<Item = MemberPath>) -> Self {
        let pending = paths.into_iter().collect();
        Self { state: Mutex::new(Awaited { pending, ..Awaited::default() }), changed: Condvar::new() }
    }

    /// This member's origin is in place, downloaded and verified against its digest.
    pub fn arrived(&self, path: &MemberPath) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.pending.remove(path);
        state.arrived.insert(path.clone());
        drop(state);
        self.changed.notify_all();
    }

    /// This member flows in through `inflow` as it downloads; `false` (and `inflow` dropped)
    /// when nothing more is wanted.
    pub fn flowing(&self, path: &MemberPath, inflow: Inflow) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.abandoned {
            return false;
        }
        // Still awaited until the reading thread takes it.
        state.flows.insert(path.clone(), inflow);
        drop(state);
        self.changed.notify_all();
        true
    }

    /// Nothing more will arrive; whoever waits stops waiting, and the downloads flowing
    /// towards members not read yet see their reader gone.
    pub fn abandon(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.abandoned = true;
        let flows = std::mem::take(&mut state.flows);
        drop(state);
        drop(flows);
        self.changed.notify_all();
    }

    /// Whether anything is still on its way.
    pub fn awaiting(&self) -> bool {
        !self.state.lock().unwrap_or_else(PoisonError::into_inner).pending.is_empty()
    }

    pub fn abandoned(&self) -> bool {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).abandoned
    }

    /// Wait until the member at `path` is in place, or flowing in.
    fn wait(&self, path: &MemberPath) -> Arrival {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.pending.contains(path) && !state.flows.contains_key(path) && !state.abandoned {
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        if let Some(inflow) = state.flows.remove(path) {
            state.pending.remove(path);
            Arrival::Flowing(inflow)
        } else if state.pending.contains(path) {
            Arrival::Abandoned
        } else if state.arrived.contains(path) {
            Arrival::Verified
        } else {
            Arrival::Present
        }
    }
}

/// What the reading thread read of one member's origin.
#[derive(Debug)]
pub struct Streamed {
    /// Over every byte read; for a blob this build verified as it arrived, that digest.
    pub sha256: Sha256,
    /// Bytes read, at most the promised size: less when the origin ran short.
    pub within_size: u64,
    /// The origin has more bytes than promised.
    pub more: bool,
    /// The origin's size on disk when it was opened.
    pub file_size: u64,
}

/// One hand-over, in order.
enum Piece {
    /// Bytes of the current member: one or more buffers, each with how many of its bytes are
    /// filled, and where they go once read: back to a flow's sender, or (`None`) to the reading
    /// thread's pool.
    Data(Vec<(Vec<u8>, usize)>, Option<Returns>),
    /// The current member ended.
    End(Streamed),
    /// The current member's origin could not be read; nothing follows.
    Failed(PackError),
}

/// The consumer's end: the members' bytes, one member at a time (`BufRead` without a copy,
/// and [`Buffers`] for all of a piece's buffers at once).
pub struct Feed<'r> {
    pieces: Receiver<Piece>,
    spent: SyncSender<Vec<u8>>,
    /// The current piece's buffers not read to their end yet, each with its filled length.
    held: VecDeque<(Vec<u8>, usize)>,
    /// Where they go once read, if not to the pool: a flow's batches, read in place.
    returns: Option<Returns>,
    /// Bytes read of the first held buffer.
    pos: usize,
    /// How the current member ended, once it has.
    ended: Option<Result<Streamed, PackError>>,
    reporter: &'r dyn Reporter,
}

impl<'r> Feed<'r> {
    /// Start reading `members` on a thread of `scope`, each once it has arrived.
    pub fn spawn<'scope>(
        scope: &'scope Scope<'scope, '_>,
        members: impl Iterator<Item = Packing<'scope>> + Send + 'scope,
        arrivals: &'scope Arrivals,
        reporter: &'r dyn Reporter,
    ) -> Self {
        let (pieces_tx, pieces) = sync_channel(DEPTH);
        let (spent, spent_rx) = sync_channel(DEPTH + 2);
        scope.spawn(move || produce(members, arrivals, &pieces_tx, spent_rx));
        Self { pieces, spent, held: VecDeque::new(), returns: None, pos: 0, ended: None, reporter }
    }

    /// After the current member's bytes have been read to their end: how it ended. The next
    /// read starts the next member.
    pub fn end_member(&mut self) -> Result<Streamed, PackError> {
        loop {
            if let Some(ended) = self.ended.take() {
                return ended;
            }
            // An error here has set `ended`.
            let n = self.fill_buf().map_or(0, <[u8]>::len);
            self.consume(n);
        }
    }

    /// The current member's read error, if reading it failed (taken).
    pub fn take_failure(&mut self) -> Option<PackError> {
        match self.ended.take() {
            Some(Err(e)) => Some(e),
            other => {
                self.ended = other;
                None
            }
        }
    }
}

impl Feed<'_> {
    /// A buffer read to its end goes back where it came from.
    fn give_back(&self, buf: Vec<u8>) {
        if let Some(returns) = &self.returns {
            returns.give(buf);
        } else {
            // Full only when the reading thread has stopped: then nobody needs it.
            let _ = self.spent.try_send(buf);
        }
    }
}

impl BufRead for Feed<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        loop {
            if let Some(&(_, len)) = self.held.front() {
                if self.pos < len {
                    break;
                }
                if let Some((spent, _)) = self.held.pop_front() {
                    self.pos = 0;
                    self.give_back(spent);
                }
                continue;
            }
            if let Some(ended) = &self.ended {
                return match ended {
                    Ok(_) => Ok(&[]),
                    Err(e) => Err(io::Error::other(e.to_string())),
                };
            }
            match self.pieces.recv() {
                Ok(Piece::Data(bufs, returns)) => (self.held, self.returns) = (bufs.into(), returns),
                Ok(Piece::End(streamed)) => self.ended = Some(Ok(streamed)),
                Ok(Piece::Failed(e)) => self.ended = Some(Err(e)),
                // Only if it panicked, which the scope raises again when it ends.
                Err(_) => {
                    let source = io::Error::other("stopped early");
                    self.ended =
                        Some(Err(PackError::Read { what: "members".into(), origin: "reading thread".into(), source }));
                }
            }
        }
        let (buf, len) = &self.held[0];
        Ok(&buf[self.pos..*len])
    }

    fn consume(&mut self, n: usize) {
        if let Some(&(_, len)) = self.held.front() {
            self.pos = (self.pos + n).min(len);
        }
        self.reporter.advance(n as u64);
    }
}

impl Buffers for Feed<'_> {
    fn fill_bufs(&mut self) -> io::Result<Vec<&[u8]>> {
        if self.fill_buf()?.is_empty() {
            return Ok(Vec::new());
        }
        let pos = self.pos;
        Ok(self.held.iter().enumerate().map(|(i, (buf, len))| &buf[if i == 0 { pos } else { 0 }..*len]).collect())
    }

    fn consume_bufs(&mut self, n: usize) {
        let mut left = n;
        while let Some(&(_, len)) = self.held.front() {
            let k = (len - self.pos).min(left);
            (self.pos, left) = (self.pos + k, left - k);
            if left == 0 {
                break;
            }
            if let Some((spent, _)) = self.held.pop_front() {
                self.pos = 0;
                self.give_back(spent);
            }
        }
        self.reporter.advance(n as u64);
    }
}

impl Read for Feed<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// The reading thread: every member in order, until done or the consumer is gone.
fn produce<'a>(
    members: impl Iterator<Item = Packing<'a>>,
    arrivals: &Arrivals,
    pieces: &SyncSender<Piece>,
    spent: Receiver<Vec<u8>>,
) {
    let mut pool = Pool::new(spent, || vec![0u8; CHUNK]);
    for member in members {
        let arrival = arrivals.wait(&member.entry.path);
        if matches!(arrival, Arrival::Abandoned) {
            let _ = pieces.send(Piece::Failed(PackError::NotFetched { what: member.what.to_owned() }));
            return;
        }
        let last = match read_member(member, arrival, pieces, &mut pool) {
            Ok(Some(streamed)) => pieces.send(Piece::End(streamed)).is_err(),
            Ok(None) => true,
            Err(e) => {
                let _ = pieces.send(Piece::Failed(e));
                true
            }
        };
        if last {
            return;
        }
    }
}

/// Read and hash one member's origin, handing its bytes over; `Ok(None)` when the consumer is
/// gone. A blob this build has just downloaded and verified (`Arrival::Verified`) is read but
/// not hashed again: its bytes were hashed as they arrived. One flowing in is read as it
/// downloads, and hashed here.
fn read_member(
    member: Packing<'_>,
    arrival: Arrival,
    pieces: &SyncSender<Piece>,
    pool: &mut Pool,
) -> Result<Option<Streamed>, PackError> {
    let read_err =
        |source| PackError::Read { what: member.what.to_owned(), origin: member.origin().into_owned(), source };
    let verified_now = matches!(arrival, Arrival::Verified);
    if let Arrival::Flowing(inflow) = arrival {
        // A flow's size is known once it ends; past the declared size, its sender fails it.
        let handed = hand_over_flow(member.entry.size, inflow, pieces).map_err(read_err)?;
        return Ok(handed.map(|(sha256, within_size, more)| Streamed {
            sha256,
            within_size,
            more,
            file_size: within_size + u64::from(more),
        }));
    }
    let file = File::open(member.origin()).map_err(read_err)?;
    let file_size = file.metadata().map_err(read_err)?.len();
    let streamed = |sha256, (within_size, more)| Streamed { sha256, within_size, more, file_size };
    if verified_now {
        let handed = hand_over(member.entry.size, file, pieces, pool).map_err(read_err)?;
        return Ok(handed.map(|h| streamed(member.entry.sha256, h)));
    }
    let mut hashing = HashingReader::new(file);
    let Some(handed) = hand_over(member.entry.size, &mut hashing, pieces, pool).map_err(read_err)? else {
        return Ok(None);
    };
    Ok(Some(streamed(hashing.finish().0, handed)))
}

// The writer stores a member's blocks where its chunks start (`writer::BundleWriter::store`):
// a flow's batches and the pool's chunks must both start on a block, or a layer streamed from
// its registry would be stored otherwise than the same layer read from the cache.
const _: () = assert!(FLOW_BATCH.is_multiple_of(BLOCK) && CHUNK.is_multiple_of(BLOCK));

/// Batches of a flow handed over together: a chunk's worth, so the packing thread wakes, and
/// writes through the writing thread, per 1 MiB whatever the source.
const GATHERED: usize = CHUNK / FLOW_BATCH;

/// Hand over `size` bytes of a flowing member, its batches as they are (no copy into a chunk),
/// a chunk's worth at a time, hashing them on the way: the digest and count of the bytes
/// handed over, and whether the flow held more; `None` when the consumer is gone.
fn hand_over_flow(
    size: u64,
    mut inflow: Inflow,
    pieces: &SyncSender<Piece>,
) -> io::Result<Option<(Sha256, u64, bool)>> {
    let mut hasher = sha2::Sha256::new();
    let mut left = size;
    let mut more = false;
    let mut gathered = Vec::with_capacity(GATHERED);
    while let Some(batch) = inflow.next_batch()? {
        let n = usize::try_from(left).map_or(batch.len(), |left| left.min(batch.len()));
        more = n < batch.len();
        if n == 0 {
            inflow.returns().give(batch);
        } else {
            hasher.update(&batch[..n]);
            left -= n as u64;
            gathered.push((batch, n));
        }
        if more {
            break;
        }
        if gathered.len() == GATHERED {
            let piece =
                Piece::Data(std::mem::replace(&mut gathered, Vec::with_capacity(GATHERED)), Some(inflow.returns()));
            if pieces.send(piece).is_err() {
                return Ok(None);
            }
        }
    }
    if !gathered.is_empty() && pieces.send(Piece::Data(gathered, Some(inflow.returns()))).is_err() {
        return Ok(None);
    }
    Ok(Some((Sha256::from_raw(hasher.finalize().into()), size - left, more)))
}

/// Hand over `size` bytes of `source` (fewer if it ends first), then ask for one more, to
/// find out whether there is more: the bytes handed over and whether there was more; `None`
/// when the consumer is gone.
fn hand_over(
    size: u64,
    mut source: impl Read,
    pieces: &SyncSender<Piece>,
    pool: &mut Pool,
) -> io::Result<Option<(u64, bool)>> {
    let mut left = size;
    while left > 0 {
        let Some(mut buf) = pool.take() else { return Ok(None) };
        let want = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        let n = fill(&mut source, &mut buf[..want])?;
        if n == 0 {
            break;
        }
        left -= n as u64;
        if pieces.send(Piece::Data(vec![(buf, n)], None)).is_err() {
            return Ok(None);
        }
    }
    let more = left == 0 && fill(&mut source, &mut [0u8; 1])? > 0;
    Ok(Some((size - left, more)))
}
