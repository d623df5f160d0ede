//! A node reads a mirror's public tree (`ROOT/public/`), served by any web server
//! (`http(s)://HOST/PATH/`) or mounted (`file:///PATH/`): the qualified release's tree is
//! `current/`, every retained release's `releases/VERSION/` and `releases/ID/` (`--release`);
//! in each, the signed manifest `airlock/manifest.json` (and `.sig`), the co-signatures
//! `bundle.airlock.KEYID.sig`, the packages under `debs/` and `rpms/`.
//!
//! The mirror is trusted for nothing. The manifest and its signatures are fetched first
//! (bounded) and checked under the node's policy; then only the members a node installs from,
//! those under `debs/` and `rpms/`, are fetched, each bounded by the size the verified manifest gives it
//! and checked against its sha256 before it is kept. Images, models and wheels stay on the
//! mirror. The node retains that part of the bundle (`State` marks it `partial`): its check
//! and its rollback verify the manifest's signatures and every kept file again.
//!
//! Only what changed crosses the network: a member whose sha256 the node already holds (in a
//! release it retains, or fetched ahead into `downloads/`) is linked from there (else copied)
//! and verified like a fetched one. A fetch cut mid-way resumes with `Range` from the byte it
//! reached; one slower than `--min-rate` over its window is given up and tried again.

use std::path::{Path, PathBuf};

use super::public::ReleaseIndex;
use super::root::RETAINED_BUNDLE;
use super::state::Kept;
use super::{SiteError, io_err};
use crate::bundle::Manifest;
use crate::bundle::manifest::VerifiedManifest;
use crate::bundle::manifest::{Entry, MANIFEST, MAX_MANIFEST_BYTES, SIGNATURE};
use crate::digest::Sha256;
use crate::fetch::{HttpError, Net};
use crate::progress::Reporter;
use crate::sign::Policy;
use crate::sign::policy::{Checked, CoSignature};

mod staging;

pub(super) use staging::{Fetching, Held, stage_packages};

/// The largest signature file read from a mirror: a DER ECDSA signature in base64 is ~100 bytes.
pub const MAX_SIGNATURE_BYTES: u64 = 4096;

/// What of `manifest` a root keeps: the entries `kept` holds, and the deb and rpm artifacts (all
/// of them for `Kept::All`).
pub fn kept(manifest: &VerifiedManifest, kept: Kept) -> VerifiedManifest {
    use crate::bundle::manifest::Artifact;
    let artifact = |a: &Artifact| kept == Kept::All || matches!(a, Artifact::Deb(_) | Artifact::Rpm(_));
    manifest.narrowed(|e| kept.holds(e.path.as_str()), artifact)
}

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("`{0}` is not a mirror's site root: name it as http(s)://HOST/PATH/ or file:///PATH/")]
    NotAMirror(String),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("the mirror's `{url}`: {detail}")]
    Read { url: String, detail: String },
    #[error(
        "the mirror has no `{url}`: is it a mirror's public tree, with a current release (and the one named by --release)?"
    )]
    Missing { url: String },
    #[error(
        "the mirror serves no release `{asked}`; it serves: {served}; name one with --release VERSION|ID \
         (nothing was downloaded)"
    )]
    NoRelease { asked: String, served: String },
    #[error(
        "the mirror does not serve `{url}`, a member its manifest lists: a relay keeps only a part of each \
         release unless it runs with --all; take this from the mirror (or a relay with --all)"
    )]
    NotServed { url: String },
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
        "the mirror's `{url}` is release {version} ({id}), not the {asked} asked for (--release): refused; nothing was \
         downloaded"
    )]
    WrongRelease { url: String, asked: String, version: String, id: super::root::BundleId },
    #[error(
        "the mirror's `{url}`: expected {expected_size} bytes with sha256 {expected}, got {size} bytes with sha256 {actual}; nothing was changed"
    )]
    Member { url: String, expected: Sha256, expected_size: u64, actual: Sha256, size: u64 },
    #[error("the mirror's `{url}` sends more than the {size} bytes its manifest lists: refused; nothing was changed")]
    Overrun { url: String, size: u64 },
}

impl crate::failure::Classify for MirrorError {
    fn class(&self) -> crate::failure::Class {
        use crate::failure::Class;
        match self {
            MirrorError::NotAMirror(_) | MirrorError::NoRelease { .. } => Class::Usage,
            MirrorError::Manifest { .. }
            | MirrorError::Untrusted { .. }
            | MirrorError::Member { .. }
            | MirrorError::Overrun { .. }
            | MirrorError::WrongRelease { .. }
            | MirrorError::Unsigned { .. }
            | MirrorError::NotRegular { .. }
            | MirrorError::TooLarge { .. } => Class::Verification,
            MirrorError::Http(e) => e.class(),
            MirrorError::Read { .. } | MirrorError::Missing { .. } | MirrorError::NotServed { .. } => Class::Runtime,
        }
    }
}

