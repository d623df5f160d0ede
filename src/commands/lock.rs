//! `airlock lock [SPEC] [--lock FILE]`

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cache::Cache;
use crate::cli::{LockArgs, TerminalReporter};
use crate::clock::Timestamp;
use crate::fetch::Fetch;
use crate::sources;
use crate::spec::SpecFile;
use crate::spec::lock::{LockError, LockFile, default_lock_path};

/// How to treat an existing lock.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Resolve everything again (`airlock lock`): catches changed content.
    Always,
    /// Keep a lock that covers the spec (`airlock build`), resolve only when it does not.
    IfStale,
    /// Never write: a missing or stale lock is an error (`build --locked`).
    Never,
}

pub fn lock_path(spec: &Path, explicit: Option<&PathBuf>) -> PathBuf {
    explicit.cloned().unwrap_or_else(|| default_lock_path(spec))
}

/// The lock for `spec` under the given policy, and whether it was (re)written.
pub fn ensure(spec: &SpecFile, path: &Path, refresh: Refresh, fetch: &Fetch<'_>) -> anyhow::Result<(LockFile, bool)> {
    let existing = LockFile::load(path)?;
    let stale = existing.as_ref().map_or(Some("no lock file".to_owned()), |l| l.lock.stale_reason(&spec.spec));
    match (refresh, existing, stale) {
        (Refresh::Never, None, _) => Err(LockError::Missing { path: path.to_owned() }.into()),
        (Refresh::Never, Some(_), Some(reason)) => Err(LockError::Stale { path: path.to_owned(), reason }.into()),
        (Refresh::Never | Refresh::IfStale, Some(lock), None) => Ok((lock, false)),
        (_, existing, _) => {
            let resolved_at = Timestamp::source_date_epoch()?.unwrap_or_else(Timestamp::now);
            let mut fresh = sources::resolve(spec, resolved_at, fetch)?;
            if let Some(old) = existing {
                // Same pins: keep the file as it is, time included, so rebuilds stay identical.
                fresh.resolved_at = old.lock.resolved_at;
                if fresh == old.lock {
                    return Ok((old, false));
                }
            }
            Ok((LockFile::write(path, fresh)?, true))
        }
    }
}

pub fn run(args: &LockArgs) -> anyhow::Result<u8> {
    let spec = SpecFile::load(&args.spec)?;
    let path = lock_path(&args.spec, args.lock.as_ref());
    let cache = Cache::open(&Cache::default_dir())?;
    let reporter = TerminalReporter::new(args.json);
    let fetch = Fetch { cache: &cache, jobs: 8, reporter: &reporter };
    let (lock, written) = ensure(&spec, &path, Refresh::Always, &fetch)?;
    if args.json {
        super::print_json(
            &serde_json::json!({ "lock": path, "updated": written, "sha256": lock.sha256, "entries": lock.lock }),
        )?;
    } else {
        let mut out = std::io::stdout().lock();
        let verb = if written { "wrote" } else { "up to date:" };
        let (images, wheels, files) = (lock.lock.image.len(), lock.lock.wheel.len(), lock.lock.file.len());
        writeln!(out, "{verb} {} ({images} image(s), {wheels} wheel(s), {files} file(s) pinned)", path.display())?;
        for i in &lock.lock.image {
            let platforms: Vec<&str> = i.platforms.iter().map(|p| p.platform.as_str()).collect();
            let extra = if platforms.is_empty() { String::new() } else { format!("  [{}]", platforms.join(" ")) };
            writeln!(out, "  image {}  sha256:{}{extra}", i.reference, i.digest)?;
        }
        for w in &lock.lock.wheel {
            writeln!(out, "  wheel {}  {} bytes  sha256 {}", w.filename, w.size, w.sha256)?;
        }
        for f in &lock.lock.file {
            writeln!(out, "  file {}  {} bytes  sha256 {}", f.name, f.size, f.sha256)?;
        }
    }
    Ok(super::EXIT_OK)
}
