//! What a delta bundle's base holds (`build --base OLD.airlock`, `--base-lock OLD.lock`): the
//! digests of content the site already has, so that the delta can leave it out.
//!
//! Nothing here is trusted: a base that lies about what it holds makes a delta whose install
//! fails on the site, which verifies the base again and takes every omitted member from it by
//! digest. What is read here only decides what to leave out.

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::bundle::manifest::BaseRef;
use crate::bundle::parts::{Input, PartsError};
use crate::bundle::reader::read_head;
use crate::cache::Cache;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::spec::lock::{LockError, LockFile};

#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    #[error("base bundle: {0}")]
    Parts(#[from] PartsError),
    #[error("base bundle `{}`: {detail}", path.display())]
    Bundle { path: PathBuf, detail: String },
    #[error("base lock `{}` does not exist", path.display())]
    NoLock { path: PathBuf },
    #[error(transparent)]
    Lock(#[from] LockError),
}

impl Classify for BaseError {
    fn class(&self) -> Class {
        match self {
            BaseError::Parts(e) => e.class(),
            BaseError::Bundle { .. } => Class::Verification,
            BaseError::NoLock { .. } => Class::Usage,
            BaseError::Lock(e) => e.class(),
        }
    }
}

/// A base: which bundle it is, and the digests of the content it holds.
#[derive(Debug)]
pub struct Base {
    pub reference: BaseRef,
    pub holds: BTreeSet<Sha256>,
}

impl Base {
    /// The content entries of an earlier bundle (file or parts), read from its manifest; a
    /// delta base's own `from_base` entries count, since the site holds those too.
    pub fn from_bundle(path: &Path) -> Result<Self, BaseError> {
        let input = Input::resolve(path)?;
        let head =
            read_head(input.open()?).map_err(|p| BaseError::Bundle { path: path.to_owned(), detail: p.to_string() })?;
        let m = head.manifest;
        let holds = m.entries.iter().filter(|e| e.path.area() != "airlock").map(|e| e.sha256).collect();
        let reference = BaseRef {
            manifest_sha256: Some(head.manifest_sha256),
            name: Some(m.name),
            version: Some(m.version),
            lock_sha256: m.lock_sha256,
        };
        Ok(Self { reference, holds })
    }

    /// The content an earlier lock pinned. Image layers and configs are not in a lock: they
    /// are read from the image manifests in the build cache (where building the base left
    /// them); an image whose manifest is not cached keeps its blobs in the delta.
    pub fn from_lock(path: &Path, cache: &Cache) -> Result<Self, BaseError> {
        let lock = LockFile::load(path)?.ok_or_else(|| BaseError::NoLock { path: path.to_owned() })?;
        let l = &lock.lock;
        let mut holds = BTreeSet::new();
        holds.extend(l.wheel.iter().map(|w| w.sha256));
        holds.extend(l.deb.iter().map(|d| d.sha256));
        holds.extend(l.rpm.iter().map(|r| r.sha256));
        holds.extend(l.file.iter().map(|f| f.sha256));
        holds.extend(l.model.iter().flat_map(|m| m.files.iter().map(|f| f.sha256)));
        for image in &l.image {
            let manifests: Vec<Sha256> = std::iter::once(image.digest)
                .chain(image.platforms.iter().map(|p| p.digest))
                .chain(image.attached.iter().map(|a| a.digest))
                .collect();
            // An index names manifests, a manifest its config and layers: two levels at most.
            let mut next = manifests;
            for _ in 0..2 {
                let mut children = Vec::new();
                for digest in next {
                    if !holds.insert(digest) {
                        continue;
                    }
                    let Some(doc) = cached_document(cache, &digest) else {
                        tracing::warn!(
                            "base lock: image {} manifest sha256:{digest} is not in the cache; what it names stays \
                             in the delta",
                            image.reference
                        );
                        continue;
                    };
                    holds.extend(doc.blobs.iter().map(|d| d.digest));
                    children.extend(doc.children.iter().map(|d| d.digest));
                }
                next = children;
            }
        }
        let reference = BaseRef { manifest_sha256: None, name: None, version: None, lock_sha256: lock.sha256 };
        Ok(Self { reference, holds })
    }
}

/// A manifest or index from the build cache, if it is there and parses.
fn cached_document(cache: &Cache, digest: &Sha256) -> Option<crate::oci::doc::Document> {
    if !cache.contains(digest, None) {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::open(cache.path(digest)).ok()?.take(4 << 20).read_to_end(&mut bytes).ok()?;
    crate::oci::doc::parse(&bytes).ok()
}
