//! Where bundle artifacts are kept: a registry repository (`oci://HOST/REPO:TAG`) or an OCI
//! image layout directory (`oci-layout:DIR[:TAG]`, for a one-way transfer on media), and the
//! verbs over them: push a local bundle, resolve, pull to a file, copy between two stores.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _, TryStreamExt as _};
use oci_client::RegistryOperation;
use oci_client::client::BlobResponse;
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE;
use serde::Serialize;
use sha2::Digest as _;

use super::upload::Uploader;
use super::{
    ARTIFACT_TYPE, ArtifactError, ArtifactManifest, BUNDLE_LAYER, COSIGNATURE_TYPE, EMPTY_BYTES, KEY_ID,
    MANIFEST_LAYER, PART_LAYER, Reach, Resolved, bundle_annotations, chained, cosignature_manifest, descriptor,
    file_name, io_err,
};
use crate::bundle::parts::Input;
use crate::bundle::reader::{Discard, OnProblem, read_bundle, read_head};
use crate::cache::Cache;
use crate::digest::{Prefixed, Sha256};
use crate::fetch::{self, DownloadError, Failure, Net, NetOptions, Opened, Verdict};
use crate::oci::doc::{Descriptor, MAX_MANIFEST_BYTES, OCI_MANIFEST, REF_NAME};
use crate::oci::{Connection, ImageRef, is_not_found, pull_manifest, retryable};
use crate::progress::Reporter;
use crate::sign::policy::CoSignature;
use crate::sign::{KeyId, Policy, TrustedKey};
use crate::tee::{Tee, TeeError};

/// The annotation that names a referrer's subject in a layout's `index.json`.
const SUBJECT: &str = "dev.airlock.subject";

/// A place bundles are pushed to or pulled from.
#[derive(Debug, Clone)]
pub enum Location {
    Registry(ImageRef),
    Layout { dir: PathBuf, tag: Option<String> },
}

impl Location {
    /// The tag it names (`oci://…:TAG`, `oci-layout:DIR:TAG`), if any.
    pub fn tag(&self) -> Option<&str> {
        match self {
            Location::Registry(image) => image.tag.as_deref(),
            Location::Layout { tag, .. } => tag.as_deref(),
        }
    }
    pub fn parse(text: &str) -> Result<Self, ArtifactError> {
        let bad = || ArtifactError::Location(text.to_owned());
        if let Some(rest) = text.strip_prefix("oci://") {
            if let Ok(image) = ImageRef::parse(rest) {
                return Ok(Self::Registry(image));
            }
            // A repository without a tag: a copy's target, which takes the source's tag.
            let untagged = !rest.contains('@') && !rest.rsplit('/').next().is_some_and(|last| last.contains(':'));
            let image = ImageRef::parse(&format!("{rest}:latest")).ok().filter(|_| untagged).ok_or_else(bad)?;
            return Ok(Self::Registry(ImageRef { tag: None, ..image }));
        }
        if let Some(rest) = text.strip_prefix("oci-layout:") {
            let (dir, tag) = match rest.rsplit_once(':') {
                Some((dir, tag)) if !tag.contains('/') && !tag.is_empty() => (dir, Some(tag.to_owned())),
                _ => (rest, None),
            };
            if dir.is_empty() {
                return Err(bad());
            }
            return Ok(Self::Layout { dir: PathBuf::from(dir), tag });
        }
        Err(bad())
    }

    /// Whether this is `oci://…` or `oci-layout:…` at all (else a file path).
    pub fn looks_like(text: &str) -> bool {
        text.starts_with("oci://") || text.starts_with("oci-layout:")
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Registry(r) => write!(f, "oci://{r}"),
            Self::Layout { dir, tag: Some(t) } => write!(f, "oci-layout:{}:{t}", dir.display()),
            Self::Layout { dir, tag: None } => write!(f, "oci-layout:{}", dir.display()),
        }
    }
}

/// The repository `image` is in, for blob requests (which name no tag).
pub(super) fn repository(image: &ImageRef) -> oci_client::Reference {
    if image.tag.is_none() && image.digest.is_none() {
        return image.with_tag("latest".to_owned()).to_client();
    }
    image.to_client()
}

type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, OciDistributionError>> + Send>>;

/// `stream`, ended with an error at the first byte past `limit`.
fn bounded(stream: ByteStream, limit: u64, what: String) -> ByteStream {
    // (bytes seen, ended): after the error, the stream ends.
    Box::pin(stream.scan((0u64, false), move |(seen, ended), chunk| {
        if *ended {
            return std::future::ready(None);
        }
        let item = chunk.and_then(|c| {
            *seen = seen.saturating_add(c.len() as u64);
            if *seen > limit {
                *ended = true;
                return Err(OciDistributionError::GenericError(Some(format!(
                    "{what}: the source sent more than the declared {limit} bytes; stopped there"
                ))));
            }
            Ok(c)
        });
        std::future::ready(Some(item))
    }))
}

