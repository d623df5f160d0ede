//! A node reads a mirror's site root, served by any web server (`http(s)://HOST/PATH/`) or
//! mounted (`file:///PATH/`): the active bundle's tree is `current/`, its signed manifest
//! `current/airlock/manifest.json` (and `.sig`), its co-signatures
//! `current/bundle.airlock.KEYID.sig`, its packages under `current/debs/` and `current/rpms/`.
//!
//! The mirror is trusted for nothing. The manifest and its signatures are fetched first
//! (bounded) and checked under the node's policy; then only the members a node installs from,
//! those under `debs/` and `rpms/`, are fetched, each bounded by the size the verified manifest gives it
//! and checked against its sha256 before it is kept. Images, models and wheels stay on the
//! mirror. The node retains that part of the bundle (`State` marks it `partial`): its check
//! and its rollback verify the manifest's signatures and every kept file again.

use std::path::{Path, PathBuf};

use futures_util::StreamExt as _;
use sha2::Digest as _;
use tokio::io::AsyncWriteExt as _;

use super::root::{RETAINED_BUNDLE, SiteRoot};
use super::stage::{Staged, Verified};
use super::{SiteError, io_err};
use crate::bundle::Manifest;
use crate::bundle::manifest::{Entry, MANIFEST, MAX_MANIFEST_BYTES};
use crate::digest::Sha256;
use crate::fetch::{HttpError, Net};
use crate::progress::Reporter;
use crate::sign::Policy;
use crate::sign::policy::{Checked, CoSignature};

/// The largest signature file read from a mirror: a DER ECDSA signature in base64 is ~100 bytes.
pub const MAX_SIGNATURE_BYTES: u64 = 4096;

/// The members a node keeps of a bundle it applied from a mirror.
pub fn kept_by_node(path: &str) -> bool {
    path.starts_with("debs/") || path.starts_with("rpms/") || path == MANIFEST || path == SIGNATURE
}

/// What of `manifest` a node keeps: its deb and rpm artifacts and the entries `kept_by_node` names
/// (what its views and its check are made from).
pub fn kept(manifest: &Manifest) -> Manifest {
    let mut kept = manifest.clone();
    kept.entries.retain(|e| kept_by_node(e.path.as_str()));
    kept.artifacts
        .retain(|a| matches!(a, crate::bundle::manifest::Artifact::Deb(_) | crate::bundle::manifest::Artifact::Rpm(_)));
    kept
}

/// The embedded signature member.
pub const SIGNATURE: &str = "airlock/manifest.json.sig";

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("`{0}` is not a mirror's site root: name it as http(s)://HOST/PATH/ or file:///PATH/")]
    NotAMirror(String),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("the mirror's `{url}`: {detail}")]
    Read { url: String, detail: String },
    #[error("the mirror has no `{url}`: is it a site root with a current bundle?")]
    Missing { url: String },
    #[error("the mirror's `{url}` is missing: its manifest is unsigned; nothing was downloaded")]
    Unsigned { url: String },
    #[error("the mirror's `{url}` is not a regular file (a FIFO, a device or a directory): refused, not read")]
    NotRegular { url: String },
    #[error("the mirror's `{url}` is larger than the {limit} bytes allowed: refused; nothing was downloaded")]
    TooLarge { url: String, limit: u64 },
    #[error("the mirror's current manifest `{url}` is not a manifest: {detail}")]
    Manifest { url: String, detail: String },
    #[error(
        "the mirror's current manifest `{url}` is signed by {signers} {whose}, {threshold} needed; \
         nothing was downloaded"
    )]
    Untrusted { url: String, whose: String, signers: usize, threshold: usize },
    #[error(
        "the mirror's `{url}`: expected {expected_size} bytes with sha256 {expected}, got {size} bytes with sha256 {actual}; nothing was changed"
    )]
    Member { url: String, expected: Sha256, expected_size: u64, actual: Sha256, size: u64 },
}

impl crate::failure::Classify for MirrorError {
    fn class(&self) -> crate::failure::Class {
        use crate::failure::Class;
        match self {
            MirrorError::NotAMirror(_) => Class::Usage,
            MirrorError::Manifest { .. }
            | MirrorError::Untrusted { .. }
            | MirrorError::Member { .. }
            | MirrorError::Unsigned { .. }
            | MirrorError::NotRegular { .. }
            | MirrorError::TooLarge { .. } => Class::Verification,
            MirrorError::Http(e) => e.class(),
            MirrorError::Read { .. } | MirrorError::Missing { .. } => Class::Runtime,
        }
    }
}

/// Whether `source` names a mirror's site root.
pub fn is_mirror(source: &str) -> bool {
    ["http://", "https://", "file://"].iter().any(|p| source.starts_with(p))
}

/// Where a mirror's `current/` is.
enum Place {
    Http(String),
    Dir(PathBuf),
}

/// The most root versions a node takes from a mirror in one apply, and the most bytes of trust
/// metadata: a site rotates its root a few times a year, each version a few KiB.
pub const MAX_CARRIED_ROOTS: u64 = 64;
pub const MAX_CARRIED_TRUST_BYTES: usize = 4 << 20;

