//! `[[file]]` entries with a local source: a path relative to the spec.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use super::{Content, Plan, SourceError};
use crate::bundle::manifest::{Artifact, FileArtifact};
use crate::digest::hash_reader;
use crate::spec::lock::{LockError, LockFile, LockedFile};
use crate::spec::{FileSpec, SpecFile};

fn describe(entry: &FileSpec) -> String {
    format!("[[file]] {}", entry.name)
}

fn local_path(spec: &SpecFile, entry: &FileSpec) -> PathBuf {
    spec.base_dir().join(&entry.source)
}

/// Hash the local file once and pin it; a digest given in the spec must match.
pub fn resolve(spec: &SpecFile, entry: &FileSpec) -> Result<LockedFile, SourceError> {
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

pub fn plan(spec: &SpecFile, lock: &LockFile, entry: &FileSpec, plan: &mut Plan) -> Result<(), SourceError> {
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
        origin: local_path(spec, entry),
        what: describe(entry),
    });
    Ok(())
}