/// An opened [`Location`].
pub(super) enum Store {
    Registry { conn: Arc<Connection>, image: ImageRef, options: NetOptions },
    Layout { dir: PathBuf, tag: Option<String> },
}

impl Store {
    pub(super) async fn open(location: &Location, reach: &Reach) -> Result<Self, ArtifactError> {
        Ok(match location {
            Location::Registry(image) => {
                let conn = reach.connect(&image.registry).await?;
                Self::Registry { conn, image: image.clone(), options: reach.options }
            }
            Location::Layout { dir, tag } => Self::Layout { dir: dir.clone(), tag: tag.clone() },
        })
    }

    fn describe(&self) -> String {
        match self {
            Self::Registry { image, .. } => format!("oci://{image}"),
            Self::Layout { dir, tag } => {
                format!("oci-layout:{}{}", dir.display(), tag.as_ref().map(|t| format!(":{t}")).unwrap_or_default())
            }
        }
    }

    fn err(&self, detail: impl std::fmt::Display) -> ArtifactError {
        ArtifactError::Registry { target: self.describe(), detail: detail.to_string() }
    }

    fn registry_err(&self, e: &OciDistributionError) -> ArtifactError {
        let hint = match e {
            OciDistributionError::AuthenticationFailure(_) | OciDistributionError::UnauthorizedError { .. } => {
                "; credentials are read from the docker config ($REGISTRY_AUTH_FILE, $DOCKER_CONFIG/config.json, \
                 ~/.docker/config.json)"
            }
            _ => "",
        };
        self.err(format!("{e}{hint}"))
    }

    async fn authorize_push(&self) -> Result<(), ArtifactError> {
        if let Self::Registry { conn, image, .. } = self {
            let reference = repository(image);
            conn.client
                .auth(&reference, &conn.auth, RegistryOperation::Push)
                .await
                .map_err(|e| self.registry_err(&e))?;
        }
        Ok(())
    }

    /// The manifest the location names (its tag or digest), or the one at `digest`.
    async fn manifest(&self, digest: Option<Sha256>) -> Result<(Vec<u8>, Sha256), ArtifactError> {
        let bytes = match self {
            Self::Registry { conn, image, options } => {
                if digest.is_none() && image.tag.is_none() && image.digest.is_none() {
                    return Err(self.err("name a tag or a digest"));
                }
                let at = digest.map_or_else(|| image.clone(), |d| image.at_digest(d));
                let (bytes, _) = pull_manifest(conn, &at, options).await.map_err(|e| self.registry_err(&e))?;
                bytes.to_vec()
            }
            Self::Layout { dir, tag } => {
                let (dir, tag) = (dir.clone(), tag.clone());
                // File work on the blocking pool, as every read of a layout is.
                fetch::blocking(move || {
                    let digest = match digest {
                        Some(d) => d,
                        None => layout_tagged(&dir, tag.as_deref())?,
                    };
                    read_small(&layout_blob(&dir, digest))
                })
                .await
                .map_err(|e| self.err(e))?
            }
        };
        let actual = Sha256::of_bytes(&bytes);
        if let Some(expected) = digest.or(self.pinned())
            && expected != actual
        {
            return Err(ArtifactError::Digest { what: format!("manifest from {}", self.describe()), expected, actual });
        }
        Ok((bytes, actual))
    }

    fn pinned(&self) -> Option<Sha256> {
        match self {
            Self::Registry { image, .. } => image.digest,
            Self::Layout { .. } => None,
        }
    }

    async fn has_blob(&self, d: &Descriptor) -> Result<bool, ArtifactError> {
        match self {
            Self::Registry { conn, image, .. } => conn
                .client
                .blob_exists(&repository(image), &format!("sha256:{}", d.digest))
                .await
                .map_err(|e| self.registry_err(&e)),
            Self::Layout { dir, .. } => {
                Ok(std::fs::metadata(layout_blob(dir, d.digest)).is_ok_and(|m| m.is_file() && m.len() == d.size))
            }
        }
    }

    /// The blob's bytes as a stream (a registry's checked against the digest by `oci_client`).
    /// A blob's bytes, never more than its descriptor declares: the first chunk past the
    /// declared size ends the stream with an error (the digest is the reader's to check).
    async fn blob_stream(&self, d: &Descriptor) -> Result<ByteStream, ArtifactError> {
        Ok(bounded(
            self.unbounded_blob_stream(d).await?,
            d.size,
            format!("{} blob sha256:{}", self.describe(), d.digest),
        ))
    }

