//! The bytes a bundle may still decompress into: one budget shared by every member's reader,
//! from what the manifest declares, so a small zstd stream cannot expand to anything.

use std::cell::Cell;
use std::io::{self, Read, Seek};
use std::rc::Rc;

use super::stream_words;
use crate::bundle::frames::Skip;
use crate::bundle::rejection::Rejection;
use crate::bundle::tar_guard::Tracker;

/// A shared cap on decompressed bytes, raised once the signed manifest says what to expect.
#[derive(Clone)]
pub(super) struct Budget(Rc<BudgetState>);

struct BudgetState {
    limit: Cell<u64>,
    used: Cell<u64>,
    tripped: Cell<bool>,
    /// What `tar_guard` refused, if it did.
    refused: std::cell::RefCell<Option<crate::bundle::tar_guard::TarRefusal>>,
}

impl Budget {
    pub(super) fn new(limit: u64) -> Self {
        Self(Rc::new(BudgetState {
            limit: Cell::new(limit),
            used: Cell::new(0),
            tripped: Cell::new(false),
            refused: std::cell::RefCell::new(None),
        }))
    }

    pub(super) fn allow_more(&self, bytes: u64) {
        self.0.limit.set(self.0.used.get().saturating_add(bytes));
    }

    /// Allow `bytes` more than the current limit (a member the manifest does not list but the
    /// format expects, bounded by the caller).
    pub(super) fn extend(&self, bytes: u64) {
        self.0.limit.set(self.0.limit.get().saturating_add(bytes));
    }

    pub(super) fn tripped(&self) -> Option<Rejection> {
        if let Some(why) = self.0.refused.borrow().clone() {
            return Some(Rejection::Extension(why));
        }
        self.0.tripped.get().then(|| Rejection::PastDeclaredSize { limit: self.0.limit.get() })
    }

    /// The rejection for a read error: the cap if it tripped, else `otherwise` with the error.
    pub(super) fn explain(&self, e: &io::Error, otherwise: fn(String) -> Rejection) -> Rejection {
        self.tripped().unwrap_or_else(|| otherwise(stream_words(e)))
    }
}

/// The decompressed stream, refusing to yield more than the budget allows, and any tar
/// extension record too large to read (`tar_guard`).
pub(super) struct Bounded<R> {
    inner: R,
    budget: Budget,
    guard: Tracker,
}

impl<R> Bounded<R> {
    pub(super) fn new(inner: R, budget: &Budget) -> Self {
        Self { inner, budget: budget.clone(), guard: Tracker::default() }
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let state = &self.budget.0;
        let left = state.limit.get().saturating_sub(state.used.get());
        if left == 0 {
            // Only an error if there is in fact more to read.
            let n = self.inner.read(&mut [0u8; 1])?;
            if n == 0 {
                return Ok(0);
            }
            state.tripped.set(true);
            return Err(io::Error::other("decompressed stream exceeds its declared size"));
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        state.used.set(state.used.get().saturating_add(n as u64));
        if let Err(why) = self.guard.observe(&buf[..n]) {
            let e = io::Error::other(why.clone());
            *state.refused.borrow_mut() = Some(why);
            return Err(e);
        }
        Ok(n)
    }
}

/// Bytes passed unread (the data of a member taken as spans, or not wanted), as the `tar`
/// crate's `entries_with_seek` skips them: within the budget, and only inside a member's data
/// as `tar_guard` follows it. The position returned is the stream's, as `tar` counts it.
impl<R: Read + Skip> Seek for Bounded<R> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let io::SeekFrom::Current(n) = pos else { return Err(io::Error::other("the stream only skips forward")) };
        let n = u64::try_from(n).map_err(|_| io::Error::other("the stream only skips forward"))?;
        let state = &self.budget.0;
        if n > state.limit.get().saturating_sub(state.used.get()) {
            state.tripped.set(true);
            return Err(io::Error::other("decompressed stream exceeds its declared size"));
        }
        if let Err(why) = self.guard.pass(n) {
            let e = io::Error::other(why.clone());
            *state.refused.borrow_mut() = Some(why);
            return Err(e);
        }
        self.inner.skip(n)?;
        state.used.set(state.used.get().saturating_add(n));
        Ok(state.used.get())
    }
}
