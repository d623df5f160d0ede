//! The lock policy: when `lock` and `build` resolve the spec again, and when they keep or
//! refuse the lock they find.

use std::path::{Path, PathBuf};

use super::BuildError;
use crate::clock::Timestamp;
use crate::fetch::Net;
use crate::sources::Sources;
use crate::spec::lock::{LockError, LockFile, default_lock_path};

/// How to treat an existing lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Resolve everything again (`airlock lock`): catches changed content.
    Always,
    /// Keep a lock that covers the spec (`airlock build`), resolve only when it does not.
    IfStale,
    /// Never write: a missing or stale lock is an error (`build --locked`).
    Never,
}

/// `--lock FILE`, else the spec's own lock (`canary.toml` → `canary.lock`).
pub fn lock_path(spec: &Path, explicit: Option<&PathBuf>) -> PathBuf {
    explicit.cloned().unwrap_or_else(|| default_lock_path(spec))
}

/// What `ensure` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The lock on disk covers the spec (or resolving again pinned the same digests).
    Kept,
    /// The lock was missing, stale or changed, and was written.
    Written,
}

/// The lock for the sources' spec at `path` under the given policy.
pub fn ensure(
    sources: &Sources<'_>,
    net: &Net,
    path: &Path,
    refresh: Refresh,
) -> Result<(LockFile, Outcome), BuildError> {
    let existing = LockFile::load(path)?;
    let stale = existing.as_ref().map_or(Some("no lock file".to_owned()), |l| {
        l.lock.stale_reason(&sources.spec.spec).or_else(|| l.lock.stale_inputs(sources.spec.base_dir()))
    });
    match (refresh, existing, stale) {
        (Refresh::Never, None, _) => Err(LockError::Missing { path: path.to_owned() }.into()),
        (Refresh::Never, Some(_), Some(reason)) => Err(LockError::Stale { path: path.to_owned(), reason }.into()),
        (Refresh::Never | Refresh::IfStale, Some(lock), None) => {
            tracing::info!("lock: `{}` covers the spec", path.display());
            Ok((lock, Outcome::Kept))
        }
        (_, existing, stale) => {
            let why = stale.unwrap_or_else(|| "`airlock lock` resolves every time".to_owned());
            tracing::info!("resolve: {} entries ({why})", sources.spec.spec.entries());
            let resolved_at = Timestamp::source_date_epoch()?.unwrap_or_else(Timestamp::now);
            let mut fresh = net.block_on(sources.resolve(resolved_at))?;
            // The lock names what resolving stored; the blobs go to the disk before it does.
            sources.fetch.cache.sync()?;
            if let Some(old) = existing {
                // Same pins: keep the file as it is, time included, so rebuilds stay identical.
                fresh.resolved_at = old.lock.resolved_at;
                if fresh == old.lock {
                    return Ok((old, Outcome::Kept));
                }
            }
            Ok((LockFile::write(path, fresh)?, Outcome::Written))
        }
    }
}