    async fn unbounded_blob_stream(&self, d: &Descriptor) -> Result<ByteStream, ArtifactError> {
        match self {
            Self::Registry { conn, image, .. } => {
                let digest = format!("sha256:{}", d.digest);
                let sized = conn
                    .client
                    .pull_blob_stream(&repository(image), &*digest)
                    .await
                    .map_err(|e| self.registry_err(&e))?;
                Ok(Box::pin(sized.stream.map_err(OciDistributionError::from)))
            }
            Self::Layout { dir, .. } => {
                let path = layout_blob(dir, d.digest);
                let file = tokio::fs::File::open(&path).await.map_err(io_err(&path))?;
                let stream = tokio_util::io::ReaderStream::with_capacity(file, 1 << 20);
                Ok(Box::pin(stream.map_err(OciDistributionError::IoError)))
            }
        }
    }

    /// Store a blob from `stream`, unless it is there already. Returns whether it was written.
    async fn put_blob(&self, d: &Descriptor, stream: ByteStream) -> Result<bool, ArtifactError> {
        if self.has_blob(d).await? {
            return Ok(false);
        }
        match self {
            Self::Registry { conn, image, .. } => {
                let digest = format!("sha256:{}", d.digest);
                tracing::debug!("PUT blob {digest} ({} bytes) to {image}", d.size);
                conn.client
                    .push_blob_stream(&repository(image), stream, &digest, Some(d.size))
                    .await
                    .map_err(|e| self.registry_err(&e))?;
            }
            Self::Layout { dir, .. } => write_layout_blob(dir, d, stream).await?,
        }
        Ok(true)
    }

    async fn put_bytes(&self, d: &Descriptor, bytes: Vec<u8>) -> Result<bool, ArtifactError> {
        let stream = futures_util::stream::once(async move { Ok(Bytes::from(bytes)) });
        self.put_blob(d, Box::pin(stream)).await
    }

    /// Store a manifest under its digest, and under `tag` when given.
    async fn put_manifest(&self, bytes: &[u8], media_type: &str, tag: Option<&str>) -> Result<Sha256, ArtifactError> {
        let digest = Sha256::of_bytes(bytes);
        match self {
            Self::Registry { conn, image, .. } => {
                let content_type = media_type.parse().map_err(|_| self.err(format!("bad media type {media_type}")))?;
                let at = match tag {
                    Some(t) => image.with_tag(t.to_owned()),
                    None => image.at_digest(digest),
                };
                conn.client
                    .push_manifest_raw(&at.to_client(), bytes.to_vec(), content_type)
                    .await
                    .map_err(|e| self.registry_err(&e))?;
            }
            Self::Layout { dir, .. } => {
                let d = descriptor(media_type, digest, bytes.len() as u64, None);
                let chunk = Bytes::copy_from_slice(bytes);
                write_layout_blob(dir, &d, Box::pin(futures_util::stream::once(async move { Ok(chunk) }))).await?;
                if let Some(tag) = tag {
                    let mut entry = d;
                    entry.annotations.insert(REF_NAME.to_owned(), tag.to_owned());
                    update_layout_index(dir, entry, |e| e.annotations.get(REF_NAME).map(String::as_str) == Some(tag))?;
                }
            }
        }
        Ok(digest)
    }

    /// Referrers of `subject`: the referrers API, else the referrers tag schema (registry), or
    /// `index.json`'s entries naming it (layout).
    async fn referrers(&self, subject: Sha256) -> Result<Vec<Descriptor>, ArtifactError> {
        match self {
            Self::Registry { conn, image, options } => {
                let at = image.at_digest(subject).to_client();
                let list = || conn.referrers(&at);
                let index = fetch::with_retries(options, &format!("referrers of {image}"), list, retryable)
                    .await
                    .map_err(|e| self.registry_err(&e))?;
                let json = serde_json::to_vec(&index).map_err(|e| self.err(e))?;
                let mut found: Vec<Descriptor> = crate::oci::doc::parse_layout_index(&json).unwrap_or_default();
                // oci-client asks the tag schema only when the API is missing; a registry that
                // has the API may still hold a tag written by a client that did not ask.
                for d in self.tag_referrers(subject).await? {
                    if !found.iter().any(|f| f.digest == d.digest) {
                        found.push(d);
                    }
                }
                Ok(found)
            }
            Self::Layout { dir, .. } => Ok(read_layout_index(dir)
                .map_err(|e| self.err(e))?
                .into_iter()
                .filter(|e| e.annotations.get(SUBJECT).is_some_and(|s| *s == subject.to_string()))
                .collect()),
        }
    }

    async fn tag_referrers(&self, subject: Sha256) -> Result<Vec<Descriptor>, ArtifactError> {
        let Self::Registry { conn, image, options } = self else { return Ok(Vec::new()) };
        match pull_manifest(conn, &image.with_tag(format!("sha256-{subject}")), options).await {
            Ok((bytes, _)) => Ok(crate::oci::doc::parse_layout_index(&bytes).unwrap_or_default()),
            Err(e) if is_not_found(&e) => Ok(Vec::new()),
            Err(e) => Err(self.registry_err(&e)),
        }
    }

