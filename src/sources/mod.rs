//! Sources resolve spec entries to locked entries (a digest and size for every input) and
//! fetch locked content for packing: one module per kind (`oci` images, `pypi` wheels, `apt`
//! Debian packages, `hf` models, `file` files), all downloading through `crate::fetch`.
//!
//! A command builds one [`Sources`] for its spec: it holds the command's HTTP client and
//! cache (through [`Fetch`]) and one registry connection per registry, shared by `resolve`
//! and `plan`. Both are async; the command runs them on its one runtime.

pub mod apt;
pub mod file;
pub mod hf;
pub mod index;
pub mod keyring;
pub mod oci;
pub mod pylock;
pub mod pypi;
pub mod rpm;

use std::path::PathBuf;

use crate::bundle::manifest::Artifact;
use crate::bundle::writer::Member;
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::{DownloadError, Fetch, HttpError};
use crate::spec::SpecFile;
use crate::spec::lock::{Lock, LockError, LockFile};

/// An input whose upstream signature the spec requires (`verify`) and none verified: an
/// image's referrers and `.sig` signatures, a file's Sigstore bundle, a wheel's provenance.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{reference}` (sha256:{digest}): no upstream Sigstore signature verifies as {asked} under {root}; {}",
    if found.is_empty() { "none found among its referrers or its `.sig` tag".to_owned() } else { format!("found: {}", found.join("; ")) }
)]
pub struct Unsigned {
    pub reference: String,
    pub digest: Sha256,
    pub asked: String,
    pub root: String,
    /// Each signature found, and why it did not verify.
    pub found: Vec<String>,
}

impl Unsigned {
    pub fn new(
        reference: String,
        digest: Sha256,
        policy: &crate::spec::UpstreamSigner,
        root: &crate::sign::sigstore::Root,
        found: Vec<String>,
    ) -> Self {
        Self { reference, digest, asked: policy.to_string(), root: root.describe(), found }
    }
}