/// Whether `source` names a mirror's site root.
pub fn is_mirror(source: &str) -> bool {
    ["http://", "https://", "file://"].iter().any(|p| source.starts_with(p))
}

/// A `--release` that names no release.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a release: a version (`2026.11.0`) or a bundle id (16 hex digits)")]
pub struct NotARelease(pub String);

impl crate::failure::Classify for NotARelease {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Usage
    }
}

/// Which of a mirror's releases a node reads: its current, or one it serves by version or
/// by id (`--release`), checked against the manifest it serves there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Release {
    #[default]
    Current,
    Named(String),
}

impl Release {
    /// A release as `--release` names it: a version or a bundle id, one plain path segment.
    pub fn parse(name: &str) -> Result<Self, NotARelease> {
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '~' | '-');
        if name.is_empty() || name.len() > 128 || name.starts_with('.') || !name.chars().all(plain) {
            return Err(NotARelease(name.to_owned()));
        }
        Ok(Self::Named(name.to_owned()))
    }

    /// The release's directory in the mirror's public tree.
    fn dir(&self) -> String {
        match self {
            Release::Current => "current".to_owned(),
            Release::Named(name) => format!("releases/{name}"),
        }
    }

    /// Whether the verified manifest is the release asked for.
    fn is(&self, manifest: &Manifest, sha256: &Sha256) -> bool {
        match self {
            Release::Current => true,
            Release::Named(name) => {
                *name == manifest.version.to_string() || *name == super::root::BundleId::of(sha256).as_str()
            }
        }
    }
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Release::Current => f.write_str("current"),
            Release::Named(name) => f.write_str(name),
        }
    }
}

/// Where a release's tree is.
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
    release: &Release,
    current: &crate::trust::metadata::Signed<crate::trust::metadata::Root>,
    net: &Net,
) -> Result<Vec<(PathBuf, Vec<u8>)>, SiteError> {
    let place = Place::parse(source, release)?;
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
    /// The mirror's public tree itself (where `promotion.json` is).
    fn root(source: &str) -> Result<Self, MirrorError> {
        if let Some(path) = source.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(MirrorError::NotAMirror(source.to_owned()));
            }
            return Ok(Self::Dir(PathBuf::from(path)));
        }
        Ok(Self::Http(format!("{}/", source.trim_end_matches('/'))))
    }

    fn parse(source: &str, release: &Release) -> Result<Self, MirrorError> {
        if let Some(path) = source.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(MirrorError::NotAMirror(source.to_owned()));
            }
            return Ok(Self::Dir(Path::new(path).join(release.dir())));
        }
        Ok(Self::Http(format!("{}/{}/", source.trim_end_matches('/'), release.dir())))
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
                let read = crate::fetch::blocking(move || super::root::read_bounded(&path, limit)).await;
                read.map_err(|e| match e {
                    SiteError::NotRegular { .. } => MirrorError::NotRegular { url },
                    SiteError::TooLarge { limit, .. } => MirrorError::TooLarge { url, limit },
                    e => MirrorError::Read { url, detail: e.to_string() },
                })
            }
        }
    }

    /// A member into `dest`, at most `entry.size` bytes, checked against its sha256: over
    /// HTTP with retries that resume where the last one stopped (`Range`), each attempt held
    /// to the rate floor.
    async fn member(&self, net: &Net, entry: &Entry, dest: &Path, reporter: &dyn Reporter) -> Result<(), SiteError> {
        let url = self.url(entry.path.as_str());
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io_err(parent))?;
        }
        let (actual, size) = match self {
            Self::Http(_) => {
                let http = net.http();
                let open = |offset: u64| {
                    let url = url.clone();
                    async move {
                        Ok(match http.open_at(&url, None, offset).await? {
                            crate::fetch::Opened::Partial(s) => {
                                crate::fetch::Opened::Partial(crate::fetch::floored(s, http.options()))
                            }
                            crate::fetch::Opened::Full(s) => {
                                crate::fetch::Opened::Full(crate::fetch::floored(s, http.options()))
                            }
                        })
                    }
                };
                let fetched = crate::fetch::download_to_file(dest, entry.size, &url, reporter, http.options(), open);
                fetched.await.map_err(|e| match e {
                    crate::fetch::DownloadError::Overrun(_) => {
                        MirrorError::Overrun { url: url.clone(), size: entry.size }
                    }
                    crate::fetch::DownloadError::Fatal(HttpError::Status { status: 404, .. }) => {
                        MirrorError::NotServed { url: url.clone() }
                    }
                    e => MirrorError::Read { url: url.clone(), detail: crate::fetch::with_causes(&e) },
                })?
            }
            Self::Dir(_) => self.copied(entry, &url, dest).await?,
        };
        if size != entry.size || actual != entry.sha256 {
            return Err(
                MirrorError::Member { url, expected: entry.sha256, expected_size: entry.size, actual, size }.into()
            );
        }
        Ok(())
    }

    /// A mounted mirror's member copied into `dest`, at most `entry.size` bytes (one more is
    /// read, to see an overrun), hashed on the way; regular files only (a FIFO is refused).
    async fn copied(&self, entry: &Entry, url: &str, dest: &Path) -> Result<(Sha256, u64), SiteError> {
        let (path, dest, limit) = (PathBuf::from(url), dest.to_owned(), entry.size);
        let url = url.to_owned();
        crate::fetch::blocking(move || {
            use std::io::Read as _;
            let Some(file) = crate::sign::policy::open_regular(&path).map_err(io_err(&path))? else {
                return Err(MirrorError::NotRegular { url }.into());
            };
            // Past the page cache where the filesystem allows, as from an HTTP mirror; synced
            // with the tree it lands in, before that is renamed into place.
            crate::fetch::direct::copy_hashed(file.take(limit + 1), &dest).map_err(io_err(&dest))
        })
        .await
    }
}