/// The trust metadata the mirror's current bundle carries (`current/airlock/trust/`): the root
/// versions after `current` (the node's own root), each bounded and verified by the one before
/// and by itself as it arrives, stopping at the first that is missing or does not verify, at
/// most `MAX_CARRIED_ROOTS` of them and `MAX_CARRIED_TRUST_BYTES` in all; and its targets
/// metadata. A mirror answering for every version cannot hold a node nor fill its memory: what
/// it sends past a good chain is never read. The node verifies the whole again when it adopts.
pub fn carried_trust(
    source: &str,
    current: &crate::trust::metadata::Signed<crate::trust::metadata::Root>,
    net: &Net,
) -> Result<Vec<(PathBuf, Vec<u8>)>, SiteError> {
    let place = Place::parse(source)?;
    let limit = crate::trust::MAX_METADATA_BYTES;
    net.block_on(async {
        let mut found = Vec::new();
        let mut total = 0usize;
        let mut last = current.clone();
        for _ in 0..MAX_CARRIED_ROOTS {
            let n = last.signed.version + 1;
            let rel = format!("{}{}", crate::bundle::manifest::TRUST_PREFIX, crate::trust::root_file(n));
            let Some(bytes) = place.small(net, &rel, limit).await? else { break };
            total += bytes.len();
            let path = PathBuf::from(place.url(&rel));
            match crate::trust::next_root(&last, &bytes, &path) {
                Ok(doc) if total <= MAX_CARRIED_TRUST_BYTES => {
                    last = doc;
                    found.push((path, bytes));
                }
                Ok(_) => {
                    tracing::warn!("the mirror's trust metadata passes {MAX_CARRIED_TRUST_BYTES} bytes: no more read");
                    break;
                }
                Err(e) => {
                    tracing::warn!("the mirror's root version {n} does not verify, none after it is read: {e}");
                    break;
                }
            }
        }
        let rel = format!("{}{}", crate::bundle::manifest::TRUST_PREFIX, crate::trust::TARGETS_FILE);
        if let Some(bytes) = place.small(net, &rel, limit).await? {
            found.push((PathBuf::from(place.url(&rel)), bytes));
        }
        Ok::<_, SiteError>(found)
    })
}

impl Place {
    fn parse(source: &str) -> Result<Self, MirrorError> {
        if let Some(path) = source.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(MirrorError::NotAMirror(source.to_owned()));
            }
            return Ok(Self::Dir(Path::new(path).join("current")));
        }
        Ok(Self::Http(format!("{}/current/", source.trim_end_matches('/'))))
    }

    fn url(&self, rel: &str) -> String {
        match self {
            Self::Http(base) => format!("{base}{rel}"),
            Self::Dir(dir) => dir.join(rel).display().to_string(),
        }
    }

    /// A small document, at most `limit` bytes; `None` when the mirror has no such file.
    async fn small(&self, net: &Net, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, MirrorError> {
        let url = self.url(rel);
        match self {
            Self::Http(_) => match net.http().fetch_small(&url, "*/*", None, limit).await {
                Ok((bytes, _)) => Ok(Some(bytes)),
                Err(HttpError::Status { status: 404, .. }) => Ok(None),
                // Past what a manifest or signature can be: integrity, not the network.
                Err(HttpError::TooLarge { limit, .. }) => Err(MirrorError::TooLarge { url, limit }),
                Err(e) => Err(e.into()),
            },
            Self::Dir(_) => {
                let path = PathBuf::from(&url);
                let read = crate::fetch::blocking(move || super::state::read_bounded(&path, limit)).await;
                read.map_err(|e| match e {
                    SiteError::NotRegular { .. } => MirrorError::NotRegular { url },
                    SiteError::TooLarge { limit, .. } => MirrorError::TooLarge { url, limit },
                    e => MirrorError::Read { url, detail: e.to_string() },
                })
            }
        }
    }

    /// A member into `dest`, at most `entry.size` bytes, checked against its sha256.
    async fn member(&self, net: &Net, entry: &Entry, dest: &Path) -> Result<(), SiteError> {
        let url = self.url(entry.path.as_str());
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io_err(parent))?;
        }
        // tokio's files do their work on the blocking pool.
        let mut out = tokio::fs::File::create(dest).await.map_err(io_err(dest))?;
        let mut hash = sha2::Sha256::new();
        let mut size = 0u64;
        let mut chunks: std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<bytes::Bytes, String>> + Send>> =
            match self {
                Self::Http(_) => {
                    let response = net.http().stream(&url).await.map_err(MirrorError::from)?;
                    Box::pin(response.bytes_stream().map(|c| c.map_err(|e| crate::fetch::with_causes(&e))))
                }
                Self::Dir(_) => {
                    // Opened without waiting, regular files only: a FIFO is refused, not read.
                    let path = PathBuf::from(&url);
                    let opened = crate::fetch::blocking(move || crate::sign::policy::open_regular(&path)).await;
                    let file = match opened.map_err(io_err(Path::new(&url)))? {
                        Some(f) => tokio::fs::File::from_std(f),
                        None => return Err(MirrorError::NotRegular { url }.into()),
                    };
                    Box::pin(
                        tokio_util::io::ReaderStream::with_capacity(file, 1 << 20)
                            .map(|c| c.map_err(|e| e.to_string())),
                    )
                }
            };
        let floor = crate::fetch::RateFloor::start(net.http().options());
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|detail| MirrorError::Read { url: url.clone(), detail })?;
            size += chunk.len() as u64;
            floor.check(size).map_err(|detail| MirrorError::Read { url: url.clone(), detail })?;
            if size > entry.size {
                break;
            }
            hash.update(&chunk);
            out.write_all(&chunk).await.map_err(io_err(dest))?;
        }
        out.sync_all().await.map_err(io_err(dest))?;
        let actual = Sha256::from_raw(hash.finalize().into());
        if size != entry.size || actual != entry.sha256 {
            return Err(
                MirrorError::Member { url, expected: entry.sha256, expected_size: entry.size, actual, size }.into()
            );
        }
        Ok(())
    }
}

