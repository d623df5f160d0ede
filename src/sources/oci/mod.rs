//! `[[image]]` entries: container images from registries (through `oci_client`) or from local
//! OCI image layouts, resolved to digests in the lock and carried in the bundle's `images/`
//! OCI image layout.
//!
//! An index is carried filtered to the spec's `platforms` (all when none are given: then the
//! upstream index is carried byte for byte); each platform manifest with its config and
//! layers. Upstream cosign signatures, attestations and SBOMs (`sha256-HEX.sig`, `.att`,
//! `.sbom` tags) and OCI referrers travel with their image.

mod client;
pub mod doc;
mod origin;
mod reference;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::{StreamExt as _, TryStreamExt as _};

pub use client::{ClientError, Connection, Credentials, Transport, connect};
use doc::{Descriptor, REF_NAME};
pub use origin::Origin;
use origin::{check_digest, is_not_found, read_layout_blob, registry_error};
pub use reference::ImageRef;

use super::{Content, SourceError};
use crate::bundle::MemberPath;
use crate::bundle::manifest::{Artifact, Attachment, AttachmentKind, ImageArtifact, ImagePlatform};
use crate::cache::{Cache, CacheError};
use crate::digest::Sha256;
use crate::fetch::Fetch;
use crate::spec::lock::{LockFile, LockedAttachment, LockedImage, LockedPlatform};
use crate::spec::{ImageSpec, SpecFile};

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("`{reference}`: {detail}")]
    Registry { reference: String, detail: String },
    #[error("`{reference}`: expected digest sha256:{expected}, got sha256:{actual}")]
    DigestMismatch { reference: String, expected: Sha256, actual: Sha256 },
    #[error("`{reference}`: {detail}")]
    Manifest { reference: String, detail: String },
    #[error("oci layout `{}`: {detail}", path.display())]
    Layout { path: PathBuf, detail: String },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

impl ImageError {
    /// Content that does not match its digest (exit 3), as opposed to failing to get it.
    pub fn is_mismatch(&self) -> bool {
        matches!(
            self,
            ImageError::DigestMismatch { .. }
                | ImageError::Cache(CacheError::DigestMismatch { .. } | CacheError::SizeMismatch { .. })
        )
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, ImageError> {
    crate::fetch::runtime().map_err(ImageError::Runtime)
}

/// Registry connections for a spec, one per registry, made on first use.
struct Connections<'a> {
    spec: &'a SpecFile,
    open: BTreeMap<String, Arc<Connection>>,
}

impl<'a> Connections<'a> {
    fn new(spec: &'a SpecFile) -> Self {
        Self { spec, open: BTreeMap::new() }
    }

    fn get(&mut self, registry: &str) -> Result<Arc<Connection>, ImageError> {
        if let Some(c) = self.open.get(registry) {
            return Ok(c.clone());
        }
        let settings = self.spec.spec.registries.get(registry);
        let transport = if settings.is_some_and(|s| s.insecure) { Transport::InsecureHttp } else { Transport::Https };
        let ca = settings.and_then(|s| s.ca.as_ref()).map(|ca| self.spec.base_dir().join(ca));
        let conn = Arc::new(connect(registry, transport, ca.as_deref())?);
        self.open.insert(registry.to_owned(), conn.clone());
        Ok(conn)
    }

