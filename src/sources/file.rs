//! `[[file]]` entries: a local file (a path relative to the spec) or a URL, whose `sha256` the
//! spec must pin; the lock downloads it once, so a wrong pin fails there and caches nothing.
//! URL entries are downloaded together, `--jobs` at a time, like every other source. A local
//! directory is one entry for its whole tree (`walkdir`, in path order): every regular file is
//! pinned by path, size and sha256, and the entry by the tree's digest; a symlink, a device or
//! anything else that is not a regular file or a directory is refused by name (a link could
//! name a file outside the tree).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Plan, SourceError, Sources};
use crate::bundle::manifest::{Artifact, FileArtifact};
use crate::bundle::writer::{Member, Origin};
use crate::digest::{Sha256, hash_reader};
use crate::fetch::{Wanted, blocking};
use crate::member_path::MemberPathError;
use crate::spec::lock::{LockError, LockFile, LockedFile, TreeFile, tree_digest};
use crate::spec::{FileSource, FileSpec, SignatureForm, SpecFile, UpstreamSignature, UpstreamSigner};

fn describe(entry: &FileSpec) -> String {
    format!("[[file]] {}", entry.name)
}

fn local_path(spec: &SpecFile, entry: &FileSpec) -> PathBuf {
    spec.base_dir().join(&entry.source)
}

/// Where each entry's bytes are, in the order given: local files where they are, URL entries in
/// the cache, downloaded (and verified against the pinned sha256) if they are not there yet.
async fn origins(sources: &Sources<'_>, entries: &[(&FileSpec, Option<u64>)]) -> Result<Vec<PathBuf>, SourceError> {
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
    let mut downloaded =
        if wanted.is_empty() { Vec::new() } else { sources.fetch.http.download_all(&wanted, &sources.fetch).await? }
            .into_iter();
    Ok(entries
        .iter()
        .map(|(entry, _)| match entry.source_kind() {
            FileSource::Url(_) => downloaded.next().expect("one download per URL entry"),
            FileSource::Local(_) => local_path(sources.spec, entry),
        })
        .collect())
}

