//! `[[image]]` entries: container images from registries (through `oci_client`) or from local
//! OCI image layouts, resolved to digests in the lock and carried in the bundle's `images/`
//! OCI image layout.
//!
//! An index is carried filtered to the spec's `platforms` (all when none are given: then the
//! upstream index is carried byte for byte); each platform manifest with its config and
//! layers. Upstream cosign signatures, attestations and SBOMs (`sha256-HEX.sig`, `.att`,
//! `.sbom` tags) and OCI referrers travel with their image.

mod carry;
mod signed;

use std::collections::BTreeSet;

use futures_util::{StreamExt as _, TryStreamExt as _};

pub use carry::{BlobRoute, PendingBlob, fetch_blobs};

use super::{Plan, SourceError, Sources};
use crate::cache::CacheError;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::NetOptions;
use crate::oci::doc;
use crate::oci::{ClientError, Connection, ImageRef, Store, StoreError, is_not_found, pull_manifest};
use crate::spec::ImageSpec;
use crate::spec::lock::{LockError, LockFile, LockedAttachment, LockedImage, LockedPlatform};

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// An image's manifest or index that is not one (shown, not chained).
    #[error("`{reference}`: {detail}")]
    Document { reference: String, detail: crate::oci::doc::DocError },
    #[error("`{reference}`: {detail}")]
    Reference { reference: String, detail: crate::oci::InvalidImageRef },
    /// A blob's download task ended before the blob did: cancelled, as the runtime shuts down.
    #[error("`{blob}`: its download was cancelled before it finished ({detail})")]
    Cancelled { blob: String, detail: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Unsigned(#[from] crate::sources::Unsigned),
    /// A platform the lock pins that the index it pins does not list: not the publisher's.
    #[error("`{reference}`: {detail}; lock it again (`airlock lock`) from the registry")]
    NotListed { reference: String, detail: crate::oci::doc::DocError },
}

impl Classify for ImageError {
    fn class(&self) -> Class {
        match self {
            ImageError::Store(e) => e.class(),
            ImageError::Cache(e) => e.class(),
            ImageError::Unsigned(e) => e.class(),
            ImageError::NotListed { .. } => Class::Verification,
            // What a registry served as an image's document is its failure, as the rest.
            ImageError::Document { .. }
            | ImageError::Reference { .. }
            | ImageError::Cancelled { .. }
            | ImageError::Client(_) => Class::Runtime,
        }
    }
}

impl Sources<'_> {
    /// Where an entry's image is read from, and the reference it carries in the bundle.
    async fn image_origin(&self, entry: &ImageSpec) -> Result<(Store, String), ImageError> {
        match (&entry.reference, &entry.oci_layout) {
            (Some(r), _) => {
                let image =
                    ImageRef::parse(r).map_err(|detail| ImageError::Reference { reference: r.clone(), detail })?;
                let conn = self.registries.get(&image.registry).await?;
                Ok((Store::Registry { conn, image, options: *self.fetch.http.options() }, r.clone()))
            }
            (None, Some(layout)) => {
                let tag = entry.tag.clone().unwrap_or_default();
                Ok((Store::Layout { dir: self.spec.base_dir().join(layout), tag: Some(tag.clone()) }, tag))
            }
            (None, None) => unreachable!("the spec check requires `ref` or `oci_layout`"),
        }
    }
}

/// Resolve every `[[image]]` of the spec to the digest its source serves now.
/// `--jobs` images at a time, in spec order.
pub async fn resolve(sources: &Sources<'_>) -> Result<Vec<LockedImage>, SourceError> {
    let images = futures_util::stream::iter(&sources.spec.spec.image)
        .map(|entry| resolve_one(sources, entry.get_ref()))
        .buffered(sources.fetch.jobs.max(1))
        .try_collect::<Vec<_>>()
        .await?;
    Ok(images)
}

async fn resolve_one(sources: &Sources<'_>, entry: &ImageSpec) -> Result<LockedImage, ImageError> {
    let (origin, reference) = sources.image_origin(entry).await?;
    let (bytes, digest) = origin.manifest(None).await?;
    // Kept for the build that follows, which would ask the registry for it again by digest.
    let bytes = match &origin {
        Store::Registry { .. } => carry::keep(sources.fetch.cache, &format!("manifest of {reference}"), bytes).await?.0,
        Store::Layout { .. } => bytes,
    };
    let manifest_err = |detail: doc::DocError| ImageError::Document { reference: reference.clone(), detail };
    let document = doc::parse(&bytes).map_err(manifest_err)?;
    let platforms = if document.is_index() {
        doc::select_platforms(&document.children, &entry.platforms)
            .map_err(manifest_err)?
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
        Store::Registry { conn, image, options } => attachments(conn, image, digest, options).await?,
        Store::Layout { .. } => Vec::new(),
    };
    let signature = match &entry.verify {
        Some(policy) => {
            Some(signed::verify_image(&origin, &reference, digest, &attached, policy, &sources.sigstore_root).await?)
        }
        None => None,
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
        signature,
    })
}

