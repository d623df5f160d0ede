//! `[[file]]` entries: a local file (a path relative to the spec) or a URL, whose `sha256` the
//! spec must pin; the lock downloads it once, so a wrong pin fails there and caches nothing.
//! URL entries are downloaded together, `--jobs` at a time, like every other source.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use super::{Content, SourceError};
use crate::bundle::manifest::{Artifact, FileArtifact};
use crate::digest::hash_reader;
use crate::fetch::{Fetch, Http, Wanted, runtime};
use crate::spec::lock::{LockError, LockFile, LockedFile};
use crate::spec::{FileSource, FileSpec, SpecFile};

fn describe(entry: &FileSpec) -> String {
    format!("[[file]] {}", entry.name)
}

fn local_path(spec: &SpecFile, entry: &FileSpec) -> PathBuf {
    spec.base_dir().join(&entry.source)
}

/// Where each entry's bytes are, in the order given: local files where they are, URL entries in
/// the cache, downloaded (and verified against the pinned sha256) if they are not there yet.
fn origins(
    spec: &SpecFile,
    entries: &[(&FileSpec, Option<u64>)],
    fetch: &Fetch<'_>,
) -> Result<Vec<PathBuf>, SourceError> {
    let wanted: Vec<Wanted> = entries
        .iter()
        .filter_map(|(entry, size)| match entry.source_kind() {
            FileSource::Url(url) => Some(Wanted {
                url: url.to_owned(),
                sha256: entry.sha256.expect("the spec check requires sha256 for URLs"),
                size: *size,
                bearer: None,
                what: describe(entry),
            }),
            FileSource::Local(_) => None,
        })
        .collect();
    let mut downloaded = if wanted.is_empty() {
        Vec::new()
    } else {
        let http = Http::new()?;
        let rt = runtime().map_err(SourceError::Runtime)?;
        rt.block_on(http.download_all(&wanted, fetch))?
    }
    .into_iter();
    Ok(entries
        .iter()
        .map(|(entry, _)| match entry.source_kind() {
            FileSource::Url(_) => downloaded.next().expect("one download per URL entry"),
            FileSource::Local(_) => local_path(spec, entry),
        })
        .collect())
}

/// Pin every entry: hash a local file, or download a URL against its pinned sha256.
pub fn resolve(spec: &SpecFile, fetch: &Fetch<'_>) -> Result<Vec<LockedFile>, SourceError> {
    let entries: Vec<_> = spec.spec.file.iter().map(|e| (e.get_ref(), None)).collect();
    let paths = origins(spec, &entries, fetch)?;
    let mut locked = Vec::new();
    for ((entry, _), path) in entries.into_iter().zip(paths) {
        let read_err = |source| SourceError::Read { what: describe(entry), path: path.clone(), source };
        let (sha256, size) = match entry.source_kind() {
            // Verified against the pin while it was downloaded.
            FileSource::Url(_) => (
                entry.sha256.expect("the spec check requires sha256 for URLs"),
                std::fs::metadata(&path).map_err(read_err)?.len(),
            ),
            FileSource::Local(_) => {
                hash_reader(BufReader::new(File::open(&path).map_err(read_err)?)).map_err(read_err)?
            }
        };
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
        locked.push(LockedFile { name: entry.name.clone(), source: entry.source.clone(), sha256, size });
    }
    locked.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(locked)
}

/// The artifacts and content members of every entry, from the lock.
pub fn plan(spec: &SpecFile, lock: &LockFile, fetch: &Fetch<'_>) -> Result<(Vec<Artifact>, Vec<Content>), SourceError> {
    let mut entries = Vec::new();
    for entry in &spec.spec.file {
        let entry = entry.get_ref();
        let locked = lock.lock.locked_file(&entry.name).ok_or_else(|| LockError::Stale {
            path: lock.path.clone(),
            reason: format!("`[[file]]` `{}` is not locked", entry.name),
        })?;
        entries.push((entry, locked));
    }
    let sized: Vec<_> = entries.iter().map(|(entry, locked)| (*entry, Some(locked.size))).collect();
    let paths = origins(spec, &sized, fetch)?;
    let mut artifacts = Vec::new();
    let mut contents = Vec::new();
    for ((entry, locked), origin) in entries.into_iter().zip(paths) {
        let path = entry.name.member_path();
        artifacts.push(Artifact::File(FileArtifact {
            name: entry.name.clone(),
            source: entry.source.clone(),
            sha256: locked.sha256,
            size: locked.size,
            path: path.clone(),
            file_kind: entry.kind,
            notes: entry.notes.clone(),
        }));
        contents.push(Content { path, size: locked.size, sha256: locked.sha256, origin, what: describe(entry) });
    }
    Ok((artifacts, contents))
}