impl Classify for Unsigned {
    fn class(&self) -> Class {
        Class::Verification
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Image(#[from] oci::ImageError),
    #[error(transparent)]
    Cache(#[from] crate::cache::CacheError),
    #[error(transparent)]
    Http(#[from] crate::fetch::HttpError),
    #[error(transparent)]
    Overrun(#[from] crate::fetch::Overrun),
    #[error(transparent)]
    Wheel(#[from] pypi::WheelError),
    #[error(transparent)]
    Model(#[from] hf::ModelError),
    #[error(transparent)]
    Deb(#[from] apt::DebError),
    #[error(transparent)]
    Rpm(#[from] rpm::RpmError),
    #[error(transparent)]
    Unsigned(#[from] Unsigned),
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
    /// `freeze`: versions a node runs that no archive of the spec serves.
    #[error(
        "the node runs {} package version(s) no archive of the spec serves: {}; add an archive that still has them as \
         an entry of the spec (the vendor's repository for that release, a snapshot of the distribution's archive); \
         searched: {}",
        packages.len(),
        packages.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        archives.join(", ")
    )]
    Unserved { packages: Vec<Unserved>, archives: Vec<String> },
}

/// A package a node runs at a version no archive of the spec serves (`freeze`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unserved {
    pub name: String,
    pub version: String,
    pub arch: String,
    /// Who needs it: the spec (named) or the installed package that depends on it.
    pub wanted_by: String,
    /// The versions of it the searched archives do serve, by archive (empty: none).
    pub served: String,
}

/// What `freeze` found from a spec's named packages through the node's installed
/// dependencies: the served packages (indexes into a universe), the installed versions no
/// archive serves, and the named packages the node does not have.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub served: Vec<usize>,
    pub unserved: Vec<Unserved>,
    pub absent: Vec<String>,
}

/// The walk `apt::freeze` and `rpm::freeze` share: from `roots` (a name, and whether to follow
/// its dependencies), each name looked up once with `served` (`None`: not installed; `Err`:
/// installed at a version no archive serves), and for a followed package, `installed_deps`
/// gives its name and the installed packages its dependencies reach.
pub(crate) fn installed_closure<E>(
    roots: &[(String, bool)],
    arch: &str,
    served: impl Fn(&str) -> Option<Result<usize, (String, String)>>,
    mut installed_deps: impl FnMut(usize) -> Result<(String, Vec<String>), E>,
) -> Result<Found, E> {
    let mut found = Found::default();
    let mut seen: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut queue: std::collections::VecDeque<(usize, bool)> = std::collections::VecDeque::new();
    let mut visit =
        |name: &str, follow: bool, wanted_by: String, found: &mut Found, queue: &mut std::collections::VecDeque<_>| {
            if !seen.insert(name.to_owned()) {
                return;
            }
            match served(name) {
                None => found.absent.push(name.to_owned()),
                Some(Ok(p)) => {
                    found.served.push(p);
                    queue.push_back((p, follow));
                }
                Some(Err((version, served))) => {
                    let arch = arch.to_owned();
                    found.unserved.push(Unserved { name: name.to_owned(), version, arch, wanted_by, served });
                }
            }
        };
    for (name, follow) in roots {
        visit(name, *follow, "named by the spec".to_owned(), &mut found, &mut queue);
    }
    while let Some((p, follow)) = queue.pop_front() {
        if !follow {
            continue;
        }
        let (parent, names) = installed_deps(p)?;
        for name in names.iter().filter(|n| **n != parent) {
            visit(name, true, format!("for {parent}"), &mut found, &mut queue);
        }
    }
    Ok(found)
}

impl std::fmt::Display for Unserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A node's inventory said these: each escaped (a line break in a version would print a
        // line of its own under airlock's error).
        let v = |s: &str| crate::escape::value(s).into_owned();
        write!(f, "{} {} ({}, {}", v(&self.name), v(&self.version), v(&self.arch), v(&self.wanted_by))?;
        if self.served.is_empty() { write!(f, "; served nowhere)") } else { write!(f, "; served: {})", self.served) }
    }
}

impl Classify for SourceError {
    fn class(&self) -> Class {
        match self {
            SourceError::Lock(e) => e.class(),
            SourceError::Image(e) => e.class(),
            SourceError::Cache(e) => e.class(),
            SourceError::Http(e) => e.class(),
            SourceError::Wheel(e) => e.class(),
            SourceError::Model(e) => e.class(),
            SourceError::Deb(e) => e.class(),
            SourceError::Rpm(e) => e.class(),
            SourceError::Read { .. } => Class::Runtime,
            SourceError::Overrun(_)
            | SourceError::DigestMismatch { .. }
            | SourceError::Unserved { .. }
            | SourceError::Unsigned(_) => Class::Verification,
        }
    }
}

/// Small bytes (a manifest, a Sigstore bundle, a provenance object) kept in the cache by their
/// own digest, for the build that carries them: the bytes back, and that digest.
pub(crate) async fn keep(
    cache: &crate::cache::Cache,
    what: &str,
    bytes: Vec<u8>,
) -> Result<(Vec<u8>, Sha256), crate::cache::CacheError> {
    let digest = Sha256::of_bytes(&bytes);
    keep_as(cache, what, bytes, digest).await
}

/// The same, the bytes' digest known already (the cache checks it as it writes them).
async fn keep_as(
    cache: &crate::cache::Cache,
    what: &str,
    bytes: Vec<u8>,
    digest: Sha256,
) -> Result<(Vec<u8>, Sha256), crate::cache::CacheError> {
    let (cache, what, size) = (cache.clone(), what.to_owned(), bytes.len() as u64);
    crate::fetch::blocking(move || cache.put(digest, Some(size), &what, bytes.as_slice()).map(|_| (bytes, digest)))
        .await
}

/// The member `path` carrying a small document the lock kept (`keep`): from the cache, else
/// fetched again from `origin` (`refetch`) and held to the `digest` the lock recorded.
pub(crate) async fn carried_document(
    sources: &Sources<'_>,
    path: crate::member_path::MemberPath,
    digest: Sha256,
    (what, origin): (String, &str),
    refetch: impl std::future::Future<Output = Result<Vec<u8>, SourceError>>,
) -> Result<Member, SourceError> {
    let cache = sources.fetch.cache;
    let size = if let Some(bytes) = cache.get_small(&digest, crate::sign::sigstore::MAX_DOCUMENT_BYTES) {
        bytes.len() as u64
    } else {
        let bytes = refetch.await?;
        let actual = Sha256::of_bytes(&bytes);
        if actual != digest {
            let hint = " (the lock pins another one than its source serves now: run `airlock lock`)";
            return Err(SourceError::DigestMismatch {
                what,
                origin: origin.to_owned(),
                expected: digest,
                actual,
                hint,
            });
        }
        // Kept only once it is the document the lock recorded.
        keep_as(cache, &what, bytes, actual).await?.0.len() as u64
    };
    Ok(Member { path, size, sha256: digest, origin: cache.path(&digest).into(), what: what.into() })
}

/// What goes into a bundle: the manifest's artifacts and the content members.
#[derive(Debug, Default)]
pub struct Plan {
    pub artifacts: Vec<Artifact>,
    pub members: Vec<Member>,
    /// Image blobs the members name that are not fetched yet (`oci::fetch_blobs`).
    pub blobs: Vec<oci::PendingBlob>,
}

impl Plan {
    fn extend(&mut self, other: Plan) {
        self.artifacts.extend(other.artifacts);
        self.members.extend(other.members);
        self.blobs.extend(other.blobs);
    }
}

/// The sources of one spec, for one command.
pub struct Sources<'a> {
    pub spec: &'a SpecFile,
    pub fetch: Fetch<'a>,
    registries: crate::oci::Registries,
    /// The Sigstore trusted root upstream signatures are verified against (`--trusted-root`,
    /// else the public-good one airlock ships).
    pub sigstore_root: crate::sign::sigstore::Root,
}

impl<'a> Sources<'a> {
    pub fn new(spec: &'a SpecFile, fetch: Fetch<'a>) -> Self {
        use crate::oci::{Endpoint, Transport};
        let endpoints = spec
            .spec
            .registries
            .iter()
            .map(|(host, s)| {
                let transport = if s.insecure { Transport::InsecureHttp } else { Transport::Https };
                let ca = s.ca.as_ref().map(|ca| spec.base_dir().join(ca));
                (host.clone(), Endpoint { transport, ca })
            })
            .collect();
        let options = fetch.http.options();
        let timeouts = (options.connect_timeout, options.read_timeout);
        Self {
            spec,
            fetch,
            registries: crate::oci::Registries::new(endpoints, timeouts),
            sigstore_root: crate::sign::sigstore::Root::PublicGood,
        }
    }

    /// Verify upstream signatures against `root` instead of the public-good one.
    #[must_use]
    pub fn with_sigstore_root(mut self, root: crate::sign::sigstore::Root) -> Self {
        self.sigstore_root = root;
        self
    }

    /// Resolve every entry of the spec: hash what it names and pin it.
    pub async fn resolve(&self, resolved_at: Timestamp) -> Result<Lock, SourceError> {
        let mut lock = Lock::new(resolved_at);
        lock.image = oci::resolve(self).await?;
        lock.wheel = pypi::resolve(self).await?;
        lock.model = hf::resolve(self).await?;
        (lock.deb, lock.deb_base) = apt::resolve(self).await?;
        (lock.rpm, lock.rpm_base) = rpm::resolve(self).await?;
        lock.file = file::resolve(self).await?;
        Ok(lock)
    }

    /// The artifacts and content members for a spec whose lock covers it, every member's
    /// bytes in the cache (or, for a local file, where it is), sorted by path. The
    /// `[[file]]` pins are taken out of `lock` (`file::plan`): the caller lets it go afterwards.
    pub async fn plan(&self, lock: &mut LockFile) -> Result<Plan, SourceError> {
        tracing::debug!("plan: images, wheels, debs, rpms, models, files");
        let mut plan = oci::plan(self, lock).await?;
        plan.extend(pypi::plan(self, lock).await?);
        plan.extend(apt::plan(self, lock).await?);
        plan.extend(rpm::plan(self, lock).await?);
        plan.extend(hf::plan(self, lock).await?);
        plan.extend(file::plan(self, &mut *lock).await?);
        plan.members.sort_unstable_by(Member::order);
        Ok(plan)
    }
}

impl From<DownloadError<HttpError>> for SourceError {
    fn from(e: DownloadError<HttpError>) -> Self {
        match e {
            DownloadError::GaveUp { what, detail, attempts } => SourceError::Http(HttpError::Request {
                url: what,
                detail: format!("{detail} (after {attempts} tries)"),
            }),
            DownloadError::Fatal(e) => SourceError::Http(e),
            DownloadError::Cache(e) => SourceError::Cache(e),
            DownloadError::Overrun(e) => SourceError::Overrun(e),
        }
    }
}