    /// The origin of an entry and the reference it carries in the bundle.
    fn origin(&mut self, entry: &ImageSpec) -> Result<(Origin, String), ImageError> {
        match (&entry.reference, &entry.oci_layout) {
            (Some(r), _) => {
                let image =
                    ImageRef::parse(r).map_err(|detail| ImageError::Manifest { reference: r.clone(), detail })?;
                let conn = self.get(&image.registry)?;
                Ok((Origin::Registry { conn, image }, r.clone()))
            }
            (None, Some(layout)) => {
                let tag = entry.tag.clone().unwrap_or_default();
                Ok((Origin::Layout { dir: self.spec.base_dir().join(layout) }, tag))
            }
            (None, None) => unreachable!("the spec check requires `ref` or `oci_layout`"),
        }
    }
}

/// Resolve every `[[image]]` of the spec to the digest its source serves now.
pub fn resolve(spec: &SpecFile) -> Result<Vec<LockedImage>, SourceError> {
    if spec.spec.image.is_empty() {
        return Ok(Vec::new());
    }
    let rt = runtime()?;
    let mut conns = Connections::new(spec);
    let mut out = Vec::new();
    for entry in &spec.spec.image {
        out.push(rt.block_on(resolve_one(&mut conns, entry.get_ref()))?);
    }
    Ok(out)
}

async fn resolve_one(conns: &mut Connections<'_>, entry: &ImageSpec) -> Result<LockedImage, ImageError> {
    let (origin, reference) = conns.origin(entry)?;
    let (bytes, digest) = match &origin {
        Origin::Registry { conn, image } => {
            let (bytes, _) = conn
                .client
                .pull_manifest_raw(&image.to_client(), &conn.auth, &doc::ACCEPTED)
                .await
                .map_err(|e| registry_error(image, &e))?;
            let digest = Sha256::of_bytes(&bytes);
            if let Some(pinned) = image.digest {
                check_digest(&reference, pinned, &bytes)?;
            }
            (bytes.to_vec(), digest)
        }
        Origin::Layout { dir } => {
            let desc = layout_entry(dir, &reference)?;
            (read_layout_blob(dir, desc.digest)?, desc.digest)
        }
    };
    let document =
        doc::parse(&bytes).map_err(|detail| ImageError::Manifest { reference: reference.clone(), detail })?;
    let platforms = if document.is_index() {
        doc::select_platforms(&document.children, &entry.platforms)
            .map_err(|detail| ImageError::Manifest { reference: reference.clone(), detail })?
            .into_iter()
            .map(|d| LockedPlatform {
                platform: d.platform.as_ref().map_or_else(|| "unknown".to_owned(), ToString::to_string),
                digest: d.digest,
                media_type: d.media_type.clone(),
                size: d.size,
            })
            .collect()
    } else {
        Vec::new()
    };
    let attached = match &origin {
        Origin::Registry { conn, image } => attachments(conn, image, digest).await?,
        Origin::Layout { .. } => Vec::new(),
    };
    let (source, tag) = entry.source_key();
    Ok(LockedImage {
        source: source.to_owned(),
        tag: tag.map(str::to_owned),
        reference,
        digest,
        media_type: document.media_type,
        size: bytes.len() as u64,
        platforms,
        attached,
    })
}

/// Cosign's `sha256-HEX.{sig,att,sbom}` tags and OCI referrers of an image, where present.
async fn attachments(conn: &Connection, image: &ImageRef, digest: Sha256) -> Result<Vec<LockedAttachment>, ImageError> {
    let mut out = Vec::new();
    // Cosign's tags, and the OCI referrers tag schema (`sha256-HEX`: an index of referrers,
    // what registries without the referrers API hold).
    for suffix in [".sig", ".att", ".sbom", ""] {
        let tag = format!("sha256-{digest}{suffix}");
        let at = image.with_tag(tag.clone());
        match conn.client.pull_manifest_raw(&at.to_client(), &conn.auth, &doc::ACCEPTED).await {
            Ok((bytes, _)) => {
                let media_type = doc::parse(&bytes)
                    .map_err(|detail| ImageError::Manifest { reference: at.to_string(), detail })?
                    .media_type;
                out.push(LockedAttachment {
                    tag: Some(tag),
                    digest: Sha256::of_bytes(&bytes),
                    media_type,
                    size: bytes.len() as u64,
                });
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(registry_error(&at, &e)),
        }
    }
    // Referrers from the API (or oci-client's own fallback to the tag schema) that the
    // referrers index above does not already carry. The API is optional (distribution 2.8
    // lacks it), so its absence is normal.
    let mut covered: BTreeSet<Sha256> = BTreeSet::new();
    for a in out.iter().filter(|a| doc::is_index(&a.media_type)) {
        let at = image.at_digest(a.digest);
        if let Ok((bytes, _)) = conn.client.pull_manifest_raw(&at.to_client(), &conn.auth, &doc::ACCEPTED).await
            && let Ok(index) = doc::parse(&bytes)
        {
            covered.extend(index.children.iter().map(|c| c.digest));
        }
    }
    match conn.client.pull_referrers(&image.at_digest(digest).to_client(), None).await {
        Ok(index) => {
            for m in index.manifests {
                let Ok(d) = crate::digest::prefixed::parse(&m.digest) else { continue };
                if !covered.contains(&d) && out.iter().all(|a| a.digest != d) {
                    let size = u64::try_from(m.size).unwrap_or(0);
                    out.push(LockedAttachment { tag: None, digest: d, media_type: m.media_type, size });
                }
            }
        }
        Err(e) => tracing::debug!("{image}: no referrers ({e})"),
    }
    Ok(out)
}

/// The descriptor a layout's `index.json` names `tag`.
fn layout_entry(dir: &std::path::Path, tag: &str) -> Result<Descriptor, ImageError> {
    let path = dir.join("index.json");
    let text = std::fs::read(&path).map_err(|e| ImageError::Layout { path: path.clone(), detail: e.to_string() })?;
    let entries = doc::parse_layout_index(&text).map_err(|detail| ImageError::Layout { path: path.clone(), detail })?;
    let names: Vec<&str> = entries.iter().filter_map(|d| d.annotations.get(REF_NAME).map(String::as_str)).collect();
    entries.iter().find(|d| d.annotations.get(REF_NAME).is_some_and(|n| n == tag)).cloned().ok_or_else(|| {
        ImageError::Layout { path, detail: format!("no image named `{tag}` (it has {})", names.join(", ")) }
    })
}

/// Fetch every locked image by digest into the cache and return the manifest's artifacts and
/// the `images/` members: `oci-layout`, `index.json`, and every blob once.
pub fn plan(spec: &SpecFile, lock: &LockFile, fetch: &Fetch<'_>) -> Result<(Vec<Artifact>, Vec<Content>), SourceError> {
    if spec.spec.image.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let rt = runtime()?;
    let mut conns = Connections::new(spec);
    let mut artifacts = Vec::new();
    let mut layout_entries = Vec::new();
    // digest -> (origin, descriptor): every blob once, from the first image that names it.
    let mut blobs: BTreeMap<Sha256, (Origin, Descriptor)> = BTreeMap::new();
    let mut manifests = BTreeSet::new();
    for entry in &spec.spec.image {
        let entry = entry.get_ref();
        let (key, tag) = entry.source_key();
        let locked = lock.lock.locked_image(key, tag).ok_or_else(|| crate::spec::lock::LockError::Stale {
            path: lock.path.clone(),
            reason: format!("`[[image]]` `{key}` is not locked"),
        })?;
        let (origin, _) = conns.origin(entry)?;
        let carried = rt.block_on(carry_image(&origin, locked, fetch.cache, &mut blobs, &mut manifests))?;
        layout_entries.extend(carried.layout_entries);
        artifacts.push(Artifact::Image(carried.artifact));
    }
    let total: u64 = blobs.values().map(|(_, d)| d.size).sum();
    fetch.reporter.start("fetching", total);
    rt.block_on(
        futures_util::stream::iter(blobs.values())
            .map(|(origin, desc)| origin.blob(desc, fetch.cache, fetch.reporter))
            .buffer_unordered(fetch.jobs.max(1))
            .try_collect::<Vec<_>>(),
    )?;
    fetch.reporter.finish();

    let mut contents = Vec::new();
    let mut add = |path: &str, digest: Sha256, size: u64| {
        contents.push(Content {
            path: MemberPath::new(path).expect("image member paths are valid"),
            size,
            sha256: digest,
            origin: fetch.cache.path(&digest),
            what: format!("image content {path}"),
        });
    };
    for (digest, (_, desc)) in &blobs {
        add(&format!("images/blobs/sha256/{digest}"), *digest, desc.size);
    }
    for (digest, size) in &manifests {
        if !blobs.contains_key(digest) {
            add(&format!("images/blobs/sha256/{digest}"), *digest, *size);
        }
    }
    let index = doc::layout_index(layout_entries);
    let index_digest = Sha256::of_bytes(&index);
    fetch.cache.put(index_digest, Some(index.len() as u64), "images/index.json", index.as_slice())?;
    add("images/index.json", index_digest, index.len() as u64);
    let layout_digest = Sha256::of_bytes(doc::OCI_LAYOUT);
    fetch.cache.put(layout_digest, None, "images/oci-layout", doc::OCI_LAYOUT)?;
    add("images/oci-layout", layout_digest, doc::OCI_LAYOUT.len() as u64);
    Ok((artifacts, contents))
}

struct Carried {
    artifact: ImageArtifact,
    layout_entries: Vec<Descriptor>,
}

/// Fetch an image's manifests by digest into the cache (blobs are queued, not fetched).
async fn carry_image(
    origin: &Origin,
    locked: &LockedImage,
    cache: &Cache,
    blobs: &mut BTreeMap<Sha256, (Origin, Descriptor)>,
    manifests: &mut BTreeSet<(Sha256, u64)>,
) -> Result<Carried, ImageError> {
    let manifest_err = |detail| ImageError::Manifest { reference: locked.reference.clone(), detail };
    let mut store = |bytes: &[u8]| -> Result<Sha256, ImageError> {
        let digest = Sha256::of_bytes(bytes);
        cache.put(digest, Some(bytes.len() as u64), &locked.reference, bytes)?;
        manifests.insert((digest, bytes.len() as u64));
        Ok(digest)
    };
    let top = origin.manifest(locked.digest).await?;
    let document = doc::parse(&top).map_err(manifest_err)?;
    let queue = |d: &[Descriptor], blobs: &mut BTreeMap<Sha256, (Origin, Descriptor)>| {
        for b in d {
            blobs.entry(b.digest).or_insert_with(|| (origin.clone(), b.clone()));
        }
    };
    let (carried_bytes, platforms) = if document.is_index() {
        let mut platforms = Vec::new();
        for p in &locked.platforms {
            let child = origin.manifest(p.digest).await?;
            store(&child)?;
            queue(&doc::parse(&child).map_err(manifest_err)?.blobs, blobs);
            platforms.push(ImagePlatform { platform: p.platform.clone(), digest: p.digest });
        }
        let all = document.children.len() == locked.platforms.len();
        let carried = if all {
            top.clone()
        } else {
            let keep: Vec<Sha256> = locked.platforms.iter().map(|p| p.digest).collect();
            doc::filter_index(&top, &keep).map_err(manifest_err)?
        };
        (carried, platforms)
    } else {
        queue(&document.blobs, blobs);
        (top.clone(), Vec::new())
    };
    let carried = store(&carried_bytes)?;
    let name = |tag: &str| match &origin {
        Origin::Registry { image, .. } => image.with_tag(tag.to_owned()).to_string(),
        Origin::Layout { .. } => tag.to_owned(),
    };
    let mut layout_entries = vec![Descriptor {
        media_type: document.media_type.clone(),
        digest: carried,
        size: carried_bytes.len() as u64,
        platform: None,
        annotations: BTreeMap::from([(REF_NAME.to_owned(), locked.reference.clone())]),
        artifact_type: None,
    }];
    let mut attachments = Vec::new();
    for a in &locked.attached {
        let bytes = origin.manifest(a.digest).await?;
        store(&bytes)?;
        let attached = doc::parse(&bytes).map_err(manifest_err)?;
        queue(&attached.blobs, blobs);
        let attachment = |digest, artifact_type: Option<String>| Attachment {
            digest,
            kind: AttachmentKind::classify(a.tag.as_deref(), artifact_type.as_deref()),
            artifact_type,
            tag: a.tag.clone(),
        };
        if attached.children.is_empty() {
            attachments.push(attachment(a.digest, attached.artifact_type.clone()));
        }
        // A referrers index brings its referrer manifests along; each is listed on its own.
        for child in &attached.children {
            let child_bytes = origin.manifest(child.digest).await?;
            store(&child_bytes)?;
            let referrer = doc::parse(&child_bytes).map_err(manifest_err)?;
            queue(&referrer.blobs, blobs);
            attachments.push(attachment(child.digest, child.artifact_type.clone().or(referrer.artifact_type)));
        }
        // Tagged attachments keep their tag; a referrer has none and is named by its subject.
        let annotation = match &a.tag {
            Some(tag) => (REF_NAME.to_owned(), name(tag)),
            None => (doc::REFERRER_OF.to_owned(), locked.reference.clone()),
        };
        layout_entries.push(Descriptor {
            media_type: a.media_type.clone(),
            digest: a.digest,
            size: a.size,
            platform: None,
            annotations: BTreeMap::from([annotation]),
            artifact_type: None,
        });
    }
    let artifact = ImageArtifact {
        reference: locked.reference.clone(),
        source: locked.source.clone(),
        digest: carried,
        upstream_digest: (carried != locked.digest).then_some(crate::digest::Prefixed(locked.digest)),
        media_type: document.media_type,
        size: carried_bytes.len() as u64,
        platforms,
        attached: attachments,
    };
    Ok(Carried { artifact, layout_entries })
}