/// Pin every entry: hash a local file, or download a URL against its pinned sha256.
pub async fn resolve(sources: &Sources<'_>) -> Result<Vec<LockedFile>, SourceError> {
    let entries: Vec<_> = sources.spec.spec.file.iter().map(|e| (e.get_ref(), None)).collect();
    let paths = origins(sources, &entries).await?;
    let mut locked = Vec::new();
    for ((entry, _), path) in entries.into_iter().zip(paths) {
        let read_err = |source| SourceError::Read { what: describe(entry), path: path.clone(), source };
        if matches!(entry.source_kind(), FileSource::Local(_)) && path.is_dir() {
            let (dir, what) = (path.clone(), describe(entry));
            let name = entry.name.clone();
            let files = blocking(move || tree(&dir, &name)).await.map_err(|e| SourceError::Read {
                what,
                path: path.clone(),
                source: e,
            })?;
            let sha256 = tree_digest(files.iter().map(|f| (f.path.as_str(), f.sha256, f.size)));
            if let Some(expected) = entry.sha256.filter(|e| *e != sha256) {
                return Err(SourceError::DigestMismatch {
                    what: describe(entry),
                    origin: path.display().to_string(),
                    expected,
                    actual: sha256,
                    hint: " (the spec pins a different tree digest)",
                });
            }
            if entry.sigstore_bundle.is_some() {
                return Err(SourceError::Read {
                    what: describe(entry),
                    path: path.clone(),
                    source: std::io::Error::other(
                        "a directory has no one digest a Sigstore bundle signs: `sigstore_bundle` needs a single file",
                    ),
                });
            }
            let size = files.iter().map(|f| f.size).sum();
            let (name, source) = (entry.name.clone(), entry.source.clone());
            locked.push(LockedFile { name, source, sha256, size, files, signature: None });
            continue;
        }
        let (sha256, size) = match entry.source_kind() {
            // Verified against the pin while it was downloaded.
            FileSource::Url(_) => (
                entry.sha256.expect("the spec check requires sha256 for URLs"),
                tokio::fs::metadata(&path).await.map_err(read_err)?.len(),
            ),
            FileSource::Local(_) => {
                let local = path.clone();
                blocking(move || hash_reader(BufReader::new(File::open(local)?))).await.map_err(read_err)?
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
        let signature = match (&entry.sigstore_bundle, &entry.verify) {
            (Some(at), Some(policy)) => Some(verify_signature(sources, entry, at, policy, sha256).await?),
            _ => None,
        };
        locked.push(LockedFile {
            name: entry.name.clone(),
            source: entry.source.clone(),
            sha256,
            size,
            files: Vec::new(),
            signature,
        });
    }
    locked.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(locked)
}

/// A `[[file]]`'s `sigstore_bundle` (a URL, or a path beside the spec), at most
/// `MAX_DOCUMENT_BYTES`.
async fn bundle_bytes(sources: &Sources<'_>, entry: &FileSpec, at: &str) -> Result<Vec<u8>, SourceError> {
    if at.starts_with("http://") || at.starts_with("https://") {
        let limit = crate::sign::sigstore::MAX_DOCUMENT_BYTES;
        return Ok(sources.fetch.http.fetch_small(at, "application/json", None, limit).await?.0);
    }
    let path = sources.spec.base_dir().join(at);
    let read = path.clone();
    blocking(move || crate::sign::sigstore::read_bounded(&read)).await.map_err(|e| SourceError::Read {
        what: format!("{} sigstore_bundle", describe(entry)),
        path,
        source: std::io::Error::other(e.to_string()),
    })
}

/// The file's signature: its bundle verified over `sha256` under the spec's policy and the
/// build host's trusted root (and kept in the cache for the build), or the file refused (exit 3).
async fn verify_signature(
    sources: &Sources<'_>,
    entry: &FileSpec,
    at: &str,
    policy: &UpstreamSigner,
    sha256: Sha256,
) -> Result<UpstreamSignature, SourceError> {
    use crate::sign::sigstore::{
        Signer,
        upstream::{record, verify_over_digest},
    };
    let bytes = bundle_bytes(sources, entry, at).await?;
    let unsigned =
        |detail: String| super::Unsigned::new(describe(entry), sha256, policy, &sources.sigstore_root, vec![detail]);
    let signer = Signer::upstream(policy);
    let verified = verify_over_digest(&format!("`{at}`"), &bytes, sha256, &signer, &sources.sigstore_root)
        .map_err(|e| unsigned(e.as_found()))?;
    let (_, digest) = super::keep(sources.fetch.cache, &format!("{} sigstore_bundle", describe(entry)), bytes).await?;
    Ok(UpstreamSignature { url: Some(at.to_owned()), ..record(SignatureForm::File, digest, policy, verified) })
}

/// Every regular file under `dir`, in path order, hashed; anything else refused by name.
fn tree(dir: &std::path::Path, name: &crate::spec::FileName) -> std::io::Result<Vec<TreeFile>> {
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(dir).follow_links(false).sort_by_file_name() {
        let entry = entry.map_err(std::io::Error::other)?;
        let kind = entry.file_type();
        if kind.is_dir() {
            continue;
        }
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        let refuse = |why: &str| {
            std::io::Error::other(format!(
                "`{}` {why}; a `[[file]]` directory carries regular files only",
                entry.path().display()
            ))
        };
        if kind.is_symlink() {
            return Err(refuse("is a symbolic link (it could name a file outside the tree)"));
        }
        if !kind.is_file() {
            return Err(refuse("is not a regular file (a device, socket or pipe)"));
        }
        let path = rel.to_str().ok_or_else(|| refuse("has a name that is not UTF-8"))?.to_owned();
        crate::member_path::MemberPath::new(format!("{}/{path}", name.member_path()))
            .map_err(|e| refuse(&format!("cannot be a bundle member ({})", e.reason)))?;
        let (sha256, size) = hash_reader(BufReader::new(File::open(entry.path())?))?;
        files.push(TreeFile { path, sha256, size });
    }
    // Path order, byte by byte (`LC_ALL=C sort`): the order the tree digest's listing has.
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// The artifacts and content members of every entry, from the lock. Each pin is taken out of
/// the lock, so a directory's listing is moved into its artifact, not copied: the lock is let
/// go after the plan, and a listing of 200,000 files is 19 MB.
pub async fn plan(sources: &Sources<'_>, lock: &mut LockFile) -> Result<Plan, SourceError> {
    let (mut sized, mut pins) = (Vec::new(), Vec::new());
    for entry in &sources.spec.spec.file {
        let entry = entry.get_ref();
        let locked = lock.lock.take_file(&entry.name).ok_or_else(|| LockError::Stale {
            path: lock.path.clone(),
            reason: format!("`[[file]]` `{}` is not locked", entry.name),
        })?;
        sized.push((entry, Some(locked.size)));
        pins.push(locked);
    }
    let paths = origins(sources, &sized).await?;
    let mut plan = Plan::default();
    for (((entry, _), locked), origin) in sized.into_iter().zip(pins).zip(paths) {
        let unpinnable = |e: MemberPathError| SourceError::Read {
            what: describe(entry),
            path: origin.clone(),
            source: std::io::Error::other(e.to_string()),
        };
        let artifact = FileArtifact::new(entry, locked).map_err(unpinnable)?;
        if !artifact.files.is_empty() {
            // One directory and one name for all its files; the messages name each file's path.
            let (dir, what): (Arc<Path>, Arc<str>) = (origin.as_path().into(), describe(entry).into());
            let skip = artifact.path.as_str().len() + 1;
            for f in &artifact.files {
                plan.members.push(Member {
                    path: artifact.member(f).map_err(unpinnable)?,
                    size: f.size,
                    sha256: f.sha256,
                    origin: Origin::InDir { dir: dir.clone(), skip },
                    what: what.clone(),
                });
            }
            plan.artifacts.push(Artifact::File(artifact));
            continue;
        }
        if let (Some(signature), Some(at)) = (&artifact.signature, &entry.sigstore_bundle) {
            let (path, what) = (crate::spec::upstream::bundle_member(signature.bundle), describe(entry));
            let refetch = bundle_bytes(sources, entry, at);
            let what = (format!("{what} sigstore_bundle"), at.as_str());
            plan.members.push(super::carried_document(sources, path, signature.bundle, what, refetch).await?);
        }
        let (path, size, sha256, what) = (artifact.path.clone(), artifact.size, artifact.sha256, describe(entry));
        plan.members.push(Member { path, size, sha256, origin: origin.into(), what: what.into() });
        plan.artifacts.push(Artifact::File(artifact));
    }
    Ok(plan)
}