    /// List `entry` as a referrer of `subject`: in the referrers tag schema's index (a registry
    /// with the referrers API lists it already, from its `subject`), or in `index.json`.
    async fn add_referrer(&self, subject: Sha256, mut entry: Descriptor) -> Result<(), ArtifactError> {
        match self {
            Self::Registry { .. } => {
                let mut listed = self.tag_referrers(subject).await?;
                if listed.iter().any(|d| d.digest == entry.digest) {
                    return Ok(());
                }
                listed.push(entry);
                let index = serde_json::json!({
                    "schemaVersion": 2, "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE, "manifests": listed,
                });
                let bytes = serde_json::to_vec(&index).map_err(|e| self.err(e))?;
                self.put_manifest(&bytes, OCI_IMAGE_INDEX_MEDIA_TYPE, Some(&format!("sha256-{subject}"))).await?;
            }
            Self::Layout { dir, .. } => {
                entry.annotations.insert(SUBJECT.to_owned(), subject.to_string());
                let digest = entry.digest;
                update_layout_index(dir, entry, |e| e.digest == digest)?;
            }
        }
        Ok(())
    }

    /// The tag to store under: the location's own, else `fallback`.
    fn tag<'a>(&'a self, fallback: Option<&'a str>) -> Option<&'a str> {
        match self {
            Self::Registry { image, .. } => {
                image.tag.as_deref().or(if image.digest.is_some() { None } else { fallback })
            }
            Self::Layout { tag, .. } => tag.as_deref().or(fallback).or(Some("latest")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// push

/// What `push` did.
#[derive(Debug, Serialize)]
pub struct Pushed {
    pub target: String,
    pub digest: Prefixed,
    pub id: String,
    pub name: String,
    pub version: String,
    pub layers_pushed: usize,
    pub layers_present: usize,
    /// Co-signatures beside the bundle, pushed as referrers.
    pub cosignatures: Vec<KeyId>,
}

/// Push a local bundle (file or parts) and the co-signatures beside it; the bundle's layers go
/// up in chunks of `chunk` bytes, resumed after a failed chunk.
pub fn push(
    input: &Input,
    target: &Location,
    reach: &Reach,
    chunk: u64,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<Pushed, ArtifactError> {
    let head = read_head(input.open()?)
        .map_err(|p| ArtifactError::NotABundle { target: input.display().to_string(), detail: p.to_string() })?;
    // The layers: the manifest, then the bundle's bytes (hashed here: the artifact names them).
    let mut files: Vec<(Descriptor, PathBuf)> = Vec::new();
    match input.split() {
        None => {
            let path = input.bundle().to_owned();
            let file = std::fs::File::open(&path).map_err(io_err(&path))?;
            let (sha256, size) =
                crate::digest::hash_reader(std::io::BufReader::with_capacity(1 << 20, file)).map_err(io_err(&path))?;
            files.push((descriptor(BUNDLE_LAYER, sha256, size, Some(file_name(&head.manifest))), path));
        }
        Some(split) => {
            for (i, part) in split.doc.parts.iter().enumerate() {
                let title = format!("{}.{:03}", file_name(&head.manifest), i + 1);
                let path = split.parts_file.with_file_name(&part.file);
                files.push((descriptor(PART_LAYER, part.sha256, part.size, Some(title)), path));
            }
        }
    }
    let manifest_layer = descriptor(
        MANIFEST_LAYER,
        head.manifest_sha256,
        head.manifest_bytes.len() as u64,
        Some("manifest.json".to_owned()),
    );
    let layers: Vec<Descriptor> =
        std::iter::once(manifest_layer.clone()).chain(files.iter().map(|f| f.0.clone())).collect();
    let artifact =
        ArtifactManifest::new(ARTIFACT_TYPE, layers, bundle_annotations(&head.manifest, head.manifest_sha256));
    let cosignatures = crate::sign::policy::cosignatures_beside(input.bundle()).map_err(io_err(input.bundle()))?;
    net.block_on(async {
        let store = Store::open(target, reach).await?;
        store.authorize_push().await?;
        let (mut pushed, mut present) = (0, 0);
        let mut count = |written: bool| if written { pushed += 1 } else { present += 1 };
        count(store.put_bytes(&artifact.config, EMPTY_BYTES.to_vec()).await?);
        count(store.put_bytes(&manifest_layer, head.manifest_bytes.clone()).await?);
        let uploader = match &store {
            Store::Registry { conn, image, .. } => Some(Uploader::new(conn, image, reach, chunk).await?),
            Store::Layout { .. } => None,
        };
        reporter.start("pushing", files.iter().map(|(d, _)| d.size).sum());
        for (d, path) in &files {
            if store.has_blob(d).await? {
                reporter.advance(d.size);
                count(false);
                continue;
            }
            if let Some(uploader) = &uploader {
                uploader.upload(path, d, reporter).await?;
            } else {
                let file = tokio::fs::File::open(path).await.map_err(io_err(path))?;
                let stream =
                    tokio_util::io::ReaderStream::with_capacity(file, 1 << 20).map_err(OciDistributionError::IoError);
                store.put_blob(d, Box::pin(stream)).await?;
                reporter.advance(d.size);
            }
            count(true);
        }
        reporter.finish();
        let bytes = artifact.bytes();
        let tag = store.tag(None).map(str::to_owned);
        let digest = store.put_manifest(&bytes, OCI_MANIFEST, tag.as_deref()).await?;
        let subject = descriptor(OCI_MANIFEST, digest, bytes.len() as u64, None);
        let mut keys = Vec::new();
        for co in &cosignatures {
            push_cosignature(&store, &subject, &file_name(&head.manifest), &co.key_id, &co.signature).await?;
            keys.push(co.key_id.clone());
        }
        Ok(Pushed {
            target: store.describe(),
            digest: Prefixed(digest),
            id: head.manifest_sha256.short(16),
            name: head.manifest.name.to_string(),
            version: head.manifest.version.to_string(),
            layers_pushed: pushed,
            layers_present: present,
            cosignatures: keys,
        })
    })
}

async fn push_cosignature(
    store: &Store,
    subject: &Descriptor,
    bundle_name: &str,
    key_id: &KeyId,
    signature: &[u8],
) -> Result<(), ArtifactError> {
    let m = cosignature_manifest(subject, bundle_name, key_id, signature);
    store.put_bytes(&m.config, EMPTY_BYTES.to_vec()).await?;
    store.put_bytes(&m.layers[0], signature.to_vec()).await?;
    let bytes = m.bytes();
    let digest = store.put_manifest(&bytes, OCI_MANIFEST, None).await?;
    let mut entry = descriptor(OCI_MANIFEST, digest, bytes.len() as u64, None);
    entry.artifact_type = Some(COSIGNATURE_TYPE.to_owned());
    entry.annotations.insert(KEY_ID.to_owned(), key_id.to_string());
    store.add_referrer(subject.digest, entry).await
}

// ---------------------------------------------------------------------------------------------
// resolve, pull

/// A bundle artifact found at a location: its manifest (the tag resolved once) and the
/// co-signatures referring to it.
#[derive(Clone)]
pub struct Found {
    pub resolved: Resolved,
    pub artifact: ArtifactManifest,
    /// The artifact manifest's exact bytes (what `copy` stores again).
    pub bytes: Vec<u8>,
    pub cosignatures: Vec<CoSignature>,
    /// Where it is, pinned to its digest.
    pub pinned: Location,
}

/// Resolve `location` to a bundle artifact and fetch its co-signatures.
pub fn resolve(location: &Location, reach: &Reach, net: &Net) -> Result<Found, ArtifactError> {
    net.block_on(async {
        let store = Store::open(location, reach).await?;
        find(&store, location).await
    })
}

async fn find(store: &Store, location: &Location) -> Result<Found, ArtifactError> {
    let (bytes, digest) = store.manifest(None).await?;
    let artifact = ArtifactManifest::parse_bundle(&bytes, &store.describe())?;
    let annotation = |k: &str| artifact.annotations.get(k).cloned().unwrap_or_default();
    let resolved = Resolved {
        reference: location.to_string(),
        digest: Prefixed(digest),
        id: annotation(super::BUNDLE_ID),
        name: annotation("dev.airlock.bundle.name"),
        version: annotation("dev.airlock.bundle.version"),
        bytes: artifact.bundle_bytes(),
    };
    tracing::info!("{} is sha256:{digest} ({} {})", location, resolved.name, resolved.version);
    let mut cosignatures = Vec::new();
    for r in store.referrers(digest).await? {
        if r.artifact_type.as_deref() != Some(COSIGNATURE_TYPE) {
            continue;
        }
        match cosignature(store, &r).await {
            Ok(co) => cosignatures.push(co),
            Err(e) => tracing::warn!("skipping co-signature referrer sha256:{}: {e}", r.digest),
        }
    }
    let pinned = match location {
        Location::Registry(image) => Location::Registry(image.at_digest(digest)),
        Location::Layout { .. } => location.clone(),
    };
    Ok(Found { resolved, artifact, bytes, cosignatures, pinned })
}

async fn cosignature(store: &Store, r: &Descriptor) -> Result<CoSignature, ArtifactError> {
    let (bytes, digest) = store.manifest(Some(r.digest)).await?;
    let m: ArtifactManifest = serde_json::from_slice(&bytes).map_err(|e| store.err(e))?;
    let layer = m.layers.first().ok_or_else(|| store.err("a co-signature referrer without a layer"))?;
    let key_id = layer.annotations.get(KEY_ID).and_then(|k| KeyId::parse(k)).ok_or_else(|| store.err("no key id"))?;
    if layer.size > crate::sign::MAX_SIGNATURE_BYTES {
        return Err(store.err("a co-signature larger than a signature can be"));
    }
    let mut signature = Vec::new();
    let mut stream = store.blob_stream(layer).await?;
    while let Some(chunk) = stream.next().await {
        signature.extend_from_slice(&chunk.map_err(|e| store.registry_err(&e))?);
    }
    if Sha256::of_bytes(&signature) != layer.digest {
        return Err(store.err("a co-signature whose bytes differ from its digest"));
    }
    Ok(CoSignature { path: PathBuf::from(format!("{}@sha256:{digest}", store.describe())), key_id, signature })
}

/// What `pull` did.
#[derive(Debug, Serialize)]
pub struct Pulled {
    #[serde(flatten)]
    pub resolved: Resolved,
    pub out: PathBuf,
    pub signers: Vec<KeyId>,
    /// Co-signature files written beside `out` (every one the registry held).
    pub cosignatures: Vec<PathBuf>,
}

/// Pull a bundle to `out`: its layers into the cache (resumable, each checked against its
/// digest), then the bundle verified whole under `keys` and `threshold` with the co-signatures
/// the registry holds, and only then written to `out`, with those co-signatures beside it.
#[allow(clippy::too_many_arguments, reason = "one call, from `commands::pull`, with every part named")]
pub fn pull(
    location: &Location,
    out: &Path,
    keys: Vec<TrustedKey>,
    threshold: usize,
    reach: &Reach,
    net: &Net,
    cache: &Cache,
    reporter: &dyn Reporter,
) -> Result<Pulled, ArtifactError> {
    // An impossible policy is a usage error before anything is asked of the registry.
    Policy::reachable(&keys, threshold)?;
    let (found, files) = net.block_on(async {
        let store = Store::open(location, reach).await?;
        let found = find(&store, location).await?;
        check_space(&found.resolved, cache.root(), out)?;
        let layers = found.artifact.data_layers();
        reporter.start("pulling", found.resolved.bytes);
        for layer in &layers {
            download(&store, layer, cache, reporter).await?;
        }
        reporter.finish();
        let files = layers.iter().map(|l| cache.path(&l.digest)).collect::<Vec<_>>();
        Ok::<_, ArtifactError>((found, files))
    })?;
    let target = found.resolved.reference.clone();
    let policy = Policy::new(keys, threshold, found.cosignatures.clone())
        .map_err(|e| ArtifactError::Rejected { target: target.clone(), detail: e.to_string() })?;
    // Verified while it is written beside `out`; it appears there only once it verified whole.
    let tmp = crate::atomic::temp_beside(out).map_err(io_err(out))?;
    let mut tee = Tee::new(chained(&files)?, tmp.as_file().try_clone().map_err(io_err(out))?);
    let report = read_bundle(&mut tee, &policy, &mut Discard, OnProblem::Stop, reporter)
        .map_err(|e| ArtifactError::Io { path: e.path.as_str().into(), detail: e.source.to_string() })?;
    if !report.verified() {
        let detail = report.problems.first().map_or_else(|| "no manifest".to_owned(), ToString::to_string);
        return Err(ArtifactError::Rejected { target, detail });
    }
    if let (Some(tag), Some(m)) = (location.tag(), &report.manifest) {
        m.check_tag(tag)?;
    }
    if report.manifest_sha256.map(|d| d.short(16)) != Some(found.resolved.id.clone()) {
        let detail =
            format!("its annotations name bundle {}, the bundle is {:?}", found.resolved.id, report.manifest_sha256);
        return Err(ArtifactError::Rejected { target, detail });
    }
    tee.finish().map_err(|e| match e {
        TeeError::Read(e) | TeeError::Write(e) => io_err(out)(e),
    })?;
    tmp.persist(out).map_err(|e| io_err(out)(e.error))?;
    let mut written = Vec::new();
    for co in &found.cosignatures {
        let path = crate::sign::policy::cosignature_path(out, &co.key_id);
        crate::atomic::write(&path, &co.signature).map_err(io_err(&path))?;
        written.push(path);
    }
    Ok(Pulled { resolved: found.resolved, out: out.to_owned(), signers: report.signers, cosignatures: written })
}

/// Refuse, before a byte is downloaded, a bundle whose declared size does not fit where a
/// pull writes it: the cache, then the output file (twice over when both are on one file
/// system). A registry that declares a terabyte gets an answer, not a full disk.
fn check_space(resolved: &Resolved, cache: &Path, out: &Path) -> Result<(), ArtifactError> {
    let out_dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let declared = resolved.bytes;
    let stat = |p: &Path| {
        let dev = std::fs::metadata(p).map(|m| std::os::unix::fs::MetadataExt::dev(&m)).map_err(io_err(p))?;
        Ok::<_, ArtifactError>((dev, free_bytes(p)?))
    };
    let (cache_dev, cache_free) = stat(cache)?;
    let (out_dev, out_free) = stat(out_dir)?;
    let places = if cache_dev == out_dev {
        vec![(cache, declared.saturating_mul(2), cache_free)]
    } else {
        vec![(cache, declared, cache_free), (out_dir, declared, out_free)]
    };
    for (path, needed, available) in places {
        if needed > available {
            return Err(ArtifactError::NoSpace {
                target: resolved.reference.clone(),
                declared,
                needed,
                path: path.to_owned(),
                available,
            });
        }
    }
    Ok(())
}

/// Bytes free for an unprivileged writer on the file system of `path`.
fn free_bytes(path: &Path) -> Result<u64, ArtifactError> {
    let fs = rustix::fs::statvfs(path).map_err(|e| io_err(path)(e.into()))?;
    Ok(fs.f_bavail.saturating_mul(fs.f_frsize))
}

/// One layer into the cache: a registry's with `Range` resume and retries, checked whole.
async fn download(
    store: &Store,
    layer: &Descriptor,
    cache: &Cache,
    reporter: &dyn Reporter,
) -> Result<(), ArtifactError> {
    if cache.contains(&layer.digest, Some(layer.size)) {
        reporter.advance(layer.size);
        return Ok(());
    }
    let what = format!("{} layer sha256:{}", store.describe(), layer.digest);
    match store {
        Store::Layout { dir, .. } => {
            // A layer can be gigabytes: copied on the blocking pool, never on the executor.
            let (path, cache, digest, size) = (layout_blob(dir, layer.digest), cache.clone(), layer.digest, layer.size);
            fetch::blocking(move || {
                let file = std::fs::File::open(&path).map_err(io_err(&path))?;
                cache.put(digest, Some(size), &what, std::io::BufReader::new(file))?;
                Ok::<_, ArtifactError>(())
            })
            .await?;
            reporter.advance(layer.size);
        }
        Store::Registry { conn, image, options } => {
            let reference = repository(image);
            let digest = format!("sha256:{}", layer.digest);
            let (reference, digest) = (&reference, digest.as_str());
            let open = |offset: u64| async move {
                let response =
                    conn.client.pull_blob_stream_partial(reference, digest, offset, None).await.map_err(|e| {
                        match retryable(&e) {
                            Verdict::Fatal => Failure::Fatal(store.registry_err(&e)),
                            _ => Failure::Transient(e.to_string()),
                        }
                    })?;
                let chunks = |s: oci_client::client::SizedStream| s.stream.map(|c| c.map_err(|e| e.to_string()));
                Ok(match response {
                    BlobResponse::Partial(s) => Opened::Partial(chunks(s)),
                    BlobResponse::Full(s) => Opened::Full(chunks(s)),
                })
            };
            fetch::download(cache, layer.digest, Some(layer.size), &what, reporter, options, open).await.map_err(
                |e| match e {
                    DownloadError::GaveUp { what, detail, attempts } => {
                        store.err(format!("{what}: {detail} (after {attempts} tries)"))
                    }
                    DownloadError::Fatal(e) => e,
                    DownloadError::Cache(e) => ArtifactError::Cache(e),
                },
            )?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// copy

/// What `copy` did.
#[derive(Debug, Serialize)]
pub struct Copied {
    pub from: String,
    pub to: String,
    pub digest: Prefixed,
    pub id: String,
    pub blobs_copied: usize,
    pub blobs_present: usize,
    pub referrers: usize,
}

/// Copy a bundle artifact and its co-signature referrers from one store to another, digests
/// unchanged: registry to registry, or through a layout directory for a one-way transfer.
pub fn copy(
    from: &Location,
    to: &Location,
    reach: &Reach,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<Copied, ArtifactError> {
    net.block_on(async {
        let source = Store::open(from, reach).await?;
        let target = Store::open(to, reach).await?;
        target.authorize_push().await?;
        let found = find(&source, from).await?;
        if let Location::Layout { dir, .. } = to {
            // Blobs are written to the layout's file system: the declared sizes must fit.
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            let declared = found.resolved.bytes;
            let available = free_bytes(dir)?;
            if declared > available {
                let (target, path) = (found.resolved.reference.clone(), dir.clone());
                return Err(ArtifactError::NoSpace { target, declared, needed: declared, path, available });
            }
        }
        let digest = found.resolved.digest.0;
        let (mut copied, mut present) = (0, 0);
        let blobs: Vec<&Descriptor> = std::iter::once(&found.artifact.config).chain(&found.artifact.layers).collect();
        reporter.start("copying", blobs.iter().map(|d| d.size).sum());
        for d in blobs {
            if copy_blob(&source, &target, d).await? {
                copied += 1;
            } else {
                present += 1;
            }
            reporter.advance(d.size);
        }
        reporter.finish();
        let source_tag = match from {
            Location::Registry(image) => image.tag.clone(),
            Location::Layout { tag: Some(tag), .. } => Some(tag.clone()),
            // The tag the layout's index.json gives the bundle.
            Location::Layout { dir, tag: None } => read_layout_index(dir)
                .unwrap_or_default()
                .into_iter()
                .find(|e| e.digest == digest)
                .and_then(|e| e.annotations.get(REF_NAME).cloned()),
        };
        let tag = target.tag(source_tag.as_deref()).map(str::to_owned);
        target.put_manifest(&found.bytes, OCI_MANIFEST, tag.as_deref()).await?;
        let mut referrers = 0;
        for r in source.referrers(digest).await? {
            let (bytes, _) = source.manifest(Some(r.digest)).await?;
            let m: ArtifactManifest = serde_json::from_slice(&bytes).map_err(|e| source.err(e))?;
            for d in std::iter::once(&m.config).chain(&m.layers) {
                copy_blob(&source, &target, d).await?;
            }
            target.put_manifest(&bytes, &r.media_type, None).await?;
            let mut entry = r.clone();
            entry.annotations.remove(SUBJECT);
            target.add_referrer(digest, entry).await?;
            referrers += 1;
        }
        Ok(Copied {
            from: source.describe(),
            to: target.describe(),
            digest: Prefixed(digest),
            id: found.resolved.id,
            blobs_copied: copied,
            blobs_present: present,
            referrers,
        })
    })
}

async fn copy_blob(source: &Store, target: &Store, d: &Descriptor) -> Result<bool, ArtifactError> {
    if target.has_blob(d).await? {
        return Ok(false);
    }
    let stream = source.blob_stream(d).await?;
    target.put_blob(d, stream).await
}

// ---------------------------------------------------------------------------------------------
// OCI image layout directories

fn layout_blob(dir: &Path, digest: Sha256) -> PathBuf {
    dir.join("blobs/sha256").join(digest.to_string())
}

/// A layout's small document (index, manifest), refused when larger than a manifest can be:
/// a truncated read would only fail later, and less clearly.
fn read_small(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_MANIFEST_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("`{}`: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(format!(
            "`{}` is larger than {MAX_MANIFEST_BYTES} bytes, more than a manifest can be",
            path.display()
        ));
    }
    Ok(bytes)
}

fn read_layout_index(dir: &Path) -> Result<Vec<Descriptor>, String> {
    let path = dir.join("index.json");
    if !path.exists() {
        return Ok(Vec::new());
    }
    crate::oci::doc::parse_layout_index(&read_small(&path)?).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// The manifest `tag` names in a layout, or its only bundle when no tag is given.
fn layout_tagged(dir: &Path, tag: Option<&str>) -> Result<Sha256, String> {
    let entries = read_layout_index(dir)?;
    let named: Vec<&Descriptor> = entries
        .iter()
        .filter(|e| match tag {
            Some(t) => e.annotations.get(REF_NAME).map(String::as_str) == Some(t),
            None => e.annotations.contains_key(REF_NAME),
        })
        .collect();
    match named.as_slice() {
        [one] => Ok(one.digest),
        [] => Err(format!("no manifest tagged {} in its index.json", tag.unwrap_or("at all"))),
        _ => Err("several tagged manifests: name one (oci-layout:DIR:TAG)".to_owned()),
    }
}

/// Add `entry` to the layout's `index.json`, replacing the entries `same` matches.
fn update_layout_index(dir: &Path, entry: Descriptor, same: impl Fn(&Descriptor) -> bool) -> Result<(), ArtifactError> {
    let bad = |detail: String| ArtifactError::Io { path: dir.join("index.json"), detail };
    let mut entries = read_layout_index(dir).map_err(bad)?;
    entries.retain(|e| !same(e));
    entries.push(entry);
    let index =
        serde_json::json!({ "schemaVersion": 2, "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE, "manifests": entries });
    let mut bytes = serde_json::to_vec_pretty(&index).map_err(|e| bad(e.to_string()))?;
    bytes.push(b'\n');
    crate::atomic::write(&dir.join("index.json"), &bytes).map_err(io_err(&dir.join("index.json")))?;
    crate::atomic::write(&dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).map_err(io_err(dir))
}

/// Write a blob into a layout, checked against its digest and size before it appears.
async fn write_layout_blob(dir: &Path, d: &Descriptor, mut stream: ByteStream) -> Result<(), ArtifactError> {
    let path = layout_blob(dir, d.digest);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    let mut tmp = crate::atomic::temp_beside(&path).map_err(io_err(&path))?;
    let mut hash = sha2::Sha256::new();
    let mut size = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ArtifactError::Io { path: path.clone(), detail: e.to_string() })?;
        hash.update(&chunk);
        size += chunk.len() as u64;
        tmp.write_all(&chunk).map_err(io_err(&path))?;
    }
    let actual = Sha256::from_raw(hash.finalize().into());
    if actual != d.digest || size != d.size {
        return Err(ArtifactError::Digest {
            what: format!("blob for `{}`", path.display()),
            expected: d.digest,
            actual,
        });
    }
    tmp.persist(&path).map_err(|e| io_err(&path)(e.error))?;
    Ok(())
}
