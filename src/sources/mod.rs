//! Sources resolve spec entries to locked entries (a digest and size for every input) and
//! fetch locked content for packing: one module per kind (`oci` images, `pypi` wheels, `apt`
//! Debian packages, `hf` models, `file` files), all downloading through `crate::fetch`.

pub mod apt;
pub mod file;
pub mod hf;
pub mod oci;
pub mod pypi;

use std::path::PathBuf;

use crate::bundle::MemberPath;
use crate::bundle::manifest::Artifact;
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::fetch::{DownloadError, Fetch, HttpError};
use crate::spec::lock::{Lock, LockError, LockFile};
use crate::spec::{SpecError, SpecFile};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Image(#[from] oci::ImageError),
    #[error(transparent)]
    Cache(#[from] crate::cache::CacheError),
    #[error(transparent)]
    Http(#[from] crate::fetch::HttpError),
    #[error(transparent)]
    Wheel(#[from] pypi::WheelError),
    #[error(transparent)]
    Model(#[from] hf::ModelError),
    #[error(transparent)]
    Deb(#[from] apt::DebError),
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("cannot read `{}` (source of `{what}`)", path.display())]
    Read {
        what: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Content that does not match the digest it was pinned to: a verification failure.
    #[error("`{what}` from `{origin}`: expected sha256 {expected}, got {actual}{hint}")]
    DigestMismatch { what: String, origin: String, expected: Sha256, actual: Sha256, hint: &'static str },
    #[error("`{what}` from `{origin}`: expected {expected} bytes, got {actual}{hint}")]
    SizeMismatch { what: String, origin: String, expected: u64, actual: u64, hint: &'static str },
}

/// One content member of the bundle to be, and where its bytes come from.
#[derive(Debug, Clone)]
pub struct Content {
    pub path: MemberPath,
    pub size: u64,
    pub sha256: Sha256,
    pub origin: PathBuf,
    /// Human name for messages, e.g. "[[file]] `fw.bin`".
    pub what: String,
}

/// What goes into a bundle: the manifest's artifacts and the content members, sorted by path.
#[derive(Debug)]
pub struct Plan {
    pub artifacts: Vec<Artifact>,
    pub contents: Vec<Content>,
}

/// Resolve every entry of the spec: hash what it names and pin it.
pub fn resolve(spec: &SpecFile, resolved_at: Timestamp, fetch: &Fetch<'_>) -> Result<Lock, SourceError> {
    let mut lock = Lock::new(resolved_at);
    lock.image = oci::resolve(spec)?;
    lock.wheel = pypi::resolve(spec, fetch)?;
    lock.model = hf::resolve(spec, fetch)?;
    lock.deb = apt::resolve(spec, fetch)?;
    lock.file = file::resolve(spec, fetch)?;
    Ok(lock)
}

/// The artifacts and content members for a spec whose lock covers it.
pub fn plan(spec: &SpecFile, lock: &LockFile, fetch: &Fetch<'_>) -> Result<Plan, SourceError> {
    let (mut artifacts, mut contents) = oci::plan(spec, lock, fetch)?;
    let (wheel_artifacts, wheel_contents) = pypi::plan(spec, lock, fetch)?;
    artifacts.extend(wheel_artifacts);
    contents.extend(wheel_contents);
    let (deb_artifacts, deb_contents) = apt::plan(spec, lock, fetch)?;
    artifacts.extend(deb_artifacts);
    contents.extend(deb_contents);
    let (model_artifacts, model_contents) = hf::plan(spec, lock, fetch)?;
    artifacts.extend(model_artifacts);
    contents.extend(model_contents);
    let (file_artifacts, file_contents) = file::plan(spec, lock, fetch)?;
    artifacts.extend(file_artifacts);
    contents.extend(file_contents);
    contents.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Plan { artifacts, contents })
}

impl From<DownloadError<HttpError>> for SourceError {
    fn from(e: DownloadError<HttpError>) -> Self {
        match e {
            DownloadError::GaveUp { what, detail } => SourceError::Http(HttpError::Request { url: what, detail }),
            DownloadError::Fatal(e) => SourceError::Http(e),
            DownloadError::Cache(e) => SourceError::Cache(e),
        }
    }
}
