//! `[[file]]` entries: a local file (a path relative to the spec) or a URL, whose `sha256` the
//! spec must pin; the lock downloads it once, so a wrong pin fails there and caches nothing.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use super::{Content, Plan, SourceError};
use crate::bundle::manifest::{Artifact, FileArtifact};
use crate::digest::hash_reader;
use crate::fetch::{Fetch, Http};
use crate::spec::lock::{LockError, LockFile, LockedFile};
use crate::spec::{FileSource, FileSpec, SpecFile};

fn describe(entry: &FileSpec) -> String {
    format!("[[file]] {}", entry.name)
}

fn local_path(spec: &SpecFile, entry: &FileSpec) -> PathBuf {
    spec.base_dir().join(&entry.source)
}

/// A URL entry's content in the cache, downloaded (and verified) if it is not there yet.
fn cached(url: &str, entry: &FileSpec, size: Option<u64>, fetch: &Fetch<'_>) -> Result<PathBuf, SourceError> {
    let digest = entry.sha256.expect("the spec check requires sha256 for URLs");
    if fetch.cache.contains(&digest, size) {
        return Ok(fetch.cache.path(&digest));
    }
    let http = Http::new()?;
    let rt = crate::fetch::runtime().map_err(SourceError::Runtime)?;
    let what = describe(entry);
    Ok(rt.block_on(http.download(url, digest, size, None, fetch, &what))?)
}

/// Pin the entry: hash a local file, or download a URL against its pinned sha256.
pub fn resolve(spec: &SpecFile, entry: &FileSpec, fetch: &Fetch<'_>) -> Result<LockedFile, SourceError> {
    if let FileSource::Url(url) = entry.source_kind() {
        let path = cached(url, entry, None, fetch)?;
        let size =
            std::fs::metadata(&path).map_err(|source| SourceError::Read { what: describe(entry), path, source })?.len();
        let sha256 = entry.sha256.expect("the spec check requires sha256 for URLs");
        return Ok(LockedFile { name: entry.name.clone(), source: entry.source.clone(), sha256, size });
    }
    let path = local_path(spec, entry);
    let read_err = |source| SourceError::Read { what: describe(entry), path: path.clone(), source };
    let file = File::open(&path).map_err(read_err)?;
    let (sha256, size) = hash_reader(BufReader::new(file)).map_err(read_err)?;
    if let Some(expected) = entry.sha256
        && expected != sha256
    {
        return Err(SourceError::DigestMismatch {
            what: describe(entry),
            origin: path.display().to_string(),
            expected,
            actual: sha256,
            hint: " (the spec pins a different sha256)",
        });
    }
    Ok(LockedFile { name: entry.name.clone(), source: entry.source.clone(), sha256, size })
}

pub fn plan(
    spec: &SpecFile,
    lock: &LockFile,
    entry: &FileSpec,
    fetch: &Fetch<'_>,
    plan: &mut Plan,
) -> Result<(), SourceError> {
    let locked = lock.lock.locked_file(&entry.name).ok_or_else(|| LockError::Stale {
        path: lock.path.clone(),
        reason: format!("`[[file]]` `{}` is not locked", entry.name),
    })?;
    let path = entry.name.member_path();
    plan.artifacts.push(Artifact::File(FileArtifact {
        name: entry.name.clone(),
        source: entry.source.clone(),
        sha256: locked.sha256,
        size: locked.size,
        path: path.clone(),
        file_kind: entry.kind,
        notes: entry.notes.clone(),
    }));
    plan.contents.push(Content {
        path,
        size: locked.size,
        sha256: locked.sha256,
        origin: match entry.source_kind() {
            FileSource::Url(url) => cached(url, entry, Some(locked.size), fetch)?,
            FileSource::Local(_) => local_path(spec, entry),
        },
        what: describe(entry),
    });
    Ok(())
}