/// The part of a mirror's current bundle a node installs from, verified into a directory
/// under `staging/`: the signed manifest, its signature, and every member under `debs/` and
/// `rpms/`; and
/// the policy that verified it (the co-signatures the mirror holds for the node's keys).
/// `before_fetch` runs on the verified manifest before any member is fetched (apply's
/// pre-flight): its error stops the staging with nothing downloaded.
pub(super) fn stage_packages(
    source: &str,
    trust: &Policy,
    root: &SiteRoot,
    net: &Net,
    reporter: &dyn Reporter,
    before_fetch: &mut dyn FnMut(&Manifest, &Sha256) -> Result<(), SiteError>,
) -> Result<(Staged, Policy), SiteError> {
    let place = Place::parse(source)?;
    let MirrorHead { bytes, signature, policy, manifest, manifest_sha256, checked } =
        net.block_on(verified_manifest(&place, trust, net))?;
    before_fetch(&manifest, &manifest_sha256)?;
    let staging = root.staging();
    let dir = tempfile::Builder::new().prefix("stage-").tempdir_in(&staging).map_err(io_err(&staging))?;
    for (rel, content) in [(MANIFEST, &bytes), (SIGNATURE, &signature)] {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap_or(dir.path())).map_err(io_err(&path))?;
        std::fs::write(&path, content).map_err(io_err(&path))?;
    }
    let wanted: Vec<&Entry> = manifest.entries.iter().filter(|e| kept_by_node(e.path.as_str())).collect();
    reporter.start("fetching", wanted.iter().map(|e| e.size).sum());
    net.block_on(async {
        for e in &wanted {
            place.member(net, e, &e.path.under(dir.path())).await?;
            reporter.advance(e.size);
        }
        Ok::<_, SiteError>(())
    })?;
    reporter.finish();
    let verified =
        Verified { manifest, manifest_sha256, signers: checked.signers, signatures: checked.signatures, base: None };
    Ok((Staged { dir, verified }, policy))
}

/// The mirror's current manifest and signature, with the policy they met and what it found.
struct MirrorHead {
    bytes: Vec<u8>,
    signature: Vec<u8>,
    policy: Policy,
    manifest: Manifest,
    manifest_sha256: Sha256,
    checked: Checked,
}

async fn verified_manifest(place: &Place, trust: &Policy, net: &Net) -> Result<MirrorHead, SiteError> {
    let url = place.url(MANIFEST);
    let need = |rel: &str, got: Option<Vec<u8>>| got.ok_or_else(|| MirrorError::Missing { url: place.url(rel) });
    let bytes = need(MANIFEST, place.small(net, MANIFEST, MAX_MANIFEST_BYTES).await?)?;
    let signature = place
        .small(net, SIGNATURE, MAX_SIGNATURE_BYTES)
        .await?
        .ok_or_else(|| MirrorError::Unsigned { url: place.url(SIGNATURE) })?;
    let mut cosignatures = Vec::new();
    for key in &trust.keys {
        let name = format!("{RETAINED_BUNDLE}.{}.sig", key.key_id());
        if let Some(sig) = place.small(net, &name, MAX_SIGNATURE_BYTES).await? {
            let path = PathBuf::from(place.url(&name));
            cosignatures.push(CoSignature { path, key_id: key.key_id().clone(), signature: sig });
        }
    }
    let policy = trust.with_cosignatures(cosignatures);
    let manifest_sha256 = Sha256::of_bytes(&bytes);
    let checked = policy.check(&manifest_sha256, &signature);
    if let Some(short) = policy.shortfall(&checked.signers) {
        let whose = match short.role.as_str() {
            crate::sign::policy::GIVEN_ROLE => "trusted key(s)".to_owned(),
            role => format!("key(s) of the signing role `{role}`"),
        };
        return Err(MirrorError::Untrusted { url, whose, signers: short.have.len(), threshold: short.need }.into());
    }
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| MirrorError::Manifest { url: url.clone(), detail: e.to_string() })?;
    manifest.check().map_err(|detail| MirrorError::Manifest { url, detail })?;
    Ok(MirrorHead { bytes, signature, policy, manifest, manifest_sha256, checked })
}