/// Cosign's `sha256-HEX.{sig,att,sbom}` tags and OCI referrers of an image, where present.
async fn attachments(
    conn: &Connection,
    image: &ImageRef,
    digest: Sha256,
    options: &NetOptions,
) -> Result<Vec<LockedAttachment>, ImageError> {
    let mut out = Vec::new();
    // Cosign's tags, and the OCI referrers tag schema (`sha256-HEX`: an index of referrers,
    // what registries without the referrers API hold), asked for together.
    let probes = [".sig", ".att", ".sbom", ""].map(|suffix| {
        let tag = format!("sha256-{digest}{suffix}");
        let at = image.with_tag(tag.clone());
        async move {
            let answer = pull_manifest(conn, &at, options).await;
            (tag, at, answer)
        }
    });
    // What the tags carry: each tagged document and, of an index (the tag schema's), what it
    // lists; the referrers API adds what is not among them.
    let mut covered = BTreeSet::new();
    for (tag, at, answer) in futures_util::future::join_all(probes).await {
        match answer {
            Ok((bytes, _)) => {
                let document =
                    doc::parse(&bytes).map_err(|detail| ImageError::Document { reference: at.to_string(), detail })?;
                let digest = Sha256::of_bytes(&bytes);
                covered.insert(digest);
                if document.is_index() {
                    covered.extend(document.children.iter().map(|c| c.digest));
                }
                let media_type = document.media_type;
                out.push(LockedAttachment { tag: Some(tag), digest, media_type, size: bytes.len() as u64 });
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(StoreError::Registry { target: format!("oci://{at}"), detail: e.to_string() }.into()),
        }
    }
    out.extend(api_referrers(conn, image, digest, covered, options).await);
    Ok(out)
}

/// Referrers from the API that are not `covered` already (by the tagged attachments and the
/// tag schema's index). The API is optional (distribution 2.8 lacks it), so its absence is
/// normal.
async fn api_referrers(
    conn: &Connection,
    image: &ImageRef,
    digest: Sha256,
    mut covered: BTreeSet<Sha256>,
    options: &NetOptions,
) -> Vec<LockedAttachment> {
    let mut out = Vec::new();
    let at = image.at_digest(digest).to_client();
    // The API alone: the tag schema's index was asked for with cosign's tags.
    let referrers = || conn.referrers_api(&at);
    match crate::fetch::with_retries(options, &format!("referrers of {image}"), referrers, crate::oci::retryable).await
    {
        Ok(None) => {}
        Ok(Some(index)) => {
            for m in index.manifests {
                let Ok(d) = crate::digest::prefixed::parse(&m.digest) else { continue };
                if covered.insert(d) {
                    let size = u64::try_from(m.size).unwrap_or(0);
                    out.push(LockedAttachment { tag: None, digest: d, media_type: m.media_type, size });
                }
            }
        }
        Err(e) => tracing::debug!("{image}: no referrers ({e})"),
    }
    out
}

/// Every locked image's manifests by digest into the cache; the manifest's artifacts, the
/// `images/` members (`oci-layout`, `index.json`, and every blob once), and the blobs to
/// fetch (`carry::fetch_blobs`, while the bundle is packed).
pub async fn plan(sources: &Sources<'_>, lock: &LockFile) -> Result<Plan, SourceError> {
    let mut carrier = carry::Carrier::new(sources.fetch.cache);
    let mut plan = Plan::default();
    for entry in &sources.spec.spec.image {
        let entry = entry.get_ref();
        let (key, tag) = entry.source_key();
        let locked = lock.lock.locked_image(key, tag).ok_or_else(|| LockError::Stale {
            path: lock.path.clone(),
            reason: format!("`[[image]]` `{key}` is not locked"),
        })?;
        let (origin, _) = sources.image_origin(entry).await?;
        let artifact = carrier.carry_image(&origin, locked).await?;
        plan.artifacts.push(crate::bundle::manifest::Artifact::Image(artifact));
    }
    if plan.artifacts.is_empty() {
        return Ok(plan);
    }
    (plan.members, plan.blobs) = carrier.into_members().await?;
    Ok(plan)
}