/// A mirror's signed promotion as it verified, with its bytes: what a relay serves again as
/// they are (it holds no key of the role; its nodes verify them as the relay did).
pub struct SignedPromotion {
    pub promotion: super::promotion::Promotion,
    pub bytes: Vec<u8>,
}

/// The mirror's signed promotion verified, and naming the manifest with `sha256` that its
/// `current` serves (what `rollout resolve` pins for a node that follows only promotions).
pub fn check_promoted(
    source: &str,
    role: &crate::trust::DecisionRole,
    seen: u64,
    sha256: &Sha256,
    manifest: &Manifest,
    net: &Net,
) -> Result<SignedPromotion, SiteError> {
    let signed = promotion(source, role, seen, net)?;
    if signed.promotion.bundle.manifest_sha256 != *sha256 {
        return Err(other_bundle(&signed.promotion, manifest, sha256).into());
    }
    Ok(signed)
}

/// A `current` that is not what the signed promotion names.
fn other_bundle(
    p: &super::promotion::Promotion,
    served: &Manifest,
    sha256: &Sha256,
) -> super::promotion::PromotionError {
    super::promotion::PromotionError::OtherBundle {
        number: p.version,
        promoted: format!("{} {} ({})", p.bundle.name, p.bundle.version, p.bundle.id),
        served: format!("{} {} ({})", served.name, served.version, super::root::BundleId::of(sha256)),
    }
}

/// The mirror's signed promotion (`promotion.json` beside `current`), verified under the
/// node's `promotion` role before anything else is read.
fn promotion(
    source: &str,
    role: &crate::trust::DecisionRole,
    seen: u64,
    net: &Net,
) -> Result<SignedPromotion, SiteError> {
    use super::promotion::{FILE, MAX_BYTES, PromotionError};
    let place = Place::root(source)?;
    let url = place.url(FILE);
    let bytes =
        net.block_on(place.small(net, FILE, MAX_BYTES))?.ok_or_else(|| PromotionError::Missing { url: url.clone() })?;
    let promotion = super::promotion::verify(&url, &bytes, role, crate::clock::Timestamp::started(), seen)?;
    Ok(SignedPromotion { promotion, bytes })
}

/// The mirror's current manifest and signature, with the policy they met and what it found.
struct MirrorHead {
    bytes: Vec<u8>,
    signature: Vec<u8>,
    policy: Policy,
    manifest: VerifiedManifest,
    manifest_sha256: Sha256,
    checked: Checked,
    /// Where its members are read, when not beside it: the release's tree by id.
    members: Option<Place>,
}

/// The co-signatures the mirror's index lists for `release` (its current, or one by version or
/// id), by key id; `None` when it has no index or the index does not name the release.
fn listed_cosignatures(index: Option<&ReleaseIndex>, release: &Release) -> Option<Vec<String>> {
    let index = index?;
    let wanted = match release {
        Release::Current => index.current.as_ref()?.as_str(),
        Release::Named(name) => name.as_str(),
    };
    index.find(wanted)?.cosignatures.clone()
}

/// The mirror's `releases.json`, parsed (bounded), if it has one that reads as an index.
async fn mirror_index(source: &str, net: &Net) -> Option<ReleaseIndex> {
    let root = Place::root(source).ok()?;
    let bytes = root.small(net, super::public::INDEX, 1 << 20).await.ok()??;
    serde_json::from_slice(&bytes).ok()
}

/// The releases a mirror serves, in words, from its `releases.json` (none when it has none or
/// it is not one: only for a message, never trusted).
async fn served_releases(source: &str, net: &Net) -> Option<String> {
    let index = mirror_index(source, net).await?;
    let list: Vec<String> = index
        .releases
        .iter()
        .map(|r| {
            let mark = if index.current.as_ref() == Some(&r.id) { ", current" } else { "" };
            crate::escape::value(&format!("{} ({}{mark})", r.version, r.id)).into_owned()
        })
        .collect();
    Some(if list.is_empty() { "nothing".to_owned() } else { list.join(", ") })
}

async fn verified_manifest(
    source: &str,
    place: &Place,
    release: &Release,
    trust: &Policy,
    net: &Net,
) -> Result<MirrorHead, SiteError> {
    let url = place.url(MANIFEST);
    let Some(bytes) = place.small(net, MANIFEST, MAX_MANIFEST_BYTES).await? else {
        if let (Release::Named(asked), Some(served)) = (release, served_releases(source, net).await) {
            return Err(MirrorError::NoRelease { asked: asked.clone(), served }.into());
        }
        return Err(MirrorError::Missing { url }.into());
    };
    let signature = place
        .small(net, SIGNATURE, MAX_SIGNATURE_BYTES)
        .await?
        .ok_or_else(|| MirrorError::Unsigned { url: place.url(SIGNATURE) })?;
    let mut cosignatures = Vec::new();
    // The mirror's index says which co-signatures it holds for this release (a hint: one it
    // hides can only fail the threshold, which the mirror could do anyway); without an index,
    // each trusted key's is asked for.
    let index = mirror_index(source, net).await;
    let listed = listed_cosignatures(index.as_ref(), release);
    for key in trust.keys.iter().filter(|k| listed.as_ref().is_none_or(|l| l.contains(&k.key_id().to_string()))) {
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
    let manifest = VerifiedManifest::establish(manifest, manifest_sha256, &policy, &checked.signers)
        .map_err(|e| MirrorError::Manifest { url: url.clone(), detail: e.to_string() })?;
    if !release.is(&manifest, &manifest_sha256) {
        let (version, id) = (manifest.version.to_string(), super::root::BundleId::of(&manifest_sha256));
        return Err(MirrorError::WrongRelease { url, asked: release.to_string(), version, id }.into());
    }
    // Where the index serves the release by id too, its members are read there: a path whose
    // content never changes (a cache in front of the mirror keeps it), and a `current` that
    // moves while they are fetched does not mix two releases.
    let id = super::root::BundleId::of(&manifest_sha256);
    let by_id = index.as_ref().is_some_and(|i| i.releases.iter().any(|r| r.id == id));
    let members = match (release, by_id) {
        (Release::Current, true) => Some(Place::parse(source, &Release::Named(id.to_string()))?),
        _ => None,
    };
    Ok(MirrorHead { bytes, signature, policy, manifest, manifest_sha256, checked, members })
}

/// The manifest a mirror serves as `release`, read but not verified, and its sha256: what a
/// rollout pins at its start (`airlock rollout resolve`). Nothing is taken on its word: every
/// node verifies the release it fetches by this id under its own trust.
pub fn served_manifest(source: &str, release: &Release, net: &Net) -> Result<(Sha256, Manifest), SiteError> {
    let place = Place::parse(source, release)?;
    let url = place.url(MANIFEST);
    let bytes = net
        .block_on(place.small(net, MANIFEST, MAX_MANIFEST_BYTES))?
        .ok_or_else(|| MirrorError::Missing { url: url.clone() })?;
    let sha256 = Sha256::of_bytes(&bytes);
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| MirrorError::Manifest { url: url.clone(), detail: e.to_string() })?;
    if !release.is(&manifest, &sha256) {
        let (version, id) = (manifest.version.to_string(), super::root::BundleId::of(&sha256));
        return Err(MirrorError::WrongRelease { url, asked: release.to_string(), version, id }.into());
    }
    Ok((sha256, manifest))
}
